//! Where every random choice comes from. A recipe has one seed; each purpose (the mixture's
//! source choice, the masks, dropout, a shuffle) draws from its own stream, derived from the
//! seed and that purpose's salt, numbered by its position in the run (a step, a micro-batch, an
//! epoch). The salts of the layers below the tasks are gathered in [`salt`]; each task declares
//! its own in its folder (`indolm_tasks::registry`), and the tasks crate's unit test refuses two
//! purposes sharing one, theirs and these together.
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The default seed of every recipe and of `indolm init`.
pub const DEFAULT_SEED: u64 = 3407;

/// The salt of every random purpose below the tasks (the tasks' own are in their declarations).
/// Changing a value changes every run that uses it.
pub mod salt {
    /// Which source each pretraining sequence is drawn from (stream: the sequence number).
    pub const SOURCE_CHOICE: u64 = 1;
    /// The block order of a source in an epoch (xored with the source index << 32; stream: the epoch).
    pub const PERMUTATION: u64 = 2;
    /// The paragraphs sampled from a recipe's mixture to train a tokenizer (stream: the source).
    pub const TOKENIZER_SAMPLE: u64 = 6;
    /// The IndoMMLU questions drawn for the checkpoint hook.
    pub const INDOMMLU_SUBSAMPLE: u64 = 9;
    /// The resamples of the bias intervals' bootstrap (stream: a hash of the language code).
    pub const BIAS_BOOTSTRAP: u64 = 13;
    /// The Multi-Bootstrap's replicates (stream: a hash of the comparison and category).
    pub const MULTIBOOTSTRAP: u64 = 14;
    /// Sampled generation (stream: the prompt's index in its file).
    pub const GENERATION: u64 = 15;

    /// Every salt with its name, for the uniqueness check.
    pub const ALL: [(&str, u64); 7] = [
        ("SOURCE_CHOICE", SOURCE_CHOICE),
        ("PERMUTATION", PERMUTATION),
        ("TOKENIZER_SAMPLE", TOKENIZER_SAMPLE),
        ("INDOMMLU_SUBSAMPLE", INDOMMLU_SUBSAMPLE),
        ("BIAS_BOOTSTRAP", BIAS_BOOTSTRAP),
        ("MULTIBOOTSTRAP", MULTIBOOTSTRAP),
        ("GENERATION", GENERATION),
    ];
}

/// Mixes a 64-bit value into a seed (SplitMix64 finaliser), for independent derived streams.
pub fn derive_seed(seed: u64, salt: u64) -> u64 {
    let mut z = seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A seeded random stream for position `stream` of purpose `salt`.
pub fn stream_rng(seed: u64, salt: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, salt));
    rng.set_stream(stream);
    rng
}

/// The salt of step `step` of a per-step purpose: the purpose's salt in the low 8 bits, the step
/// above them, so no two (purpose, step) pairs meet while salts stay below 256.
pub fn per_step(salt: u64, step: u64) -> u64 {
    salt ^ (step << 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salts_are_distinct_and_fit_below_the_step_bits() {
        for (i, (name, a)) in salt::ALL.iter().enumerate() {
            assert!(*a < 256, "{name} = {a} would collide with per_step's step bits");
            for (other, b) in &salt::ALL[i + 1..] {
                assert_ne!(a, b, "salts {name} and {other} are equal");
            }
        }
    }

    #[test]
    fn derived_streams_are_reproducible_and_independent() {
        use rand::Rng;
        let draw = |salt, stream| -> Vec<u32> {
            let mut rng = stream_rng(DEFAULT_SEED, salt, stream);
            (0..4).map(|_| rng.random()).collect()
        };
        assert_eq!(draw(salt::PERMUTATION, 7), draw(salt::PERMUTATION, 7));
        assert_ne!(draw(salt::PERMUTATION, 7), draw(salt::PERMUTATION, 8));
        assert_ne!(draw(salt::PERMUTATION, 7), draw(salt::SOURCE_CHOICE, 7));
        assert_ne!(derive_seed(DEFAULT_SEED, 1), derive_seed(DEFAULT_SEED, 2));
    }
}
