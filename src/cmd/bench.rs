//! The bench-mode commands behind the CLI: `bench`, `report`, `compare`, `capacity`.
//! Each returns the process exit code; the clap argument structs live here too.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::app::loader;
use crate::bench::{BenchOptions, BenchPlan};

/// `llmprobe bench` flags.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The YAML config file with a `bench:` section.
    #[arg(long, short)]
    pub config: PathBuf,
    /// Result directory (created; must not already hold results).
    #[arg(long, short, required_unless_present = "dry_run")]
    pub output: Option<PathBuf>,
    /// The target to measure when the config lists several.
    #[arg(long)]
    pub target: Option<String>,
    /// Sample RSS and CPU of this process (the server, on this machine) from /proc.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Interval of the side samples, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub sample_interval_ms: u64,
    /// Print the planned runs (the matrix, or the one sweep) with their config hashes; send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// No progress line on the terminal.
    #[arg(long)]
    pub quiet: bool,
    /// Run shard I of N (0-based) of a run split over N load generators: rate/N per shard, or
    /// C/N workers (remainder to the first shards). Needs --run-id, and --start-at when N > 1.
    #[arg(long, env = "LLMPROBE_SHARD", value_name = "I/N")]
    pub shard: Option<crate::bench::shard::Shard>,
    /// The run ID, the same for every shard of one run (default: a fresh UUID).
    #[arg(long, env = "LLMPROBE_RUN_ID", value_name = "ID")]
    pub run_id: Option<String>,
    /// Wait until this wall-clock time (RFC 3339 or Unix seconds) before the first point; every
    /// later warm-up/repeat gets a slot of point_timeout + 2 s from then.
    #[arg(long, env = "LLMPROBE_START_AT", value_name = "TIME", value_parser = crate::bench::shard::parse_start_at)]
    pub start_at: Option<f64>,
}

/// Loads a config for a bench command; `Err(code)` after printing the problems.
fn load_plan(path: &std::path::Path) -> Result<BenchPlan, ExitCode> {
    let file = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read config file: {e} ({file})");
            return Err(ExitCode::from(crate::EXIT_CONFIG));
        }
    };
    let cfg = match loader::parse(&text, &file) {
        Ok(c) => c,
        Err(errors) => {
            eprintln!("{errors}");
            return Err(ExitCode::from(crate::EXIT_CONFIG));
        }
    };
    for w in &cfg.warnings {
        eprintln!("warning: {}", w.display_in(&file));
    }
    BenchPlan::new(cfg, &file, &text).map_err(|e| {
        eprintln!("{e:#}");
        ExitCode::from(crate::EXIT_CONFIG)
    })
}

/// `llmprobe bench`.
pub async fn bench(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let plan = match load_plan(&args.config) {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    let runs = crate::bench::matrix::expand(&plan);
    if args.dry_run {
        print!("{}", crate::bench::matrix::listing(&runs));
        for r in &runs {
            let line = crate::bench::progress::planned_line(&crate::bench::progress::planned(&r.plan.bench));
            if runs.len() == 1 { println!("{line}") } else { println!("{}: {line}", r.name) }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(output) = args.output.clone() else { anyhow::bail!("--output is required") };
    let sharding = crate::bench::shard::Sharding { shard: args.shard, run_id: args.run_id.clone(), start_at_unix_s: args.start_at };
    if let Err(e) = crate::bench::shard::check(&plan, &sharding) {
        eprintln!("{e:#}");
        return Ok(ExitCode::from(crate::EXIT_CONFIG));
    }
    let opts = BenchOptions {
        output: output.clone(),
        target: args.target.clone(),
        server_pid: args.server_pid,
        sample_every: Duration::from_millis(args.sample_interval_ms.max(10)),
        quiet: args.quiet,
    };
    let mock = match &plan.bench.mock {
        Some(profile) => Some(start_mock(&plan, args.target.as_deref(), profile).await?),
        None => None,
    };
    let result = run_all(&runs, plan.bench.matrix.is_some(), &opts, &sharding).await;
    if let Some((stop, task)) = mock {
        stop.cancel();
        let _ = task.await;
    }
    result?;
    println!("results in {}", output.display());
    Ok(ExitCode::SUCCESS)
}

/// Runs the sweep, or each matrix run into its own subdirectory (with `matrix.json` listing them).
async fn run_all(runs: &[crate::bench::matrix::Run], matrix: bool, opts: &BenchOptions, sharding: &crate::bench::shard::Sharding) -> anyhow::Result<()> {
    if matrix {
        std::fs::create_dir_all(&opts.output)?;
        crate::bench::write_json(&opts.output.join("matrix.json"), &runs)?;
    }
    for r in runs {
        let opts = if matrix { BenchOptions { output: opts.output.join(&r.name), ..opts.clone() } } else { opts.clone() };
        if matrix {
            eprintln!("bench: run {} -> {}", r.name, opts.output.display());
        }
        let summary = crate::bench::run_sharded(&r.plan, &opts, sharding).await?;
        print!("{}", crate::bench::progress::table(&summary));
    }
    Ok(())
}

type MockTask = tokio::task::JoinHandle<std::io::Result<()>>;

/// Starts the built-in mock engine on the target's address (`bench.mock: true`).
async fn start_mock(plan: &BenchPlan, target: Option<&str>, profile: &str) -> anyhow::Result<(CancellationToken, MockTask)> {
    let t = plan.target(target)?;
    let addr = super::demo::mock_address(&t.base_url).context("bench.mock: true needs a target base_url of the form http://IP:port")?;
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding the mock engine to {addr}"))?;
    let mut opts = crate::mock::MockOptions {
        profile: crate::mock::Profile::by_name(profile).context("unknown mock profile")?,
        slowdown: plan.bench.mock_slowdown,
        ..Default::default()
    };
    if let Some(model) = &t.model {
        opts.model = model.clone();
    }
    let slow = if plan.bench.mock_slowdown == 1.0 { String::new() } else { format!(", slowed {}x", plan.bench.mock_slowdown) };
    eprintln!("bench: mock engine ({profile}{slow}) on http://{addr}");
    let stop = CancellationToken::new();
    let task = tokio::spawn(crate::mock::serve(listener, opts, stop.clone()));
    Ok((stop, task))
}

/// `llmprobe report` flags.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result directories; several are merged (their request records pooled exactly).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Where to write the report (default: the result directory). Required when merging: the
    /// merged records.jsonl and summary.json are written there too.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Retry for up to this many seconds (every 10 s) while the directories cannot be merged yet:
    /// a shard missing or unfinished (the merge Job of the Helm chart waits for the shards).
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    pub wait_seconds: u64,
}

/// `llmprobe report`.
pub fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let deadline = std::time::Instant::now() + Duration::from_secs(args.wait_seconds);
    let rs = loop {
        match crate::bench::report::load(&args.dirs) {
            Ok(rs) => break rs,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("report: not ready ({e:#}); retrying in 10 s");
                std::thread::sleep(Duration::from_secs(10).min(deadline.saturating_duration_since(std::time::Instant::now())));
            }
            Err(e) => return Err(e),
        }
    };
    let out = match (&args.output, args.dirs.len()) {
        (Some(o), _) => o.clone(),
        (None, 1) => args.dirs[0].clone(),
        (None, _) => anyhow::bail!("merging {} result directories needs --output DIR for the merged results", args.dirs.len()),
    };
    if args.dirs.len() > 1 {
        crate::bench::report::write_merged(&rs, &out)?;
    }
    let (md, html) = crate::bench::report::write(&rs, &out)?;
    print!("{}", crate::bench::progress::table(&rs.summary));
    println!("wrote {} and {}", md.display(), html.display());
    Ok(ExitCode::SUCCESS)
}

/// `llmprobe compare` flags.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline result directory.
    pub base: PathBuf,
    /// New result directory.
    pub new: PathBuf,
    /// Largest allowed increase of a latency percentile, in percent.
    #[arg(long, default_value_t = 10.0)]
    pub max_latency_increase_pct: f64,
    /// Latency increases up to this many milliseconds never count (timer and scheduler jitter).
    #[arg(long, default_value_t = 1.0)]
    pub min_latency_increase_ms: f64,
    /// Largest allowed drop of the goodput ratio, absolute (0.02 = 2 percentage points).
    #[arg(long, default_value_t = 0.02)]
    pub max_goodput_drop: f64,
    /// Largest allowed drop of output token throughput, in percent.
    #[arg(long, default_value_t = 10.0)]
    pub max_throughput_drop_pct: f64,
    /// Latency figures checked (ttft|tpot|itl|e2e with _p50/_p95/_p99...), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "ttft_p95,ttft_p99,tpot_p95,tpot_p99,e2e_p95")]
    pub latency: Vec<String>,
    /// Bootstrap resamples.
    #[arg(long, default_value_t = 1000)]
    pub resamples: usize,
    /// Bootstrap seed (fixed so the verdict is reproducible).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// `llmprobe compare`: exit 0 when nothing regressed, 1 on a regression, 2 on unusable input.
pub fn compare(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let load = |d: &PathBuf| crate::bench::report::load(std::slice::from_ref(d));
    let (base, new) = match (load(&args.base), load(&args.new)) {
        (Ok(b), Ok(n)) => (b, n),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e:#}");
            return Ok(ExitCode::from(crate::EXIT_CONFIG));
        }
    };
    if base.summary.mode != new.summary.mode {
        eprintln!("error: cannot compare a {} sweep with a {} sweep", base.summary.mode, new.summary.mode);
        return Ok(ExitCode::from(crate::EXIT_CONFIG));
    }
    let t = crate::bench::compare::Thresholds {
        latency_increase: args.max_latency_increase_pct / 100.0,
        goodput_drop: args.max_goodput_drop,
        latency_floor_ms: args.min_latency_increase_ms,
        throughput_drop: args.max_throughput_drop_pct / 100.0,
        latency: args.latency,
        resamples: args.resamples,
        seed: args.seed,
    };
    let c = crate::bench::compare::compare(&base, &new, &t);
    print!("{}", crate::bench::compare::table(&c, &t));
    if c.rows.is_empty() {
        eprintln!("error: no load point in common");
        return Ok(ExitCode::from(crate::EXIT_CONFIG));
    }
    Ok(if c.regressed() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// `llmprobe capacity` flags (each overrides the same key of `--spec`).
#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// YAML file with the inputs (keys as the flags, with `_`: params_billion, layers, ...).
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// A bench result directory: its candidate knee supplies the measured throughput, goodput
    /// ratio and (concurrency sweeps) a concurrency limit.
    #[arg(long)]
    pub from_bench: Option<PathBuf>,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub inputs: crate::bench::capacity::Spec,
}

/// `llmprobe capacity`: exit 2 on missing or invalid inputs.
pub fn capacity(args: CapacityArgs) -> anyhow::Result<ExitCode> {
    let base = match &args.spec {
        Some(path) => match read_spec(path) {
            Ok(s) => s,
            Err(msg) => {
                eprintln!("{msg}");
                return Ok(ExitCode::from(crate::EXIT_CONFIG));
            }
        },
        None => crate::bench::capacity::Spec::default(),
    };
    let spec = args.inputs.over(base);
    let measured = match &args.from_bench {
        Some(dir) => {
            let rs = crate::bench::report::load(std::slice::from_ref(dir))?;
            Some(crate::bench::capacity::measured_from(&rs.summary, &dir.display().to_string())?)
        }
        None => None,
    };
    match crate::bench::capacity::plan(&spec, measured) {
        Ok(plan) => {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&plan)?);
            } else {
                print!("{}", crate::bench::capacity::text(&plan));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => {
            for e in errors {
                eprintln!("{e}");
            }
            Ok(ExitCode::from(crate::EXIT_CONFIG))
        }
    }
}

/// Reads a capacity spec; an error names the key and line.
fn read_spec(path: &std::path::Path) -> Result<crate::bench::capacity::Spec, String> {
    let file = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {file}: {e}"))?;
    let de = serde_norway::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let at = e.path().to_string();
        let inner = e.into_inner();
        let line = inner.location().map_or(String::new(), |l| format!(":{}", l.line()));
        format!("{at}: {inner} ({file}{line})")
    })
}
