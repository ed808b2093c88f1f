//! Progress of a sweep: on a terminal a progress bar per warm-up or repeat (requests done of the
//! total, elapsed, ETA) and one self-rewriting line per finished repeat; otherwise (CI logs,
//! files) one plain log line per interval and one per finished repeat. `planned` is what
//! `bench --dry-run` prints: how long the sweep is expected to take.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::config::{Bench, BenchMode};

use super::figure::Figure;
use super::summary::RepeatSummary;

pub struct Progress {
    tty: bool,
    points: usize,
    repeats: u32,
}

impl Progress {
    /// Rewrites a line on stderr when it is a terminal and `quiet` is off.
    pub fn new(points: usize, repeats: u32, quiet: bool) -> Self {
        Progress { tty: !quiet && std::io::stderr().is_terminal(), points, repeats }
    }

    fn head(&self, point: usize, load: f64) -> String {
        format!("point {}/{} load {}", point + 1, self.points, super::knee::fmt(load))
    }

    /// A warm-up or repeat starts: a bar on a terminal, a log line every `LOG_EVERY` otherwise.
    pub fn phase(&self, point: usize, load: f64, repeat: Option<u32>, goal: PhaseGoal, quiet: bool) -> PhaseProgress {
        let done = Arc::new(AtomicU64::new(0));
        let what = match repeat {
            None => "warm-up".to_owned(),
            Some(r) => format!("repeat {}/{}", r + 1, self.repeats),
        };
        let head = format!("{} | {what}", self.head(point, load));
        let started = Instant::now();
        if self.tty {
            let bar = indicatif::ProgressBar::new(1000);
            let style = indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(head);
            let (b, d) = (bar.clone(), done.clone());
            let ticker = tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(250));
                loop {
                    tick.tick().await;
                    let (share, text) = status(d.load(Ordering::Relaxed), goal, started.elapsed());
                    b.set_position(share.map_or(0, |s| (s * 1000.0) as u64));
                    b.set_message(text);
                }
            });
            return PhaseProgress { done, bar: Some(bar), ticker: Some(ticker) };
        }
        if quiet {
            return PhaseProgress { done, bar: None, ticker: None };
        }
        let d = done.clone();
        let ticker = tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + LOG_EVERY, LOG_EVERY);
            loop {
                tick.tick().await;
                let (_, text) = status(d.load(Ordering::Relaxed), goal, started.elapsed());
                tracing::info!("{head} | {text}");
            }
        });
        PhaseProgress { done, bar: None, ticker: Some(ticker) }
    }

    /// A repeat finished.
    pub fn repeat_done(&self, s: &RepeatSummary) {
        let r = s.repeat.unwrap_or(0);
        let line = format!(
            "{} | repeat {}/{} | ok {} failed {} dropped {} | {:.2} req/s {:.0} tok/s | goodput {:.1}% | ttft p95 {} | tpot p95 {}",
            self.head(s.point, s.load),
            r + 1,
            self.repeats,
            s.success,
            s.failed,
            s.dropped,
            s.request_throughput_rps,
            s.output_token_throughput_per_s,
            s.goodput_ratio * 100.0,
            ms(s.ttft_p95_ms),
            ms(s.tpot_p95_ms),
        );
        if self.tty {
            eprint!("\r\x1b[2K{line}");
            if r + 1 == self.repeats {
                eprintln!();
            }
            let _ = std::io::stderr().flush();
        } else {
            tracing::info!("{line}");
        }
    }
}

/// How often a line is logged while a phase runs when stderr is not a terminal.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// What a running phase ends on: a request count, a duration, or neither (its point_timeout).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseGoal {
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
}

/// Share done (0..=1, `None` when unknown) and the text: `done/total requests · elapsed · ETA`.
/// A duration goal counts time (requests are shown as done so far); a request goal counts requests,
/// the ETA from the rate so far.
pub fn status(done: u64, goal: PhaseGoal, elapsed: Duration) -> (Option<f64>, String) {
    let el = elapsed.as_secs_f64();
    let (share, eta) = match (goal.duration, goal.requests) {
        (Some(d), _) if d > Duration::ZERO => {
            let share = (el / d.as_secs_f64()).min(1.0);
            (Some(share), Some((d.as_secs_f64() - el).max(0.0)))
        }
        (_, Some(n)) if n > 0 => {
            let share = (done as f64 / n as f64).min(1.0);
            let eta = (done > 0).then(|| el / done as f64 * n.saturating_sub(done) as f64);
            (Some(share), eta)
        }
        _ => (None, None),
    };
    let requests = match goal.requests {
        Some(n) if goal.duration.is_none() => format!("{done}/{n} requests"),
        _ => format!("{done} requests"),
    };
    let eta = eta.map_or("ETA -".to_owned(), |s| format!("ETA {}", clock(s)));
    (share, format!("{requests} · {} elapsed · {eta}", clock(el)))
}

/// `1h02m03s`, `4m05s`, `7s`.
pub fn clock(s: f64) -> String {
    let s = if s.is_finite() { s.max(0.0).round() as u64 } else { 0 };
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec:02}s"),
        (h, m, sec) => format!("{h}h{m:02}m{sec:02}s"),
    }
}

/// A running warm-up or repeat: count its requests with `done`; the bar or log ticker stops when
/// it is dropped.
pub struct PhaseProgress {
    pub done: Arc<AtomicU64>,
    bar: Option<indicatif::ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for PhaseProgress {
    fn drop(&mut self) {
        if let Some(t) = self.ticker.take() {
            t.abort();
        }
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// The sweep's expected and longest duration, for `bench --dry-run`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Planned {
    /// The phases whose length is known in advance: a duration, or a request count at a rate.
    pub expected: Duration,
    /// Phases whose length depends on the server (request counts in concurrency mode).
    pub unknown_phases: u32,
    /// Every phase at its point_timeout: the most the sweep can take.
    pub at_most: Duration,
}

/// How long a plan's sweep is expected to take: per point a warm-up (if any) and the repeats.
pub fn planned(b: &Bench) -> Planned {
    let mut expected = 0.0;
    let mut unknown = 0u32;
    let mut phases = 0u32;
    let timeout = b.point_timeout.as_secs_f64();
    for &load in &b.points {
        let warmup = (b.warmup_requests > 0).then_some(PhaseGoal { requests: Some(b.warmup_requests), duration: None });
        let repeat = PhaseGoal { requests: b.requests, duration: b.duration };
        for goal in warmup.into_iter().chain(std::iter::repeat_n(repeat, b.repeats as usize)) {
            phases += 1;
            match (goal.duration, goal.requests, b.mode) {
                (Some(d), ..) => expected += d.as_secs_f64().min(timeout),
                (None, Some(n), BenchMode::Rate) if load > 0.0 => expected += (n as f64 / load).min(timeout),
                _ => unknown += 1,
            }
        }
    }
    Planned { expected: Duration::from_secs_f64(expected), unknown_phases: unknown, at_most: Duration::from_secs_f64(timeout * f64::from(phases)) }
}

/// The dry-run line of a plan.
pub fn planned_line(p: &Planned) -> String {
    let unknown = match p.unknown_phases {
        0 => String::new(),
        n => format!(" plus {n} phase(s) whose length depends on the server (request counts at a concurrency)"),
    };
    let about = if p.expected.is_zero() && p.unknown_phases > 0 {
        format!("set by the server ({} phase(s) of request counts at a concurrency)", p.unknown_phases)
    } else {
        format!("about {}{unknown}", clock(p.expected.as_secs_f64()))
    };
    format!("planned duration: {about}; at most {} (every phase at its point_timeout)", clock(p.at_most.as_secs_f64()))
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}ms"))
}

/// The end-of-run console table: medians across repeats per point, then the knee.
pub fn table(s: &super::summary::SummaryFile) -> String {
    let mut out = format!(
        "{:>8} {:>9} {:>9} {:>10} {:>9} {:>10} {:>10} {:>10} {:>8}\n",
        s.mode, "ok/total", "req/s", "out tok/s", "goodput", "ttft p95", "tpot p95", "e2e p95", "tput cv"
    );
    for p in &s.points {
        let m = |f: Figure| p.median(f);
        out.push_str(&format!(
            "{:>8} {:>9} {:>9} {:>10} {:>8.1}% {:>10} {:>10} {:>10} {:>8}\n",
            super::knee::fmt(p.load),
            format!("{}/{}", p.pooled.success, p.pooled.requests),
            m(Figure::RequestThroughput).map_or("-".into(), |v| format!("{v:.2}")),
            m(Figure::OutputTokenThroughput).map_or("-".into(), |v| format!("{v:.0}")),
            m(Figure::GoodputRatio).unwrap_or(0.0) * 100.0,
            ms(m(Figure::TtftP95)),
            ms(m(Figure::TpotP95)),
            ms(m(Figure::E2eP95)),
            p.spread_of(Figure::OutputTokenThroughput).and_then(|s| s.cv).map_or("-".into(), |cv| format!("{:.1}%", cv * 100.0)),
        ));
    }
    out.push_str(&format!(
        "medians across repeats; percentiles nearest-rank\ncandidate knee: {} ({})\nsaturation: {} ({})\n",
        s.knee.candidate.map_or("none".into(), super::knee::fmt),
        s.knee.candidate_reason,
        s.knee.saturation.map_or("none".into(), super::knee::fmt),
        s.knee.saturation_reason
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_counts_requests_or_time() {
        let by_requests = PhaseGoal { requests: Some(300), duration: None };
        let (share, text) = status(100, by_requests, Duration::from_secs(20));
        assert_eq!(share, Some(100.0 / 300.0));
        // 100 requests in 20 s: the 200 left take 40 s
        assert_eq!(text, "100/300 requests · 20s elapsed · ETA 40s");
        let (_, text) = status(0, by_requests, Duration::from_secs(3));
        assert_eq!(text, "0/300 requests · 3s elapsed · ETA -");
        let by_time = PhaseGoal { requests: Some(1000), duration: Some(Duration::from_secs(120)) };
        let (share, text) = status(57, by_time, Duration::from_secs(30));
        assert_eq!(share, Some(0.25));
        assert_eq!(text, "57 requests · 30s elapsed · ETA 1m30s");
        let (share, text) = status(5, PhaseGoal { requests: None, duration: None }, Duration::from_secs(3725));
        assert_eq!(share, None);
        assert_eq!(text, "5 requests · 1h02m05s elapsed · ETA -");
        // past the goal: never above 1, never a negative ETA
        let (share, text) = status(400, by_requests, Duration::from_secs(80));
        assert_eq!(share, Some(1.0));
        assert!(text.ends_with("ETA 0s"), "{text}");
    }

    #[test]
    fn clock_formats() {
        assert_eq!(clock(0.4), "0s");
        assert_eq!(clock(59.6), "1m00s");
        assert_eq!(clock(3600.0), "1h00m00s");
        assert_eq!(clock(f64::NAN), "0s");
        assert_eq!(clock(-3.0), "0s");
    }

    fn bench(mode: BenchMode, requests: Option<u64>, duration: Option<u64>) -> Bench {
        Bench {
            mode,
            points: vec![2.0, 4.0],
            max_concurrency: 8,
            arrival: crate::config::ArrivalSpec::default(),
            warmup_requests: 4,
            repeats: 3,
            requests,
            duration: duration.map(Duration::from_secs),
            point_timeout: Duration::from_secs(90),
            mock: None,
            mock_slowdown: 1.0,
            engine_metrics_url: None,
            matrix: None,
        }
    }

    #[test]
    fn planned_duration_of_a_sweep() {
        // rate mode by duration: 2 points x 3 repeats x 60 s, plus warm-ups of 4 requests at 2/s and 4/s
        let p = planned(&bench(BenchMode::Rate, None, Some(60)));
        assert_eq!(p.expected, Duration::from_secs(360 + 2 + 1));
        assert_eq!(p.unknown_phases, 0);
        assert_eq!(p.at_most, Duration::from_secs(8 * 90));
        // rate mode by requests: 120 requests at 2/s = 60 s, at 4/s = 30 s, each three times
        let p = planned(&bench(BenchMode::Rate, Some(120), None));
        assert_eq!(p.expected, Duration::from_secs(3 * 60 + 3 * 30 + 2 + 1));
        // concurrency mode by requests: the server decides
        let p = planned(&bench(BenchMode::Concurrency, Some(120), None));
        assert_eq!(p.expected, Duration::ZERO);
        assert_eq!(p.unknown_phases, 8);
        assert_eq!(
            planned_line(&p),
            "planned duration: set by the server (8 phase(s) of request counts at a concurrency); at most 12m00s (every phase at its point_timeout)"
        );
        // a duration longer than point_timeout is cut there
        let p = planned(&bench(BenchMode::Rate, None, Some(600)));
        assert_eq!(p.expected, Duration::from_secs(6 * 90 + 3));
        assert_eq!(
            planned_line(&planned(&bench(BenchMode::Rate, None, Some(60)))),
            "planned duration: about 6m03s; at most 12m00s (every phase at its point_timeout)"
        );
    }
}
