//! What saving the detector's state costs probe recording, at the detector's caps (not a test;
//! it prints figures). A recorder thread hands probes to the detector as the prober's recorder
//! does (take the lock, observe, release), one every 0.5 ms on a fixed schedule, while a saver
//! thread saves the state every `--save-every` seconds in one of three ways: not at all;
//! serialised and written under the lock (the earlier design); serialised under the lock and
//! written after it is released (the current one, `DetectSink::save`). A probe's handling time
//! runs from its scheduled time to the end of its observe, so probes queued behind a save count
//! their wait. Printed: the state's size, what serialising and writing take, and per way the
//! handling time's p50, p99, p99.9 and max.
//!
//! `cargo bench --bench detect_record -- [--seconds N] [--save-every S]` (release build; defaults
//! 30 s per way, a save every 5 s; the prober saves once a minute). Without `--bench` (as
//! `cargo test --all-targets` runs it) one second per way on a detector of a sixteenth of the
//! keys and an hour of bins: it checks the bench runs, its figures mean nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llmprobe::detect::{DetectSettings, Detector, Observation, persist};

const TARGETS: usize = 16;
const SCENARIOS: usize = 16;

fn key(i: usize) -> (String, String) {
    (format!("target-{}", i % TARGETS), format!("scenario-{}", (i / TARGETS) % SCENARIOS))
}

fn observation(i: u64) -> Observation {
    // A deterministic spread of latencies around 0.2 s, some probes missing goodput.
    let jitter = ((i.wrapping_mul(2_654_435_761) >> 7) % 1000) as f64 / 1000.0;
    Observation { ttft: Some(0.15 + 0.1 * jitter), tpot: Some(0.02 + 0.01 * jitter), e2e: Some(1.0 + jitter), good: Some(i % 97 != 0), ..Default::default() }
}

/// A detector at its caps: `max_keys` keys, full latency baselines and 12 hours of bins.
fn filled(settings: &DetectSettings, t0: f64, full: bool) -> (Detector, f64) {
    let mut det = Detector::new(settings.clone());
    let keys = settings.max_keys;
    let mut n = 0u64;
    let mut now = t0;
    // Eleven hours (the full run), a probe per key per minute (the history bins), then an hour at one per
    // key every 1.5 s (the latency baselines, 2,048 values each at most).
    let hours = if full { [(11.0, 60.0), (1.0, 1.5)] } else { [(1.0, 60.0), (0.1, 1.5)] };
    for (hours, step) in hours {
        let end = now + hours * 3600.0;
        while now < end {
            for k in 0..keys {
                let (t, s) = key(k);
                det.observe(&t, &s, observation(n), now + k as f64 * step / keys as f64);
                n += 1;
            }
            now += step;
        }
    }
    (det, now)
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[derive(Clone, Copy, PartialEq)]
enum Saving {
    None,
    UnderTheLock,
    AfterTheLock,
}

fn main() {
    let arg = |name: &str, default: u64| std::env::args().skip_while(|a| a != name).nth(1).and_then(|s| s.parse().ok()).unwrap_or(default);
    let full = std::env::args().any(|a| a == "--bench");
    let (seconds, save_every) = if full { (arg("--seconds", 30), arg("--save-every", 5)) } else { (1, 1) };
    let mut settings = DetectSettings::default();
    if !full {
        settings.max_keys /= 16;
    }
    let t0 = 1_767_225_600.0;
    let started = Instant::now();
    let (det, now) = filled(&settings, t0, full);
    println!("filled {} keys in {:.1} s", det.keys(), started.elapsed().as_secs_f64());
    let at = Instant::now();
    let snapshot = det.snapshot();
    let serialise = at.elapsed();
    let dir = std::env::temp_dir().join(format!("llmprobe-detect-bench-{}", std::process::id()));
    let at = Instant::now();
    persist::write(&dir, &snapshot).expect("state written");
    let write = at.elapsed();
    println!("state {:.1} MB; serialise {:.1} ms; write {:.1} ms", snapshot.len() as f64 / 1e6, serialise.as_secs_f64() * 1e3, write.as_secs_f64() * 1e3);

    let det = Arc::new(Mutex::new(det));
    let clock = Arc::new(Mutex::new(now));
    println!("{:<48}{:>9}{:>9}{:>11}{:>9}{:>9}", format!("saving every {save_every} s"), "p50 µs", "p99 µs", "p99.9 ms", "max ms", "probes");
    for (name, saving) in [
        ("none", Saving::None),
        ("serialised and written under the lock (before)", Saving::UnderTheLock),
        ("serialised under the lock, written after (now)", Saving::AfterTheLock),
    ] {
        let stop = Arc::new(AtomicBool::new(false));
        let saver = {
            let (det, stop, dir) = (det.clone(), stop.clone(), dir.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_secs(save_every));
                    match saving {
                        Saving::None => {}
                        Saving::UnderTheLock => persist::save(&dir, &det.lock().unwrap()).expect("saved"),
                        Saving::AfterTheLock => {
                            let bytes = det.lock().unwrap().snapshot();
                            persist::write(&dir, &bytes).expect("saved");
                        }
                    }
                }
            })
        };
        let mut times = Vec::new();
        let start = Instant::now();
        let probes = seconds * 2000;
        for i in 0..probes {
            let due = start + Duration::from_micros(500 * i);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let (t, s) = key(i as usize % settings.max_keys);
            let now = {
                let mut c = clock.lock().unwrap();
                *c += 0.0005;
                *c
            };
            det.lock().unwrap().observe(&t, &s, observation(i), now);
            times.push(due.elapsed());
        }
        stop.store(true, Ordering::Relaxed);
        saver.join().unwrap();
        times.sort();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "{name:<48}{:>9.1}{:>9.1}{:>11.1}{:>9.1}{:>9}",
            us(percentile(&times, 0.5)),
            us(percentile(&times, 0.99)),
            ms(percentile(&times, 0.999)),
            times.last().map_or(0.0, |d| ms(*d)),
            times.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
