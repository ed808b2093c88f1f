//! Side samples taken while a sweep runs, aligned with the request records by timestamp: each
//! line of `<source>.jsonl` is `{"source", "run_id", "t_s", "unix_s", ...values}` on the run's
//! clock.
//!
//! `SideSource` is the hook for any sampler: the `/proc` process sampler (`--server-pid`), and
//! the telemetry sources of `src/source/` (engine `/metrics`, dcgm-exporter, NVML) from the
//! config's `sources:`, plus the engine page found for the agreement check.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::records::Epoch;
use crate::config::Target;
use crate::source::{Source, SourceKind, SourceSpec};

/// Something sampled at an interval during a sweep.
pub trait SideSource: Send {
    /// File stem and `source` field, e.g. `process`.
    fn name(&self) -> &str;
    /// What the samples hold, for the manifest.
    fn description(&self) -> String;
    /// One sample; `None` when nothing could be read this time (the line is skipped).
    fn sample(&mut self) -> BoxFuture<'_, Option<Map<String, Value>>>;
}

/// RSS and CPU of one process from `/proc/PID/{stat,status}` (Linux).
pub struct ProcessSource {
    pid: u32,
    last: Option<(f64, std::time::Instant)>,
}

/// Clock ticks per second for `/proc/PID/stat` times; 100 on every mainstream Linux build.
const CLOCK_TICKS: f64 = 100.0;

impl ProcessSource {
    pub fn new(pid: u32) -> anyhow::Result<Self> {
        anyhow::ensure!(Path::new(&format!("/proc/{pid}/stat")).exists(), "no process {pid} in /proc (--server-pid)");
        Ok(ProcessSource { pid, last: None })
    }

    fn read(&mut self) -> Option<Map<String, Value>> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let cpu_s = cpu_seconds(&stat)?;
        let now = std::time::Instant::now();
        let cpu_ratio = self.last.map(|(c, t)| (cpu_s - c) / now.duration_since(t).as_secs_f64().max(1e-9));
        self.last = Some((cpu_s, now));
        let rss = status_kb(&status, "VmRSS:").map(|kb| kb * 1024);
        let v = json!({"pid": self.pid, "rss_bytes": rss, "cpu_seconds_total": cpu_s, "cpu_cores_used": cpu_ratio, "threads": status_kb(&status, "Threads:")});
        v.as_object().cloned()
    }
}

impl SideSource for ProcessSource {
    fn name(&self) -> &str {
        "process"
    }
    fn description(&self) -> String {
        format!(
            "server process {} from /proc: rss_bytes (VmRSS), cpu_seconds_total (utime+stime at {CLOCK_TICKS} ticks/s), cpu_cores_used since the previous sample",
            self.pid
        )
    }
    fn sample(&mut self) -> BoxFuture<'_, Option<Map<String, Value>>> {
        Box::pin(async move { self.read() })
    }
}

/// utime + stime (fields 14 and 15) in seconds; the command name may contain spaces, so fields
/// are counted after its closing parenthesis.
fn cpu_seconds(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3, so utime (14) is index 11 and stime (15) index 12.
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / CLOCK_TICKS)
}

fn status_kb(status: &str, key: &str) -> Option<u64> {
    status.lines().find(|l| l.starts_with(key))?.split_whitespace().nth(1)?.parse().ok()
}

/// A telemetry source of `src/source/` read as a side sample: the fields of its `Reading`
/// (`requests_running`, `requests_waiting`, `kv_cache_usage`, `prefix_cache_hit_rate`,
/// `gpu_utilization`, `gpu_memory_used_bytes`, `gpu_power_watts`), each present when the source
/// reports it. A failed scrape skips the line.
struct TelemetrySource {
    name: String,
    description: String,
    timeout: Duration,
    inner: Box<dyn Source>,
}

impl SideSource for TelemetrySource {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> String {
        self.description.clone()
    }
    fn sample(&mut self) -> BoxFuture<'_, Option<Map<String, Value>>> {
        Box::pin(async move {
            let reading = tokio::time::timeout(self.timeout, self.inner.scrape()).await.ok()?.ok()?;
            let mut m = Map::new();
            for (name, v) in reading.values() {
                // `engine.kv_cache_usage` -> `kv_cache_usage`, `gpu.power_watts` -> `gpu_power_watts`.
                let key = name.strip_prefix("engine.").map_or_else(|| name.replace('.', "_"), str::to_owned);
                m.insert(key, json!(v));
            }
            Some(m)
        })
    }
}

/// The side sources for one target: every `sources:` entry for it (or for all targets), and the
/// agreement check's engine page as `engine` when no engine source is configured.
pub fn telemetry(specs: &[SourceSpec], target: &Target, engine_url: Option<&str>) -> anyhow::Result<Vec<Box<dyn SideSource>>> {
    let client = crate::client::plain_client()?;
    let mut out: Vec<Box<dyn SideSource>> = Vec::new();
    let mine = specs.iter().filter(|s| s.target.as_deref().is_none_or(|t| t == target.name));
    for spec in mine {
        let name = format!("source-{}", spec.name);
        let description = format!(
            "`sources:` entry {} ({}{}), read at the side-sample interval",
            spec.name,
            spec.kind.as_str(),
            spec.url.as_deref().map_or(String::new(), |u| format!(", {u}"))
        );
        out.push(Box::new(TelemetrySource { name, description, timeout: spec.timeout, inner: crate::source::build(spec, client.clone()) }));
    }
    let has_engine = specs.iter().any(|s| matches!(s.kind, SourceKind::Engine(_)) && s.target.as_deref().is_none_or(|t| t == target.name));
    if let (Some(url), false) = (engine_url, has_engine) {
        let spec = SourceSpec {
            name: "engine".into(),
            kind: SourceKind::Engine(None),
            url: Some(url.to_owned()),
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(5),
            target: None,
            filter: Default::default(),
        };
        let description = format!("engine page {url}: requests_running, requests_waiting, kv_cache_usage (0..1), prefix_cache_hit_rate");
        out.push(Box::new(TelemetrySource { name: "engine".into(), description, timeout: spec.timeout, inner: crate::source::build(&spec, client) }));
    }
    Ok(out)
}

/// Samples `source` every `every` into `dir/<name>.jsonl` until `stop`; returns the file.
pub async fn run(
    mut source: Box<dyn SideSource>,
    dir: PathBuf,
    every: Duration,
    epoch: Epoch,
    run_id: String,
    stop: CancellationToken,
) -> anyhow::Result<PathBuf> {
    let path = dir.join(format!("{}.jsonl", source.name()));
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => break,
        }
        let Some(mut values) = source.sample().await else { continue };
        let t = epoch.rel(std::time::Instant::now());
        values.insert("source".into(), json!(source.name()));
        values.insert("run_id".into(), json!(run_id));
        values.insert("t_s".into(), json!(t));
        values.insert("unix_s".into(), json!(epoch.unix_s + t));
        serde_json::to_writer(&mut file, &values)?;
        file.write_all(b"\n")?;
    }
    file.flush()?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_in_the_name() {
        let stat = "42 (my server) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 123456 789";
        assert_eq!(cpu_seconds(stat), Some(3.0));
        assert_eq!(status_kb("Name:\tx\nVmRSS:\t  2048 kB\n", "VmRSS:"), Some(2048));
    }

    #[tokio::test]
    async fn samples_this_process() {
        let mut p = ProcessSource::new(std::process::id()).unwrap();
        let v = p.sample().await.unwrap();
        assert!(v["rss_bytes"].as_u64().unwrap() > 0);
        assert!(ProcessSource::new(u32::MAX).is_err());
    }
}
