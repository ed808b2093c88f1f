//! `llmprobe detect simulate`: the probe-rate planner on the command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use crate::config::DetectSettings;
use crate::detect::sim::{self, PlanParams, ReplayProbe};

#[derive(Debug, Subcommand)]
pub enum DetectCommand {
    /// Probe-rate planner: run the regression detector on synthetic (or replayed) probes in
    /// virtual time and print detection probability within 5/15/60 min, median time to detect,
    /// and false alarms per 30 days with one release a day.
    Simulate(SimulateArgs),
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Probes per second to the target, all scenarios together.
    #[arg(long, default_value_t = 0.5)]
    pub rate: f64,
    /// Scenarios sharing the rate (each against its own baseline; pooled per target).
    #[arg(long, default_value_t = 3)]
    pub scenarios: usize,
    /// Median TTFT (lognormal).
    #[arg(long, default_value_t = 200.0)]
    pub ttft_median_ms: f64,
    /// Sigma of ln TTFT.
    #[arg(long, default_value_t = 0.5)]
    pub ttft_sigma: f64,
    /// Median TPOT (lognormal).
    #[arg(long, default_value_t = 20.0)]
    pub tpot_median_ms: f64,
    /// Sigma of ln TPOT.
    #[arg(long, default_value_t = 0.2)]
    pub tpot_sigma: f64,
    /// Output tokens per probe (e2e = TTFT + tokens x TPOT).
    #[arg(long, default_value_t = 64.0)]
    pub output_tokens: f64,
    /// Factor on TTFT after the release (1 = no latency regression).
    #[arg(long, default_value_t = 1.25)]
    pub regression: f64,
    /// Goodput (share of good probes) before the release.
    #[arg(long, default_value_t = 0.995)]
    pub good_before: f64,
    /// Goodput after the release (default: unchanged).
    #[arg(long)]
    pub good_after: Option<f64>,
    /// Relative amplitude of the daily latency cycle (0.2 = +-20%).
    #[arg(long, default_value_t = 0.2)]
    pub drift: f64,
    /// Period of the latency cycle in hours.
    #[arg(long, default_value_t = 24.0)]
    pub drift_period_h: f64,
    /// Share of probes that are outliers.
    #[arg(long, default_value_t = 0.01)]
    pub outlier_share: f64,
    /// Latency factor of an outlier.
    #[arg(long, default_value_t = 10.0)]
    pub outlier_factor: f64,
    /// Detection trials, and simulated null days for the false-alarm rate.
    #[arg(long, default_value_t = 1000)]
    pub trials: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How long after the release a detection trial runs (minutes).
    #[arg(long, default_value_t = 60.0)]
    pub horizon_min: f64,
    /// Do not mark the release: measure the continuous detector alone on a silent regression.
    #[arg(long)]
    pub no_marker: bool,
    /// Worker threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Use recorded probes (bench `records.jsonl`, or a result directory holding one) as the
    /// latency and goodput distribution of each recorded scenario instead of the lognormals.
    #[arg(long)]
    pub replay: Option<PathBuf>,
    /// Detector settings (YAML or JSON, the fields of `DetectSettings`); defaults otherwise.
    #[arg(long)]
    pub settings: Option<PathBuf>,
}

pub fn run(cmd: DetectCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DetectCommand::Simulate(a) => simulate(a),
    }
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
    if !(a.rate > 0.0 && a.rate.is_finite()) || a.scenarios == 0 || a.trials == 0 {
        bail!("--rate must be positive, --scenarios and --trials at least 1");
    }
    for (name, v) in [("--good-before", a.good_before), ("--good-after", a.good_after.unwrap_or(a.good_before))] {
        if !(0.0..=1.0).contains(&v) {
            bail!("{name} must be a share in [0, 1]");
        }
    }
    let mut p = PlanParams::new(settings);
    p.rate = a.rate;
    p.scenarios = a.scenarios;
    p.ttft_median_s = a.ttft_median_ms / 1e3;
    p.ttft_sigma = a.ttft_sigma;
    p.tpot_median_s = a.tpot_median_ms / 1e3;
    p.tpot_sigma = a.tpot_sigma;
    p.output_tokens = a.output_tokens;
    p.regression = a.regression;
    p.good_before = a.good_before;
    p.good_after = a.good_after.unwrap_or(a.good_before);
    p.drift = a.drift;
    p.drift_period_s = a.drift_period_h * 3600.0;
    p.outlier_share = a.outlier_share;
    p.outlier_factor = a.outlier_factor;
    p.trials = a.trials;
    p.seed = a.seed;
    p.horizon_s = a.horizon_min * 60.0;
    p.threads = a.threads;
    p.marker = !a.no_marker;
    if let Some(path) = &a.replay {
        let pools = read_replay(path)?;
        let bad = pools.iter().flatten().filter(|r| !r.good).count() as f64 / pools.iter().map(Vec::len).sum::<usize>() as f64;
        p.scenarios = pools.len();
        // Replay keeps the recorded outcomes before the release; --good-after is applied on top.
        p.good_before = 1.0 - bad;
        if a.good_after.is_none() {
            p.good_after = p.good_before;
        }
        p.replay = Some(pools);
    }
    let started = std::time::Instant::now();
    let result = sim::run(&p);
    print!("{}", sim::format(&p, &result));
    eprintln!("({} detection trials and {} simulated days in {:.1} s)", p.trials, p.trials, started.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

/// Recorded probes grouped by scenario (first-seen order): warm-up and dropped probes skipped;
/// good = succeeded and met the SLO (success alone when the record has no verdict).
pub fn read_replay(path: &Path) -> anyhow::Result<Vec<Vec<ReplayProbe>>> {
    let file = if path.is_dir() { path.join(crate::bench::records::RECORDS_FILE) } else { path.to_path_buf() };
    let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    parse_replay(&text).with_context(|| format!("in {}", file.display()))
}

/// `read_replay` on the text of a records file.
pub fn parse_replay(text: &str) -> anyhow::Result<Vec<Vec<ReplayProbe>>> {
    let mut names: Vec<String> = Vec::new();
    let mut pools: Vec<Vec<ReplayProbe>> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line).with_context(|| format!("line {}", i + 1))?;
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
        let probe = ReplayProbe { ttft: ms("ttft_ms"), tpot: ms("tpot_ms"), e2e: ms("e2e_ms"), good };
        let scenario = v.get("scenario").and_then(|s| s.as_str()).unwrap_or("").to_string();
        match names.iter().position(|n| *n == scenario) {
            Some(k) => pools[k].push(probe),
            None => {
                names.push(scenario);
                pools.push(vec![probe]);
            }
        }
    }
    if pools.is_empty() {
        bail!("no measured probes");
    }
    Ok(pools)
}
