//! `llmprobe gate`: a baseline and a candidate deployment probed side by side with the same
//! workload; exit 0 passed, 1 regressed, 3 inconclusive, 2 on bad input.

use std::fmt::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::app::loader;
use crate::bench::BenchPlan;
use crate::bench::gate::{GateOptions, GateReport};
use crate::bench::paired::{Decision, GateSettings, GateSignal, GateVerdict};
use crate::config::{Bench, BenchMode, Config, parse_duration};

/// The built-in workload without `--config`.
const GATE_YAML: &str = include_str!("../../config/gate.yaml");

/// Exit code of an inconclusive gate (as `release wait`).
pub const EXIT_INCONCLUSIVE: u8 = 3;

/// `llmprobe gate` flags.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// Base URL of the deployment serving now (the reference).
    #[arg(long, value_name = "URL")]
    pub baseline: String,
    /// Base URL of the new deployment beside it.
    #[arg(long, value_name = "URL")]
    pub candidate: String,
    /// The workload: a config file (scenarios, SLOs, checks; its target's API, model, key and
    /// timeouts serve both sides, its base_url is replaced). Default: the built-in config/gate.yaml.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// The config's target to take the settings from when it lists several.
    #[arg(long)]
    pub target: Option<String>,
    /// Result directory: baseline/ and candidate/ (bench results) and gate.json.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Pairs per second, each one request to each side (default: the config's probe rate).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Longest run.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Look at the pairs --looks times over --duration and stop at the first look that decides
    /// the verdict (alpha is split over the looks).
    #[arg(long)]
    pub until_verdict: bool,
    /// Looks planned with --until-verdict (evenly spaced over --duration).
    #[arg(long, default_value_t = 20)]
    pub looks: u32,
    /// Time blocks the pairs are grouped in for the interval (pairs in one block may depend on
    /// each other; blocks are treated as independent).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub block: Duration,
    /// A signal is judged from this many blocks with pairs on.
    #[arg(long, default_value_t = 4)]
    pub min_blocks: usize,
    /// Probability of calling a candidate no worse than the baseline regressed, over all signals
    /// and looks of the run.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Latency ratio a pass must rule out (default: the config's detect.tuning.verdict_latency_effect, 1.25).
    #[arg(long)]
    pub latency_effect: Option<f64>,
    /// Latency ratio still counted as no worse (default: detect.tuning.latency_tolerance, 1.05).
    #[arg(long)]
    pub latency_tolerance: Option<f64>,
    /// Goodput drop (and check-failure rise), absolute, a pass must rule out (default:
    /// detect.tuning.verdict_goodput_effect, 0.02).
    #[arg(long)]
    pub goodput_effect: Option<f64>,
    /// Print the verdict as JSON (the content of gate.json) instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `llmprobe gate`.
pub async fn gate(args: GateArgs) -> anyhow::Result<ExitCode> {
    let (plan, opts) = match prepare(&args) {
        Ok(p) => p,
        Err(msg) => {
            eprintln!("error: {msg}");
            return Ok(ExitCode::from(crate::EXIT_CONFIG));
        }
    };
    eprintln!(
        "gate: {} vs {} at {} pairs/s for up to {}{}",
        opts.baseline_url,
        opts.candidate_url,
        opts.rate,
        crate::config::format_duration(opts.duration),
        if opts.until_verdict { format!(", {} looks", opts.settings.looks) } else { String::new() }
    );
    let report = crate::bench::gate::run(&plan, &opts).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table(&report));
    }
    Ok(match report.verdict {
        GateVerdict::Passed => ExitCode::SUCCESS,
        GateVerdict::Regressed => ExitCode::FAILURE,
        GateVerdict::Undecided | GateVerdict::Inconclusive => ExitCode::from(EXIT_INCONCLUSIVE),
    })
}

/// The plan and options from the flags and the config; `Err` names what is wrong.
fn prepare(args: &GateArgs) -> Result<(BenchPlan, GateOptions), String> {
    let (text, file) = match &args.config {
        Some(path) => (std::fs::read_to_string(path).map_err(|e| format!("cannot read config file: {e} ({})", path.display()))?, path.display().to_string()),
        None => (GATE_YAML.to_owned(), "built-in config/gate.yaml".to_owned()),
    };
    let config = loader::parse(&text, &file).map_err(|e| e.to_string())?;
    for w in &config.warnings {
        eprintln!("warning: {}", w.display_in(&file));
    }
    let tuning = &config.detect.tuning;
    let settings = GateSettings {
        alpha: args.alpha,
        looks: if args.until_verdict { args.looks } else { 1 },
        block_s: args.block.as_secs_f64(),
        min_blocks: args.min_blocks.max(2),
        latency_effect: args.latency_effect.unwrap_or(tuning.verdict_latency_effect),
        latency_tolerance: args.latency_tolerance.unwrap_or(tuning.latency_tolerance),
        goodput_effect: args.goodput_effect.unwrap_or(tuning.verdict_goodput_effect),
        checked_scenarios: config.scenarios.iter().filter(|s| s.checks.is_some()).map(|s| s.name.clone()).collect(),
    };
    settings.validate()?;
    let rate = args.rate.unwrap_or_else(|| config.scenarios.iter().map(|s| s.rate).sum());
    if !(rate.is_finite() && (crate::config::MIN_RATE..=crate::config::MAX_RATE).contains(&rate)) {
        return Err(format!("--rate must be in [{}, {}] pairs/s, got {rate}", crate::config::MIN_RATE, crate::config::MAX_RATE));
    }
    if args.duration.is_zero() || args.duration > crate::config::MAX_DURATION {
        return Err(format!("--duration must be positive and at most {}", crate::config::format_duration(crate::config::MAX_DURATION)));
    }
    let plan = plan(config, &file, &text, rate, args.duration);
    let target = plan.target(args.target.as_deref()).map_err(|e| format!("{e:#}"))?;
    let url = |flag: &str, text: &str| -> Result<String, String> {
        // Credentials in a URL would be written to the manifests: keys belong in the config.
        if text.contains('@') {
            return Err(format!("--{flag}: credentials in the URL are not accepted; give the key with api_key_env or api_key_file in the config"));
        }
        crate::config::Target::from_names(flag, text, target.api.as_str())
            .map(|t| t.base_url)
            .map_err(|issues| format!("--{flag}: {}", issues.iter().map(|i| i.message.as_str()).collect::<Vec<_>>().join("; ")))
    };
    crate::bench::gate::prepare_output(&args.output).map_err(|e| format!("{e:#}"))?;
    let opts = GateOptions {
        baseline_url: url("baseline", &args.baseline)?,
        candidate_url: url("candidate", &args.candidate)?,
        target: args.target.clone(),
        output: args.output.clone(),
        rate,
        max_in_flight: plan.config.probe.max_in_flight,
        duration: args.duration,
        until_verdict: args.until_verdict,
        settings,
    };
    Ok((plan, opts))
}

/// A gate run as a bench plan: one rate point, one repeat of `duration`; requests still running
/// when the target's total timeout has passed after it are cancelled.
fn plan(config: Config, file: &str, text: &str, rate: f64, duration: Duration) -> BenchPlan {
    let longest = config.targets.iter().map(|t| t.timeouts.total).max().unwrap_or_default();
    let bench = Bench {
        mode: BenchMode::Rate,
        points: vec![rate],
        max_concurrency: config.probe.max_in_flight,
        arrival: config.bench.as_ref().map(|b| b.arrival).unwrap_or_default(),
        warmup_requests: 0,
        repeats: 1,
        requests: None,
        duration: Some(duration),
        point_timeout: duration + longest + Duration::from_secs(10),
        mock: None,
        mock_slowdown: 1.0,
        engine_metrics_url: None,
        matrix: None,
    };
    BenchPlan { config, bench, config_file: file.to_owned(), config_sha256: crate::workload::sha256_hex(text.as_bytes()) }
}

/// How a figure is printed.
type Shown = fn(f64) -> String;

/// The side-by-side table; a signal decided at an earlier look shows the pairs and figures it
/// was decided on.
pub fn table(r: &GateReport) -> String {
    let s = &r.settings;
    let mut out = format!(
        "gate: {} pairs at {}/s over {:.0} s ({}); alpha {} over {} signals x {} looks = {:.2e} per test\n\
         latency: regressed when the interval is above {}x, passed when below {}x; goodput and checks: passed when a {:.1}-point drop is ruled out\n",
        r.pairs,
        r.rate_per_s,
        r.elapsed_s,
        if r.stopped_early { format!("stopped at look {} of {}", r.looks_taken, s.looks) } else { format!("{} look(s)", r.looks_taken) },
        s.alpha,
        s.signals().len(),
        s.looks,
        r.alpha_per_test,
        s.latency_tolerance,
        s.latency_effect,
        s.goodput_effect * 100.0,
    );
    let _ = writeln!(out, "{:<12} {:>6} {:>10} {:>10} {:>9} {:>20}  verdict", "signal", "pairs", "baseline", "candidate", "ratio", "interval");
    for x in &r.signals {
        let (name, value, change): (&str, Shown, Shown) = match x.signal {
            GateSignal::Ttft => ("ttft_ms", |v| format!("{v:.1}"), |v| format!("{v:.3}x")),
            GateSignal::Tpot => ("tpot_ms", |v| format!("{v:.2}"), |v| format!("{v:.3}x")),
            GateSignal::E2e => ("e2e_ms", |v| format!("{v:.1}"), |v| format!("{v:.3}x")),
            GateSignal::Goodput => ("goodput", |v| format!("{:.1}%", v * 100.0), |v| format!("{:+.1}pt", v * 100.0)),
            GateSignal::Checks => ("checks_fail", |v| format!("{:.1}%", v * 100.0), |v| format!("{:+.1}pt", v * 100.0)),
        };
        let verdict = match (x.decision, x.decided_at_look) {
            (Decision::Regressed | Decision::Passed, Some(k)) if s.looks > 1 => format!("{} (look {k})", x.decision.as_str()),
            (d, _) => d.as_str().to_owned(),
        };
        let _ = writeln!(
            out,
            "{:<12} {:>6} {:>10} {:>10} {:>9} {:>20}  {}: {}",
            name,
            x.pairs,
            x.baseline.map_or("-".into(), value),
            x.candidate.map_or("-".into(), value),
            x.estimate.map_or("-".into(), change),
            x.interval.map_or("-".into(), |(lo, hi)| format!("[{}, {}]", change(lo), change(hi))),
            verdict,
            x.note
        );
    }
    let _ = writeln!(out, "records: {} and {} (llmprobe report / compare read them)", r.baseline_dir.display(), r.candidate_dir.display());
    let _ = writeln!(out, "result: {}", r.verdict.as_str());
    out
}
