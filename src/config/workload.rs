//! Stage 2 for the workload parts of a scenario: length distributions, arrival processes,
//! prefixes and datasets. Each check records issues by path and returns a placeholder on failure.

use std::path::Path;
use std::sync::Arc;

use std::time::Duration;

use super::check::Checker;
use super::check::MAX_TOKENS;
use super::dataset::{Dataset, DatasetFormat, DatasetOrder};
use super::raw_workload::{RawArrival, RawDataset, RawDist, RawLength, RawPrefix};
use super::slo::SloOverride;

/// Largest accepted token count, input or output.
/// One request shape sent to every target at its own arrival rate.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Unique, `[a-zA-Z0-9_.-]+`; the `scenario` label.
    pub name: String,
    /// Resolved mean arrival rate per target, requests per second (> 0).
    pub rate: f64,
    /// Prompt length in tokens (unused when `dataset` is set: its prompts are sent as they are).
    pub input_tokens: LengthSpec,
    /// Requested output length (`max_tokens`); for a dataset, used by entries without their own.
    pub output_tokens: LengthSpec,
    /// How send times are drawn.
    pub arrival: ArrivalSpec,
    /// Shared prompt prefix; `None` = every prompt starts with a unique nonce.
    pub prefix: Option<PrefixSpec>,
    /// Replayed prompts instead of synthetic ones.
    pub dataset: Option<Arc<Dataset>>,
    /// vLLM `cache_salt` body field (prefix-cache isolation per trust group).
    pub cache_salt: Option<String>,
    /// `slo:` fields replacing the target's and the global ones for this scenario.
    pub slo: SloOverride,
    /// Behaviour checks (`checks:`); `None` when nothing is checked.
    pub checks: Option<Arc<super::checks::Checks>>,
    /// Reasoning effort and budget (`reasoning:`); `None` when the scenario sets none.
    pub reasoning: Option<super::reasoning::Reasoning>,
    /// A conversation (`turns:`) or a warm/cold cache pair (`cache_pair:`); `None`: one probe
    /// at a time.
    pub sequence: Option<Sequence>,
}

impl Scenario {
    /// A synthetic-prompt scenario with Poisson arrivals and no prefix sharing.
    pub fn synthetic(name: &str, rate: f64, input_tokens: LengthSpec, output_tokens: LengthSpec) -> Self {
        Scenario {
            name: name.to_owned(),
            rate,
            input_tokens,
            output_tokens,
            arrival: ArrivalSpec::default(),
            prefix: None,
            dataset: None,
            cache_salt: None,
            slo: SloOverride::default(),
            checks: None,
            reasoning: None,
            sequence: None,
        }
    }
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnSpec {
    pub input_tokens: LengthSpec,
    pub output_tokens: LengthSpec,
}

/// A scenario's sequence.
#[derive(Debug, Clone, PartialEq)]
pub enum Sequence {
    /// `turns:`: turn k sends turns 1..k-1 (prompts and answers) and its own prompt.
    Conversation { turns: Vec<TurnSpec>, think_time: Duration },
    /// `cache_pair:`: a cold probe with a fresh `prefix_tokens` prefix, then a warm one with the
    /// same prefix as soon as the cold one ended.
    CachePair { prefix_tokens: u32 },
    /// `agent:`: a tool loop; step k+1 sends the calls of step k and the tools' canned results.
    Agent(Arc<super::agent::Agent>),
}

/// A token-count distribution; every draw is clamped to `min..=max` (1..=1_000_000).
#[derive(Debug, Clone, PartialEq)]
pub enum LengthSpec {
    Fixed(u32),
    /// Uniform on the inclusive range.
    Uniform {
        min: u32,
        max: u32,
    },
    /// Normal, truncated to `min..=max` (redrawn, not piled up on the bounds).
    Normal {
        mean: f64,
        stddev: f64,
        min: u32,
        max: u32,
    },
    /// e^N(mu, sigma²), truncated to `min..=max`.
    LogNormal {
        mu: f64,
        sigma: f64,
        min: u32,
        max: u32,
    },
    /// Observed values with weights (> 0).
    Empirical {
        bins: Vec<(u32, f64)>,
    },
    /// One component per draw, picked by weight (> 0), then clamped to `min..=max`.
    Mixture {
        components: Vec<(f64, LengthSpec)>,
        min: u32,
        max: u32,
    },
}

/// How a scenario's send times are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ArrivalSpec {
    pub kind: ArrivalKind,
    pub diurnal: Option<Diurnal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum ArrivalKind {
    #[default]
    Poisson,
    /// Gamma-distributed gaps with shape `burstiness` (CV² = 1 / burstiness; 1 = Poisson).
    Gamma { burstiness: f64 },
    /// Evenly spaced.
    Constant,
}

/// Sinusoidal rate modulation: rate × (1 + amplitude × cos(2π (t − peak_at) / period)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Diurnal {
    pub period: Duration,
    /// In [0, 1).
    pub amplitude: f64,
    pub peak_at: Duration,
}

/// A shared prompt prefix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrefixSpec {
    /// Prefix length in tokens (part of the input length).
    pub tokens: u32,
    /// Fraction of requests with a shared prefix, in [0, 1].
    pub share: f64,
    /// Number of different prefixes (>= 1).
    pub distinct: u32,
}

/// z-scores of the 90th and 99th percentiles of the standard normal.
const Z90: f64 = 1.281_551_565_545;
const Z99: f64 = 2.326_347_874_041;

const KINDS: &str = "fixed, uniform, normal, lognormal, empirical, mixture";

fn count(path: &str, n: i64, c: &mut Checker) -> u32 {
    if (1..=MAX_TOKENS).contains(&n) {
        n as u32
    } else {
        c.error(path, format!("token count {n} is out of range: expected 1 to {MAX_TOKENS}"));
        1
    }
}

/// A token-count distribution.
pub fn length(path: &str, raw: &RawLength, c: &mut Checker) -> LengthSpec {
    match raw {
        RawLength::Fixed(n) => LengthSpec::Fixed(count(path, *n, c)),
        RawLength::Dist(d) => {
            if d.weight.is_some() {
                c.error(format!("{path}.weight"), "weight is only allowed on mixture components");
            }
            dist(path, d, c)
        }
    }
}

/// The clamp bounds of a distribution, defaulting to the whole range.
fn bounds(path: &str, d: &RawDist, c: &mut Checker) -> (u32, u32) {
    let min = count(&format!("{path}.min"), d.min.unwrap_or(1), c);
    let max = count(&format!("{path}.max"), d.max.unwrap_or(MAX_TOKENS), c);
    if min > max {
        c.error(format!("{path}.min"), format!("min ({min}) must not be greater than max ({max})"));
    }
    (min, max)
}

/// Reports fields set that the kind does not read (a likely mix-up, e.g. `p90` on `normal`).
fn only(path: &str, d: &RawDist, kind: &str, allowed: &[&str], c: &mut Checker) {
    let set = [
        ("value", d.value.is_some()),
        ("mean", d.mean.is_some()),
        ("stddev", d.stddev.is_some()),
        ("median", d.median.is_some()),
        ("p90", d.p90.is_some()),
        ("p99", d.p99.is_some()),
        ("mu", d.mu.is_some()),
        ("sigma", d.sigma.is_some()),
        ("values", d.values.is_some()),
        ("histogram", d.histogram.is_some()),
        ("components", d.components.is_some()),
    ];
    for (name, _) in set.iter().filter(|(n, s)| *s && !allowed.contains(n)) {
        c.error(format!("{path}.{name}"), format!("{name} does not apply to kind {kind}"));
    }
}

fn need<T: Copy>(path: &str, field: &str, v: Option<T>, kind: &str, c: &mut Checker) -> Option<T> {
    if v.is_none() {
        c.error(path, format!("kind {kind} needs {field}"));
    }
    v
}

fn dist(path: &str, d: &RawDist, c: &mut Checker) -> LengthSpec {
    let kind = d.kind.as_deref().unwrap_or("uniform");
    match kind {
        "fixed" => {
            only(path, d, kind, &["value"], c);
            let n = need(path, "value", d.value, kind, c).unwrap_or(1);
            LengthSpec::Fixed(count(&format!("{path}.value"), n, c))
        }
        "uniform" => {
            only(path, d, kind, &[], c);
            if d.kind.is_none() && (d.min.is_none() || d.max.is_none()) {
                c.error(path, "a range needs both min and max (or set kind)");
            }
            let (min, max) = bounds(path, d, c);
            LengthSpec::Uniform { min, max }
        }
        "normal" => normal(path, d, c),
        "lognormal" => lognormal(path, d, c),
        "empirical" => empirical(path, d, c),
        "mixture" => mixture(path, d, c),
        other => {
            c.error(format!("{path}.kind"), format!("unknown distribution \"{other}\": expected one of {KINDS}"));
            LengthSpec::Fixed(1)
        }
    }
}

fn normal(path: &str, d: &RawDist, c: &mut Checker) -> LengthSpec {
    only(path, d, "normal", &["mean", "stddev"], c);
    let mut mean = need(path, "mean", d.mean, "normal", c).unwrap_or(1.0);
    if !mean.is_finite() {
        // NaN would sample every length as the minimum; an infinity, as the maximum.
        c.error(format!("{path}.mean"), format!("must be a finite number, got {mean}"));
        mean = 1.0;
    }
    let stddev = need(path, "stddev", d.stddev, "normal", c).unwrap_or(0.0);
    if !(stddev >= 0.0 && stddev.is_finite()) {
        c.error(format!("{path}.stddev"), format!("must be a number >= 0, got {stddev}"));
    }
    let (min, max) = bounds(path, d, c);
    if mean.is_finite() && stddev > 0.0 && (mean + 4.0 * stddev < min as f64 || mean - 4.0 * stddev > max as f64) {
        c.error(format!("{path}.mean"), format!("mean {mean} is more than 4 stddev outside min..max ({min}..{max})"));
    }
    LengthSpec::Normal { mean, stddev, min, max }
}

fn lognormal(path: &str, d: &RawDist, c: &mut Checker) -> LengthSpec {
    only(path, d, "lognormal", &["median", "p90", "p99", "mu", "sigma"], c);
    let (min, max) = bounds(path, d, c);
    let (mu, sigma) = match (d.median, d.mu) {
        (Some(_), Some(_)) => {
            c.error(format!("{path}.mu"), "set either median (with p90, p99 or sigma) or mu, not both");
            (0.0, 1.0)
        }
        (None, None) => {
            c.error(path, "kind lognormal needs median (with p90, p99 or sigma) or mu and sigma");
            (0.0, 1.0)
        }
        (Some(median), None) => {
            let median = c.positive(&format!("{path}.median"), median);
            (median.ln(), lognormal_sigma(path, d, median, c))
        }
        (None, Some(mu)) => {
            if d.p90.is_some() || d.p99.is_some() {
                c.error(format!("{path}.mu"), "p90 and p99 go with median; with mu give sigma");
            }
            let sigma = need(path, "sigma", d.sigma, "lognormal", c).unwrap_or(1.0);
            if !mu.is_finite() {
                c.error(format!("{path}.mu"), format!("must be a finite number, got {mu}"));
            }
            (if mu.is_finite() { mu } else { 0.0 }, c.positive(&format!("{path}.sigma"), sigma))
        }
    };
    LengthSpec::LogNormal { mu, sigma, min, max }
}

/// Sigma from exactly one of `p90`, `p99`, `sigma`, each checked against the median.
fn lognormal_sigma(path: &str, d: &RawDist, median: f64, c: &mut Checker) -> f64 {
    let given: Vec<(&str, f64)> = [("p90", d.p90), ("p99", d.p99), ("sigma", d.sigma)].into_iter().filter_map(|(n, v)| v.map(|v| (n, v))).collect();
    match given.as_slice() {
        [("sigma", s)] => c.positive(&format!("{path}.sigma"), *s),
        [(name, q)] => {
            if !(q.is_finite() && *q > median) {
                c.error(format!("{path}.{name}"), format!("{name} ({q}) must be greater than median ({median})"));
                return 1.0;
            }
            let z = if *name == "p90" { Z90 } else { Z99 };
            (q / median).ln() / z
        }
        [] => {
            c.error(path, "kind lognormal with median needs one of p90, p99 or sigma");
            1.0
        }
        _ => {
            c.error(format!("{path}.{}", given[1].0), "give only one of p90, p99 or sigma");
            1.0
        }
    }
}

fn empirical(path: &str, d: &RawDist, c: &mut Checker) -> LengthSpec {
    only(path, d, "empirical", &["values", "histogram"], c);
    if d.min.is_some() || d.max.is_some() {
        c.error(path, "empirical takes its range from its values: min and max do not apply");
    }
    let bins: Vec<(u32, f64)> = match (&d.values, &d.histogram) {
        (Some(values), None) => values.iter().enumerate().map(|(i, v)| (count(&format!("{path}.values[{i}]"), *v, c), 1.0)).collect(),
        (None, Some(hist)) => hist
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let at = format!("{path}.histogram[{i}]");
                let value = count(&format!("{at}.value"), b.value, c);
                (value, c.positive(&format!("{at}.weight"), b.weight))
            })
            .collect(),
        (Some(_), Some(_)) => {
            c.error(format!("{path}.histogram"), "set either values or histogram, not both");
            vec![(1, 1.0)]
        }
        (None, None) => {
            c.error(path, "kind empirical needs values or histogram");
            vec![(1, 1.0)]
        }
    };
    if bins.is_empty() {
        let field = if d.values.is_some() { "values" } else { "histogram" };
        c.error(format!("{path}.{field}"), "must not be empty");
        return LengthSpec::Fixed(1);
    }
    LengthSpec::Empirical { bins }
}

fn mixture(path: &str, d: &RawDist, c: &mut Checker) -> LengthSpec {
    only(path, d, "mixture", &["components"], c);
    let (min, max) = bounds(path, d, c);
    let raws = d.components.as_deref().unwrap_or_default();
    if raws.is_empty() {
        c.error(format!("{path}.components"), "kind mixture needs at least one component");
    }
    let components = raws
        .iter()
        .enumerate()
        .map(|(i, comp)| {
            let at = format!("{path}.components[{i}]");
            let weight = match comp.weight {
                Some(w) => c.positive(&format!("{at}.weight"), w),
                None => {
                    c.error(&at, "a mixture component needs a weight");
                    1.0
                }
            };
            (weight, dist(&at, comp, c))
        })
        .collect();
    LengthSpec::Mixture { components, min, max }
}

/// An arrival spec; a scenario's own replaces the probe-wide one entirely.
pub fn arrival(path: &str, raw: Option<&RawArrival>, c: &mut Checker) -> ArrivalSpec {
    let Some(raw) = raw else { return ArrivalSpec::default() };
    let kind = match raw.kind.as_str() {
        "poisson" | "constant" => {
            if raw.burstiness.is_some() {
                c.error(format!("{path}.burstiness"), format!("burstiness applies to kind gamma only, not {}", raw.kind));
            }
            if raw.kind == "poisson" { ArrivalKind::Poisson } else { ArrivalKind::Constant }
        }
        "gamma" => {
            let b = c.positive(&format!("{path}.burstiness"), raw.burstiness.unwrap_or(1.0));
            ArrivalKind::Gamma { burstiness: b }
        }
        other => {
            c.error(format!("{path}.kind"), format!("unknown arrival kind \"{other}\": expected one of poisson, gamma, constant"));
            ArrivalKind::Poisson
        }
    };
    let diurnal = raw.diurnal.as_ref().map(|d| {
        let at = format!("{path}.diurnal");
        let period = c.positive_duration(&format!("{at}.period"), &d.period);
        if !(0.0..1.0).contains(&d.amplitude) {
            c.error(format!("{at}.amplitude"), format!("must be in [0, 1) so the rate stays positive, got {}", d.amplitude));
        }
        let peak_at = d.peak_at.as_ref().map(|p| c.duration(&format!("{at}.peak_at"), p)).unwrap_or_default();
        Diurnal { period, amplitude: d.amplitude, peak_at }
    });
    ArrivalSpec { kind, diurnal }
}

pub fn prefix(path: &str, raw: &RawPrefix, c: &mut Checker) -> PrefixSpec {
    let tokens = count(&format!("{path}.tokens"), raw.tokens, c);
    let share = raw.share.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&share) {
        c.error(format!("{path}.share"), format!("must be between 0 and 1, got {share}"));
    }
    let distinct = raw.distinct.unwrap_or(1);
    if !(1..=1_000_000).contains(&distinct) {
        c.error(format!("{path}.distinct"), format!("must be 1 to 1000000, got {distinct}"));
    }
    PrefixSpec { tokens, share, distinct: distinct.clamp(1, 1_000_000) as u32 }
}

/// Reads and checks a dataset file (relative paths are relative to the config file).
pub fn dataset(path: &str, raw: &RawDataset, base_dir: &Path, c: &mut Checker) -> Option<Arc<Dataset>> {
    let format = match raw.format.as_deref() {
        None if raw.path.ends_with(".json") => DatasetFormat::ShareGpt,
        None | Some("jsonl") => DatasetFormat::Jsonl,
        Some("sharegpt") => DatasetFormat::ShareGpt,
        Some(other) => {
            c.error(format!("{path}.format"), format!("unknown dataset format \"{other}\": expected jsonl or sharegpt"));
            DatasetFormat::Jsonl
        }
    };
    let order = match raw.order.as_deref() {
        None | Some("random") => DatasetOrder::Random,
        Some("sequential") => DatasetOrder::Sequential,
        Some(other) => {
            c.error(format!("{path}.order"), format!("unknown order \"{other}\": expected random or sequential"));
            DatasetOrder::Random
        }
    };
    let file = base_dir.join(&raw.path);
    match (c.resolvers.dataset)(&file, format, order, raw.nonce.unwrap_or(true)) {
        Ok(d) => Some(Arc::new(d)),
        Err(e) => {
            c.error(format!("{path}.path"), e);
            None
        }
    }
}
