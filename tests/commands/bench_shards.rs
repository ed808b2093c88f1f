//! Sharded bench runs (`bench --shard I/N`) against one in-process mock engine over loopback
//! (port 0), three shards in one process, then the exact merge of their directories: request
//! counts add up, the merged arrival rate is the configured one, latency percentiles are the
//! nearest-rank ones of the union of the records, every phase runs inside its wall-clock slot,
//! and merges of the wrong directories are refused with a message naming the problem.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use llmprobe::bench::records::{self, Phase, Record};
use llmprobe::bench::report;
use llmprobe::bench::shard::{self, Shard, Sharding};
use llmprobe::bench::summary::SummaryFile;
use llmprobe::bench::{self, BenchOptions, BenchPlan, schema};
use llmprobe::mock::{MockOptions, Profile};
use llmprobe::util::stats::{percentile, sort_f64};

fn temp_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("llmprobe-{tag}-{}", uuid::Uuid::new_v4()))
}

fn plan(base_url: &str, bench_yaml: &str) -> BenchPlan {
    let text = format!(
        "probe: {{seed: 11}}\ntargets:\n  - name: t\n    base_url: {base_url}\n    api: openai-chat\n    timeouts: {{connect: 1s, ttft: 5s, idle: 5s, total: 10s}}\nscenarios:\n  - {{name: a, weight: 3, input_tokens: 32, output_tokens: 4}}\n  - {{name: b, weight: 1, input_tokens: 64, output_tokens: 4}}\nslo: {{ttft: 2s, tpot: 500ms, objective: 0.9}}\nbench:\n{bench_yaml}"
    );
    let cfg = llmprobe::app::loader::parse(&text, "shards.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"));
    BenchPlan::new(cfg, "shards.yaml", &text).unwrap()
}

fn opts(dir: &Path) -> BenchOptions {
    BenchOptions { output: dir.to_path_buf(), target: None, server_pid: None, sample_every: Duration::from_millis(200), quiet: true }
}

/// Runs `n` shards of `plan` concurrently with one run ID, starting `lead` from now; returns
/// their directories, summaries and the common start.
async fn run_shards(plan: &BenchPlan, n: u32, run_id: &str, tag: &str) -> (Vec<PathBuf>, Vec<SummaryFile>, f64) {
    let start = llmprobe::util::clock::unix_now() + 2.0;
    let dirs: Vec<PathBuf> = (0..n).map(|i| temp_dir(&format!("{tag}-shard{i}"))).collect();
    let runs = dirs.iter().enumerate().map(|(i, d)| {
        let sharding = Sharding { shard: Some(Shard { index: i as u32, count: n }), run_id: Some(run_id.to_owned()), start_at_unix_s: Some(start) };
        let (plan, o) = (plan.clone(), opts(d));
        tokio::spawn(async move { bench::run_sharded(&plan, &o, &sharding).await })
    });
    let mut summaries = Vec::new();
    for r in futures_util::future::join_all(runs).await {
        summaries.push(r.unwrap().unwrap());
    }
    (dirs, summaries, start)
}

fn nearest(mut v: Vec<f64>, q: f64) -> Option<f64> {
    sort_f64(&mut v);
    percentile(&v, q)
}

fn union(dirs: &[PathBuf]) -> Vec<Record> {
    dirs.iter().flat_map(|d| records::read(d).unwrap()).collect()
}

/// The merged figures are those of the union of the shards' records: counts add up, and TTFT
/// (and E2E) percentiles are the nearest-rank percentiles of the pooled sample, per repeat and
/// over all repeats.
fn check_merge_is_exact(merged: &SummaryFile, shards: &[SummaryFile], all: &[Record]) {
    for p in &merged.points {
        let shard_points = shards.iter().filter_map(|s| s.points.iter().find(|q| q.point == p.point));
        assert_eq!(p.pooled.requests, shard_points.map(|q| q.pooled.requests).sum::<u64>(), "point {} requests add up", p.point);
        for r in p.repeats.iter().chain(std::iter::once(&p.pooled)) {
            let mine: Vec<&Record> =
                all.iter().filter(|x| x.point == p.point && x.phase == Phase::Measure && (r.repeat.is_none() || x.repeat == r.repeat)).collect();
            assert_eq!(r.requests as usize, mine.len());
            assert_eq!(r.success as usize, mine.iter().filter(|x| x.is_success()).count());
            let ttft: Vec<f64> = mine.iter().filter(|x| x.is_success()).filter_map(|x| x.ttft_ms).collect();
            for (q, got) in [(0.5, r.ttft_p50_ms), (0.95, r.ttft_p95_ms), (0.99, r.ttft_p99_ms)] {
                assert_eq!(got, nearest(ttft.clone(), q), "point {} repeat {:?} ttft q{q}", p.point, r.repeat);
            }
            let e2e: Vec<f64> = mine.iter().filter(|x| x.is_success()).filter_map(|x| x.e2e_ms).collect();
            assert_eq!(r.e2e_p95_ms, nearest(e2e, 0.95));
        }
    }
}

/// Every measured request was intended inside its phase's slot: [start + k × slot, + duration],
/// where a phase that reaches its slot late (a busy machine) runs up to `START_TOLERANCE_S`
/// later, the alignment the shards promise (beyond it a shard warns that it is not aligned).
fn check_slots(all: &[Record], start: f64, slot: f64, duration: f64, phases_per_point: u32) {
    for r in all.iter().filter(|r| r.phase == Phase::Measure) {
        let k = r.point as u32 * phases_per_point + r.repeat.unwrap();
        let from = start + f64::from(k) * slot;
        assert!(
            r.intended_unix_s >= from - 0.05 && r.intended_unix_s <= from + duration + shard::START_TOLERANCE_S,
            "point {} repeat {:?}: {} outside [{from}, +{duration}]",
            r.point,
            r.repeat,
            r.intended_unix_s
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_poisson_shards_merge_exactly() {
    let (addr, stop) = common::start_mock(MockOptions { profile: Profile::large_gpu(), ..Default::default() }).await;
    let url = format!("http://{addr}");
    // 90 req/s in total, 30 per shard, two repeats of 2 s each in 5 s slots (point_timeout 3 s + 2 s).
    let poisson = plan(&url, "  mode: rate\n  rates: [90]\n  arrival: poisson\n  repeats: 2\n  duration: 2s\n  point_timeout: 3s\n");
    let (dirs, shards, start) = run_shards(&poisson, 3, "run-poisson", "poisson").await;
    let merged_dir = temp_dir("poisson-merged");
    let rs = report::load(&dirs).unwrap();
    report::write_merged(&rs, &merged_dir).unwrap();
    report::write(&rs, &merged_dir).unwrap();

    // Each shard's manifest names the run, its index and the count, and conforms to the schema.
    for (i, d) in dirs.iter().enumerate() {
        let m = bench::manifest::read(d).unwrap();
        assert_eq!(m.run_id, "run-poisson");
        let s = m.shard.as_ref().expect("shard section");
        assert_eq!((s.index, s.count), (i as u32, 3));
        assert_eq!(s.loads, vec![30.0]);
        assert_eq!(s.slot_s, 5.0);
        assert!(s.superposition.contains("exactly a Poisson stream"), "{}", s.superposition);
        let v: serde_json::Value = bench::read_json(&d.join("manifest.json")).unwrap();
        let errors = schema::validate(&v, &schema::parse(schema::MANIFEST));
        assert!(errors.is_empty(), "shard manifest does not conform:\n{}", errors.join("\n"));
        assert_eq!(shards[i].points[0].load, 30.0, "a shard alone reports its own share");
    }
    let all = union(&dirs);
    check_merge_is_exact(&rs.summary, &shards, &all);
    check_slots(&all, start, 5.0, 2.0, 2);
    // The shards drew different streams (seeds from the run seed and the shard index).
    let firsts: Vec<f64> = dirs.iter().map(|d| records::read(d).unwrap()[0].intended_unix_s).collect();
    assert!(firsts[0] != firsts[1] && firsts[1] != firsts[2], "{firsts:?}");

    let s = &rs.summary;
    assert_eq!(s.run_ids, vec!["run-poisson".to_owned()]);
    let p = &s.points[0];
    assert_eq!(p.load, 90.0, "the merged point carries the configured rate");
    assert_eq!(p.pooled.target_rate_rps, Some(90.0));
    // Poisson statistics: the count over the 2 × 2 s measured is Poisson(360), σ = 19 (5.3%);
    // 4σ bounds it. The same bound holds for the achieved rate of each 2 s repeat (σ = 7.5%).
    let (lambda_t, n) = (90.0 * 4.0, p.pooled.requests as f64);
    assert!((n - lambda_t).abs() <= 4.0 * lambda_t.sqrt(), "{n} requests, expected {lambda_t} ± {}", 4.0 * lambda_t.sqrt());
    for r in &p.repeats {
        let achieved = r.achieved_rate_rps.unwrap();
        assert!((achieved / 90.0 - 1.0).abs() <= 4.0 / (90.0f64 * 2.0).sqrt(), "repeat {:?}: achieved {achieved}", r.repeat);
    }
    let on_disk: SummaryFile = bench::read_json(&merged_dir.join("summary.json")).unwrap();
    assert_eq!(&on_disk, s);
    assert_eq!(records::read(&merged_dir).unwrap().len(), all.len());
    assert!(std::fs::read_to_string(merged_dir.join("report.md")).unwrap().contains("shard 2/3"));

    // A missing shard is named; a shard given twice is refused.
    let e = report::load(&dirs[..2]).err().expect("two of three shards").to_string();
    assert!(e.contains("shard 2 is missing") && e.contains("run-poisson"), "{e}");
    let e = report::load(&[dirs[0].clone(), dirs[2].clone()]).err().unwrap().to_string();
    assert!(e.contains("shard 1 is missing"), "{e}");
    let e = report::load(&[dirs[0].clone(), dirs[1].clone(), dirs[1].clone()]).err().unwrap().to_string();
    assert!(e.contains("given twice"), "{e}");

    // Constant arrivals: the phase-shifted tickers merge into the 60/s ticker, so the offered
    // (intended) rate is the configured one and the request count that of 3 s. The achieved rate
    // moves with schedule lag: a timing figure of the bench harness, not asserted here.
    let constant = plan(&url, "  mode: rate\n  rates: [60]\n  arrival: constant\n  repeats: 1\n  duration: 3s\n  point_timeout: 4s\n");
    let (cdirs, cshards, cstart) = run_shards(&constant, 3, "run-constant", "constant").await;
    stop.cancel();
    let crs = report::load(&cdirs).unwrap();
    let call = union(&cdirs);
    check_merge_is_exact(&crs.summary, &cshards, &call);
    check_slots(&call, cstart, 6.0, 3.0, 1);
    let r = &crs.summary.points[0].repeats[0];
    assert!(r.achieved_rate_rps.is_some_and(|a| a > 0.0), "{r:?}");
    assert!((r.offered_rate_rps.unwrap() / 60.0 - 1.0).abs() < 0.01, "{r:?}");
    assert!((175..=181).contains(&r.requests), "3 s at 60/s: {} requests", r.requests);

    // Shards of two different runs are refused, naming both run IDs.
    let mixed = vec![dirs[0].clone(), dirs[1].clone(), cdirs[2].clone()];
    let e = report::load(&mixed).err().expect("different runs").to_string();
    assert!(e.contains("run-constant") && e.contains("run-poisson") && e.contains("only the shards of one run"), "{e}");
    // A plain (unsharded) directory does not merge with shards.
    let e = report::load(&[dirs[0].clone(), merged_dir.clone()]);
    assert!(e.is_err());
    for d in dirs.iter().chain(&cdirs).chain([&merged_dir]) {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_shards_split_workers_and_skip_empty_points() {
    let (addr, stop) = common::start_mock(MockOptions { profile: Profile::large_gpu(), ..Default::default() }).await;
    // Concurrency 2 over 3 shards is 1 + 1 + 0: shard 2 sits point 0 out; 4 is 2 + 1 + 1.
    let p = plan(&format!("http://{addr}"), "  mode: concurrency\n  concurrency: [2, 4]\n  repeats: 1\n  duration: 1s\n  point_timeout: 2s\n");
    let (dirs, shards, start) = run_shards(&p, 3, "run-conc", "conc").await;
    stop.cancel();
    let loads: Vec<Vec<f64>> = dirs.iter().map(|d| bench::manifest::read(d).unwrap().shard.unwrap().loads).collect();
    assert_eq!(loads, vec![vec![1.0, 2.0], vec![1.0, 1.0], vec![0.0, 1.0]]);
    assert!(records::read(&dirs[2]).unwrap().iter().all(|r| r.point == 1), "shard 2 has no worker at point 0");
    assert_eq!(shards[2].points.len(), 1);
    let rs = report::load(&dirs).unwrap();
    assert_eq!(rs.summary.points.iter().map(|p| p.load).collect::<Vec<_>>(), vec![2.0, 4.0]);
    let all = union(&dirs);
    check_merge_is_exact(&rs.summary, &shards, &all);
    check_slots(&all, start, 4.0, 1.0, 1);
    for d in &dirs {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[tokio::test]
async fn sharded_runs_refuse_unaligned_configs() {
    let p = plan("http://127.0.0.1:9", "  mode: rate\n  rates: [10]\n  repeats: 1\n  duration: 1s\n");
    let dir = temp_dir("refuse");
    let one = Some(Shard { index: 0, count: 2 });
    let no_id = Sharding { shard: one, run_id: None, start_at_unix_s: Some(llmprobe::util::clock::unix_now() + 5.0) };
    let e = bench::run_sharded(&p, &opts(&dir), &no_id).await.err().unwrap().to_string();
    assert!(e.contains("--run-id"), "{e}");
    let no_start = Sharding { shard: one, run_id: Some("r".into()), start_at_unix_s: None };
    let e = bench::run_sharded(&p, &opts(&dir), &no_start).await.err().unwrap().to_string();
    assert!(e.contains("--start-at"), "{e}");
    let past = Sharding { shard: one, run_id: Some("r".into()), start_at_unix_s: Some(llmprobe::util::clock::unix_now() - 30.0) };
    let e = bench::run_sharded(&p, &opts(&dir), &past).await.err().unwrap().to_string();
    assert!(e.contains("passed") && e.contains("not be aligned"), "{e}");
    let by_count = plan("http://127.0.0.1:9", "  mode: rate\n  rates: [10]\n  repeats: 1\n  requests: 20\n");
    let ok = Sharding { shard: one, run_id: Some("r".into()), start_at_unix_s: Some(llmprobe::util::clock::unix_now() + 5.0) };
    let e = bench::run_sharded(&by_count, &opts(&dir), &ok).await.err().unwrap().to_string();
    assert!(e.contains("bench.duration is required for a sharded run"), "{e}");
    // N gamma streams do not superpose to one gamma stream; N diurnal Poisson streams do.
    let gamma = plan("http://127.0.0.1:9", "  mode: rate\n  rates: [10]\n  arrival: {kind: gamma, cv: 2}\n  repeats: 1\n  duration: 1s\n");
    let e = bench::run_sharded(&gamma, &opts(&dir), &ok).await.err().unwrap().to_string();
    assert!(e.contains("cannot be split over 2 shards"), "{e}");
    let diurnal = plan("http://127.0.0.1:9", "  mode: rate\n  rates: [10]\n  arrival: {diurnal: {period: 1h, amplitude: 0.5}}\n  repeats: 1\n  duration: 1s\n");
    shard::check(&diurnal, &ok).unwrap();
    assert!(!dir.join("manifest.json").exists(), "nothing is written for a refused run");
}
