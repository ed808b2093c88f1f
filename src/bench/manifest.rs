//! The run manifest: what ran (tool version, config and its SHA-256, bench settings, seed),
//! against what (target, model, engine and version from discovery), on what machine (CPU, cores,
//! memory from /proc), and when (start and end, RFC 3339 and Unix seconds).

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Written into `manifest.json` (`shard`) by a sharded run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardManifest {
    pub index: u32,
    pub count: u32,
    /// Wall-clock start of the first phase (Unix seconds) and each phase's slot length.
    pub start_at_unix_s: f64,
    pub start_at: String,
    pub slot_s: f64,
    /// This shard's load at each point: requests/s (`rate / N`) or workers (0: point skipped).
    pub loads: Vec<f64>,
    /// In-flight cap of this shard (rate mode): `max_concurrency` split like workers.
    pub max_concurrency: Option<usize>,
    /// What the union of the shards' arrival streams is.
    pub superposition: String,
}

/// The manifest file inside a result directory.
pub const MANIFEST_FILE: &str = "manifest.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub run_id: String,
    pub tool: String,
    pub tool_version: String,
    pub tool_revision: String,
    pub config_file: String,
    pub config_sha256: String,
    pub mode: String,
    pub points: Vec<f64>,
    pub repeats: u32,
    pub warmup_requests: u64,
    pub requests_per_repeat: Option<u64>,
    pub duration_per_repeat_s: Option<f64>,
    pub point_timeout_s: f64,
    pub max_concurrency: Option<usize>,
    pub arrival: Option<String>,
    pub seed: u64,
    pub scenarios: Vec<String>,
    /// The target's SLO (global `slo:` with the target's overrides).
    pub slo: SloManifest,
    /// Scenarios whose own `slo:` makes their effective SLO differ from `slo`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub scenario_slo: std::collections::BTreeMap<String, SloManifest>,
    pub target: TargetManifest,
    /// `Some(profile)` when the built-in mock engine served the run in-process.
    pub mock_profile: Option<String>,
    /// The in-process mock's step-duration factor (`bench.mock_slowdown`), with `mock_profile`.
    #[serde(default)]
    pub mock_slowdown: Option<f64>,
    /// The engine page read around each repeat (`engine_window.jsonl`); `None` when none was.
    #[serde(default)]
    pub engine_metrics_url: Option<String>,
    pub machine: Machine,
    pub started_at: String,
    pub started_unix_s: f64,
    pub ended_at: Option<String>,
    pub ended_unix_s: Option<f64>,
    /// Side files with samples aligned by timestamp (e.g. `process.jsonl`), with what they hold.
    pub side_samples: Vec<SideSampleFile>,
    /// `bench --shard I/N`: this shard's index, the shard count, the common start and slot, its
    /// share of each point; `None` for a run on one machine.
    #[serde(default)]
    pub shard: Option<ShardManifest>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloManifest {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    pub objective: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetManifest {
    pub name: String,
    pub base_url: String,
    pub api: String,
    /// From discovery (`/v1/models`); the configured model when set.
    pub model: Option<String>,
    pub engine: Option<String>,
    pub engine_version: Option<String>,
    /// Why discovery failed, when it did (the run still goes on).
    pub discovery_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideSampleFile {
    pub file: String,
    pub source: String,
    pub description: String,
}

/// The machine the load generator ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: Option<String>,
    pub os: String,
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    /// Logical CPUs listed in /proc/cpuinfo.
    pub cpu_logical: Option<usize>,
    /// CPUs this process may use.
    pub available_parallelism: usize,
    pub memory_total_bytes: Option<u64>,
}

impl Machine {
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
        Machine {
            hostname: read("/proc/sys/kernel/hostname"),
            os: std::env::consts::OS.to_owned(),
            kernel: read("/proc/sys/kernel/osrelease"),
            cpu_model: cpu_model(&cpuinfo),
            cpu_logical: Some(cpuinfo.lines().filter(|l| l.starts_with("processor")).count()).filter(|&n| n > 0),
            available_parallelism: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            memory_total_bytes: mem_total(&meminfo),
        }
    }
}

/// `model name : ...` (x86) or `Model`/`CPU part` lines elsewhere.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "cpu model", "Processor"].iter().find_map(|key| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_owned())
        })
    })
}

/// `MemTotal:  24567890 kB` in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Unix seconds as RFC 3339 UTC with milliseconds, e.g. `2026-11-30T12:00:00.123Z`.
pub fn rfc3339(unix_s: f64) -> String {
    crate::util::rfc3339::format_unix(unix_s, 3)
}

/// Writes the manifest (pretty JSON).
pub fn write(dir: &Path, m: &Manifest) -> anyhow::Result<()> {
    super::json::write_json(&dir.join(MANIFEST_FILE), m)
}

pub fn read(dir: &Path) -> anyhow::Result<Manifest> {
    super::json::read_json(&dir.join(MANIFEST_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400.5), "2000-02-29T00:00:00.500Z");
        assert_eq!(rfc3339(1_796_083_200.0), "2026-12-01T00:00:00.000Z");
    }

    #[test]
    fn proc_parsers() {
        assert_eq!(mem_total("MemTotal:       2048 kB\nMemFree: 1 kB\n"), Some(2048 * 1024));
        assert_eq!(cpu_model("processor\t: 0\nmodel name\t: Example CPU @ 2GHz\n").as_deref(), Some("Example CPU @ 2GHz"));
        let m = Machine::detect();
        assert!(m.available_parallelism >= 1);
    }
}
