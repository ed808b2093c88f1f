//! Progress of a sweep: one self-rewriting line per point on a terminal (`\r`), plain log lines
//! otherwise (CI logs, files).

use std::io::{IsTerminal, Write};

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

    /// A warm-up or repeat is starting.
    pub fn start(&self, point: usize, load: f64, repeat: Option<u32>) {
        if !self.tty {
            return;
        }
        let what = match repeat {
            None => "warm-up".to_owned(),
            Some(r) => format!("repeat {}/{}", r + 1, self.repeats),
        };
        eprint!("\r\x1b[2K{} | {what} running", self.head(point, load));
        let _ = std::io::stderr().flush();
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
