//! Arrival processes: the gaps between intended send times of an open-loop schedule.
//!
//! Gaps are drawn online, one at a time, from a seeded RNG: an unbounded run never uses a
//! precomputed schedule rescaled to a total (which would not be Poisson). Kinds: Poisson,
//! gamma (renewal process with shape = burstiness, CV² = 1/shape) and constant; any of them can
//! be modulated by a sinusoidal rate (`Modulated`, exact time-rescaling of the unit-rate
//! process through the integrated rate).

use std::f64::consts::TAU;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::Distribution;

use crate::config::{ArrivalKind, ArrivalSpec, Diurnal};

pub trait Arrival: Send {
    /// Time from the previous intended send to the next one.
    fn next_gap(&mut self) -> Duration;
}

/// Poisson process: exponentially distributed gaps with mean `1 / rate`.
pub struct Poisson {
    rate: f64,
    rng: StdRng,
}

impl Poisson {
    pub fn new(rate_per_second: f64, seed: u64) -> Self {
        assert!(rate_per_second > 0.0, "rate must be positive");
        Poisson { rate: rate_per_second, rng: StdRng::seed_from_u64(seed) }
    }
}

impl Arrival for Poisson {
    fn next_gap(&mut self) -> Duration {
        // Inverse CDF on (0, 1]: `1 - u` never hits zero, so ln never returns -inf.
        let u: f64 = 1.0 - self.rng.random::<f64>();
        gap(-u.ln() / self.rate)
    }
}

/// The longest gap between two arrivals: beyond any rate config allows (≥ 1e-4/s), so it only
/// guards the conversion against a degenerate draw.
const MAX_GAP: Duration = Duration::from_secs(30 * 24 * 3600);

/// Seconds as a gap, never panicking: negative or NaN is 0, huge or infinite is `MAX_GAP`.
fn gap(seconds: f64) -> Duration {
    if seconds.is_nan() || seconds <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(seconds).map_or(MAX_GAP, |d| d.min(MAX_GAP))
}

/// Fixed gaps of `1 / rate` (a ticker, still open-loop).
pub struct Constant {
    gap: Duration,
}

impl Constant {
    pub fn new(rate_per_second: f64) -> Self {
        assert!(rate_per_second > 0.0, "rate must be positive");
        Constant { gap: gap(1.0 / rate_per_second) }
    }
}

impl Arrival for Constant {
    fn next_gap(&mut self) -> Duration {
        self.gap
    }
}

/// Gamma-distributed gaps with shape `burstiness` and mean `1 / rate`: burstiness 1 is Poisson,
/// below 1 clumps arrivals, above 1 spaces them more evenly (CV² = 1 / burstiness).
pub struct Gamma {
    dist: rand_distr::Gamma<f64>,
    rng: StdRng,
}

impl Gamma {
    pub fn new(rate_per_second: f64, burstiness: f64, seed: u64) -> Self {
        assert!(rate_per_second > 0.0 && burstiness > 0.0, "rate and burstiness must be positive");
        let dist = rand_distr::Gamma::new(burstiness, 1.0 / (burstiness * rate_per_second)).expect("valid gamma");
        Gamma { dist, rng: StdRng::seed_from_u64(seed) }
    }
}

impl Arrival for Gamma {
    fn next_gap(&mut self) -> Duration {
        gap(self.dist.sample(&mut self.rng))
    }
}

/// A process of mean rate `rate` whose instantaneous rate follows
/// `rate × (1 + a·cos(2π (t − peak_at) / period))`. The unit-rate base process runs in
/// "operational time" Λ; each arrival's wall time t solves Λ(t) = Λ_n (time-rescaling theorem:
/// exact for Poisson, and the standard modulated renewal process for the others).
struct Modulated {
    base: Box<dyn Arrival>,
    rate: f64,
    amplitude: f64,
    omega: f64,
    phase: f64,
    /// Current wall time (s) and its operational time.
    t: f64,
    lambda: f64,
}

impl Modulated {
    /// `base` must have rate 1.
    pub fn new(base: Box<dyn Arrival>, rate: f64, d: Diurnal) -> Self {
        let omega = TAU / d.period.as_secs_f64();
        Modulated { base, rate, amplitude: d.amplitude, omega, phase: -omega * d.peak_at.as_secs_f64(), t: 0.0, lambda: 0.0 }
    }

    /// The rate at wall time `t` seconds from the start.
    pub fn rate_at(&self, t: f64) -> f64 {
        self.rate * (1.0 + self.amplitude * (self.omega * t + self.phase).cos())
    }

    /// Λ(t) = rate × (t + a/ω · (sin(ωt + φ) − sin φ)).
    fn integrated(&self, t: f64) -> f64 {
        let a = self.amplitude / self.omega;
        self.rate * (t + a * ((self.omega * t + self.phase).sin() - self.phase.sin()))
    }

    /// Solves Λ(t) = target for t ≥ self.t (Λ is increasing: amplitude < 1). Newton steps kept
    /// inside a bracket, so it always converges.
    fn solve(&self, target: f64) -> f64 {
        let (mut lo, mut hi) = (self.t, self.t + (target - self.lambda) / (self.rate * (1.0 - self.amplitude)));
        let mut t = self.t + (target - self.lambda) / self.rate;
        for _ in 0..100 {
            let f = self.integrated(t) - target;
            if f.abs() < 1e-12 * target.max(1.0) {
                break;
            }
            if f > 0.0 {
                hi = t
            } else {
                lo = t
            }
            let next = t - f / self.rate_at(t).max(1e-300);
            t = if next > lo && next < hi { next } else { 0.5 * (lo + hi) };
        }
        t
    }
}

impl Arrival for Modulated {
    fn next_gap(&mut self) -> Duration {
        let target = self.lambda + self.base.next_gap().as_secs_f64();
        let t = self.solve(target);
        let gap = (t - self.t).max(0.0);
        self.t = t;
        self.lambda = target;
        self::gap(gap)
    }
}

/// `rest` with its first gap replaced by `first`: a sharded constant ticker is phase-shifted so
/// the shards' union is the single ticker (shard I first sends at (I + 1) / rate).
pub struct Shifted {
    pub first: Option<Duration>,
    pub rest: Box<dyn Arrival>,
}

impl Arrival for Shifted {
    fn next_gap(&mut self) -> Duration {
        self.first.take().unwrap_or_else(|| self.rest.next_gap())
    }
}

/// The arrival process of a spec at mean `rate`, seeded.
pub fn build(spec: &ArrivalSpec, rate: f64, seed: u64) -> Box<dyn Arrival> {
    let base_rate = if spec.diurnal.is_some() { 1.0 } else { rate };
    let base: Box<dyn Arrival> = match spec.kind {
        ArrivalKind::Poisson => Box::new(Poisson::new(base_rate, seed)),
        ArrivalKind::Gamma { burstiness } => Box::new(Gamma::new(base_rate, burstiness, seed)),
        ArrivalKind::Constant => Box::new(Constant::new(base_rate)),
    };
    match spec.diurnal {
        Some(d) => Box::new(Modulated::new(base, rate, d)),
        None => base,
    }
}

/// The spec in words, for manifests: `poisson`, `constant`, `gamma (burstiness 0.25, cv 2)`,
/// each followed by `, diurnal (period …, amplitude …, peak_at …)` when modulated.
pub fn describe(spec: &ArrivalSpec) -> String {
    let mut text = match spec.kind {
        ArrivalKind::Poisson => "poisson".to_owned(),
        ArrivalKind::Constant => "constant".to_owned(),
        ArrivalKind::Gamma { burstiness } => format!("gamma (burstiness {burstiness}, cv {})", 1.0 / burstiness.sqrt()),
    };
    if let Some(d) = spec.diurnal {
        let f = crate::config::format_duration;
        text += &format!(", diurnal (period {}, amplitude {}, peak_at {})", f(d.period), d.amplitude, f(d.peak_at));
    }
    text
}

/// A stable per-stream seed derived from the run seed and a stream name, so each
/// target×scenario schedule is independent but reproducible.
pub fn stream_seed(run_seed: u64, stream: &str) -> u64 {
    // FNV-1a over the name, mixed with the run seed (splitmix64 finaliser).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in stream.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = run_seed ^ h;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_mean_rate_and_exponential_shape() {
        let mut p = Poisson::new(4.0, 7);
        let gaps: Vec<f64> = (0..100_000).map(|_| p.next_gap().as_secs_f64()).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean - 0.25).abs() < 0.25 * 0.02, "mean gap {mean}");
        // Exponential: P(gap > mean) = e^-1.
        let above = gaps.iter().filter(|&&g| g > 0.25).count() as f64 / gaps.len() as f64;
        assert!((above - (-1f64).exp()).abs() < 0.01, "tail share {above}");
        // Kolmogorov-Smirnov against Exp(4): D below the 1% critical value 1.63/sqrt(n).
        let mut sorted = gaps.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len() as f64;
        let d = sorted
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let cdf = 1.0 - (-4.0 * x).exp();
                (cdf - i as f64 / n).abs().max(((i + 1) as f64 / n - cdf).abs())
            })
            .fold(0.0, f64::max);
        assert!(d < 1.63 / n.sqrt(), "KS D = {d}");
    }

    #[test]
    fn shifted_replaces_only_the_first_gap_and_describe_names_the_spec() {
        let mut s = Shifted { first: Some(Duration::from_millis(10)), rest: Box::new(Constant::new(4.0)) };
        let gaps: Vec<Duration> = (0..3).map(|_| s.next_gap()).collect();
        assert_eq!(gaps, [10, 250, 250].map(Duration::from_millis));
        assert_eq!(describe(&ArrivalSpec::default()), "poisson");
        let gamma = ArrivalSpec {
            kind: ArrivalKind::Gamma { burstiness: 0.25 },
            diurnal: Some(Diurnal { period: Duration::from_secs(3600), amplitude: 0.5, peak_at: Duration::ZERO }),
        };
        assert_eq!(describe(&gamma), "gamma (burstiness 0.25, cv 2), diurnal (period 3600s, amplitude 0.5, peak_at 0s)");
    }

    #[test]
    fn seeded_schedules_repeat_and_streams_differ() {
        let a: Vec<_> = (0..5)
            .map({
                let mut p = Poisson::new(1.0, 1);
                move |_| p.next_gap()
            })
            .collect();
        let b: Vec<_> = (0..5)
            .map({
                let mut p = Poisson::new(1.0, 1);
                move |_| p.next_gap()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(stream_seed(1, "t/a"), stream_seed(1, "t/b"));
        assert_eq!(Constant::new(4.0).next_gap(), Duration::from_millis(250));
    }
}
