//! One bench run: the sweep of points (warm-up, then repeats) through the scheduler, the engine
//! and side samples around it, and the result directory it writes.

use crate::util::clock::unix_now;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::json::write_json;
use super::manifest::{self, Manifest, SideSampleFile, SloManifest, TargetManifest};
use super::plan::BenchPlan;
use super::records::{self, Epoch, Place, Record};
use super::side::{self, SideSource};
use super::summary::{self, SummaryFile};
use super::{engine, progress, report, shard};
use crate::client::TargetRuntime;
use crate::config::{ArrivalKind, ArrivalSpec, Bench, BenchMode, Target};
use crate::pipeline::scheduler::{self, Pacing, StopRule, StoppedBy, Stream};
use crate::probe::arrival::{self, stream_seed};
use crate::replicas::Endpoints;
use crate::sink::Collect;
use crate::workload::{Calibration, Mix};

/// Options of one bench run beyond the config.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub output: PathBuf,
    pub target: Option<String>,
    /// Sample this process's RSS and CPU from /proc (the server, when it runs on this machine).
    pub server_pid: Option<u32>,
    pub sample_every: Duration,
    /// No progress line even on a terminal.
    pub quiet: bool,
}

/// Runs the sweep, writes the result directory, and returns its summary.
pub async fn run(plan: &BenchPlan, opts: &BenchOptions) -> anyhow::Result<SummaryFile> {
    run_sharded(plan, opts, &shard::Sharding::default()).await
}

/// As [`run`], as one shard of a run split over several load generators (`bench --shard I/N`),
/// or with a given run ID and start time.
pub async fn run_sharded(plan: &BenchPlan, opts: &BenchOptions, sharding: &shard::Sharding) -> anyhow::Result<SummaryFile> {
    shard::check(plan, sharding)?;
    if let Some(at) = sharding.start_at_unix_s {
        let late = unix_now() - at;
        anyhow::ensure!(
            late <= shard::START_TOLERANCE_S,
            "--start-at {} passed {late:.1} s ago: this shard would not be aligned with the others; choose a later start for every shard",
            manifest::rfc3339(at)
        );
    }
    let dir = &opts.output;
    prepare_dir(dir)?;
    let target_cfg = plan.target(opts.target.as_deref())?;
    let target = Arc::new(TargetRuntime::new(target_cfg.clone())?);
    let epoch = Epoch::now();
    let run_id = sharding.run_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let seed = plan.config.probe.seed.unwrap_or_else(rand::random);
    let mut manifest = new_manifest(plan, &target_cfg, &run_id, seed, &epoch);
    manifest.shard = sharding.shard.map(|s| {
        let b = &plan.bench;
        let start = sharding.start_at_unix_s.unwrap_or(epoch.unix_s);
        manifest::ShardManifest {
            index: s.index,
            count: s.count,
            start_at_unix_s: start,
            start_at: manifest::rfc3339(start),
            slot_s: shard::slot_s(b),
            loads: b.points.iter().map(|&l| shard::load_at(b, l, Some(s))).collect(),
            max_concurrency: (b.mode == BenchMode::Rate).then(|| (s.part(b.max_concurrency as u64) as usize).max(1)),
            superposition: shard::superposition(b, s.count),
        }
    });
    discover(&target, &mut manifest.target).await;
    let scraper = engine_scraper(&plan.bench, &target_cfg).await?;
    manifest.engine_metrics_url = scraper.as_ref().map(|s| s.url.clone());

    let side_stop = CancellationToken::new();
    let mut sources: Vec<Box<dyn SideSource>> = Vec::new();
    if let Some(pid) = opts.server_pid {
        sources.push(Box::new(side::ProcessSource::new(pid)?));
    }
    sources.extend(side::telemetry(&plan.config.sources, &target_cfg, scraper.as_ref().map(|s| s.url.as_str()))?);
    let mut side_tasks = Vec::new();
    for source in sources {
        manifest.side_samples.push(SideSampleFile {
            file: format!("{}.jsonl", source.name()),
            source: source.name().into(),
            description: source.description(),
        });
        side_tasks.push(spawn_side(source, dir, opts.sample_every, epoch, &run_id, &side_stop));
    }
    manifest::write(dir, &manifest)?;

    let all = sweep(plan, &target, &run_id, seed, epoch, dir, scraper.as_ref(), opts.quiet, sharding).await;
    side_stop.cancel();
    for t in side_tasks {
        t.await.context("side sampler")??;
    }
    all?;
    let end = epoch.unix_s + epoch.rel(std::time::Instant::now());
    manifest.ended_unix_s = Some(end);
    manifest.ended_at = Some(manifest::rfc3339(end));
    manifest::write(dir, &manifest)?;
    // Summarise what was written, so the summary equals what any later reader of the records
    // computes (JSON number text is the evidence, not the in-memory floats).
    let rs = report::load(std::slice::from_ref(dir))?;
    write_json(&dir.join(summary::SUMMARY_FILE), &rs.summary)?;
    report::write(&rs, dir)?;
    Ok(rs.summary)
}

/// Every point: warm-up, then the repeats; records appended to the file as each ends.
#[allow(clippy::too_many_arguments)]
async fn sweep(
    plan: &BenchPlan,
    target: &Arc<TargetRuntime>,
    run_id: &str,
    seed: u64,
    epoch: Epoch,
    dir: &Path,
    scraper: Option<&engine::Scraper>,
    quiet: bool,
    sharding: &shard::Sharding,
) -> anyhow::Result<()> {
    let b = &plan.bench;
    let sh = sharding.shard;
    // The slot grid: phase k starts at start_at + k × slot in every shard.
    let grid = sharding.start_at_unix_s.map(|at| (at, shard::slot_s(b)));
    let mut phase_no = 0u32;
    let progress = progress::Progress::new(b.points.len(), b.repeats, quiet);
    // Prompt lengths follow the server's tokenizer: fit once with /tokenize before any load.
    let calibration = Arc::new(Calibration::new(target.config.api));
    if let Err(e) = crate::client::tokenize::calibrate_with_tokenize(target, &calibration).await {
        tracing::info!("prompt length not calibrated with /tokenize ({e}); using the default estimate");
    }
    for (point, &configured) in b.points.iter().enumerate() {
        let load = shard::load_at(b, configured, sh);
        let phases = (b.warmup_requests > 0).then_some(None).into_iter().chain((0..b.repeats).map(Some));
        for repeat in phases {
            let tag = format!("point{point}/{}", repeat.map_or("warmup".into(), |r| format!("repeat{r}")));
            if let Some((at, slot)) = grid {
                let late = shard::wait_until_unix(at + f64::from(phase_no) * slot).await;
                if late > shard::START_TOLERANCE_S {
                    tracing::warn!("{tag}: started {late:.1} s after its slot; it is not aligned with the other shards");
                }
            }
            phase_no += 1;
            let part = |n: u64| sh.map_or(n, |s| s.part(n));
            let stop = match repeat {
                None => StopRule { requests: Some(part(b.warmup_requests)), duration: None, timeout: Some(b.point_timeout) },
                Some(_) => StopRule { requests: b.requests.map(part), duration: b.duration, timeout: Some(b.point_timeout) },
            };
            if load == 0.0 || stop.requests == Some(0) {
                tracing::info!("{tag}: nothing for shard {} (its share is 0); skipped", sh.map_or("-".into(), |s| s.to_string()));
                continue;
            }
            let phase = progress.phase(point, load, repeat, progress::PhaseGoal { requests: stop.requests, duration: stop.duration }, quiet);
            let counted = phase.done.clone();
            // Each shard draws its own lengths, prompts and arrivals: seeds from the run seed and
            // the shard index (a plain run keeps the seeds it always had).
            let stream = match sh {
                Some(s) => format!("{tag}/shard{}", s.index),
                None => tag.clone(),
            };
            let mut mix = Mix::new(&plan.config.scenarios, stream_seed(seed, &stream), &calibration);
            // The engine window opens after the warm-up, so its counters hold the repeat alone.
            let before = match (repeat, scraper) {
                (Some(_), Some(s)) => read_counters(s, &tag).await,
                _ => None,
            };
            let pacing = pacing_of(b, configured, sh, &mut mix);
            let place = Place { run_id: run_id.to_owned(), point, load, repeat };
            let slo = plan.config.slo_table();
            let sink = Arc::new(Collect::new(move |o, sample| {
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                records::from_outcome(o, sample, slo.get(&o.target, &o.scenario), &epoch, &place)
            }));
            let stream =
                Stream { endpoints: Arc::new(Endpoints::new(target.clone())), draws: mix, pacing, id_prefix: format!("{run_id}-{}-{stream}", target.name) };
            let stopped = scheduler::drive(vec![stream], stop, vec![sink.clone()], plan.config.slo_table()).await?;
            if stopped == StoppedBy::Timeout {
                tracing::warn!("{tag}: point_timeout ({:?}) reached; running requests were cancelled", b.point_timeout);
            }
            drop(phase);
            let mut recs = sink.take();
            recs.sort_by(|a, b| a.intended_s.total_cmp(&b.intended_s));
            if let (Some(r), Some(s), Some(before)) = (repeat, scraper, before) {
                let first_tokens = recs.iter().filter(|x| x.ttft_ms.is_some()).count() as f64;
                if let Some(after) = settled_counters(s, &before.1, first_tokens, &tag).await {
                    let w = engine::Window {
                        run_id: run_id.to_owned(),
                        point,
                        repeat: r,
                        url: s.url.clone(),
                        before_unix_s: before.0,
                        after_unix_s: after.0,
                        before: before.1,
                        after: after.1,
                    };
                    engine::append(dir, &w)?;
                }
            }
            records::append(dir, &recs)?;
            if repeat.is_some() {
                let refs: Vec<&Record> = recs.iter().collect();
                progress.repeat_done(&summary::summarize(&refs, point, load, repeat, b.mode == BenchMode::Rate));
            }
        }
    }
    Ok(())
}

/// The engine page for agreement: `bench.engine_metrics_url` (must be readable), else the target's
/// own `/metrics` when it carries vLLM's counters (skipped quietly when it does not).
async fn engine_scraper(b: &Bench, t: &Target) -> anyhow::Result<Option<engine::Scraper>> {
    let (url, explicit) = match &b.engine_metrics_url {
        Some(u) => (u.clone(), true),
        None => (t.metrics_url(), false),
    };
    let scraper = engine::Scraper::new(url)?;
    match scraper.read().await {
        Ok(_) => Ok(Some(scraper)),
        Err(e) if explicit => Err(e.context("bench.engine_metrics_url")),
        Err(e) => {
            tracing::info!("no engine agreement check: {e:#}");
            Ok(None)
        }
    }
}

async fn read_counters(s: &engine::Scraper, tag: &str) -> Option<(f64, engine::AgreementCounters)> {
    match s.read().await {
        Ok(c) => Some((unix_now(), c)),
        Err(e) => {
            tracing::warn!("{tag}: engine counters not read, no agreement for this repeat: {e:#}");
            None
        }
    }
}

/// Counters after a repeat. The engine may record a request's figures a moment after its last
/// byte left, so the page is re-read (up to ~1 s) until it has counted every first token the
/// prober saw.
async fn settled_counters(s: &engine::Scraper, before: &engine::AgreementCounters, first_tokens: f64, tag: &str) -> Option<(f64, engine::AgreementCounters)> {
    let mut last = None;
    for _ in 0..10 {
        last = read_counters(s, tag).await;
        match &last {
            Some((_, c)) if c.ttft_count - before.ttft_count < first_tokens => tokio::time::sleep(Duration::from_millis(100)).await,
            _ => break,
        }
    }
    last
}

/// How a shard (or the whole run) applies a configured point's load; a random arrival process
/// is seeded from the mix, so one seed drives the whole repeat.
fn pacing_of(b: &Bench, configured: f64, sh: Option<shard::Shard>, mix: &mut Mix) -> Pacing {
    let load = shard::load_at(b, configured, sh);
    match b.mode {
        BenchMode::Concurrency => Pacing::Closed { workers: load as usize },
        BenchMode::Rate => {
            let cap = sh.map_or(b.max_concurrency, |s| (s.part(b.max_concurrency as u64) as usize).max(1));
            let mut arrival = arrival::build(&b.arrival, load, mix.fork_seed());
            // Shard I of a constant ticker first sends at (I + 1) / rate, then every N / rate.
            if let (Some(s), ArrivalSpec { kind: ArrivalKind::Constant, diurnal: None }) = (sh, b.arrival) {
                arrival = Box::new(arrival::Shifted { first: Some(Duration::from_secs_f64(f64::from(s.index + 1) / configured)), rest: arrival });
            }
            Pacing::Open { arrival, cap }
        }
    }
}

/// A fresh directory, or an existing one without results in it: evidence is never overwritten.
pub(super) fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for f in [records::RECORDS_FILE, summary::SUMMARY_FILE, manifest::MANIFEST_FILE] {
        anyhow::ensure!(!dir.join(f).exists(), "{} already holds results ({f}); choose a new --output directory", dir.display());
    }
    Ok(())
}

fn slo_manifest(slo: &crate::config::Slo) -> SloManifest {
    let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
    SloManifest { ttft_ms: ms(slo.ttft), tpot_ms: ms(slo.tpot), e2e_ms: ms(slo.e2e), objective: slo.objective }
}

pub(super) fn new_manifest(plan: &BenchPlan, t: &Target, run_id: &str, seed: u64, epoch: &Epoch) -> Manifest {
    let b = &plan.bench;
    let target_slo = plan.config.slo.overridden(&t.slo);
    Manifest {
        run_id: run_id.to_owned(),
        tool: "llmprobe".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        tool_revision: crate::util::version::BUILD_REVISION.into(),
        config_file: plan.config_file.clone(),
        config_sha256: plan.config_sha256.clone(),
        mode: b.mode.as_str().into(),
        points: b.points.clone(),
        repeats: b.repeats,
        warmup_requests: b.warmup_requests,
        requests_per_repeat: b.requests,
        duration_per_repeat_s: b.duration.map(|d| d.as_secs_f64()),
        point_timeout_s: b.point_timeout.as_secs_f64(),
        max_concurrency: (b.mode == BenchMode::Rate).then_some(b.max_concurrency),
        arrival: (b.mode == BenchMode::Rate).then(|| arrival::describe(&b.arrival)),
        seed,
        scenarios: plan.config.scenarios.iter().map(|s| s.name.clone()).collect(),
        slo: slo_manifest(&target_slo),
        scenario_slo: plan
            .config
            .scenarios
            .iter()
            .map(|s| (s.name.clone(), plan.config.slo_for(&t.name, &s.name)))
            .filter(|(_, slo)| *slo != target_slo)
            .map(|(name, slo)| (name, slo_manifest(&slo)))
            .collect(),
        target: TargetManifest {
            name: t.name.clone(),
            base_url: t.base_url.clone(),
            api: t.api.as_str().into(),
            model: t.model.clone(),
            engine: None,
            engine_version: None,
            discovery_error: None,
        },
        mock_profile: b.mock.clone(),
        mock_slowdown: b.mock.as_ref().map(|_| b.mock_slowdown),
        engine_metrics_url: None,
        machine: manifest::Machine::detect(),
        started_at: manifest::rfc3339(epoch.unix_s),
        started_unix_s: epoch.unix_s,
        ended_at: None,
        ended_unix_s: None,
        side_samples: Vec::new(),
        shard: None,
    }
}

/// Fills model/engine/version from `/v1/models` and `/version`; a failure is noted, not fatal
/// (the requests themselves will show what is wrong).
pub(super) async fn discover(target: &TargetRuntime, into: &mut TargetManifest) {
    match target.discover().await {
        Ok(d) => {
            into.model = Some(d.model);
            into.engine = Some(d.engine);
            into.engine_version = Some(d.engine_version).filter(|v| !v.is_empty());
        }
        Err(f) => into.discovery_error = Some(format!("{}: {}", f.class.as_str(), target.redact(&f.detail))),
    }
}

fn spawn_side(
    source: Box<dyn SideSource>,
    dir: &Path,
    every: Duration,
    epoch: Epoch,
    run_id: &str,
    stop: &CancellationToken,
) -> tokio::task::JoinHandle<anyhow::Result<PathBuf>> {
    tokio::spawn(side::run(source, dir.to_path_buf(), every, epoch, run_id.to_owned(), stop.clone()))
}
