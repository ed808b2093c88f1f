//! `llmprobe detect simulate`: the probe-rate planner on the command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use serde::Deserialize;

use crate::config::DetectSettings;
use crate::detect::sim::{self, ColdCache, LoadOffset, LoadReading, PlanParams, Ramp, RegressionTarget, Replay, ReplayOrder, ReplayProbe, Rollout, SideBySide};

#[derive(Debug, Subcommand)]
pub enum DetectCommand {
    /// Probe-rate planner: run the regression detector on synthetic (or replayed) probes in
    /// virtual time and print detection probability within 5/15/60 min, median time to detect,
    /// and false alarms per 30 days with one release a day.
    Simulate(Box<SimulateArgs>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    Random,
    Time,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TargetArg {
    All,
    Miss,
    Slowest,
}

/// The day's conditions: flags without a default take the `--day` file's value, else the one
/// named in their help.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Probes per second to the target, all scenarios together.
    #[arg(long, default_value_t = 0.5)]
    pub rate: f64,
    /// Scenarios sharing the rate (each against its own baseline; pooled per target).
    #[arg(long, default_value_t = 3)]
    pub scenarios: usize,
    /// YAML file of the day's conditions (keys: ttft, tpot, output_tokens, goodput, drift,
    /// outliers, load, cache, outage_s, burst, rollout); flags override it.
    #[arg(long)]
    pub day: Option<PathBuf>,
    /// Median TTFT (lognormal) [default: 200].
    #[arg(long)]
    pub ttft_median_ms: Option<f64>,
    /// Sigma of ln TTFT [default: 0.5].
    #[arg(long)]
    pub ttft_sigma: Option<f64>,
    /// Median TPOT (lognormal) [default: 20].
    #[arg(long)]
    pub tpot_median_ms: Option<f64>,
    /// Sigma of ln TPOT [default: 0.2].
    #[arg(long)]
    pub tpot_sigma: Option<f64>,
    /// Output tokens per probe (e2e = TTFT + tokens x TPOT) [default: 64].
    #[arg(long)]
    pub output_tokens: Option<f64>,
    /// Factor on TTFT after the release (1 = no latency regression).
    #[arg(long, default_value_t = 1.25)]
    pub regression: f64,
    /// Which probes the TTFT regression slows: all, or prefix-cache misses only (needs
    /// --cache-hit-share).
    #[arg(long, value_enum, default_value_t = TargetArg::All)]
    pub regression_target: TargetArg,
    /// With --regression-target slowest: the share of requests (the slowest) slowed [default: 0.03].
    #[arg(long)]
    pub slowest_share: Option<f64>,
    /// The engine's load reading joined to each probe explains this share of the load's
    /// variance (0..1] [default: no reading].
    #[arg(long)]
    pub reading_r2: Option<f64>,
    /// Share of a latency regression the reading carries after the release (0: offered load;
    /// a queue reading carries part of a slowdown) [default: 0].
    #[arg(long)]
    pub reading_mediator: Option<f64>,
    /// One latency incident a simulated day, this long (s); in detection trials it comes earlier
    /// that day, before the baseline hour [default: 0].
    #[arg(long)]
    pub incident_s: Option<f64>,
    /// Latency factor during an incident [default: 2].
    #[arg(long)]
    pub incident_factor: Option<f64>,
    /// The marker arrives this many seconds after the release it names (a late marker with its
    /// own time) [default: 0].
    #[arg(long)]
    pub marker_delay_s: Option<f64>,
    /// A second marker of the same version this many seconds after the release [default: none].
    #[arg(long)]
    pub second_marker_s: Option<f64>,
    /// A traffic ramp with each release inside it: latency rises by this factor over
    /// `--ramp-min` minutes, then holds (an offered-load reading rises with it) [default: none].
    #[arg(long)]
    pub ramp_factor: Option<f64>,
    /// Latency creeping by this factor an hour from the release on (a leak; with
    /// `--regression 1 --no-marker` only the continuous test can see it) [default: 1].
    #[arg(long)]
    pub creep_per_h: Option<f64>,
    /// Goodput counts a probe with TTFT above this (ms) as bad: an SLO miss, more frequent
    /// under load [default: only errors are bad].
    #[arg(long)]
    pub slo_ttft_ms: Option<f64>,
    /// Two versions side by side: this many replicas (each probe to one at random), replaced by
    /// the new version one by one from the release over `--side-by-side-min`; only new replicas
    /// regress, and the canary comparison runs beside the detector [default: none]
    #[arg(long)]
    pub side_by_side: Option<usize>,
    /// The side-by-side rollout's duration (minutes) [default: 20]
    #[arg(long)]
    pub side_by_side_min: Option<f64>,
    /// Side by side: each replica's lasting latency offset (log sd: another GPU, a noisy
    /// neighbour) [default: 0]
    #[arg(long)]
    pub replica_sd: Option<f64>,
    /// The ramp's duration (minutes) [default: 120].
    #[arg(long)]
    pub ramp_min: Option<f64>,
    /// A cold prefix cache after each release: the hit share (`--cache-hit-share`) falls to 0
    /// and recovers linearly over a time drawn from MIN..MAX minutes, e.g. `10..20`.
    #[arg(long, value_name = "MIN..MAX")]
    pub cold_cache_min: Option<String>,
    /// Join the engine's prefix-cache hit rate to each probe.
    #[arg(long)]
    pub cache_reading: bool,
    /// Only the first N scenarios regress (latency and goodput) [default: all].
    #[arg(long)]
    pub regression_scenarios: Option<usize>,
    /// Goodput (share of good probes) before the release [default: 0.995].
    #[arg(long)]
    pub good_before: Option<f64>,
    /// Goodput after the release [default: unchanged].
    #[arg(long)]
    pub good_after: Option<f64>,
    /// Relative amplitude of the daily latency cycle (0.2 = +-20%) [default: 0.2].
    #[arg(long)]
    pub drift: Option<f64>,
    /// Period of the latency cycle in hours [default: 24].
    #[arg(long)]
    pub drift_period_h: Option<f64>,
    /// Day-to-day variation of the cycle's amplitude: x(1 + SD x z), z drawn per day
    /// [default: 0, every day alike].
    #[arg(long, value_name = "SD")]
    pub drift_day_sd: Option<f64>,
    /// Stationary sd of the shared log-latency load offset (Ornstein-Uhlenbeck, all scenarios
    /// alike) [default: 0].
    #[arg(long)]
    pub load_sd: Option<f64>,
    /// Time constant of the load offset in minutes [default: 5].
    #[arg(long)]
    pub load_tau_min: Option<f64>,
    /// TPOT moves by exp(share x offset), TTFT by exp(offset) [default: 0.5].
    #[arg(long)]
    pub tpot_load_share: Option<f64>,
    /// Scenarios feel the shared load and the daily cycle unlike: scenario i of n by a factor
    /// from 1 - S (the first) to 1 + S (the last), evenly spaced [default: 0, all alike].
    #[arg(long, value_name = "S")]
    pub scenario_load_spread: Option<f64>,
    /// The load swings more in the busy hours: its sd follows the daily cycle, from
    /// sd x (1 - W) at the quietest hour to sd x (1 + W) at the busiest [default: 0, the same
    /// all day].
    #[arg(long, value_name = "W")]
    pub load_sd_day_swing: Option<f64>,
    /// Share of prefix-cache hits: TTFT becomes bimodal, misses at --miss-factor x the median
    /// [default: 0, unimodal].
    #[arg(long)]
    pub cache_hit_share: Option<f64>,
    /// TTFT factor of a cache miss [default: 3].
    #[arg(long)]
    pub miss_factor: Option<f64>,
    /// Share of probes that are outliers [default: 0.01].
    #[arg(long)]
    pub outlier_share: Option<f64>,
    /// Latency factor of an outlier [default: 10].
    #[arg(long)]
    pub outlier_factor: Option<f64>,
    /// An outlier's factor is Pareto(alpha), at least 1, instead of --outlier-factor.
    #[arg(long)]
    pub tail_pareto_alpha: Option<f64>,
    /// One total outage a simulated day at a random time, this long (s): every probe fails
    /// [default: 0].
    #[arg(long)]
    pub outage_s: Option<f64>,
    /// One error burst a simulated day at a random time, this long (s) [default: 0].
    #[arg(long)]
    pub burst_s: Option<f64>,
    /// Share of probes failing in a burst [default: 0.25].
    #[arg(long)]
    pub burst_error_share: Option<f64>,
    /// Rollout warm-up after each release (latency x a random factor for a random time, a few
    /// errors at first); any --rollout-* flag turns it on too.
    #[arg(long)]
    pub rollout: bool,
    /// Smallest warm-up latency factor [default: 1.3].
    #[arg(long)]
    pub rollout_factor_min: Option<f64>,
    /// Largest warm-up latency factor [default: 2.0].
    #[arg(long)]
    pub rollout_factor_max: Option<f64>,
    /// Shortest warm-up (s) [default: 120].
    #[arg(long)]
    pub rollout_duration_min_s: Option<f64>,
    /// Longest warm-up (s) [default: 300].
    #[arg(long)]
    pub rollout_duration_max_s: Option<f64>,
    /// Share of probes failing early in the warm-up [default: 0.03].
    #[arg(long)]
    pub rollout_error_share: Option<f64>,
    /// For how long after the release they fail (s) [default: 120].
    #[arg(long)]
    pub rollout_error_s: Option<f64>,
    /// Detection trials.
    #[arg(long, default_value_t = 1000)]
    pub trials: usize,
    /// Simulated null days for the false-alarm rate [default: --trials].
    #[arg(long)]
    pub days: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How long after the release a detection trial runs (minutes).
    #[arg(long, default_value_t = 60.0)]
    pub horizon_min: f64,
    /// Baseline warm-up before the release (hours) [default: the longest baseline window].
    #[arg(long)]
    pub warmup_h: Option<f64>,
    /// Do not mark the release: measure the continuous detector alone on a silent regression.
    #[arg(long)]
    pub no_marker: bool,
    /// Worker threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Use recorded probes (bench `records.jsonl`, or a result directory holding one) instead of
    /// the lognormals.
    #[arg(long)]
    pub replay: Option<PathBuf>,
    /// random: each probe drawn from its scenario's records at Poisson times of --rate; time:
    /// the records in send order at their recorded gaps (looping), keeping their autocorrelation.
    #[arg(long, value_enum, default_value_t = OrderArg::Random)]
    pub replay_order: OrderArg,
    /// Detector settings (YAML or JSON, the fields of `DetectSettings`); defaults otherwise.
    #[arg(long)]
    pub settings: Option<PathBuf>,
    /// Also search the smallest TTFT slowdown detected in >= 90% of trials within 15 and 60 min.
    #[arg(long)]
    pub min_detectable: bool,
    /// Detection trials per step of that search.
    #[arg(long, default_value_t = 100)]
    pub scan_trials: usize,
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// The `--day` file: the conditions of a simulated day. Every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DayFile {
    pub ttft: Option<LatencyKeys>,
    pub tpot: Option<LatencyKeys>,
    pub output_tokens: Option<f64>,
    /// Goodput before the release.
    pub goodput: Option<f64>,
    pub drift: Option<DriftKeys>,
    pub outliers: Option<OutlierKeys>,
    pub load: Option<LoadKeys>,
    pub cache: Option<CacheKeys>,
    pub outage_s: Option<f64>,
    pub burst: Option<BurstKeys>,
    pub incident: Option<IncidentKeys>,
    /// Present (even `{}`): the rollout warm-up is on.
    pub rollout: Option<RolloutKeys>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LatencyKeys {
    pub median_ms: Option<f64>,
    pub sigma: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DriftKeys {
    pub amplitude: Option<f64>,
    pub period_h: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutlierKeys {
    pub share: Option<f64>,
    pub factor: Option<f64>,
    pub pareto_alpha: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadKeys {
    pub sd: Option<f64>,
    pub tau_min: Option<f64>,
    pub tpot_share: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheKeys {
    pub hit_share: Option<f64>,
    pub miss_factor: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BurstKeys {
    pub s: Option<f64>,
    pub error_share: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct IncidentKeys {
    pub s: Option<f64>,
    pub factor: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RolloutKeys {
    pub factor_min: Option<f64>,
    pub factor_max: Option<f64>,
    pub duration_min_s: Option<f64>,
    pub duration_max_s: Option<f64>,
    pub error_share: Option<f64>,
    pub error_s: Option<f64>,
}

/// Parses a day file; an error names the key (with its path) and the line.
fn parse_day(text: &str) -> anyhow::Result<DayFile> {
    // serde_norway's message already carries the path of the key and its line and column.
    Ok(serde_norway::from_str::<Option<DayFile>>(text)?.unwrap_or_default())
}

pub fn run(cmd: DetectCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DetectCommand::Simulate(a) => simulate(*a),
    }
}

/// Flags over the day file over the defaults, checked; an error names the flag.
fn plan_params(a: &SimulateArgs, day: &DayFile, settings: DetectSettings) -> anyhow::Result<PlanParams> {
    let mut p = PlanParams::new(settings);
    let d = day;
    let pick = |flag: Option<f64>, file: Option<f64>, default: f64| flag.or(file).unwrap_or(default);
    p.rate = a.rate;
    p.scenarios = a.scenarios;
    p.ttft_median_s = pick(a.ttft_median_ms, d.ttft.as_ref().and_then(|k| k.median_ms), 200.0) / 1e3;
    p.ttft_sigma = pick(a.ttft_sigma, d.ttft.as_ref().and_then(|k| k.sigma), p.ttft_sigma);
    p.tpot_median_s = pick(a.tpot_median_ms, d.tpot.as_ref().and_then(|k| k.median_ms), 20.0) / 1e3;
    p.tpot_sigma = pick(a.tpot_sigma, d.tpot.as_ref().and_then(|k| k.sigma), p.tpot_sigma);
    p.output_tokens = pick(a.output_tokens, d.output_tokens, p.output_tokens);
    p.regression = a.regression;
    p.regression_target = match a.regression_target {
        TargetArg::All => RegressionTarget::All,
        TargetArg::Miss => RegressionTarget::Miss,
        TargetArg::Slowest => RegressionTarget::Slowest,
    };
    p.slowest_share = a.slowest_share.unwrap_or(p.slowest_share);
    p.incident_s = pick(a.incident_s, d.incident.as_ref().and_then(|k| k.s), 0.0);
    p.incident_factor = pick(a.incident_factor, d.incident.as_ref().and_then(|k| k.factor), p.incident_factor);
    p.marker_delay_s = a.marker_delay_s.unwrap_or(0.0);
    p.reading = a.reading_r2.map(|r2| LoadReading { r2, mediator: a.reading_mediator.unwrap_or(0.0) });
    p.second_marker_s = a.second_marker_s;
    p.ramp = a.ramp_factor.map(|factor| Ramp { factor, duration_s: a.ramp_min.unwrap_or(120.0) * 60.0 });
    p.cache_reading = a.cache_reading;
    p.creep_per_h = a.creep_per_h.unwrap_or(1.0);
    p.slo_ttft_s = a.slo_ttft_ms.map(|ms| ms / 1e3);
    p.side_by_side =
        a.side_by_side.map(|replicas| SideBySide { replicas, rollout_s: a.side_by_side_min.unwrap_or(20.0) * 60.0, replica_sd: a.replica_sd.unwrap_or(0.0) });
    p.cold_cache = a.cold_cache_min.as_deref().and_then(minutes_range).map(|(lo, hi)| ColdCache { min_s: lo * 60.0, max_s: hi * 60.0 });
    p.regression_scenarios = a.regression_scenarios;
    p.good_before = pick(a.good_before, d.goodput, p.good_before);
    p.good_after = a.good_after.unwrap_or(p.good_before);
    p.drift = pick(a.drift, d.drift.as_ref().and_then(|k| k.amplitude), p.drift);
    p.drift_period_s = pick(a.drift_period_h, d.drift.as_ref().and_then(|k| k.period_h), 24.0) * 3600.0;
    p.drift_day_sd = a.drift_day_sd.unwrap_or(0.0);
    let load = d.load.as_ref();
    p.load = LoadOffset {
        sd: pick(a.load_sd, load.and_then(|k| k.sd), 0.0),
        tau_s: pick(a.load_tau_min, load.and_then(|k| k.tau_min), 5.0) * 60.0,
        tpot_share: pick(a.tpot_load_share, load.and_then(|k| k.tpot_share), 0.5),
        scenario_spread: a.scenario_load_spread.unwrap_or(0.0),
        day_swing: a.load_sd_day_swing.unwrap_or(0.0),
    };
    let cache = d.cache.as_ref();
    p.cache_hit_share = pick(a.cache_hit_share, cache.and_then(|k| k.hit_share), 0.0);
    p.miss_factor = pick(a.miss_factor, cache.and_then(|k| k.miss_factor), 3.0);
    let out = d.outliers.as_ref();
    p.outlier_share = pick(a.outlier_share, out.and_then(|k| k.share), p.outlier_share);
    p.outlier_factor = pick(a.outlier_factor, out.and_then(|k| k.factor), p.outlier_factor);
    p.tail_pareto_alpha = a.tail_pareto_alpha.or(out.and_then(|k| k.pareto_alpha));
    p.outage_s = pick(a.outage_s, d.outage_s, 0.0);
    p.burst_s = pick(a.burst_s, d.burst.as_ref().and_then(|k| k.s), 0.0);
    p.burst_error_share = pick(a.burst_error_share, d.burst.as_ref().and_then(|k| k.error_share), p.burst_error_share);
    let r = d.rollout.as_ref();
    let flags = [a.rollout_factor_min, a.rollout_factor_max, a.rollout_duration_min_s, a.rollout_duration_max_s, a.rollout_error_share, a.rollout_error_s];
    if a.rollout || r.is_some() || flags.iter().any(Option::is_some) {
        let dflt = Rollout::default();
        p.rollout = Some(Rollout {
            factor_min: pick(a.rollout_factor_min, r.and_then(|k| k.factor_min), dflt.factor_min),
            factor_max: pick(a.rollout_factor_max, r.and_then(|k| k.factor_max), dflt.factor_max),
            duration_min_s: pick(a.rollout_duration_min_s, r.and_then(|k| k.duration_min_s), dflt.duration_min_s),
            duration_max_s: pick(a.rollout_duration_max_s, r.and_then(|k| k.duration_max_s), dflt.duration_max_s),
            error_share: pick(a.rollout_error_share, r.and_then(|k| k.error_share), dflt.error_share),
            error_s: pick(a.rollout_error_s, r.and_then(|k| k.error_s), dflt.error_s),
        });
    }
    p.trials = a.trials;
    p.days = a.days.unwrap_or(a.trials);
    p.seed = a.seed;
    p.horizon_s = a.horizon_min * 60.0;
    if let Some(h) = a.warmup_h {
        p.warmup_s = h * 3600.0;
    }
    p.threads = a.threads;
    p.marker = !a.no_marker;
    p.replay_order = match a.replay_order {
        OrderArg::Random => ReplayOrder::Random,
        OrderArg::Time => ReplayOrder::Time,
    };
    check(a, &p)?;
    Ok(p)
}

/// `MIN..MAX` minutes, 0 < MIN <= MAX < a day.
fn minutes_range(text: &str) -> Option<(f64, f64)> {
    let (x, y) = text.split_once("..")?;
    let (lo, hi) = (x.trim().parse::<f64>().ok()?, y.trim().parse::<f64>().ok()?);
    (lo.is_finite() && lo > 0.0 && lo <= hi && hi < 1440.0).then_some((lo, hi))
}

/// Every bad value, each named by its flag (and day-file key).
fn check(a: &SimulateArgs, p: &PlanParams) -> anyhow::Result<()> {
    let mut errors: Vec<String> = Vec::new();
    let mut need = |ok: bool, what: &str| {
        if !ok {
            errors.push(what.to_owned());
        }
    };
    let share = |v: f64| (0.0..=1.0).contains(&v);
    let pos = |v: f64| v > 0.0 && v.is_finite();
    let nonneg = |v: f64| v >= 0.0 && v.is_finite();
    need(pos(p.rate), "--rate must be positive");
    need(p.scenarios >= 1, "--scenarios must be at least 1");
    need(p.trials + p.days > 0 || a.min_detectable, "--trials or --days must be at least 1");
    need(pos(p.horizon_s), "--horizon-min must be positive");
    need(nonneg(p.warmup_s), "--warmup-h must be >= 0");
    need(pos(p.ttft_median_s) && pos(p.tpot_median_s), "--ttft-median-ms and --tpot-median-ms (ttft/tpot.median_ms) must be positive");
    need(nonneg(p.ttft_sigma) && nonneg(p.tpot_sigma), "--ttft-sigma and --tpot-sigma (ttft/tpot.sigma) must be >= 0");
    need(nonneg(p.output_tokens), "--output-tokens must be >= 0");
    need(pos(p.regression), "--regression must be positive");
    need(share(p.good_before), "--good-before (goodput) must be a share in [0, 1]");
    need(share(p.good_after), "--good-after must be a share in [0, 1]");
    need((0.0..1.0).contains(&p.drift), "--drift (drift.amplitude) must be in [0, 1)");
    need(pos(p.drift_period_s), "--drift-period-h (drift.period_h) must be positive");
    need((0.0..=1.0).contains(&p.drift_day_sd), "--drift-day-sd must be in [0, 1]");
    need(nonneg(p.load.sd), "--load-sd (load.sd) must be >= 0");
    need(pos(p.load.tau_s), "--load-tau-min (load.tau_min) must be positive");
    need(p.load.tpot_share.is_finite(), "--tpot-load-share (load.tpot_share) must be a number");
    need((0.0..=1.0).contains(&p.load.scenario_spread), "--scenario-load-spread must be in [0, 1]");
    need((0.0..=1.0).contains(&p.load.day_swing), "--load-sd-day-swing must be in [0, 1]");
    need((0.0..1.0).contains(&p.cache_hit_share), "--cache-hit-share (cache.hit_share) must be in [0, 1)");
    need(pos(p.miss_factor), "--miss-factor (cache.miss_factor) must be positive");
    need(share(p.outlier_share), "--outlier-share (outliers.share) must be a share in [0, 1]");
    need(pos(p.outlier_factor), "--outlier-factor (outliers.factor) must be positive");
    need(p.tail_pareto_alpha.is_none_or(pos), "--tail-pareto-alpha (outliers.pareto_alpha) must be positive");
    need(nonneg(p.outage_s), "--outage-s (outage_s) must be >= 0");
    need(nonneg(p.incident_s) && p.incident_s < 86_400.0, "--incident-s (incident.s) must be >= 0 and shorter than a day");
    need(p.incident_factor.is_finite() && p.incident_factor > 0.0, "--incident-factor (incident.factor) must be positive");
    need(p.slowest_share > 0.0 && p.slowest_share < 1.0, "--slowest-share must be in (0, 1)");
    need(p.regression_target != RegressionTarget::Slowest || a.replay.is_none(), "--regression-target slowest needs synthetic latencies (no --replay)");
    need(nonneg(p.marker_delay_s), "--marker-delay-s must be >= 0");
    need(p.reading.is_none_or(|r| r.r2 > 0.0 && r.r2 <= 1.0), "--reading-r2 must be in (0, 1]");
    need(p.reading.is_none_or(|r| (0.0..=1.0).contains(&r.mediator)), "--reading-mediator must be in [0, 1]");
    need(a.reading_mediator.is_none() || a.reading_r2.is_some(), "--reading-mediator needs --reading-r2");
    need(p.second_marker_s.is_none_or(nonneg), "--second-marker-s must be >= 0");
    need(
        p.ramp.is_none_or(|r| pos(r.factor) && pos(r.duration_s) && r.duration_s < 86_400.0),
        "--ramp-factor must be positive and --ramp-min positive, under a day",
    );
    need(a.ramp_min.is_none() || a.ramp_factor.is_some(), "--ramp-min needs --ramp-factor");
    need(pos(p.creep_per_h) && p.creep_per_h < 100.0, "--creep-per-h must be a positive factor below 100");
    need(p.slo_ttft_s.is_none_or(pos), "--slo-ttft-ms must be positive");
    need(
        p.side_by_side
            .is_none_or(|b| (2..=64).contains(&b.replicas) && pos(b.rollout_s) && b.rollout_s < 86_400.0 && nonneg(b.replica_sd) && b.replica_sd < 2.0),
        "--side-by-side must be 2..64 replicas, --side-by-side-min positive and under a day, --replica-sd in [0, 2)",
    );
    need(p.side_by_side.is_some() || (a.side_by_side_min.is_none() && a.replica_sd.is_none()), "--side-by-side-min and --replica-sd need --side-by-side");
    need(a.cold_cache_min.is_none() || p.cold_cache.is_some(), "--cold-cache-min must be MIN..MAX minutes, 0 < MIN <= MAX < 1440");
    need(p.cold_cache.is_none() || p.cache_hit_share > 0.0, "--cold-cache-min needs --cache-hit-share (a cache to go cold)");
    need(nonneg(p.burst_s), "--burst-s (burst.s) must be >= 0");
    need(share(p.burst_error_share), "--burst-error-share (burst.error_share) must be a share in [0, 1]");
    need(p.outage_s.max(p.burst_s) < 86_400.0, "--outage-s and --burst-s must be shorter than a day");
    if let Some(r) = p.rollout {
        need(pos(r.factor_min) && r.factor_min <= r.factor_max, "--rollout-factor-min/max (rollout.factor_min/max) must be positive, min <= max");
        need(
            nonneg(r.duration_min_s) && r.duration_min_s <= r.duration_max_s,
            "--rollout-duration-min/max-s (rollout.duration_min/max_s) must be >= 0, min <= max",
        );
        need(share(r.error_share), "--rollout-error-share (rollout.error_share) must be a share in [0, 1]");
        need(nonneg(r.error_s), "--rollout-error-s (rollout.error_s) must be >= 0");
    }
    need(p.regression_scenarios.is_none_or(|n| n >= 1), "--regression-scenarios must be at least 1");
    need(
        p.regression_target != RegressionTarget::Miss || (p.cache_hit_share > 0.0 && a.replay.is_none()),
        "--regression-target miss needs --cache-hit-share > 0 (and no --replay)",
    );
    need(a.replay.is_some() || p.replay_order == ReplayOrder::Random, "--replay-order time needs --replay");
    need(!a.min_detectable || a.scan_trials >= 1, "--scan-trials must be at least 1");
    if errors.is_empty() { Ok(()) } else { bail!("{}", errors.join("\n")) }
}

fn simulate(a: SimulateArgs) -> anyhow::Result<ExitCode> {
    let settings: DetectSettings = match &a.settings {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            serde_norway::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
        }
        None => DetectSettings::default(),
    };
    if let Err(errors) = settings.validate() {
        bail!("invalid detector settings:\n  {}", errors.join("\n  "));
    }
    let day = match &a.day {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            parse_day(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => DayFile::default(),
    };
    let mut p = plan_params(&a, &day, settings)?;
    if let Some(path) = &a.replay {
        let replay = read_replay(path, p.replay_order)?;
        let pools = &replay.pools;
        let bad = pools.iter().flatten().filter(|r| !r.good).count() as f64 / pools.iter().map(Vec::len).sum::<usize>() as f64;
        p.scenarios = pools.len();
        // Replay keeps the recorded outcomes before the release; --good-after is applied on top.
        p.good_before = 1.0 - bad;
        if a.good_after.is_none() {
            p.good_after = p.good_before;
        }
        if p.replay_order == ReplayOrder::Time {
            p.rate = replay.rate().unwrap_or(p.rate);
        }
        p.replay = Some(replay);
    }
    let started = std::time::Instant::now();
    let result = sim::run(&p);
    let min = a.min_detectable.then(|| sim::min_detectable(&p, &sim::SLOWDOWN_GRID, a.scan_trials));
    if a.json {
        let mut v = sim::to_json(&p, &result, min.as_ref());
        v["params"]["settings_file"] = serde_json::json!(a.settings.as_ref().map(|p| p.display().to_string()));
        v["params"]["day_file"] = serde_json::json!(a.day.as_ref().map(|p| p.display().to_string()));
        println!("{v}");
    } else {
        print!("{}", sim::format(&p, &result));
        if let Some(m) = &min {
            println!();
            print!("{}", sim::format_min_detectable(m));
        }
    }
    eprintln!("({} detection trials and {} simulated days in {:.1} s)", p.trials, p.days, started.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

/// Recorded probes (bench `records.jsonl` or a result directory holding one).
pub fn read_replay(path: &Path, order: ReplayOrder) -> anyhow::Result<Replay> {
    let file = if path.is_dir() { path.join(crate::bench::records::RECORDS_FILE) } else { path.to_path_buf() };
    let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    parse_records(&text, order).with_context(|| format!("in {}", file.display()))
}

/// Recorded probes grouped by scenario (first-seen order): warm-up and dropped probes skipped;
/// good = succeeded and met the SLO (success alone when the record has no verdict).
pub fn parse_replay(text: &str) -> anyhow::Result<Vec<Vec<ReplayProbe>>> {
    Ok(parse_records(text, ReplayOrder::Random)?.pools)
}

/// `parse_replay` with the send-order timeline; time order needs every record's time
/// (`intended_unix_s`, else `sent_unix_s`). A bad line is an error naming it.
fn parse_records(text: &str, order: ReplayOrder) -> anyhow::Result<Replay> {
    let mut names: Vec<String> = Vec::new();
    let mut records: Vec<(usize, ReplayProbe)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line).with_context(|| format!("line {}", i + 1))?;
        if !v.is_object() {
            bail!("line {}: not a JSON object", i + 1);
        }
        if v.get("phase").and_then(|p| p.as_str()) == Some("warmup") {
            continue;
        }
        let outcome = v.get("outcome").and_then(|o| o.as_str()).unwrap_or("");
        if outcome == "dropped" || outcome.is_empty() {
            continue;
        }
        let ms = |k: &str| v.get(k).and_then(|x| x.as_f64()).filter(|x| x.is_finite() && *x > 0.0).map(|x| x / 1e3);
        let success = outcome == "success";
        let good = success && v.get("slo").and_then(|s| s.get("goodput")).and_then(|g| g.as_bool()).unwrap_or(true);
        let at_s = ["intended_unix_s", "sent_unix_s"].iter().find_map(|k| v.get(*k).and_then(|x| x.as_f64()).filter(|x| x.is_finite()));
        if order == ReplayOrder::Time && at_s.is_none() {
            bail!("line {}: no intended_unix_s or sent_unix_s (needed by --replay-order time)", i + 1);
        }
        let probe = ReplayProbe { ttft: ms("ttft_ms"), tpot: ms("tpot_ms"), e2e: ms("e2e_ms"), good, at_s };
        let scenario = v.get("scenario").and_then(|s| s.as_str()).unwrap_or("").to_string();
        let k = match names.iter().position(|n| *n == scenario) {
            Some(k) => k,
            None => {
                names.push(scenario);
                names.len() - 1
            }
        };
        records.push((k, probe));
    }
    if records.is_empty() {
        bail!("no measured probes");
    }
    let replay = Replay::new(records);
    if order == ReplayOrder::Time && replay.timeline.is_empty() {
        bail!("time-order replay needs at least two probes whose recorded times advance");
    }
    Ok(replay)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: SimulateArgs,
    }

    fn params(flags: &[&str], day: &str) -> anyhow::Result<PlanParams> {
        let cli = Cli::try_parse_from(std::iter::once("simulate").chain(flags.iter().copied()))?;
        plan_params(&cli.a, &parse_day(day)?, DetectSettings::default())
    }

    /// The day file sets the conditions, flags override it, and the rest keeps the defaults.
    #[test]
    fn day_file_sets_conditions_and_flags_override() {
        let day = "load: {sd: 0.1, tau_min: 5}\noutage_s: 40\nburst: {s: 120, error_share: 0.25}\ncache: {hit_share: 0.7, miss_factor: 3}\nrollout: {}\n";
        let p = params(&["--load-sd", "0.2", "--miss-factor", "4"], day).unwrap();
        assert_eq!((p.load.sd, p.load.tau_s, p.load.tpot_share), (0.2, 300.0, 0.5));
        assert_eq!((p.outage_s, p.burst_s, p.burst_error_share), (40.0, 120.0, 0.25));
        assert_eq!((p.cache_hit_share, p.miss_factor), (0.7, 4.0));
        assert_eq!(p.rollout, Some(Rollout::default()), "an empty rollout key turns it on with the defaults");
        assert_eq!((p.drift, p.outlier_share, p.ttft_median_s), (0.2, 0.01, 0.2));
        let none = params(&[], "").unwrap();
        assert_eq!((none.load.sd, none.outage_s, none.rollout, none.days), (0.0, 0.0, None, 1000));
        assert!(params(&["--rollout-error-s", "60"], "").unwrap().rollout.is_some_and(|r| r.error_s == 60.0));
    }

    /// An unknown key is named with its path; a bad value names its flag.
    #[test]
    fn day_file_errors_name_the_field() {
        let e = parse_day("load: {sd: 0.1, tua_min: 5}\n").unwrap_err().to_string();
        assert!(e.contains("load") && e.contains("tua_min"), "{e}");
        let e = parse_day("outages: 3\n").unwrap_err().to_string();
        assert!(e.contains("outages"), "{e}");
        let e = params(&[], "burst: {s: 60, error_share: 1.5}\n").unwrap_err().to_string();
        assert!(e.contains("--burst-error-share") && e.contains("burst.error_share"), "{e}");
        let e = params(&["--regression-target", "miss"], "").unwrap_err().to_string();
        assert!(e.contains("--cache-hit-share"), "{e}");
    }

    /// Time order needs every record's time; a bad line is named.
    #[test]
    fn replay_records_in_time_order() {
        let line =
            |s: &str, at: f64, ttft: f64| format!(r#"{{"phase":"measure","scenario":"{s}","outcome":"success","ttft_ms":{ttft},"intended_unix_s":{at}}}"#);
        let text = [line("a", 100.0, 1.0), line("b", 102.0, 3.0), line("a", 101.0, 2.0)].join("\n");
        let r = parse_records(&text, ReplayOrder::Time).unwrap();
        assert_eq!(r.timeline.iter().map(|t| (t.scenario, t.probe.ttft.unwrap() * 1e3)).collect::<Vec<_>>(), vec![(0, 1.0), (0, 2.0), (1, 3.0)]);
        assert_eq!(r.rate(), Some(1.0));
        let untimed = r#"{"phase":"measure","scenario":"a","outcome":"success","ttft_ms":5}"#;
        let e = parse_records(&format!("{text}\n{untimed}"), ReplayOrder::Time).unwrap_err().to_string();
        assert!(e.contains("line 4"), "{e}");
        assert!(parse_records(&format!("{text}\n{untimed}"), ReplayOrder::Random).is_ok());
        let e = format!("{:#}", parse_records(&format!("{text}\n{{oops"), ReplayOrder::Random).unwrap_err());
        assert!(e.contains("line 4"), "{e}");
    }
}
