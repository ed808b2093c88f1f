//! Sampling token counts from a `LengthSpec`, and the summary figures `workload preview` shows.

use rand::{Rng, RngExt};
use rand_distr::{Distribution, LogNormal, Normal};

use crate::config::LengthSpec;

/// Draws for a truncated distribution before falling back to clamping (only reached when the
/// mass inside min..max is tiny, which validation mostly rules out).
const MAX_REDRAWS: usize = 64;

impl LengthSpec {
    /// One token count.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        match self {
            LengthSpec::Fixed(n) => *n,
            LengthSpec::Uniform { min, max } => rng.random_range(*min..=*max),
            LengthSpec::Normal { mean, stddev, min, max } => {
                let d = Normal::new(*mean, *stddev).unwrap_or_else(|_| Normal::new(*mean, 0.0).expect("stddev 0"));
                truncated(|r| d.sample(r), *min, *max, rng)
            }
            LengthSpec::LogNormal { mu, sigma, min, max } => {
                let d = LogNormal::new(*mu, *sigma).unwrap_or_else(|_| LogNormal::new(*mu, 0.0).expect("sigma 0"));
                truncated(|r| d.sample(r), *min, *max, rng)
            }
            LengthSpec::Empirical { bins } => bins[pick(bins.iter().map(|b| b.1), rng)].0,
            LengthSpec::Mixture { components, min, max } => {
                let i = pick(components.iter().map(|c| c.0), rng);
                components[i].1.sample(rng).clamp(*min, *max)
            }
        }
    }

    /// The smallest count a draw can have.
    pub fn min_value(&self) -> Option<u32> {
        match self {
            LengthSpec::Fixed(0) => None,
            LengthSpec::Fixed(n) => Some(*n),
            LengthSpec::Uniform { min, .. } | LengthSpec::Normal { min, .. } | LengthSpec::LogNormal { min, .. } => Some(*min),
            LengthSpec::Empirical { bins } => bins.iter().map(|b| b.0).min(),
            LengthSpec::Mixture { components, min, .. } => components.iter().filter_map(|c| c.1.min_value()).min().map(|m| m.max(*min)),
        }
    }

    /// A short description, e.g. `lognormal(median 256, σ 0.80) in 16..4000`.
    pub fn describe(&self) -> String {
        match self {
            LengthSpec::Fixed(n) => n.to_string(),
            LengthSpec::Uniform { min, max } => format!("uniform {min}..{max}"),
            LengthSpec::Normal { mean, stddev, min, max } => format!("normal(μ {mean}, σ {stddev}) in {min}..{max}"),
            LengthSpec::LogNormal { mu, sigma, min, max } => {
                format!("lognormal(median {:.0}, σ {sigma:.2}) in {min}..{max}", mu.exp())
            }
            LengthSpec::Empirical { bins } => format!("empirical({} values)", bins.len()),
            LengthSpec::Mixture { components, .. } => {
                let total: f64 = components.iter().map(|c| c.0).sum();
                let parts: Vec<String> = components.iter().map(|(w, d)| format!("{:.0}% {}", 100.0 * w / total, d.describe())).collect();
                format!("mix[{}]", parts.join(" | "))
            }
        }
    }
}

/// Draws until the value rounds into `min..=max`.
fn truncated<R: Rng + ?Sized>(mut draw: impl FnMut(&mut R) -> f64, min: u32, max: u32, rng: &mut R) -> u32 {
    let mut x = draw(rng);
    for _ in 0..MAX_REDRAWS {
        if x.is_finite() && x.round() >= min as f64 && x.round() <= max as f64 {
            break;
        }
        x = draw(rng);
    }
    if x.is_finite() { x.round().clamp(min as f64, max as f64) as u32 } else { min }
}

/// An index drawn with probability proportional to its weight.
pub fn pick<R: Rng + ?Sized>(weights: impl Iterator<Item = f64> + Clone, rng: &mut R) -> usize {
    let total: f64 = weights.clone().sum();
    let mut u = rng.random::<f64>() * total;
    let mut last = 0;
    for (i, w) in weights.enumerate() {
        if u < w {
            return i;
        }
        u -= w;
        last = i;
    }
    last
}

/// Quantile `q` in [0, 1] of sorted values (nearest rank).
pub fn quantile(sorted: &[u32], q: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
