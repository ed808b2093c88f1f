//! What the release tests compare: a scenario's long-run level, the baselines frozen at a marker
//! (latency values and quantiles, goodput's capped bad counts per bin) and the post-release probes
//! (docs/detection.md, "Release-armed tests").

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::math::{quantile_se, sum_tail};
use super::sensitivity::Sensitivity;
use super::tail::TailFrozen;
use crate::config::DetectSettings;
/// Exponentially weighted mean and variance: a scenario's long-run level and spread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Ewma {
    pub n: u64,
    pub mean: f64,
    pub var: f64,
    pub last: f64,
}

impl Ewma {
    pub(super) fn weight(&self, now: f64, tau: f64) -> f64 {
        let by_time = 1.0 - (-(now - self.last).max(0.0) / tau).exp();
        (1.0 / (self.n as f64 + 1.0)).max(by_time)
    }

    /// Adds `y`, winsorized at mean ± clip·sd once there is a spread to clip with.
    pub(super) fn push(&mut self, y: f64, now: f64, tau: f64, clip: f64) {
        let a = self.weight(now, tau);
        let y = if self.n >= 10 && self.var > 0.0 {
            let sd = self.var.sqrt();
            y.clamp(self.mean - clip * sd, self.mean + clip * sd)
        } else {
            y
        };
        if self.n == 0 {
            self.mean = y;
            self.var = 0.0;
        } else {
            let d = y - self.mean;
            self.mean += a * d;
            self.var = (1.0 - a) * (self.var + a * d * d);
        }
        self.n += 1;
        self.last = now;
    }

    /// Winsorizing bounds for a log latency: mean ± (clip sd + ln 2). Wide enough that the slow
    /// mode of a bimodal latency (cache misses) and a doubling stay inside; one 10x probe does not.
    pub(super) fn bounds(&self, clip: f64) -> (f64, f64) {
        if self.n < 10 {
            return (f64::NEG_INFINITY, f64::INFINITY);
        }
        let half = clip * self.var.sqrt() + std::f64::consts::LN_2;
        (self.mean - half, self.mean + half)
    }
}

// ---- goodput: bad probes counted per bin, capped ---------------------------------------------

/// The null model of a goodput test: the distribution of the capped bad count of one bin in the
/// baseline (outage bins left out), with a Dirichlet(½) prior so an unseen count is not impossible.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GoodFrozen {
    pub(super) pmf: Vec<f64>,
    pub(super) cap: u32,
    /// Probes and bad probes of the baseline (the bad fraction for estimates and recovery).
    pub(super) n: u64,
    pub(super) bad: u64,
}

impl GoodFrozen {
    /// From the baseline's (good, bad) bins. The cap is a little above the bad count a bin
    /// usually holds (at least 2, at most 8): failures count per bin up to it, so a burst of
    /// errors weighs a few bins' worth (bad minutes, not bad probes) while a release that fails a
    /// few percent of requests shows in most bins.
    pub(super) fn from_bins(bins: impl Iterator<Item = (u32, u32)> + Clone) -> Option<GoodFrozen> {
        let (mut n, mut bad, mut count) = (0u64, 0u64, 0u64);
        for (g, b) in bins.clone() {
            n += (g + b) as u64;
            bad += b as u64;
            count += 1;
        }
        if count == 0 {
            return None;
        }
        let per_bin = bad as f64 / count as f64;
        let cap = ((2.0 * per_bin).ceil() as u32 + 1).clamp(2, 8);
        let mut pmf = vec![0.5; cap as usize + 1];
        for (_, b) in bins {
            pmf[b.min(cap) as usize] += 1.0;
        }
        let total: f64 = pmf.iter().sum();
        pmf.iter_mut().for_each(|p| *p /= total);
        Some(GoodFrozen { pmf, cap, n, bad })
    }

    pub(super) fn p_bad(&self) -> f64 {
        (self.bad as f64 + 0.5) / (self.n as f64 + 1.0)
    }

    /// P(sum of capped bad counts over these bins ≥ observed) under the baseline, with bins that
    /// move together counted as fewer: the sum and the number of bins divided by the design
    /// effect `deff` (the null mean of the sum kept, its variance times `deff`).
    pub(super) fn tail(&self, bins: &[(u32, u32)], deff: f64) -> f64 {
        let s: u32 = bins.iter().map(|(_, b)| (*b).min(self.cap)).sum();
        let n = bins.len();
        if deff.is_nan() || deff <= 1.0 || n == 0 {
            return sum_tail(&self.pmf, n, s as usize);
        }
        let n_eff = ((n as f64 / deff).round() as usize).max(1);
        sum_tail(&self.pmf, n_eff, (f64::from(s) * n_eff as f64 / n as f64).ceil() as usize)
    }

    /// The variance of one bin's capped count under the baseline: what the test assumes of
    /// independent bins.
    pub(super) fn var(&self) -> f64 {
        let mean: f64 = self.pmf.iter().enumerate().map(|(k, p)| k as f64 * p).sum();
        self.pmf.iter().enumerate().map(|(k, p)| (k as f64 - mean).powi(2) * p).sum()
    }
}

/// Baseline of one latency signal frozen at a marker (log seconds).
#[derive(Debug, Clone)]
pub(super) struct LatencyFrozen {
    pub(super) m: usize,
    pub(super) median: f64,
    pub(super) se_median: f64,
    pub(super) p95: f64,
    pub(super) se_p95: f64,
    pub(super) lo: f64,
    pub(super) hi: f64,
    /// Mean and variance of the winsorized log values.
    pub(super) mean: f64,
    pub(super) var: f64,
    /// The exceedance test's reference (the baseline quantile), the baseline's share above it,
    /// and the share the tolerance moves above it (baseline values in (q − ln tolerance, q]).
    pub(super) q: f64,
    pub(super) above: f64,
    pub(super) above_tolerance: f64,
    /// The tail test's reference: the departures from the recent level over the history
    /// (`None`: too little history).
    pub(super) tail: Option<TailFrozen>,
    /// How much this scenario feels the shared load, learned before the marker (`sensitivity`).
    pub(super) sensitivity: Sensitivity,
    /// (count, mean of the winsorized values) of the newest part of the baseline window, one per
    /// `BASELINE_SPANS` fraction: the mean tests compare with the part that gives the narrowest
    /// contrast under the dependence (`Detector::release_look`).
    pub(super) spans: [(f64, f64); BASELINE_SPANS.len()],
}

/// The newest fractions of the latency baseline window a mean test may compare with, the whole
/// window last. Where latency drifts (the daily cycle's slope, slow load), an hour before the
/// marker is further from the probes after it than a shorter part, and its contrast varies more
/// than the shorter part's larger probe noise costs; where it does not, the whole hour is the
/// narrowest. The choice is made from the history's dependence and the probe counts alone, never
/// from the values compared.
pub(super) const BASELINE_SPANS: [f64; 5] = [0.25, 1.0 / 3.0, 0.5, 0.75, 1.0];

impl LatencyFrozen {
    /// From the baseline window's (time, log value) pairs before `at` (window `span_s` long).
    pub(super) fn from_values(tv: &[(f64, f32)], at: f64, span_s: f64, (lo, hi): (f64, f64), tail: Option<TailFrozen>, s: &DetectSettings) -> Option<Self> {
        let spans = BASELINE_SPANS.map(|frac| {
            let from = at - frac * span_s;
            let (n, sum) = tv.iter().filter(|(t, _)| *t >= from).fold((0.0, 0.0), |(n, sum), (_, y)| (n + 1.0, sum + (*y as f64).clamp(lo, hi)));
            (n, if n > 0.0 { sum / n } else { f64::NAN })
        });
        let mut v: Vec<f32> = tv.iter().map(|x| x.1).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        let (median, se_median) = quantile_se(&v, 0.5)?;
        let (p95, se_p95) = quantile_se(&v, 0.95)?;
        let (q, _) = quantile_se(&v, s.exceedance_quantile)?;
        let n = v.len() as f64;
        let c: Vec<f64> = v.iter().map(|x| (*x as f64).clamp(lo, hi)).collect();
        let mean = c.iter().sum::<f64>() / n;
        let var = (c.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0)).max(1e-6);
        let above = v.iter().filter(|x| **x as f64 > q).count() as f64 / n;
        let tol = s.latency_tolerance.ln();
        let above_tolerance = v.iter().filter(|x| (**x as f64) > q - tol && (**x as f64) <= q).count() as f64 / n;
        Some(LatencyFrozen {
            m: v.len(),
            median,
            se_median,
            p95,
            se_p95,
            lo,
            hi,
            mean,
            var,
            q,
            above,
            above_tolerance,
            tail,
            sensitivity: Sensitivity::default(),
            spans,
        })
    }
}

/// The probes of one latency signal after the grace window.
#[derive(Debug, Clone, Default)]
pub(super) struct LatencyPost {
    pub(super) n: u64,
    pub(super) sum: f64,
    pub(super) sum_sq: f64,
    pub(super) above: u64,
    /// Probes with a departure from the recent level, and those above the tail's reference.
    pub(super) tail_n: u64,
    pub(super) above_tail: u64,
    /// The newest (time, log value, departure or NaN), at most `baseline_max_samples`.
    pub(super) recent: VecDeque<(f64, f32, f32)>,
}

/// Post-release probes of a time span: count, mean of winsorized logs, share above the reference.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Part {
    pub(super) n: f64,
    pub(super) mean: f64,
    pub(super) var: f64,
    pub(super) above: f64,
    /// Probes with a departure, and the share of them above the tail's reference.
    pub(super) tail_n: f64,
    pub(super) above_tail: f64,
}

impl LatencyPost {
    /// One post-grace probe (log value and its departure from the recent level, NaN: none) into
    /// the window's sums.
    pub(super) fn add(&mut self, f: &LatencyFrozen, y: f64, r: f64) {
        let c = y.clamp(f.lo, f.hi);
        self.n += 1;
        self.sum += c;
        self.sum_sq += c * c;
        self.above += u64::from(y > f.q);
        if let Some(tail) = f.tail.filter(|_| r.is_finite()) {
            self.tail_n += 1;
            self.above_tail += u64::from(r > tail.q);
        }
    }

    /// One probe into the newest probes.
    pub(super) fn push(&mut self, t: f64, y: f64, r: f64, max_recent: usize) {
        self.recent.push_back((t, y as f32, r as f32));
        while self.recent.len() > max_recent {
            self.recent.pop_front();
        }
    }

    pub(super) fn all(&self, f: &LatencyFrozen) -> Part {
        let n = self.n as f64;
        if n < 1.0 {
            return Part::default();
        }
        let mean = self.sum / n;
        let var = if n >= 2.0 { ((self.sum_sq - n * mean * mean) / (n - 1.0)).max(0.0) } else { f.var };
        Part { n, mean, var, above: self.above as f64 / n, tail_n: self.tail_n as f64, above_tail: self.above_tail as f64 / (self.tail_n as f64).max(1.0) }
    }

    /// The stored probes with time in [from, to).
    pub(super) fn span(&self, f: &LatencyFrozen, from: f64, to: f64) -> Part {
        self.span_where(f, from, to, |_| true)
    }

    /// The stored probes with time in [from, to) that `keep` keeps (by their time).
    pub(super) fn span_where(&self, f: &LatencyFrozen, from: f64, to: f64, keep: impl Fn(f64) -> bool) -> Part {
        let (mut n, mut sum, mut sq, mut above, mut tail_n, mut above_tail) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for (t, y, r) in &self.recent {
            if *t >= from && *t < to && keep(*t) {
                let y = *y as f64;
                let c = y.clamp(f.lo, f.hi);
                n += 1.0;
                sum += c;
                sq += c * c;
                above += f64::from(u8::from(y > f.q));
                if let Some(tail) = f.tail.filter(|_| r.is_finite()) {
                    tail_n += 1.0;
                    above_tail += f64::from(u8::from(*r as f64 > tail.q));
                }
            }
        }
        if n < 1.0 {
            return Part::default();
        }
        let mean = sum / n;
        let var = if n >= 2.0 { ((sq - n * mean * mean) / (n - 1.0)).max(0.0) } else { f.var };
        Part { n, mean, var, above: above / n, tail_n, above_tail: above_tail / tail_n.max(1.0) }
    }
}

/// One bin of a scenario's goodput counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(super) struct GoodBin {
    pub bin: i64,
    pub good: u32,
    pub bad: u32,
}
