//! The prober's own probe log: one JSON line per finished probe, in the fields of a bench
//! record that the planner reads (`llmprobe detect simulate --replay FILE --replay-order time`),
//! so a user can plan the detector on their own traffic, in time order. Bounded: at `max_bytes`
//! the file is renamed to `FILE.1` (replacing the older one) and a new one started, so at most
//! twice `max_bytes` is on disk. A write error is logged once and the probe is not lost to the
//! other sinks.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use super::Sink;
use crate::probe::measure::Sample;
use crate::probe::outcome::Outcome;
use crate::util::clock::unix_now;

pub struct ProbeLog {
    path: PathBuf,
    max_bytes: u64,
    state: Mutex<LogFile>,
}

impl std::fmt::Debug for ProbeLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeLog").field("path", &self.path).field("max_bytes", &self.max_bytes).finish()
    }
}

struct LogFile {
    file: Option<std::fs::File>,
    written: u64,
    warned: bool,
}

#[derive(Serialize)]
struct Line<'a> {
    target: &'a str,
    scenario: &'a str,
    outcome: &'static str,
    intended_unix_s: f64,
    sent_unix_s: f64,
    ttft_ms: Option<f64>,
    tpot_ms: Option<f64>,
    e2e_ms: Option<f64>,
    output_tokens: Option<u64>,
    slo: Option<Goodput>,
}

#[derive(Serialize)]
struct Goodput {
    goodput: bool,
}

impl ProbeLog {
    /// Appends to `path` (created if missing); `max_bytes` at least 4 KiB.
    pub fn open(path: &Path, max_bytes: u64) -> std::io::Result<ProbeLog> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(ProbeLog { path: path.to_path_buf(), max_bytes: max_bytes.max(4096), state: Mutex::new(LogFile { file: Some(file), written, warned: false }) })
    }

    fn write(&self, line: &[u8]) -> std::io::Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.written + line.len() as u64 > self.max_bytes {
            s.file = None;
            let mut old = self.path.clone().into_os_string();
            old.push(".1");
            std::fs::rename(&self.path, &old)?;
            s.file = Some(std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?);
            s.written = 0;
        }
        let result = match s.file.as_mut() {
            Some(f) => f.write_all(line),
            None => Err(std::io::Error::other("probe log not open")),
        };
        match result {
            Ok(()) => {
                s.written += line.len() as u64;
                Ok(())
            }
            Err(e) => {
                if !s.warned {
                    s.warned = true;
                    tracing::warn!(path = %self.path.display(), "probe log: {e} (further errors are not logged)");
                }
                Err(e)
            }
        }
    }
}

impl Sink for ProbeLog {
    fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        let tl = &outcome.timeline;
        // Unix time of an instant of this probe: now minus how long ago it was.
        let (now, unix) = (Instant::now(), unix_now());
        let at = |t: Instant| unix - now.saturating_duration_since(t).as_secs_f64();
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let line = Line {
            target: &outcome.target,
            scenario: &outcome.scenario,
            outcome: outcome.error_class().map_or("success", |c| c.outcome_label()),
            intended_unix_s: at(tl.intended),
            sent_unix_s: at(tl.sent),
            ttft_ms: sample.filter(|s| s.streamed).map(|s| ms(s.ttft)),
            tpot_ms: sample.and_then(|s| s.tpot.map(ms)),
            e2e_ms: sample.map(|s| ms(s.e2e)),
            output_tokens: sample.map(|s| s.output_tokens),
            slo: sample.map(|s| Goodput { goodput: s.goodput }),
        };
        let Ok(mut text) = serde_json::to_vec(&line) else { return };
        text.push(b'\n');
        let _ = self.write(&text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rotates_at_its_size_and_keeps_one_older_file() {
        let dir = std::env::temp_dir().join(format!("llmprobe-probe-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("probes.jsonl");
        let log = ProbeLog::open(&path, 4096).unwrap();
        let line = vec![b'x'; 1000];
        for _ in 0..10 {
            log.write(&line).unwrap();
        }
        let len = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let older = dir.join("probes.jsonl.1");
        assert!(len(&path) <= 4096 && len(&older) <= 4096 && len(&older) > 0, "{} {}", len(&path), len(&older));
        assert_eq!((len(&path) + len(&older)) % 1000, 0, "whole lines only");
    }
}
