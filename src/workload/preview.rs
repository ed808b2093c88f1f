//! `llmprobe workload preview`: what a config will send, before it is deployed. Lengths are
//! sampled (the same samplers the prober uses) so mixtures and truncation show as they are.

use std::fmt::Write;

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::{fingerprint, quantile};
use crate::config::{ArrivalKind, ArrivalSpec, Config, LengthSpec, Scenario};

/// Draws per distribution.
const SAMPLES: usize = 20_000;
const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
const HIST_BINS: usize = 24;

/// Summary of sampled lengths.
#[derive(Debug, Clone, PartialEq)]
pub struct LengthSummary {
    pub mean: f64,
    pub p50: u32,
    pub p90: u32,
    pub p99: u32,
    pub min: u32,
    pub max: u32,
    /// Counts in equal-width bins between min and max.
    pub bins: Vec<usize>,
}

pub fn summarize(spec: &LengthSpec, seed: u64) -> LengthSummary {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut v: Vec<u32> = (0..SAMPLES).map(|_| spec.sample(&mut rng)).collect();
    v.sort_unstable();
    let (min, max) = (v[0], v[v.len() - 1]);
    let mut bins = vec![0; HIST_BINS];
    let width = (max - min) as f64 / HIST_BINS as f64;
    for &x in &v {
        let i = if width > 0.0 { ((x - min) as f64 / width) as usize } else { 0 };
        bins[i.min(HIST_BINS - 1)] += 1;
    }
    LengthSummary {
        mean: v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64,
        p50: quantile(&v, 0.5),
        p90: quantile(&v, 0.9),
        p99: quantile(&v, 0.99),
        min,
        max,
        bins,
    }
}

fn sparkline(bins: &[usize]) -> String {
    let top = bins.iter().copied().max().unwrap_or(0).max(1);
    bins.iter().map(|&n| if n == 0 { ' ' } else { SPARK[((n * (SPARK.len() - 1)) as f64 / top as f64).round() as usize] }).collect()
}

fn arrival(a: &ArrivalSpec) -> String {
    let kind = match a.kind {
        ArrivalKind::Poisson => "poisson".to_owned(),
        ArrivalKind::Gamma { burstiness } => format!("gamma(b={burstiness})"),
        ArrivalKind::Constant => "constant".to_owned(),
    };
    match a.diurnal {
        Some(d) => format!("{kind} ±{:.0}%/{}", d.amplitude * 100.0, crate::config::format_duration(d.period)),
        None => kind,
    }
}

/// Input and output summaries of a scenario (`None` input for a replayed dataset).
fn lengths(s: &Scenario) -> (Option<LengthSummary>, LengthSummary) {
    let input = s.dataset.is_none().then(|| summarize(&s.input_tokens, 1));
    let output = match &s.dataset {
        Some(d) => {
            let values: Vec<(u32, f64)> =
                d.entries.iter().map(|e| (e.output_tokens.unwrap_or_else(|| s.output_tokens.sample(&mut StdRng::seed_from_u64(2))), 1.0)).collect();
            summarize(&LengthSpec::Empirical { bins: values }, 2)
        }
        None => summarize(&s.output_tokens, 2),
    };
    (input, output)
}

fn row(label: &str, s: &LengthSummary) -> String {
    format!(
        "    {label:<7} mean {:>8.1}  p50 {:>7}  p90 {:>7}  p99 {:>7}  range {}..{}\n            {}\n",
        s.mean,
        s.p50,
        s.p90,
        s.p99,
        s.min,
        s.max,
        sparkline(&s.bins)
    )
}

/// The whole preview as text.
pub fn render(config: &Config) -> String {
    let hash = fingerprint(config);
    let mut out = String::new();
    let _ = writeln!(out, "workload sha256 {}", hash.total);
    let total_rate: f64 = config.scenarios.iter().map(|s| s.rate).sum();
    let (mut in_tps, mut out_tps) = (0.0, 0.0);
    for s in &config.scenarios {
        let (input, output) = lengths(s);
        let share = 100.0 * s.rate / total_rate;
        let _ = writeln!(out, "\nscenario {}  rate {:.4}/s ({share:.1}%)  arrival {}", s.name, s.rate, arrival(&s.arrival));
        match (&input, &s.dataset) {
            (Some(i), _) => {
                let _ = writeln!(out, "  input   {}", s.input_tokens.describe());
                out.push_str(&row("input", i));
                in_tps += s.rate * i.mean;
            }
            (None, Some(d)) => {
                let _ = writeln!(out, "  input   dataset {} ({} prompts, {:?}, sha256 {})", d.path.display(), d.entries.len(), d.order, d.sha256);
            }
            (None, None) => {}
        }
        let _ = writeln!(out, "  output  {}", s.output_tokens.describe());
        out.push_str(&row("output", &output));
        // The length limit is the output plus any reasoning budget (exact with `ignore_eos`).
        out_tps += s.rate * (output.mean + f64::from(s.reasoning.map_or(0, |r| r.budget_tokens)));
        if let Some(p) = s.prefix {
            let _ = writeln!(out, "  prefix  {} tokens shared by {:.0}% of requests, {} distinct", p.tokens, p.share * 100.0, p.distinct);
        }
        if let Some(salt) = &s.cache_salt {
            let _ = writeln!(out, "  cache_salt {salt}");
        }
        if let Some(r) = s.reasoning {
            let effort = r.effort.map_or("the server's", |e| e.as_str());
            let _ = writeln!(out, "  reasoning effort {effort}, {} tokens of budget on top of the output (the length limit)", r.budget_tokens);
        }
    }
    let _ = writeln!(out, "\nper target: {total_rate:.4} req/s, ~{in_tps:.1} prompt tokens/s + ~{out_tps:.1} output tokens/s");
    for t in &config.targets {
        let _ = writeln!(out, "  {}: {total_rate:.4} req/s, {in_tps:.1} in + {out_tps:.1} out tokens/s", t.name);
        if let Some(r) = &t.replicas {
            let line = match r.rate {
                crate::config::ReplicaRate::Split => {
                    format!("replicas discovered at run time (at most {} probed): the rate above in total, {total_rate:.4}/N req/s per replica", r.max)
                }
                crate::config::ReplicaRate::PerReplica => format!(
                    "replicas discovered at run time (at most {} probed): {total_rate:.4} req/s per replica, N x that in total (up to {:.4} req/s)",
                    r.max,
                    total_rate * r.max as f64
                ),
            };
            let _ = writeln!(out, "    {line}");
        }
    }
    if config.detect.enabled && total_rate > 0.0 {
        out.push_str(&detection(config, total_rate));
    }
    out
}

/// Trials per planner figure in the preview: a rough sizing estimate (±8 points at 90%) in a few
/// seconds; the planner runs more.
const PREVIEW_TRIALS: usize = 40;

/// The TTFT slowdowns the preview tries (coarser than the planner's `--min-detectable`).
const PREVIEW_GRID: [f64; 5] = [1.1, 1.25, 1.5, 2.0, 3.0];

/// What the release-regression detector catches at this config's rate, from the planner run on
/// the real detector in virtual time (`llmprobe detect simulate` for more trials and options).
/// Every target is probed at the same rate, so one run serves them all.
fn detection(config: &Config, rate: f64) -> String {
    use crate::detect::sim;
    let mut p = sim::PlanParams::new(config.detect.tuning.clone());
    p.rate = rate;
    p.scenarios = config.scenarios.len();
    p.trials = PREVIEW_TRIALS;
    let min = sim::min_detectable(&p, &PREVIEW_GRID, PREVIEW_TRIALS);
    p.regression = 1.0;
    p.good_after = 0.97;
    let goodput = sim::PlanResult::from_detections(sim::detections(&p));
    let slowdown = |x: Option<f64>| x.map_or_else(|| format!("over x{}", PREVIEW_GRID[PREVIEW_GRID.len() - 1]), |x| format!("x{x}"));
    let median = goodput.median_detect_s().map_or("over 60 min".to_owned(), |s| format!("{:.1} min", s / 60.0));
    let goodput = format!("{:.0}% within 15 min, median {median}", 100.0 * goodput.detected_within(900.0));
    let mut out = format!(
        "\nrelease regressions this rate detects (planner, {PREVIEW_TRIALS} trials a figure; assumes TTFT lognormal median 200 ms sigma 0.5, ±20% daily drift, 1% outliers, independent probes; `llmprobe detect simulate` to change them):\n"
    );
    for t in &config.targets {
        let _ = writeln!(
            out,
            "  {}: smallest TTFT slowdown found in {:.0}% of trials within 15 min: {}, within 60 min: {}; goodput 99.5% -> 97%: {goodput}",
            t.name,
            sim::DETECTABLE_POWER * 100.0,
            slowdown(min.within_15_min),
            slowdown(min.within_60_min)
        );
    }
    out
}
