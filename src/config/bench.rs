//! The `bench:` section: sweep mode and load points, warm-up, repeats, stop conditions, per-point
//! timeout, the open-loop arrival process, the in-process mock engine, and the scenario matrix. Stage 1 (serde) and stage 2
//! (validation) for this section live together here; `validate.rs` calls `bench()`.

use std::time::Duration;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::check::Checker;
use super::duration::RawDuration;
use super::raw_workload::{RawArrival, RawDiurnal};
use super::workload::{ArrivalKind, ArrivalSpec};

/// `bench:` as written.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with mode, concurrency or rates, warmup_requests, repeats, requests, duration, ...")]
pub struct RawBench {
    /// `concurrency` (closed loop; `closed` is a synonym) or `rate` (open arrival; `open`).
    pub mode: String,
    /// Closed-loop sweep: number of workers at each point, increasing.
    #[serde(default)]
    pub concurrency: Vec<i64>,
    /// Open-arrival sweep: requests per second at each point, increasing.
    #[serde(default)]
    pub rates: Vec<f64>,
    /// Rate mode: in-flight cap; a request due while it is reached is dropped and counted.
    /// Default 256.
    pub max_concurrency: Option<i64>,
    /// Rate mode: the arrival process, as for scenarios (`{kind: gamma, cv: 2}`, a diurnal
    /// cycle), or just its kind (`poisson`, the default, or `constant`).
    pub arrival: Option<RawBenchArrival>,
    /// Requests sent at each point before its repeats, excluded from every figure. Default 0.
    #[serde(default)]
    pub warmup_requests: i64,
    /// Measured repeats per point. Default 3.
    #[serde(default = "default_repeats")]
    pub repeats: i64,
    /// Stop a repeat after this many requests (sent or dropped).
    pub requests: Option<i64>,
    /// Stop a repeat after this long (no new request after it; in-flight ones finish).
    pub duration: Option<RawDuration>,
    /// Hard limit per repeat (and per warm-up); requests still running are cancelled.
    /// Default `120s`.
    #[serde(default = "default_point_timeout")]
    pub point_timeout: RawDuration,
    /// Start the built-in mock engine in-process on the target's address. Default false.
    #[serde(default)]
    pub mock: bool,
    /// The mock's hardware profile. Default `small-gpu`.
    pub mock_profile: Option<String>,
    /// The in-process mock's step durations are multiplied by this factor. Default 1.0.
    pub mock_slowdown: Option<f64>,
    /// The engine's Prometheus page for the engine-agreement check and the engine side samples.
    /// Default: the target's `base_url` + `/metrics`, used when it serves vLLM names.
    pub engine_metrics_url: Option<String>,
    /// A grid of runs (see `config/README.md`).
    pub matrix: Option<RawMatrix>,
}

fn default_repeats() -> i64 {
    3
}

fn default_point_timeout() -> RawDuration {
    RawDuration("120s".to_owned())
}

/// `bench.arrival:` as written: a kind alone, or a spec.
#[derive(Debug)]
pub enum RawBenchArrival {
    Kind(String),
    Spec(RawBenchArrivalSpec),
}

/// `bench.arrival: {...}`: a scenario's arrival spec, where gamma burstiness may also be given as
/// the coefficient of variation of the gaps (`cv`; burstiness = 1 / cv²).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with kind, cv or burstiness, diurnal")]
pub struct RawBenchArrivalSpec {
    #[serde(default)]
    pub kind: Option<String>,
    pub burstiness: Option<f64>,
    pub cv: Option<f64>,
    pub diurnal: Option<RawDiurnal>,
}

impl<'de> Deserialize<'de> for RawBenchArrival {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(BenchArrivalVisitor)
    }
}

struct BenchArrivalVisitor;

impl<'de> Visitor<'de> for BenchArrivalVisitor {
    type Value = RawBenchArrival;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an arrival kind (poisson, gamma, constant) or {kind: ..., cv: ..., diurnal: ...}")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<RawBenchArrival, E> {
        Ok(RawBenchArrival::Kind(v.to_owned()))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawBenchArrival, A::Error> {
        RawBenchArrivalSpec::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawBenchArrival::Spec)
    }
}

/// `bench.matrix:` as written.
#[derive(Debug, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with concurrency, rates, input_tokens, output_tokens")]
pub struct RawMatrix {
    #[serde(default)]
    pub concurrency: Vec<i64>,
    #[serde(default)]
    pub rates: Vec<f64>,
    #[serde(default)]
    pub input_tokens: Vec<i64>,
    #[serde(default)]
    pub output_tokens: Vec<i64>,
}

/// How load is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BenchMode {
    /// Closed loop: C workers, each sends its next request when the previous one ends.
    Concurrency,
    /// Open arrival at a rate, with an in-flight cap whose drops are counted.
    Rate,
}

impl BenchMode {
    pub fn as_str(self) -> &'static str {
        match self {
            BenchMode::Concurrency => "concurrency",
            BenchMode::Rate => "rate",
        }
    }
}

/// The validated `bench:` section.
#[derive(Debug, Clone, PartialEq)]
pub struct Bench {
    pub mode: BenchMode,
    /// Load at each point: worker counts (whole numbers) or rates, strictly increasing.
    pub points: Vec<f64>,
    /// Rate mode in-flight cap.
    pub max_concurrency: usize,
    /// Rate mode arrival process (the scenarios' kinds; Poisson by default).
    pub arrival: ArrivalSpec,
    pub warmup_requests: u64,
    pub repeats: u32,
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
    pub point_timeout: Duration,
    /// `Some(profile name)`: start the mock engine in-process.
    pub mock: Option<String>,
    /// Step-duration factor of the in-process mock (1.0 = as the profile says).
    pub mock_slowdown: f64,
    /// Explicit engine `/metrics` URL; `None` = try the target's own `/metrics`.
    pub engine_metrics_url: Option<String>,
    pub matrix: Option<Matrix>,
}

/// The validated grid: every combination of input × output tokens is one run; the load list
/// (if set) replaces the sweep points of each run.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub points: Vec<f64>,
    pub input_tokens: Vec<u32>,
    pub output_tokens: Vec<u32>,
}

/// Default rate-mode in-flight cap.
const DEFAULT_MAX_CONCURRENCY: usize = 256;

/// Validates `bench:`; `None` when the section is absent.
pub(super) fn bench(raw: Option<&RawBench>, c: &mut Checker) -> Option<Bench> {
    let raw = raw?;
    let (mode, known) = match raw.mode.as_str() {
        "concurrency" | "closed" => (BenchMode::Concurrency, true),
        "rate" | "open" => (BenchMode::Rate, true),
        other => {
            c.error("bench.mode", format!("unknown mode \"{other}\": expected concurrency (closed) or rate (open)"));
            (BenchMode::Concurrency, false)
        }
    };
    // With an unknown mode, checks that depend on it would only add noise.
    let points = if known { load_list(mode, "bench", &raw.concurrency, &raw.rates, true, c) } else { Vec::new() };
    if known && mode == BenchMode::Concurrency {
        if raw.max_concurrency.is_some() {
            c.error("bench.max_concurrency", "only for mode rate (in mode concurrency the load is the worker count)");
        }
        if raw.arrival.is_some() {
            c.error("bench.arrival", "only for mode rate");
        }
    }
    let max_concurrency = match raw.max_concurrency {
        None => DEFAULT_MAX_CONCURRENCY,
        Some(n) if n >= 1 => n as usize,
        Some(n) => {
            c.error("bench.max_concurrency", format!("must be at least 1, got {n}"));
            1
        }
    };
    let arrival = raw.arrival.as_ref().map_or_else(ArrivalSpec::default, |a| arrival(a, c));
    let warmup_requests = non_negative("bench.warmup_requests", raw.warmup_requests, c);
    let repeats = if (1..=1000).contains(&raw.repeats) {
        raw.repeats as u32
    } else {
        c.error("bench.repeats", format!("must be 1 to 1000, got {}", raw.repeats));
        1
    };
    let requests = raw.requests.map(|n| {
        if n < 1 {
            c.error("bench.requests", format!("must be at least 1, got {n}"));
        }
        n.max(1) as u64
    });
    let duration = raw.duration.as_ref().map(|d| c.positive_duration("bench.duration", d));
    if requests.is_none() && duration.is_none() {
        c.error("bench", "set a stop condition: requests (per repeat), duration, or both");
    }
    let point_timeout = c.positive_duration("bench.point_timeout", &raw.point_timeout);
    if let Some(d) = duration {
        if !point_timeout.is_zero() && d > point_timeout {
            c.error("bench.point_timeout", "must not be shorter than bench.duration");
        }
    }
    let mock = mock_profile(raw, c);
    let mock_slowdown = match raw.mock_slowdown {
        None => 1.0,
        Some(f) if f.is_finite() && f > 0.0 && f <= 1000.0 => f,
        Some(f) => {
            c.error("bench.mock_slowdown", format!("must be a factor greater than 0 and at most 1000, got {f}"));
            1.0
        }
    };
    if raw.mock_slowdown.is_some() && !raw.mock {
        c.warn("bench.mock_slowdown", "unused: bench.mock is false");
    }
    let engine_metrics_url = raw.engine_metrics_url.clone();
    if let Some(u) = &engine_metrics_url {
        c.http_url("bench.engine_metrics_url", u);
    }
    let matrix = raw.matrix.as_ref().filter(|_| known).map(|m| matrix(mode, m, c));
    Some(Bench {
        mode,
        points,
        max_concurrency,
        arrival,
        warmup_requests,
        repeats,
        requests,
        duration,
        point_timeout,
        mock,
        mock_slowdown,
        engine_metrics_url,
        matrix,
    })
}

/// The arrival spec, checked as a scenario's (`cv` turned into burstiness first).
fn arrival(raw: &RawBenchArrival, c: &mut Checker) -> ArrivalSpec {
    const AT: &str = "bench.arrival";
    let spec = match raw {
        RawBenchArrival::Kind(kind) => {
            if !["poisson", "gamma", "constant"].contains(&kind.as_str()) {
                c.error(AT, format!("unknown arrival \"{kind}\": expected poisson, gamma, constant or a mapping {{kind, cv, diurnal}}"));
                return ArrivalSpec::default();
            }
            RawArrival { kind: kind.clone(), burstiness: None, diurnal: None }
        }
        RawBenchArrival::Spec(s) => {
            let kind = s.kind.clone().unwrap_or_else(|| "poisson".to_owned());
            let burstiness = match (s.cv, s.burstiness) {
                (Some(_), Some(_)) => {
                    c.error(format!("{AT}.cv"), "set cv or burstiness, not both (burstiness = 1 / cv²)");
                    None
                }
                (Some(_), None) if kind != "gamma" => {
                    c.error(format!("{AT}.cv"), format!("cv applies to kind gamma only, not {kind}"));
                    None
                }
                (Some(cv), None) => Some(1.0 / (c.positive(&format!("{AT}.cv"), cv).powi(2))),
                (None, b) => b,
            };
            RawArrival { kind, burstiness, diurnal: s.diurnal.clone() }
        }
    };
    let spec = super::workload::arrival(AT, Some(&spec), c);
    if matches!(spec.kind, ArrivalKind::Gamma { burstiness } if !burstiness.is_finite()) {
        c.error(format!("{AT}.cv"), "too small: the gaps' burstiness (1 / cv²) is not a finite number");
    }
    spec
}

fn mock_profile(raw: &RawBench, c: &mut Checker) -> Option<String> {
    let name = raw.mock_profile.clone().unwrap_or_else(|| "small-gpu".to_owned());
    let known = (c.resolvers.mock_profiles)();
    if !known.contains(&name.as_str()) {
        c.error("bench.mock_profile", format!("unknown profile \"{name}\": expected one of {}", known.join(", ")));
    }
    if raw.mock_profile.is_some() && !raw.mock {
        c.warn("bench.mock_profile", "unused: bench.mock is false");
    }
    raw.mock.then_some(name)
}

fn non_negative(path: &str, n: i64, c: &mut Checker) -> u64 {
    if n < 0 {
        c.error(path, format!("must be 0 or more, got {n}"));
    }
    n.max(0) as u64
}

/// The load list of the mode (`concurrency` or `rates`), checked; the other list must be empty.
fn load_list(mode: BenchMode, at: &str, workers: &[i64], rates: &[f64], required: bool, c: &mut Checker) -> Vec<f64> {
    let (own, other, values): (&str, &str, Vec<f64>) = match mode {
        BenchMode::Concurrency => ("concurrency", "rates", workers.iter().map(|&n| n as f64).collect()),
        BenchMode::Rate => ("rates", "concurrency", rates.to_vec()),
    };
    let other_set = match mode {
        BenchMode::Concurrency => !rates.is_empty(),
        BenchMode::Rate => !workers.is_empty(),
    };
    if other_set {
        c.error(format!("{at}.{other}"), format!("not used in mode {}: set {own} instead", mode.as_str()));
    }
    if values.is_empty() && required {
        c.error(format!("{at}.{own}"), format!("at least one point is required in mode {}", mode.as_str()));
    }
    for (i, &v) in values.iter().enumerate() {
        let path = format!("{at}.{own}[{i}]");
        let ok = match mode {
            BenchMode::Concurrency => (1.0..=100_000.0).contains(&v),
            BenchMode::Rate => v.is_finite() && (super::check::MIN_RATE..=super::check::MAX_RATE).contains(&v),
        };
        if !ok {
            let want = if mode == BenchMode::Concurrency { "a whole number 1 to 100000" } else { "a rate between 0.0001 and 100000 per second" };
            c.error(path, format!("must be {want}, got {v}"));
        } else if i > 0 && v <= values[i - 1] {
            c.error(path, format!("points must be strictly increasing ({v} after {})", values[i - 1]));
        }
    }
    values
}

fn matrix(mode: BenchMode, raw: &RawMatrix, c: &mut Checker) -> Matrix {
    let points = load_list(mode, "bench.matrix", &raw.concurrency, &raw.rates, false, c);
    let tokens = |name: &str, list: &[i64], c: &mut Checker| -> Vec<u32> {
        list.iter()
            .enumerate()
            .map(|(i, &n)| {
                if !(1..=1_000_000).contains(&n) {
                    c.error(format!("bench.matrix.{name}[{i}]"), format!("token count {n} is out of range: expected 1 to 1000000"));
                }
                n.clamp(1, 1_000_000) as u32
            })
            .collect()
    };
    let m = Matrix { points, input_tokens: tokens("input_tokens", &raw.input_tokens, c), output_tokens: tokens("output_tokens", &raw.output_tokens, c) };
    if m.points.is_empty() && m.input_tokens.is_empty() && m.output_tokens.is_empty() {
        c.error("bench.matrix", "empty: list at least one of concurrency/rates, input_tokens, output_tokens");
    }
    m
}

#[cfg(test)]
mod tests {
    use super::super::{ArrivalKind, ArrivalSpec, BenchMode};
    use crate::app::loader::parse;

    fn bench(yaml: &str) -> super::Bench {
        let text = format!(
            "targets:\n  - {{name: t, base_url: http://127.0.0.1:8000, api: openai-chat}}\nscenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 8}}\nbench:\n  requests: 5\n{yaml}"
        );
        parse(&text, "t.yaml").unwrap_or_else(|e| panic!("{e}")).bench.expect("bench section")
    }

    #[test]
    fn arrival_is_a_kind_or_a_spec() {
        let open = |a: &str| bench(&format!("  mode: open\n  rates: [1]\n{a}"));
        assert_eq!(open("").arrival, ArrivalSpec::default());
        assert_eq!(open("  arrival: constant\n").arrival.kind, ArrivalKind::Constant);
        assert_eq!(open("  arrival: gamma\n").arrival.kind, ArrivalKind::Gamma { burstiness: 1.0 });
        assert_eq!(open("  arrival: {kind: gamma, cv: 2}\n").arrival.kind, ArrivalKind::Gamma { burstiness: 0.25 });
        assert_eq!(open("  arrival: {kind: gamma, burstiness: 4}\n").arrival.kind, ArrivalKind::Gamma { burstiness: 4.0 });
        let diurnal = open("  arrival: {diurnal: {period: 1h, amplitude: 0.5}}\n").arrival;
        assert_eq!((diurnal.kind, diurnal.diurnal.map(|d| d.amplitude)), (ArrivalKind::Poisson, Some(0.5)));
    }

    #[test]
    fn open_and_closed_name_the_modes() {
        assert_eq!(bench("  mode: open\n  rates: [1]\n").mode, BenchMode::Rate);
        assert_eq!(bench("  mode: closed\n  concurrency: [1]\n").mode, BenchMode::Concurrency);
    }
}
