//! Sharded runs: one sweep split over N load generators (processes, pods, machines) that start
//! every point at the same wall-clock moment, and the exact merge of their result directories.
//!
//! - Rate sweeps: shard I draws its own arrival stream at `rate / N` from a seed derived from the
//!   run seed and I. N independent Poisson streams superpose exactly to one Poisson stream at
//!   `rate`. Constant arrivals are phase-shifted (shard I's first send at `(I + 1) / rate`, then
//!   every `N / rate`), so their union is the single-process ticker. Diurnal Poisson streams
//!   share one rate curve, so they superpose to the diurnal Poisson stream. Other processes do
//!   not superpose to themselves (the union of N gamma streams tends to Poisson, CV → 1), so a
//!   run split over several shards refuses them.
//! - Concurrency sweeps: shard I runs `C / N` workers, the remainder going to the first shards;
//!   a shard with no worker at a point sits that point out (it writes no records for it).
//! - Alignment: `--start-at` is the start of the first phase (warm-up or repeat) of the first
//!   point; every later phase starts `slot_s` (= `point_timeout` + [`SLOT_GUARD_S`]) after the
//!   previous one. A phase cannot outlast `point_timeout` (its requests are cancelled then), so
//!   the grid is a function of the config alone and equal in every shard.
//! - Merge: the directories of one run (same run ID, config SHA-256 and shard count, every index
//!   once) are pooled record by record; each point's load is the configured one.

use std::path::PathBuf;
use std::time::Duration;

use super::manifest::Manifest;
use super::plan::BenchPlan;
use super::summary::SummaryFile;
use crate::config::{ArrivalKind, Bench, BenchMode};

/// Time added to `point_timeout` for a phase's slot: the record write and the engine counter
/// re-reads after the last request (up to ~1 s) happen inside the slot.
const SLOT_GUARD_S: f64 = 2.0;

/// How late (seconds) a shard may reach `--start-at` and still start: beyond it the shards would
/// not be aligned, and the run is refused.
pub const START_TOLERANCE_S: f64 = 1.0;

pub use crate::config::Shard;
use crate::util::clock::unix_now;

/// Sharding and alignment options of one bench process (all empty for a plain run).
#[derive(Debug, Clone, Default)]
pub struct Sharding {
    pub shard: Option<Shard>,
    /// The run ID shared by every shard (`--run-id`); a fresh UUID when `None`.
    pub run_id: Option<String>,
    /// Wall-clock start of the first phase, Unix seconds (`--start-at`).
    pub start_at_unix_s: Option<f64>,
}

/// Wall-clock slot of one phase (warm-up or repeat): `point_timeout` + [`SLOT_GUARD_S`].
pub fn slot_s(b: &Bench) -> f64 {
    b.point_timeout.as_secs_f64() + SLOT_GUARD_S
}

/// What the merged arrival stream is, for the manifest and the docs.
pub fn superposition(b: &Bench, n: u32) -> String {
    match (b.mode, b.arrival.kind, b.arrival.diurnal) {
        (BenchMode::Concurrency, ..) => format!("closed loop: the workers of {n} shard(s) add up to the configured concurrency"),
        (BenchMode::Rate, ArrivalKind::Poisson, None) => {
            format!("{n} independent Poisson streams at rate/{n}: their superposition is exactly a Poisson stream at the configured rate")
        }
        (BenchMode::Rate, ArrivalKind::Poisson, Some(_)) => {
            format!(
                "{n} independent diurnal Poisson streams at rate/{n} on one rate curve: their superposition is exactly the diurnal Poisson stream at the configured rate"
            )
        }
        (BenchMode::Rate, ArrivalKind::Constant, None) => {
            format!("{n} phase-shifted tickers at rate/{n} (shard I first sends at (I+1)/rate): their union is the ticker at the configured rate")
        }
        (BenchMode::Rate, ..) => format!("{n} independent {} streams at rate/{n}", crate::probe::arrival::describe(&b.arrival)),
    }
}

/// Checks a sharded run's options against the plan before anything is sent.
pub fn check(plan: &BenchPlan, s: &Sharding) -> anyhow::Result<()> {
    let Some(shard) = s.shard else { return Ok(()) };
    let b = &plan.bench;
    anyhow::ensure!(
        s.run_id.as_deref().is_some_and(|id| !id.trim().is_empty()),
        "--shard {shard} needs --run-id ID (or LLMPROBE_RUN_ID): every shard of one run must be given the same run ID, so that `llmprobe report` can check it merges the shards of one run"
    );
    if shard.count > 1 {
        anyhow::ensure!(
            s.start_at_unix_s.is_some(),
            "--shard {shard} needs --start-at TIME (RFC 3339 or Unix seconds; or LLMPROBE_START_AT): the shards start every point together, from this common moment"
        );
    }
    anyhow::ensure!(
        b.duration.is_some(),
        "{}: bench.duration is required for a sharded run: repeats are aligned across shards by wall-clock slots, and a request-count stop would end each shard's repeat at a different moment (bench.requests may stay as an extra limit, split over the shards)",
        plan.config_file
    );
    let superposes = matches!((b.arrival.kind, b.arrival.diurnal), (ArrivalKind::Poisson, _) | (ArrivalKind::Constant, None));
    anyhow::ensure!(
        shard.count == 1 || b.mode == BenchMode::Concurrency || superposes,
        "{}: bench.arrival {} cannot be split over {} shards: the union of independent streams of it is not the same process (use poisson, with or without diurnal, or constant)",
        plan.config_file,
        crate::probe::arrival::describe(&b.arrival),
        shard.count
    );
    anyhow::ensure!(b.matrix.is_none(), "{}: bench.matrix cannot be sharded; run each combination as its own config", plan.config_file);
    Ok(())
}

/// This shard's load at a configured point.
pub fn load_at(b: &Bench, load: f64, shard: Option<Shard>) -> f64 {
    match (shard, b.mode) {
        (None, _) => load,
        (Some(s), BenchMode::Rate) => load / s.count as f64,
        (Some(s), BenchMode::Concurrency) => s.part(load as u64) as f64,
    }
}

/// Parses `--start-at`: Unix seconds (`1767225600`, `1767225600.5`) or RFC 3339
/// (`2026-01-01T00:00:00Z`, `2026-01-01T01:00:00.250+01:00`).
pub fn parse_start_at(text: &str) -> Result<f64, String> {
    let t = text.trim();
    if let Ok(v) = t.parse::<f64>() {
        return if v.is_finite() && v >= 0.0 { Ok(v) } else { Err(format!("{text:?}: not a valid Unix time")) };
    }
    if !t.contains(['-', ':']) {
        return Err(format!("{text:?}: expected RFC 3339 (e.g. 2026-01-01T12:00:00Z) or Unix seconds"));
    }
    crate::util::rfc3339::parse_unix(t)
}

/// Sleeps until the wall-clock instant `unix_s`; returns how late (seconds, ≥ 0) it was reached.
pub async fn wait_until_unix(unix_s: f64) -> f64 {
    let ahead = unix_s - unix_now();
    if ahead > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(ahead)).await;
    }
    (unix_now() - unix_s).max(0.0)
}

/// Checks that the manifests of a merge are the complete set of shards of one run; `Ok(false)`
/// when none is sharded (a plain merge of independent runs).
pub fn check_merge(manifests: &[Manifest], dirs: &[PathBuf]) -> anyhow::Result<bool> {
    let sharded: Vec<bool> = manifests.iter().map(|m| m.shard.is_some()).collect();
    if !sharded.iter().any(|&s| s) {
        return Ok(false);
    }
    if let Some(i) = sharded.iter().position(|&s| !s) {
        anyhow::bail!("{}: not a shard (its manifest has no shard section); shards of a run can only be merged with each other", dirs[i].display());
    }
    let first = &manifests[0];
    let count = first.shard.as_ref().map_or(0, |s| s.count);
    for (m, d) in manifests.iter().zip(dirs).skip(1) {
        anyhow::ensure!(
            m.run_id == first.run_id,
            "{}: run ID {:?} differs from {:?} ({}): only the shards of one run can be merged",
            d.display(),
            m.run_id,
            first.run_id,
            dirs[0].display()
        );
        anyhow::ensure!(
            m.config_sha256 == first.config_sha256,
            "{}: config SHA-256 {} differs from {} ({}): the shards ran different configs",
            d.display(),
            m.config_sha256,
            first.config_sha256,
            dirs[0].display()
        );
        let n = m.shard.as_ref().map_or(0, |s| s.count);
        anyhow::ensure!(n == count, "{}: shard count {n} differs from {count} ({})", d.display(), dirs[0].display());
    }
    let mut seen: Vec<Option<&PathBuf>> = vec![None; count as usize];
    for (m, d) in manifests.iter().zip(dirs) {
        let i = m.shard.as_ref().map_or(0, |s| s.index) as usize;
        anyhow::ensure!(i < seen.len(), "{}: shard index {i} is out of range for {count} shards", d.display());
        if let Some(other) = seen[i] {
            anyhow::bail!("shard {i}/{count} of run {} is given twice: {} and {}", first.run_id, other.display(), d.display());
        }
        seen[i] = Some(d);
    }
    for (m, d) in manifests.iter().zip(dirs) {
        anyhow::ensure!(
            m.ended_unix_s.is_some(),
            "{}: shard {} of run {} has not finished (its manifest has no end time)",
            d.display(),
            m.shard.as_ref().map_or(0, |s| s.index),
            m.run_id
        );
    }
    let missing: Vec<String> = seen.iter().enumerate().filter(|(_, d)| d.is_none()).map(|(i, _)| i.to_string()).collect();
    anyhow::ensure!(
        missing.is_empty(),
        "run {} has {count} shards, but shard{} {} {} missing (given: {})",
        first.run_id,
        if missing.len() == 1 { "" } else { "s" },
        missing.join(", "),
        if missing.len() == 1 { "is" } else { "are" },
        dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
    );
    Ok(true)
}

/// After a merge of shards: one run ID, and each point's load the configured one (the shards'
/// shares add up to it; the float sum of `rate / N` might not, to the last bit). The knee is
/// found again over the configured loads.
pub fn merged_summary(summary: &mut SummaryFile, configured: &[f64], objective: f64) {
    summary.run_ids.dedup();
    let rate = summary.mode == "rate";
    for p in &mut summary.points {
        let Some(&load) = configured.get(p.point) else { continue };
        p.load = load;
        for r in p.repeats.iter_mut().chain(std::iter::once(&mut p.pooled)) {
            r.load = load;
            if rate {
                r.target_rate_rps = Some(load);
            }
        }
    }
    summary.knee = super::knee::find(&summary.points, objective);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_syntax() {
        assert_eq!("1/3".parse::<Shard>(), Ok(Shard { index: 1, count: 3 }));
        assert!("3/3".parse::<Shard>().unwrap_err().contains("out of range"));
        assert!("0/0".parse::<Shard>().is_err());
        assert!("a/3".parse::<Shard>().is_err());
        assert!("2".parse::<Shard>().unwrap_err().contains("I/N"));
    }

    #[test]
    fn parts_add_up_with_the_remainder_first() {
        for total in 0..20u64 {
            for count in 1..6u32 {
                let parts: Vec<u64> = (0..count).map(|index| Shard { index, count }.part(total)).collect();
                assert_eq!(parts.iter().sum::<u64>(), total);
                assert!(parts.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1), "{total}/{count}: {parts:?}");
            }
        }
        assert_eq!((0..3).map(|index| Shard { index, count: 3 }.part(8)).collect::<Vec<_>>(), vec![3, 3, 2]);
        assert_eq!((0..4).map(|index| Shard { index, count: 4 }.part(2)).collect::<Vec<_>>(), vec![1, 1, 0, 0]);
    }

    #[test]
    fn start_at_forms() {
        assert_eq!(parse_start_at("1767225600"), Ok(1_767_225_600.0));
        assert_eq!(parse_start_at("1767225600.5"), Ok(1_767_225_600.5));
        assert_eq!(parse_start_at("2026-01-01T00:00:00Z"), Ok(1_767_225_600.0));
        assert_eq!(parse_start_at("2026-01-01T01:00:00.250+01:00"), Ok(1_767_225_600.25));
        assert_eq!(parse_start_at("2000-02-29T00:00:00.5Z"), Ok(951_782_400.5));
        assert!(parse_start_at("tomorrow").is_err());
        assert!(parse_start_at("2026-13-01T00:00:00Z").is_err());
        let e = parse_start_at("2026-02-31T00:00:00Z").expect_err("no February 31st");
        assert!(e.starts_with("\"2026-02-31T00:00:00Z\": ") && e.contains("day"), "{e}");
        assert!(parse_start_at("2026-01-01T00:00:00").is_err(), "an offset is required");
        // Round trip with the formatter the manifests use.
        let t = 1_796_083_200.125;
        assert_eq!(parse_start_at(&crate::util::rfc3339::format_unix(t, 3)), Ok(t));
    }

    /// Independent Poisson streams at rate/N superpose to rate: over a long virtual horizon the
    /// count is within a few Poisson standard deviations of rate × T (here T = 20000 s at 30/s,
    /// 600000 expected arrivals, σ = 775 = 0.13%; 2% is 15σ).
    #[test]
    fn poisson_shards_superpose_to_the_rate() {
        use crate::probe::arrival::{Arrival, Poisson, stream_seed};
        let (rate, horizon, n) = (30.0, 20_000.0, 3u32);
        let mut merged = Vec::new();
        for i in 0..n {
            let mut p = Poisson::new(rate / n as f64, stream_seed(7, &format!("point0/repeat0/shard{i}")));
            let mut t = 0.0;
            loop {
                t += p.next_gap().as_secs_f64();
                if t > horizon {
                    break;
                }
                merged.push(t);
            }
        }
        let expected = rate * horizon;
        let got = merged.len() as f64;
        assert!((got - expected).abs() < 4.0 * expected.sqrt(), "{got} arrivals, expected {expected}");
        // The merged gaps are exponential with mean 1/rate: their CV is 1.
        crate::util::stats::sort_f64(&mut merged);
        let gaps: Vec<f64> = merged.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((mean * rate - 1.0).abs() < 0.01 && (sd / mean - 1.0).abs() < 0.01, "mean {mean}, cv {}", sd / mean);
    }
}
