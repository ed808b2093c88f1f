//! The seeded generator of the property tests (splitmix64: small, seedable, good enough to
//! shape inputs), and the driver that runs a case per seed and names the seed of a failure.
//! `PROPS_ITERS` raises the case counts.
#![allow(dead_code)]

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// Up to `max` random bytes.
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max as u64 + 1) as usize;
        (0..n).map(|_| self.next() as u8).collect()
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Up to `max` pieces of `pieces` (steering input towards the fields a parser reads), with a
/// few random bytes in between.
pub fn fragments(rng: &mut Rng, pieces: &[&str], max: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..rng.below(max) {
        if rng.below(8) == 0 {
            out.extend(rng.bytes(4));
        } else {
            out.extend_from_slice(rng.pick(pieces).as_bytes());
        }
    }
    out
}

/// The case count: `PROPS_ITERS`, else `default`.
pub fn iters(default: u64) -> u64 {
    std::env::var("PROPS_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Runs `case` for seeds 0..n, naming the seed of a failure.
pub fn for_seeds(name: &str, n: u64, mut case: impl FnMut(&mut Rng)) {
    for seed in 0..n {
        let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ name.len() as u64);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(&mut rng)));
        if let Err(e) = result {
            panic!("{name}: failed for seed {seed}: {}", llmprobe::util::health::panic_message(e.as_ref()));
        }
    }
}
