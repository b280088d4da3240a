//! Weighted mixtures of prepared sources. Each training sequence is drawn from a source
//! chosen with the mixture's probabilities; within a source, blocks of `seq_len - 2` tokens
//! are visited in a fresh seeded permutation every epoch (small sources wrap around). All
//! randomness is derived from the seed and the position, so the sampler's whole state is a
//! small `Cursor` and a resumed run sees exactly the sequences it would have seen.
use super::shards::Shard;
use crate::error::{Error, Result};
use indolm_core::seeds::{salt, stream_rng};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Where the sampler stands: sequences drawn in total and from each source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Sequences drawn in all: the index of the next one, which picks its source.
    pub sequences: u64,
    /// Sequences drawn from each source, in the mixture's source order: each source's position in
    /// its sequence of epoch permutations.
    pub per_source: Vec<u64>,
}

struct MixtureSource {
    shard: Shard,
    weight: f64,
    /// Blocks used for training; the last `heldout` blocks of the shard are kept for evaluation.
    train_blocks: u64,
    heldout_blocks: u64,
    /// The permutation of the epoch in use: (epoch, order).
    permutation: Option<(u64, Vec<u32>)>,
}

/// The sampler over weighted sources: the source of every sequence and the block within it are
/// functions of the seed and a `Cursor`, so the sampler itself holds no position.
pub struct Mixture {
    sources: Vec<MixtureSource>,
    cumulative: Vec<f64>,
    seed: u64,
    seq_len: usize,
    cls: i64,
    sep: i64,
}

/// The shortest training sequence (`[CLS]`, six tokens, `[SEP]`), checked when a recipe is read.
pub const MIN_SEQ_LEN: usize = 8;

impl Mixture {
    /// `sources`: shards with their weights (> 0; normalised here). `heldout_fraction` of each
    /// shard's blocks (at least one when > 0) is reserved for evaluation.
    pub fn new(
        sources: Vec<(Shard, f64)>,
        seq_len: usize,
        seed: u64,
        heldout_fraction: f64,
        cls: i64,
        sep: i64,
    ) -> Result<Self> {
        if seq_len < MIN_SEQ_LEN {
            return Err(Error::data("data.seq_len", format!("expected at least {MIN_SEQ_LEN}, found {seq_len}")));
        }
        let total: f64 = sources.iter().map(|(_, w)| *w).sum();
        let block = (seq_len - 2) as u64;
        let mut built = Vec::new();
        for (shard, weight) in sources {
            if weight <= 0.0 || !weight.is_finite() {
                return Err(Error::data(
                    format!("source `{}`", shard.meta.source),
                    format!("weight must be > 0, found {weight}"),
                ));
            }
            let blocks = shard.meta.tokens / block;
            let heldout =
                if heldout_fraction > 0.0 { ((blocks as f64 * heldout_fraction).ceil() as u64).max(1) } else { 0 };
            if blocks < heldout + 1 {
                return Err(Error::data(
                    format!("source `{}`", shard.meta.source),
                    format!("{} tokens make {blocks} block(s) of {block}; need at least {} (lower data.seq_len or add text)", shard.meta.tokens, heldout + 1),
                ));
            }
            built.push(MixtureSource {
                shard,
                weight: weight / total,
                train_blocks: blocks - heldout,
                heldout_blocks: heldout,
                permutation: None,
            });
        }
        let mut acc = 0.0;
        let cumulative = built
            .iter()
            .map(|s| {
                acc += s.weight;
                acc
            })
            .collect();
        Ok(Mixture { sources: built, cumulative, seed, seq_len, cls, sep })
    }

    /// Length of every sequence, `[CLS]` and `[SEP]` included.
    pub fn seq_len(&self) -> usize {
        self.seq_len
    }

    /// Source names, in the mixture's order.
    pub fn names(&self) -> Vec<String> {
        self.sources.iter().map(|s| s.shard.meta.source.clone()).collect()
    }

    /// Each source's name with the content key of the files its shard was made from
    /// (`content_sha256`): what a resumed run must still be reading.
    pub fn source_contents(&self) -> std::collections::BTreeMap<String, String> {
        self.sources.iter().map(|s| (s.shard.meta.source.clone(), s.shard.meta.content_sha256.clone())).collect()
    }

    /// Normalised weights (summing to 1), in the mixture's order.
    pub fn weights(&self) -> Vec<f64> {
        self.sources.iter().map(|s| s.weight).collect()
    }

    /// A cursor at the start of the stream: nothing drawn.
    pub fn new_cursor(&self) -> Cursor {
        Cursor { sequences: 0, per_source: vec![0; self.sources.len()] }
    }

    /// Epochs each source has gone through at `cursor` (fractional).
    pub fn epochs(&self, cursor: &Cursor) -> Vec<f64> {
        self.sources.iter().zip(&cursor.per_source).map(|(s, &n)| n as f64 / s.train_blocks as f64).collect()
    }

    /// The source of sequence number `index`.
    fn choose_source(&self, index: u64) -> usize {
        let u: f64 = stream_rng(self.seed, salt::SOURCE_CHOICE, index).random();
        self.cumulative.iter().position(|&c| u < c).unwrap_or(self.sources.len() - 1)
    }

    /// The block of source `s` at its `draw`-th use: epoch-wise seeded permutations.
    fn block_of(&mut self, s: usize, draw: u64) -> u64 {
        let src = &mut self.sources[s];
        let n = src.train_blocks;
        let epoch = draw / n;
        if src.permutation.as_ref().is_none_or(|(e, _)| *e != epoch) {
            let mut order: Vec<u32> = (0..n as u32).collect();
            let mut rng = stream_rng(self.seed, salt::PERMUTATION ^ ((s as u64) << 32), epoch);
            for i in (1..order.len()).rev() {
                let j = rng.random_range(0..=i);
                order.swap(i, j);
            }
            src.permutation = Some((epoch, order));
        }
        src.permutation.as_ref().unwrap().1[(draw % n) as usize] as u64
    }

    fn block_tokens(&self, s: usize, block: u64) -> Vec<i64> {
        let len = self.seq_len - 2;
        let mut ids = Vec::with_capacity(self.seq_len);
        ids.push(self.cls);
        ids.extend(self.sources[s].shard.slice(block as usize * len, len));
        ids.push(self.sep);
        ids
    }

    /// Draws the next `n` training sequences (each `seq_len` ids), advancing `cursor`.
    pub fn next_sequences(&mut self, cursor: &mut Cursor, n: usize) -> Vec<Vec<i64>> {
        (0..n)
            .map(|_| {
                let s = self.choose_source(cursor.sequences);
                let block = self.block_of(s, cursor.per_source[s]);
                cursor.sequences += 1;
                cursor.per_source[s] += 1;
                self.block_tokens(s, block)
            })
            .collect()
    }

    /// The held-out sequences of every source (fixed; for evaluation), at most `per_source` each.
    pub fn heldout_sequences(&self, per_source: usize) -> Vec<(usize, Vec<i64>)> {
        let mut out = Vec::new();
        for (s, src) in self.sources.iter().enumerate() {
            for k in 0..src.heldout_blocks.min(per_source as u64) {
                out.push((s, self.block_tokens(s, src.train_blocks + k)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_must_hold_more_than_the_special_tokens() {
        let err = Mixture::new(Vec::new(), 7, 1, 0.0, 2, 3).err().expect("too short").to_string();
        assert_eq!(err, "data.seq_len: expected at least 8, found 7");
        let empty = Mixture::new(Vec::new(), 8, 1, 0.1, 2, 3).expect("8 is enough");
        assert_eq!(empty.seq_len(), 8);
        assert!(empty.names().is_empty() && empty.weights().is_empty());
        assert_eq!(empty.new_cursor(), Cursor { sequences: 0, per_source: Vec::new() });
        assert!(empty.heldout_sequences(4).is_empty());
    }
}
