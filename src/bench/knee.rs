//! The candidate knee of a sweep: the largest load whose goodput ratio stays at or above the
//! objective (every lighter point too), and the saturation point where more load stops buying
//! throughput but still costs latency. Both use each point's median across repeats.

use super::figure::Figure;
use super::summary::{Knee, PointSummary};

/// Throughput must grow by more than this from one point to the next to count as a gain.
const MIN_THROUGHPUT_GAIN: f64 = 0.10;
/// A TTFT p95 rise of more than this (relative) at no gain marks saturation.
const MAX_TTFT_RISE: f64 = 0.50;

/// Finds the knee of points sorted by load.
pub fn find(points: &[PointSummary], objective: f64) -> Knee {
    let mut pts: Vec<&PointSummary> = points.iter().collect();
    pts.sort_by(|a, b| a.load.total_cmp(&b.load));
    let (candidate, candidate_reason) = slo_knee(&pts, objective);
    let (saturation, saturation_reason) = saturation(&pts);
    Knee { candidate, candidate_reason, saturation, saturation_reason }
}

fn slo_knee(pts: &[&PointSummary], objective: f64) -> (Option<f64>, String) {
    let mut best = None;
    for p in pts {
        let ratio = p.median(Figure::GoodputRatio).unwrap_or(0.0);
        if ratio < objective {
            let reason = match best {
                None => format!("goodput ratio {ratio:.3} < objective {objective} already at the lightest load {}", fmt(p.load)),
                Some(b) => format!("goodput ratio falls to {ratio:.3} (< objective {objective}) at load {} ; last load meeting it: {}", fmt(p.load), fmt(b)),
            };
            return (best, reason);
        }
        best = Some(p.load);
    }
    match best {
        Some(b) => (best, format!("every point meets the goodput objective {objective}; the knee is at or beyond the heaviest load {}", fmt(b))),
        None => (None, "no points".into()),
    }
}

fn saturation(pts: &[&PointSummary]) -> (Option<f64>, String) {
    for w in pts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let (Some(ta), Some(tb)) = (a.median(Figure::OutputTokenThroughput), b.median(Figure::OutputTokenThroughput)) else { continue };
        let (Some(la), Some(lb)) = (a.median(Figure::TtftP95), b.median(Figure::TtftP95)) else { continue };
        let gain = if ta > 0.0 { tb / ta - 1.0 } else { 0.0 };
        let rise = if la > 0.0 { lb / la - 1.0 } else { 0.0 };
        if gain <= MIN_THROUGHPUT_GAIN && rise > MAX_TTFT_RISE {
            return (
                Some(a.load),
                format!(
                    "{} -> {}: output throughput {:+.0}% ({:.1} -> {:.1} tok/s) while TTFT p95 {:+.0}% ({:.1} -> {:.1} ms)",
                    fmt(a.load),
                    fmt(b.load),
                    gain * 100.0,
                    ta,
                    tb,
                    rise * 100.0,
                    la,
                    lb
                ),
            );
        }
    }
    (
        None,
        format!(
            "throughput kept growing by more than {:.0}% per step, or TTFT p95 did not rise by more than {:.0}%",
            MIN_THROUGHPUT_GAIN * 100.0,
            MAX_TTFT_RISE * 100.0
        ),
    )
}

/// A load value without needless decimals.
pub fn fmt(load: f64) -> String {
    if load.fract() == 0.0 { format!("{load:.0}") } else { format!("{load}") }
}
