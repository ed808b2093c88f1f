//! One `llmprobe gate` run: the same workload sent to a baseline and a candidate deployment side
//! by side through the one scheduler (a stream whose endpoints are the two sides: each draw goes
//! to both at the same intended time, in turn first), looks at the pairs as they come
//! (`paired.rs`), and one bench result directory per side (`baseline/`, `candidate/`) that
//! `report` and `compare` read, plus `gate.json` with the verdict.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::json::write_json;
use super::manifest;
use super::paired::{GateSettings, GateVerdict, Looks, SignalResult};
use super::plan::BenchPlan;
use super::records::{self, Epoch, Place, Record};
use super::run::{discover, new_manifest, prepare_dir};
use super::{report, summary};
use crate::client::TargetRuntime;
use crate::pipeline::scheduler::{self, Pacing, StopRule, Stream};
use crate::probe::arrival::{self, stream_seed};
use crate::replicas::Endpoints;
use crate::sink::Collect;
use crate::workload::{Calibration, Mix};

/// The verdict file in the output directory.
const GATE_FILE: &str = "gate.json";

/// Which deployment a probe went to (its `replica` label while the gate runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Baseline,
    Candidate,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Baseline => "baseline",
            Side::Candidate => "candidate",
        }
    }
}

/// What a gate run needs beyond the config.
#[derive(Debug, Clone)]
pub struct GateOptions {
    pub baseline_url: String,
    pub candidate_url: String,
    /// The config's target whose settings (API, model, key, timeouts) both sides use.
    pub target: Option<String>,
    pub output: PathBuf,
    /// Pairs per second (each sends one request to each side).
    pub rate: f64,
    /// In-flight cap of each side; a request due beyond it is dropped and counted (as not good).
    pub max_in_flight: usize,
    /// Longest run; with `until_verdict` it stops at the first look that decides.
    pub duration: Duration,
    pub until_verdict: bool,
    pub settings: GateSettings,
}

/// What a run found.
#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    pub verdict: GateVerdict,
    pub baseline_url: String,
    pub candidate_url: String,
    pub rate_per_s: f64,
    pub duration_s: f64,
    /// Seconds from the first send to the look that decided (or to the end).
    pub elapsed_s: f64,
    pub stopped_early: bool,
    pub looks_taken: u32,
    pub pairs: usize,
    pub settings: GateSettings,
    pub alpha_per_test: f64,
    pub signals: Vec<SignalResult>,
    pub baseline_dir: PathBuf,
    pub candidate_dir: PathBuf,
}

/// Creates the output directory and one per side; an error when any already holds results
/// (evidence is never overwritten).
pub fn prepare_output(output: &Path) -> anyhow::Result<[PathBuf; 2]> {
    let dirs = [output.join(Side::Baseline.as_str()), output.join(Side::Candidate.as_str())];
    for d in &dirs {
        prepare_dir(d)?;
    }
    anyhow::ensure!(!output.join(GATE_FILE).exists(), "{} already holds a gate result ({GATE_FILE}); choose a new --output directory", output.display());
    Ok(dirs)
}

/// Runs the gate and writes its results under `opts.output`.
pub async fn run(plan: &BenchPlan, opts: &GateOptions) -> anyhow::Result<GateReport> {
    let dirs = prepare_output(&opts.output)?;
    let target_cfg = plan.target(opts.target.as_deref())?;
    let sides = [(Side::Baseline, &opts.baseline_url), (Side::Candidate, &opts.candidate_url)];
    let mut runtimes = Vec::new();
    for (side, url) in sides {
        let mut cfg = target_cfg.clone();
        cfg.base_url = url.clone();
        let mut rt = TargetRuntime::new(cfg)?;
        rt.replica = Some(side.as_str().into());
        runtimes.push(Arc::new(rt));
    }
    let epoch = Epoch::now();
    let run_id = uuid::Uuid::new_v4().to_string();
    let seed = plan.config.probe.seed.unwrap_or_else(rand::random);
    let mut manifests = Vec::new();
    for ((side, _), (rt, dir)) in sides.iter().zip(runtimes.iter().zip(&dirs)) {
        // Distinct run ids, so `report baseline candidate` cannot mistake them for one run.
        let mut m = new_manifest(plan, &rt.config, &format!("{run_id}-{}", side.as_str()), seed, &epoch);
        discover(rt, &mut m.target).await;
        manifest::write(dir, &m)?;
        manifests.push(m);
    }

    // Prompt lengths follow the baseline's tokenizer; both sides get the same prompts.
    let calibration = Arc::new(Calibration::new(target_cfg.api));
    if let Err(e) = crate::client::tokenize::calibrate_with_tokenize(&runtimes[0], &calibration).await {
        tracing::info!("prompt length not calibrated with /tokenize ({e}); using the default estimate");
    }
    let mut mix = Mix::new(&plan.config.scenarios, stream_seed(seed, "gate"), &calibration);
    let arrival = arrival::build(&plan.bench.arrival, opts.rate, mix.fork_seed());
    let endpoints = Arc::new(Endpoints::side_by_side(runtimes[0].clone(), runtimes.clone()));
    let stream =
        Stream { endpoints, draws: mix, pacing: Pacing::Open { arrival, cap: opts.max_in_flight }, id_prefix: format!("{run_id}-{}", target_cfg.name) };
    let place = Place { run_id: run_id.clone(), point: 0, load: opts.rate, repeat: Some(0) };
    let slo = plan.config.slo_table();
    let sink = Arc::new(Collect::new(move |o, sample| {
        let side = if o.replica.as_deref() == Some(Side::Candidate.as_str()) { Side::Candidate } else { Side::Baseline };
        (side, records::from_outcome(o, sample, slo.get(&o.target, &o.scenario), &epoch, &place))
    }));

    let looks_planned = if opts.until_verdict { opts.settings.looks } else { 1 };
    let mut looks = Looks::new(GateSettings { looks: looks_planned, ..opts.settings.clone() });
    let rule = StopRule { requests: None, duration: Some(opts.duration), timeout: Some(plan.bench.point_timeout) };
    let stop = CancellationToken::new();
    let finished = CancellationToken::new();
    let begin = Instant::now();
    let driving = async {
        let r = scheduler::drive_until(vec![stream], rule, vec![sink.clone()], plan.config.slo_table(), stop.clone()).await;
        finished.cancel();
        r
    };
    let watching = async {
        // Looks 1..K-1 while the run goes on; look K is taken once every request has ended.
        for k in 1..looks_planned {
            let at = begin + opts.duration.mul_f64(f64::from(k) / f64::from(looks_planned));
            tokio::select! {
                _ = tokio::time::sleep_until(at.into()) => {}
                _ = finished.cancelled() => return None,
            }
            let (b, c) = sink.peek(split);
            let verdict = looks.look(&b, &c, false);
            eprintln!("{}", progress_line(&looks, begin.elapsed().as_secs_f64()));
            if matches!(verdict, GateVerdict::Regressed | GateVerdict::Passed) {
                stop.cancel();
                return Some(begin.elapsed().as_secs_f64());
            }
        }
        None
    };
    let (driven, decided_at) = tokio::join!(driving, watching);
    let stopped = driven?;
    if stopped == scheduler::StoppedBy::Timeout {
        tracing::warn!("gate: the run's time limit ({:?}) passed; running requests were cancelled", plan.bench.point_timeout);
    }
    let (baseline, candidate) = split(&sink.take());
    match decided_at {
        Some(_) => looks.close("not decided yet when the verdict was and the run stopped"),
        None => {
            looks.look(&baseline, &candidate, true);
            eprintln!("{}", progress_line(&looks, begin.elapsed().as_secs_f64()));
        }
    }
    let pairs = super::paired::pairs(&baseline, &candidate).len();
    for ((mut m, dir), recs) in manifests.into_iter().zip(&dirs).zip([baseline, candidate]) {
        finish_side(&mut m, dir, &recs, &epoch)?;
    }
    let report = GateReport {
        verdict: looks.verdict(),
        baseline_url: opts.baseline_url.clone(),
        candidate_url: opts.candidate_url.clone(),
        rate_per_s: opts.rate,
        duration_s: opts.duration.as_secs_f64(),
        elapsed_s: decided_at.unwrap_or_else(|| begin.elapsed().as_secs_f64()),
        stopped_early: decided_at.is_some(),
        looks_taken: looks.done,
        pairs,
        alpha_per_test: looks.settings.alpha_per_test(),
        settings: looks.settings.clone(),
        signals: looks.results.clone(),
        baseline_dir: dirs[0].clone(),
        candidate_dir: dirs[1].clone(),
    };
    write_json(&opts.output.join(GATE_FILE), &report)?;
    Ok(report)
}

/// Records by side, each in send order.
fn split(all: &[(Side, Record)]) -> (Vec<Record>, Vec<Record>) {
    let mut out = (Vec::new(), Vec::new());
    for (side, r) in all {
        match side {
            Side::Baseline => out.0.push(r.clone()),
            Side::Candidate => out.1.push(r.clone()),
        }
    }
    out.0.sort_by(|a, b| a.intended_s.total_cmp(&b.intended_s));
    out.1.sort_by(|a, b| a.intended_s.total_cmp(&b.intended_s));
    out
}

/// Writes one side's records, its finished manifest, summary and report.
fn finish_side(m: &mut manifest::Manifest, dir: &Path, recs: &[Record], epoch: &Epoch) -> anyhow::Result<()> {
    records::append(dir, recs)?;
    let end = epoch.unix_s + epoch.rel(Instant::now());
    m.ended_unix_s = Some(end);
    m.ended_at = Some(manifest::rfc3339(end));
    manifest::write(dir, m)?;
    let rs = report::load(std::slice::from_ref(&dir.to_path_buf()))?;
    write_json(&dir.join(summary::SUMMARY_FILE), &rs.summary)?;
    report::write(&rs, dir)?;
    Ok(())
}

/// One line per look on stderr: the state of each signal.
fn progress_line(looks: &Looks, elapsed_s: f64) -> String {
    let mut s = format!("gate: look {}/{} at {elapsed_s:.0} s:", looks.done, looks.settings.looks);
    for r in &looks.results {
        let est = match (r.signal, r.estimate) {
            (_, None) => "-".to_owned(),
            (super::paired::GateSignal::Goodput | super::paired::GateSignal::Checks, Some(v)) => format!("{:+.1}pt", v * 100.0),
            (_, Some(v)) => format!("{v:.2}x"),
        };
        s.push_str(&format!(" {} {est} {} ({} pairs);", r.signal.as_str(), r.decision.as_str(), r.pairs));
    }
    s.pop();
    s
}
