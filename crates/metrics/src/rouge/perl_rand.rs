//! Perl's `srand` and `rand` (perl ≥ 5.20 on every platform: its own 48-bit linear congruential
//! generator, FreeBSD's drand48), which ROUGE-1.5.5.pl's bootstrap draws its resamples from.
//! `srand(seed)` keeps the low 32 bits of the seed (`Rand_seed_t` is U32); `rand(n)` is `n`
//! times the next draw, and the script's `int(rand(n))` truncates it to an index.

/// The multiplier of drand48.
const MULTIPLIER: u64 = 0x5_DEEC_E66D;
/// Its increment.
const INCREMENT: u64 = 0xB;
/// The low 16 bits of the state after `srand` (FreeBSD's `DRAND48_SEED_0`).
const SEED_LOW: u64 = 0x330E;
/// The 48 bits of the state.
const MASK: u64 = (1 << 48) - 1;

/// A perl random stream after `srand(seed)`.
#[derive(Debug, Clone)]
pub(crate) struct PerlRand {
    state: u64,
}

impl PerlRand {
    /// The stream `srand(seed)` starts (seeds equal modulo 2³² are the same stream).
    pub(crate) fn seeded(seed: u64) -> Self {
        PerlRand { state: SEED_LOW + (u64::from(seed as u32) << 16) }
    }

    /// `rand()`: the next value in [0, 1), the 48-bit state scaled by 2⁻⁴⁸.
    pub(crate) fn next_f64(&mut self) -> f64 {
        self.state = MULTIPLIER.wrapping_mul(self.state).wrapping_add(INCREMENT) & MASK;
        self.state as f64 / (1u64 << 48) as f64
    }

    /// `int(rand(n))`: an index below `n` (`n` > 0).
    pub(crate) fn index(&mut self, n: usize) -> usize {
        (n as f64 * self.next_f64()) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `perl -e 'srand(S); printf("%.17g ", rand()) for 1..3; print int(rand(320))'` (perl 5.36),
    /// the draws written as their shortest decimals.
    #[test]
    fn draws_equal_perls() {
        let cases: [(u64, [f64; 3], usize); 4] = [
            (0, [0.17082803610628972, 0.7499019804849638, 0.09637165562356742], 278),
            (1, [0.041630344771878214, 0.45449244472862915, 0.8348172181669149], 107),
            (7, [0.2664441967654092, 0.6820352301906212, 0.26549059342699977], 41),
            (999, [0.10233439302919933, 0.635775759906636, 0.8034886364276979], 296),
        ];
        for (seed, draws, index) in cases {
            let mut rng = PerlRand::seeded(seed);
            for expected in draws {
                assert_eq!(rng.next_f64(), expected, "srand({seed})");
            }
            assert_eq!(rng.index(320), index, "srand({seed})");
        }
        // srand keeps 32 bits: 2³² + 1 is the stream of 1.
        assert_eq!(PerlRand::seeded((1 << 32) + 1).next_f64(), 0.041630344771878214);
    }
}
