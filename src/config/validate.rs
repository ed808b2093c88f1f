//! Stage 2: `RawConfig` -> `Config`, collecting every problem instead of stopping at the first.
//!
//! Each check records issues by path (`targets[1].timeouts.ttft`) and returns a placeholder on
//! failure so the remaining checks still run; the result is only used when nothing was
//! recorded. Lines are filled in afterwards from the paths (see `locate.rs`). Target checks
//! live in `target.rs`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::dataset::ReadDataset;
use super::duration::{format_duration, parse_duration};
use super::raw::{RawConfig, RawDuration, RawProbe, RawScenario, RawSlo};
use super::{ArrivalSpec, Config, ConfigIssue, LengthSpec, ProbeSettings, Scenario, Slo, Target};
use super::{target, workload};

/// What config names but does not own, resolved by the modules that own it: config reads no
/// dataset file and knows no mock profile itself.
#[derive(Clone, Copy)]
pub struct Resolvers {
    /// Reads a dataset file (`workload`).
    pub dataset: ReadDataset,
    /// The mock engine's profile names (`mock`).
    pub mock_profiles: fn() -> Vec<&'static str>,
}

/// Issues found so far. Paths only; lines are added by the caller.
pub struct Checker {
    pub errors: Vec<ConfigIssue>,
    pub warnings: Vec<ConfigIssue>,
    pub resolvers: Resolvers,
}

impl Checker {
    pub fn new(resolvers: Resolvers) -> Self {
        Checker { errors: Vec::new(), warnings: Vec::new(), resolvers }
    }

    /// For checks that name no dataset or mock profile (a section's documented defaults).
    pub fn detached() -> Self {
        Checker::new(Resolvers { dataset: |path, _, _, _| Err(format!("dataset {} cannot be read here", path.display())), mock_profiles: Vec::new })
    }

    pub(super) fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigIssue { path: path.into(), line: None, message: message.into() });
    }

    pub(super) fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(ConfigIssue { path: path.into(), line: None, message: message.into() });
    }

    /// Parses a duration, recording an error (and returning zero) when it is malformed.
    pub(super) fn duration(&mut self, path: &str, raw: &RawDuration) -> Duration {
        parse_duration(&raw.0).unwrap_or_else(|e| {
            self.error(path, e);
            Duration::ZERO
        })
    }

    /// A duration that must be > 0. A malformed one is reported once, as malformed.
    pub(super) fn positive_duration(&mut self, path: &str, raw: &RawDuration) -> Duration {
        match parse_duration(&raw.0) {
            Ok(Duration::ZERO) => {
                self.error(path, "must be greater than 0");
                Duration::ZERO
            }
            Ok(d) => d,
            Err(e) => {
                self.error(path, e);
                Duration::ZERO
            }
        }
    }

    /// A finite number > 0.
    pub(super) fn positive(&mut self, path: &str, value: f64) -> f64 {
        if value.is_finite() && value > 0.0 {
            value
        } else {
            self.error(path, format!("must be a number greater than 0, got {value}"));
            1.0
        }
    }
}

/// The slowest probe rate accepted: one probe every ~2.8 hours. Slower schedules say nothing
/// useful, and the arrival arithmetic stays well inside its range.
pub const MIN_RATE: f64 = 1e-4;
/// Most probes in flight per target: each holds a connection and its frames.
pub const MAX_IN_FLIGHT: u64 = 100_000;
/// The fastest: far beyond what one prober process can send.
pub const MAX_RATE: f64 = 100_000.0;

impl Checker {
    /// An http(s) URL with a host and no `user:password@` (a URL holding credentials is never
    /// echoed back). `None` after recording the problem.
    pub(super) fn http_url(&mut self, path: &str, text: &str) -> Option<reqwest::Url> {
        let shown = if text.contains('@') { "(hidden)".to_owned() } else { format!("\"{text}\"") };
        let url = match reqwest::Url::parse(text) {
            Ok(url) => url,
            Err(e) => {
                self.error(path, format!("invalid URL {shown}: {e}; expected e.g. http://127.0.0.1:8000"));
                return None;
            }
        };
        if !matches!(url.scheme(), "http" | "https") {
            self.error(path, format!("invalid URL {shown}: scheme must be http or https"));
        } else if url.host_str().is_none_or(str::is_empty) {
            self.error(path, format!("invalid URL {shown}: a host is required"));
        } else if !url.username().is_empty() || url.password().is_some() {
            self.error(path, "URL must not contain credentials (user:password@): they would end up in logs; use a key file or headers_from");
        } else {
            return Some(url);
        }
        None
    }

    /// A probe rate in `[MIN_RATE, MAX_RATE]`.
    pub(super) fn rate(&mut self, path: &str, value: f64) -> f64 {
        if value.is_finite() && (MIN_RATE..=MAX_RATE).contains(&value) {
            value
        } else {
            self.error(path, format!("must be a rate between {MIN_RATE} and {MAX_RATE} probes per second, got {value}"));
            1.0
        }
    }
}

/// Validates the whole file. The `Config` is meaningful only when `checker.errors` is empty.
/// Relative dataset paths are resolved against `base_dir` (the config file's folder).
pub fn validate(raw: &RawConfig, base_dir: &Path, c: &mut Checker) -> Config {
    let listen = listen(&raw.listen, c);
    let (probe, probe_rate) = probe(&raw.probe, c);
    let targets = target::targets(&raw.targets, c);
    let arrival = workload::arrival("probe.arrival", raw.probe.arrival.as_ref(), c);
    let shared = Shared { explicit_probe_rate: raw.probe.rate, probe_rate, arrival, base_dir };
    let mut scenarios = scenarios(&raw.scenarios, &shared, c);
    // A shard sends its share; the shards' independent streams add up to the configured rate.
    for s in &mut scenarios {
        s.rate /= probe.shard.count as f64;
    }
    let slo = slo(&raw.slo, c);
    warn_in_flight_cap(&probe, &targets, &scenarios, c);
    let tracing = super::telemetry::tracing(&raw.tracing, c);
    let sources = super::telemetry::sources(&raw.sources, &raw.targets, c);
    let bench = super::bench::bench(raw.bench.as_ref(), c);
    let detect = super::detect::detect(&raw.detect, c);
    Config { listen, probe, targets, scenarios, slo, tracing, sources, bench, detect, warnings: Vec::new() }
}

fn listen(text: &str, c: &mut Checker) -> SocketAddr {
    text.parse().unwrap_or_else(|_| {
        c.error("listen", format!("invalid address \"{text}\": expected IP:port, e.g. 127.0.0.1:9464"));
        SocketAddr::from(([127, 0, 0, 1], 9464))
    })
}

/// Returns the settings and the shared rate (`probe.rate`, default 1.0).
fn probe(raw: &RawProbe, c: &mut Checker) -> (ProbeSettings, f64) {
    let rate = c.rate("probe.rate", raw.rate.unwrap_or(1.0));
    if !(1..=MAX_IN_FLIGHT).contains(&raw.max_in_flight) {
        c.error("probe.max_in_flight", format!("must be between 1 and {MAX_IN_FLIGHT}, got {}", raw.max_in_flight));
    }
    let shard = match &raw.shard {
        None => super::Shard::default(),
        Some(s) => {
            if !(1..=super::MAX_SHARDS).contains(&s.count) {
                c.error("probe.shard.count", format!("must be 1 to {}, got {}", super::MAX_SHARDS, s.count));
            } else if s.index >= s.count {
                c.error("probe.shard.index", format!("must be below count ({}), got {}", s.count, s.index));
            }
            super::Shard { index: s.index.min(s.count.saturating_sub(1)) as usize, count: s.count.clamp(1, super::MAX_SHARDS) as usize }
        }
    };
    if let Some(p) = &raw.prober {
        check_name("probe.prober", p, c);
    }
    let settings = ProbeSettings {
        seed: raw.seed,
        max_in_flight: usize::try_from(raw.max_in_flight).unwrap_or(usize::MAX),
        shutdown_grace: c.duration("probe.shutdown_grace", &raw.shutdown_grace),
        discovery_interval: c.positive_duration("probe.discovery_interval", &raw.discovery_interval),
        shard,
        prober: raw.prober.clone(),
    };
    (settings, rate)
}

/// Names become metric label values: keep them short-alphabet and unique.
pub(super) fn check_name(path: &str, name: &str, c: &mut Checker) {
    let ok = |ch: char| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-');
    if name.is_empty() || !name.chars().all(ok) {
        c.error(path, format!("invalid name \"{name}\": use only letters, digits, '_', '.' and '-'"));
    }
}

/// Reports every name that was already used by an earlier entry of `section`.
pub(super) fn check_unique<'a>(section: &str, what: &str, names: impl Iterator<Item = &'a str>, c: &mut Checker) {
    let mut seen: Vec<&str> = Vec::new();
    for (i, name) in names.enumerate() {
        if let Some(first) = seen.iter().position(|n| *n == name) {
            c.error(format!("{section}[{i}].name"), format!("duplicate {what} name \"{name}\" (already used by {section}[{first}])"));
        }
        seen.push(name);
    }
}

/// What every scenario inherits from `probe:`.
struct Shared<'a> {
    explicit_probe_rate: Option<f64>,
    probe_rate: f64,
    arrival: ArrivalSpec,
    base_dir: &'a Path,
}

/// Resolves every scenario's rate: its own `rate`, or its weight's share of `probe.rate`.
fn scenarios(raws: &[RawScenario], shared: &Shared, c: &mut Checker) -> Vec<Scenario> {
    if raws.is_empty() {
        c.error("scenarios", "at least one scenario is required");
    }
    check_unique("scenarios", "scenario", raws.iter().map(|s| s.name.as_str()), c);
    let weights: Vec<Option<f64>> = raws.iter().enumerate().map(|(i, s)| weight(i, s, c)).collect();
    let total_weight: f64 = weights.iter().flatten().sum();
    if total_weight == 0.0 && !raws.is_empty() && shared.explicit_probe_rate.is_some() {
        c.warn("probe.rate", "unused: every scenario sets its own rate");
    }
    raws.iter()
        .zip(weights)
        .enumerate()
        .map(|(i, (raw, w))| {
            let path = format!("scenarios[{i}]");
            check_name(&format!("{path}.name"), &raw.name, c);
            let rate = match (raw.rate, w) {
                (Some(own), _) => c.rate(&format!("{path}.rate"), own),
                (None, Some(w)) => c.rate(&format!("{path}.weight"), shared.probe_rate * w / total_weight),
                (None, None) => shared.probe_rate, // unreachable: no rate means a weight
            };
            scenario(&path, raw, rate, shared, c)
        })
        .collect()
}

/// One scenario's lengths, arrival, prefix and dataset.
fn scenario(path: &str, raw: &RawScenario, rate: f64, shared: &Shared, c: &mut Checker) -> Scenario {
    let dataset = raw.dataset.as_ref().and_then(|d| workload::dataset(&format!("{path}.dataset"), d, shared.base_dir, c));
    let mut length = |field: &str, value: &Option<super::raw::RawLength>, required: bool| match value {
        Some(v) => workload::length(&format!("{path}.{field}"), v, c),
        None => {
            if required {
                c.error(path, format!("missing field `{field}`"));
            }
            LengthSpec::Fixed(0) // unused: the dataset provides it
        }
    };
    let has_dataset = raw.dataset.is_some();
    let input_tokens = length("input_tokens", &raw.input_tokens, !has_dataset);
    let needs_output = dataset.as_ref().is_none_or(|d| d.entries_without_output() > 0);
    let output_tokens = length("output_tokens", &raw.output_tokens, needs_output && !(has_dataset && dataset.is_none()));
    if has_dataset && raw.input_tokens.is_some() {
        c.error(format!("{path}.input_tokens"), "input_tokens does not apply with a dataset (its prompts are sent as they are)");
    }
    if has_dataset && raw.prefix.is_some() {
        c.error(format!("{path}.prefix"), "prefix does not apply with a dataset");
    }
    let prefix = raw.prefix.as_ref().map(|p| workload::prefix(&format!("{path}.prefix"), p, c));
    if let (Some(p), Some(min)) = (prefix, input_tokens.min_value()) {
        if p.tokens >= min && p.share > 0.0 {
            c.warn(
                format!("{path}.prefix.tokens"),
                format!("prefix ({}) is not shorter than the shortest input ({min}): shorter draws get a cut prefix", p.tokens),
            );
        }
    }
    if let Some(salt) = &raw.cache_salt {
        if salt.is_empty() || salt.len() > 256 {
            c.error(format!("{path}.cache_salt"), "must be 1 to 256 characters");
        }
    }
    Scenario {
        name: raw.name.clone(),
        rate,
        input_tokens,
        output_tokens,
        arrival: match &raw.arrival {
            Some(a) => workload::arrival(&format!("{path}.arrival"), Some(a), c),
            None => shared.arrival,
        },
        prefix,
        dataset,
        cache_salt: raw.cache_salt.clone(),
        slo: super::slo::slo_override(&format!("{path}.slo"), raw.slo.as_ref(), c),
    }
}

/// The scenario's weight when it shares `probe.rate`, `None` when it has its own rate.
fn weight(i: usize, raw: &RawScenario, c: &mut Checker) -> Option<f64> {
    match (raw.weight, raw.rate) {
        (Some(_), Some(_)) => {
            c.error(format!("scenarios[{i}].rate"), "set either weight (a share of probe.rate) or rate (an own rate), not both");
            None
        }
        (_, Some(_)) => None,
        (w, None) => Some(c.positive(&format!("scenarios[{i}].weight"), w.unwrap_or(1.0))),
    }
}

fn slo(raw: &RawSlo, c: &mut Checker) -> Slo {
    let mut threshold = |name: &str, d: &Option<RawDuration>| d.as_ref().map(|d| c.positive_duration(&format!("slo.{name}"), d));
    let slo = Slo { ttft: threshold("ttft", &raw.ttft), tpot: threshold("tpot", &raw.tpot), e2e: threshold("e2e", &raw.e2e), objective: raw.objective };
    if !(raw.objective > 0.0 && raw.objective < 1.0) {
        c.error("slo.objective", format!("must be between 0 and 1 (exclusive), e.g. 0.99; got {}", raw.objective));
    }
    slo
}

/// Open-loop traffic at `rate` against requests that may each take up to `total` needs about
/// `rate × total` slots; below that, a slow target makes the prober drop probes.
fn warn_in_flight_cap(probe: &ProbeSettings, targets: &[Target], scenarios: &[Scenario], c: &mut Checker) {
    let rate: f64 = scenarios.iter().map(|s| s.rate).sum();
    for t in targets {
        let needed = rate * t.timeouts.total.as_secs_f64();
        if (probe.max_in_flight as f64) < needed {
            c.warn(
                "probe.max_in_flight",
                format!(
                    "{} is below rate × total timeout for target \"{}\" ({}/s × {} = {needed:.0}): \
                     probes will be dropped if responses get that slow",
                    probe.max_in_flight,
                    t.name,
                    short_number(rate),
                    format_duration(t.timeouts.total),
                ),
            );
        }
    }
}

/// `2.1000000000000005` -> `2.1`: at most 3 decimals, no trailing zeros.
fn short_number(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}
