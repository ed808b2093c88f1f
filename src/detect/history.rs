//! A target's binned history: the time bins its probes are pooled in, their variogram with the
//! load-reading cross sums, incident bins left out, and the design effect of a block contrast
//! (docs/detection.md, "The dependence model" and "Load-aware tests").

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::covariates::{Adjust, adjusted};
use super::math::{isotonic_increasing, median_and_robust_sd};
// ---- the dependence model: a target's probes pooled in time bins --------------------------------

/// One closed time bin of a target: per latency signal the probes, the mean of their residuals
/// (winsorized log latency minus the scenario's long-run level) and the variance of that mean
/// from the spread inside the bin (`-1`: fewer than two probes); goodput counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct HistBin {
    pub(super) n: [u32; 3],
    pub(super) mean: [f32; 3],
    pub(super) nugget: [f32; 3],
    pub(super) good: u32,
    pub(super) bad: u32,
    /// Per latency signal: the bin mean was far from the bins just before it when it closed (an
    /// incident: `INCIDENT_SCALES` robust deviations). Left out of the variogram, so one bad
    /// quarter hour does not widen every test's yardstick for the 12 hours it stays in the
    /// history, and out of the continuous test's reference.
    #[serde(default)]
    pub(super) excluded: [bool; 3],
    /// Probes with a load reading and the mean of their readings.
    #[serde(default)]
    pub(super) x_n: u32,
    #[serde(default)]
    pub(super) x: f32,
    /// Probes with a prefix-cache hit-rate reading and the mean of their readings.
    #[serde(default)]
    pub(super) h_n: u32,
    #[serde(default)]
    pub(super) h: f32,
    /// Failed probes whose answer failed a behaviour check.
    #[serde(default)]
    pub(super) check_bad: u32,
    /// Bad probes that answered, with their latency: SLO misses, not errors.
    #[serde(default)]
    pub(super) slo_missed: u32,
}

impl HistBin {
    /// A bin without probes (no nugget either).
    pub(super) fn empty() -> HistBin {
        HistBin { nugget: [-1.0; 3], ..HistBin::default() }
    }

    /// Every probe of the bin failed (at least two): a total outage, left to the availability
    /// alerts and out of the goodput tests, which look for a release that fails *some* requests.
    pub(super) fn outage(&self) -> bool {
        self.good == 0 && self.bad >= 2
    }

    /// An incident flagged this bin in any latency signal.
    pub(super) fn incident(&self) -> bool {
        self.excluded.iter().any(|x| *x)
    }

    /// (good, bad) of the bin as a goodput test counts them; `errors_only`: an SLO miss (the
    /// probe answered, too slowly) counts as good, only failures as bad.
    pub(super) fn counts(&self, errors_only: bool) -> (u32, u32) {
        if errors_only { (self.good + self.slo_missed, self.bad.saturating_sub(self.slo_missed)) } else { (self.good, self.bad) }
    }

    /// Whether signal `k` of this bin counts in the variogram and in reference blocks.
    pub(super) fn usable(&self, k: usize) -> bool {
        self.n[k] > 0 && !self.excluded[k]
    }
}

/// The bin of time `t` (bins of `bin_s`); a time no clock gives is bin 0.
pub(super) fn bin_index(t: f64, bin_s: f64) -> i64 {
    let b = (t / bin_s).floor();
    if b.is_finite() { b.clamp(-9.0e15, 9.0e15) as i64 } else { 0 }
}

/// The middle of bin `bin` (bins of `bin_s`), the time a bin's mean stands for.
pub(super) fn bin_centre(bin: i64, bin_s: f64) -> f64 {
    (bin as f64 + 0.5) * bin_s
}

/// A bin mean further than this many robust standard deviations (1.4826 × MAD) from the median
/// of the unflagged bins among the `INCIDENT_REFERENCE` before it is an incident (`HistBin::excluded`). Load
/// swings of a Gaussian kind pass it about once in 3 million bins; a 2x latency incident on a
/// target whose bins vary by 0.1 in log latency is flagged.
pub(super) const INCIDENT_SCALES: f64 = 5.0;
pub(super) const INCIDENT_REFERENCE: usize = 60;
/// Fewer usable bins before it than this: nothing is flagged (a new target).
pub(super) const INCIDENT_MIN_REFERENCE: usize = 20;
/// An incident's edges: the bin before its first flagged block and each bin after a flagged one
/// are flagged too when they lie this many robust standard deviations out on the same side (after
/// it, also when nearer the incident's level than the reference's). An incident starts and ends
/// inside a bin, and its recovery takes a while: those partial bins stay under `INCIDENT_SCALES`
/// yet each pair they form weighs like a large load swing. A Gaussian bin passes it about once in
/// 80, and only next to an incident is it asked.
pub(super) const INCIDENT_EDGE_SCALES: f64 = 2.5;
/// Bins in a row whose mean is held to `INCIDENT_SCALES` of such means' spread: a 1.5x incident
/// moves a bin by under 5 robust deviations at 0.5 probes/s (a 1.3x one by about 3), and left in
/// the variogram a quarter hour of it looks like a load that lasts a quarter hour
/// (docs/detection.md, "Incidents left out", has the planner's figures).
pub(super) const INCIDENT_BLOCKS: [usize; 2] = [3, 10];
/// Blocks this long are held to the dependence model's yardstick too: in an hour of load that
/// swings for a quarter hour, the spread of ten-bin means is known from a few pieces and may
/// come out small.
const VARIOGRAM_CHECKED_BLOCK: usize = 10;

/// `HistBin::excluded`'s yardstick: the level of the bins before and robust standard deviations.
#[derive(Debug, Clone, Copy)]
pub(super) struct IncidentReference {
    median: f64,
    /// Of one bin mean.
    scale: f64,
    /// Of the mean of the bins in a row it was asked for.
    spread: f64,
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct OpenBin {
    pub(super) n: [u32; 3],
    pub(super) sum: [f64; 3],
    pub(super) sum_sq: [f64; 3],
    pub(super) good: u32,
    pub(super) bad: u32,
    pub(super) x_n: u32,
    pub(super) x_sum: f64,
    pub(super) h_n: u32,
    pub(super) h_sum: f64,
    pub(super) check_bad: u32,
    pub(super) slo_missed: u32,
}

impl OpenBin {
    pub(super) fn close(&self) -> HistBin {
        let x = if self.x_n > 0 { (self.x_sum / self.x_n as f64) as f32 } else { 0.0 };
        let h = if self.h_n > 0 { (self.h_sum / self.h_n as f64) as f32 } else { 0.0 };
        let mut b = HistBin {
            n: self.n,
            good: self.good,
            bad: self.bad,
            x_n: self.x_n,
            x,
            h_n: self.h_n,
            h,
            check_bad: self.check_bad,
            slo_missed: self.slo_missed,
            ..HistBin::empty()
        };
        for k in 0..3 {
            let n = self.n[k] as f64;
            if n >= 1.0 {
                let mean = self.sum[k] / n;
                b.mean[k] = mean as f32;
                if n >= 2.0 {
                    b.nugget[k] = (((self.sum_sq[k] - n * mean * mean) / (n - 1.0)).max(0.0) / n) as f32;
                }
            }
        }
        b
    }
}

/// Running sums of the empirical variogram γ(k) = ½ E[(x_{i+k} − x_i)²] of a target's bin means,
/// lags 1..=k_max, over the bins held; pairs are added when a bin arrives and removed when it
/// leaves, so a look costs O(k_max).
#[derive(Debug, Clone, Default)]
pub(super) struct Variogram {
    pub(super) sums: Vec<f64>,
    /// Σ |Δr|^½ per lag: the robust (Cressie–Hawkins) estimate of the raw variogram. A level
    /// shift too small to be flagged as an incident (a quarter hour of 1.3x) weighs on the
    /// squares of every pair that straddles it for the 12 hours it stays in the history; the
    /// square roots dampen it.
    pub(super) roots: Vec<f64>,
    pub(super) counts: Vec<f64>,
    pub(super) nugget_sum: f64,
    pub(super) nugget_n: f64,
    /// Over the pairs where both bins have a load reading: Σ Δr², Σ Δr·Δx, Σ Δx² and the count
    /// (Δr the difference of residual means, Δx of load readings), so the variogram of
    /// r − b·x is known for any b: γ(b) = (Σ Δr² − 2b Σ ΔrΔx + b² Σ Δx²) / 2n.
    pub(super) rr_x: Vec<f64>,
    pub(super) rx: Vec<f64>,
    pub(super) xx: Vec<f64>,
    pub(super) n_x: Vec<f64>,
}

/// Lags (bins) whose increments fit the load slope: the minutes-to-an-hour scale on which load
/// swings move latency.
pub(super) const SLOPE_LAGS: usize = 60;
/// The load adjustment is used only when it takes at least this share off the variogram at
/// `SLOPE_LAGS`: a reading that does not track the latency would only add noise.
pub(super) const MIN_VARIANCE_CUT: f64 = 0.1;

/// A lag of the variogram counts with at least this many pairs.
pub(super) const MIN_PAIRS: f64 = 8.0;

impl Variogram {
    pub(super) fn new(k_max: usize) -> Self {
        let zeros = vec![0.0; k_max + 1];
        Variogram {
            sums: zeros.clone(),
            roots: zeros.clone(),
            counts: zeros.clone(),
            nugget_sum: 0.0,
            nugget_n: 0.0,
            rr_x: zeros.clone(),
            rx: zeros.clone(),
            xx: zeros.clone(),
            n_x: zeros,
        }
    }

    /// Adds (`sign` 1) or removes (-1) bin `i`'s pairs with the bins after it up to `limit`
    /// (`forward`) or before it, and its nugget.
    pub(super) fn update(&mut self, bins: &VecDeque<HistBin>, i: usize, k: usize, forward: Option<usize>, sign: f64) {
        let b = &bins[i];
        if !b.usable(k) {
            return;
        }
        if b.nugget[k] >= 0.0 {
            self.nugget_sum += sign * b.nugget[k] as f64;
            self.nugget_n += sign;
        }
        let x = b.mean[k] as f64;
        let k_max = self.sums.len() - 1;
        for lag in 1..=k_max {
            let j = match forward {
                Some(limit) if i + lag >= limit => break,
                Some(_) => i + lag,
                None => i.wrapping_sub(lag),
            };
            let Some(o) = bins.get(j) else { break };
            if o.usable(k) {
                let d = x - o.mean[k] as f64;
                self.sums[lag] += sign * d * d;
                self.roots[lag] += sign * d.abs().sqrt();
                self.counts[lag] += sign;
                if b.x_n > 0 && o.x_n > 0 {
                    let dx = (b.x - o.x) as f64;
                    self.rr_x[lag] += sign * d * d;
                    self.rx[lag] += sign * d * dx;
                    self.xx[lag] += sign * dx * dx;
                    self.n_x[lag] += sign;
                }
            }
        }
    }

    /// The probe noise of a bin mean: the average within-bin variance of the mean.
    pub(super) fn nugget(&self) -> Option<f64> {
        (self.nugget_n >= 1.0).then(|| (self.nugget_sum / self.nugget_n).max(1e-12))
    }

    /// The slope of the residuals on the load reading, from the increments of lags
    /// 1..=`SLOPE_LAGS` (differences cancel each scenario's level and slow drift), when the
    /// reading takes at least `MIN_VARIANCE_CUT` off the variogram at that lag.
    pub(super) fn load_slope(&self) -> Option<f64> {
        let top = SLOPE_LAGS.min(self.rx.len() - 1);
        let lags = (1..=top).filter(|&k| self.n_x[k] >= MIN_PAIRS);
        let (rx, xx): (f64, f64) = lags.fold((0.0, 0.0), |(a, b), k| (a + self.rx[k], b + self.xx[k]));
        if !(xx > 0.0 && rx.is_finite()) {
            return None;
        }
        let b = rx / xx;
        let at = (1..=top).rev().find(|&k| self.n_x[k] >= MIN_PAIRS)?;
        let raw = self.rr_x[at];
        let adjusted = raw - 2.0 * b * self.rx[at] + b * b * self.xx[at];
        (adjusted <= (1.0 - MIN_VARIANCE_CUT) * raw).then_some(b)
    }

    /// γ(0..=k_max) of the residuals (`slope` `Some(b)`: of r − b·x, from the pairs with a load
    /// reading), non-decreasing (isotonic fit weighted by pair counts: a variogram of load that
    /// lasts minutes, plus slow drift, only grows with the lag); lags with too few pairs take the
    /// nearest estimated one. `None` until some lag has enough pairs.
    pub(super) fn curve(&self, slope: Option<f64>) -> Option<Vec<f64>> {
        let (sums, counts): (Vec<f64>, &[f64]) = match slope {
            None => (self.sums.clone(), &self.counts),
            Some(b) => ((0..self.rx.len()).map(|k| self.rr_x[k] - 2.0 * b * self.rx[k] + b * b * self.xx[k]).collect(), &self.n_x),
        };
        let lags: Vec<usize> = (1..sums.len()).filter(|&k| counts[k] >= MIN_PAIRS).collect();
        if lags.is_empty() {
            return None;
        }
        // Raw: Cressie–Hawkins, 2γ = (mean |Δ|^½)⁴ / (0.457 + 0.494/n), unbiased for Gaussian
        // increments; adjusted for load: the squares (the cross sums are of squares).
        let raw: Vec<f64> = lags
            .iter()
            .map(|&k| match slope {
                None => (self.roots[k] / counts[k]).max(0.0).powi(4) / (2.0 * (0.457 + 0.494 / counts[k])),
                Some(_) => (sums[k] / (2.0 * counts[k])).max(0.0),
            })
            .collect();
        let w: Vec<f64> = lags.iter().map(|&k| counts[k]).collect();
        let fit = isotonic_increasing(&raw, &w);
        let mut out = vec![0.0; sums.len()];
        let mut j = 0;
        for (k, o) in out.iter_mut().enumerate().skip(1) {
            while j + 1 < lags.len() && lags[j + 1] <= k {
                j += 1;
            }
            *o = fit[j];
        }
        Some(out)
    }
}

/// The design effect of a contrast of blocks `a` and `b` of bin values whose variogram is
/// `gamma`, against independent bins of variance `var` (at least 1).
pub(super) fn independent_design_effect(gamma: &[f64], var: f64, a: (i64, i64), b: (i64, i64)) -> f64 {
    let iid = var * (1.0 / (a.1 - a.0).max(1) as f64 + 1.0 / (b.1 - b.0).max(1) as f64);
    let contrast = contrast_var(gamma, a, b);
    if iid > 0.0 && contrast.is_finite() { (contrast / iid).max(1.0) } else { 1.0 }
}

/// Variance of mean(bins [b0, b1)) − mean(bins [a0, a1)) (a1 ≤ b0 or overlapping: any blocks)
/// from a variogram: Var(Σ wᵢxᵢ) = −Σᵢⱼ wᵢwⱼ γ(|i−j|) for weights summing to zero. Exact for any
/// process with stationary increments (load that swings for minutes, slow drift included).
pub(super) fn contrast_var(gamma: &[f64], (a0, a1): (i64, i64), (b0, b1): (i64, i64)) -> f64 {
    let (na, nb) = ((a1 - a0) as f64, (b1 - b0) as f64);
    if na < 1.0 || nb < 1.0 {
        return f64::INFINITY;
    }
    let g = |k: i64| gamma[(k as usize).min(gamma.len() - 1)];
    let within = |n: i64| (1..n).map(|k| (n - k) as f64 * g(k)).sum::<f64>();
    // Ordered pairs (i in A, j in B) at lag j − i = k.
    let mut cross = 0.0;
    let (lo, hi) = (b0 - (a1 - 1), b1 - 1 - a0);
    for k in lo..=hi {
        let count = (a1.min(b1 - k) - a0.max(b0 - k)).max(0) as f64;
        if count > 0.0 {
            cross += count * g(k.abs());
        }
    }
    (2.0 * cross / (na * nb) - 2.0 * within(a1 - a0) / (na * na) - 2.0 * within(b1 - b0) / (nb * nb)).max(0.0)
}

/// Var(Σ wᵢxᵢ) = −Σᵢ≠ⱼ wᵢwⱼ γ(|i−j|) for weights on bins (summing to zero), the general form of
/// `contrast_var`. Weights on one bin index are merged first. O(n²) in the bins weighted.
pub(super) fn weights_var(gamma: &[f64], w: &[(i64, f64)]) -> f64 {
    let mut merged: Vec<(i64, f64)> = w.to_vec();
    merged.sort_by_key(|x| x.0);
    merged.dedup_by(|b, a| {
        let same = a.0 == b.0;
        if same {
            a.1 += b.1;
        }
        same
    });
    let g = |k: i64| gamma[(k as usize).min(gamma.len() - 1)];
    let mut v = 0.0;
    for (i, a) in merged.iter().enumerate() {
        for b in &merged[i + 1..] {
            v -= 2.0 * a.1 * b.1 * g(b.0 - a.0);
        }
    }
    v.max(0.0)
}

/// γ(0..=k_max) of a short series with gaps (½ mean squared difference at each lag, fitted
/// non-decreasing, lags with fewer than `MIN_PAIRS` pairs take the nearest estimated one).
fn residual_variogram(x: &[Option<f64>], k_max: usize) -> Option<Vec<f64>> {
    grouped_variogram(x, k_max, |lo| lo)
}

/// γ(0..=k_max) of bin counts with gaps, pooled over lag groups of doubling width (1, 2–3, 4–7,
/// 8–15, …). Counts of rare failures are noisy lag by lag; a non-decreasing fit of single lags
/// rides their noise upward at long lags (a goodput release test lost a fifth of its power within
/// the hour on independent failures that way), the groups average it out first.
fn count_variogram(x: &[Option<f64>], k_max: usize) -> Option<Vec<f64>> {
    grouped_variogram(x, k_max, |lo| 2 * lo - 1)
}

/// ½ mean squared difference of the pairs of `x` in each group of lags [lo, `last(lo)`], fitted
/// non-decreasing over the groups; a group with fewer than `MIN_PAIRS` pairs is skipped, and each
/// lag up to `k_max` takes the group that starts nearest below it.
fn grouped_variogram(x: &[Option<f64>], k_max: usize, last: impl Fn(usize) -> usize) -> Option<Vec<f64>> {
    let top = k_max.min(x.len().saturating_sub(1));
    let (mut starts, mut raw, mut w) = (Vec::new(), Vec::new(), Vec::new());
    let mut lo = 1;
    while lo <= top {
        let hi = last(lo).clamp(lo, top);
        let (mut sum, mut n) = (0.0, 0.0);
        for k in lo..=hi {
            for i in 0..x.len() - k {
                if let (Some(a), Some(b)) = (x[i], x[i + k]) {
                    sum += (b - a) * (b - a);
                    n += 1.0;
                }
            }
        }
        if n >= MIN_PAIRS {
            starts.push(lo);
            raw.push(sum / (2.0 * n));
            w.push(n);
        }
        lo = hi + 1;
    }
    if starts.is_empty() {
        return None;
    }
    let fit = isotonic_increasing(&raw, &w);
    let mut out = vec![0.0; k_max + 1];
    let mut j = 0;
    for (k, o) in out.iter_mut().enumerate().skip(1) {
        while j + 1 < starts.len() && starts[j + 1] <= k {
            j += 1;
        }
        *o = fit[j];
    }
    Some(out)
}

/// Bins of the level around a bin and of the current level (an hour at 1-minute bins).
const LEVEL_BINS: usize = 60;
/// Share of the history's bins, those nearest the current level, that give the local swing.
const LOCAL_SHARE: f64 = 0.4;
/// Lags of the local swing's variogram (an hour at 1-minute bins: the span of a release's
/// baseline; the daily cycle adds about a tenth at the longest).
const LOCAL_LAGS: usize = 60;
/// Pairs the local swing needs.
const MIN_LOCAL_PAIRS: f64 = 2000.0;
/// The largest widening of the load part (the load's sd twice the history's average).
const MAX_LOCAL_SCALE: f64 = 4.0;

/// Bins the count coupling needs (two hours at 1-minute bins).
const COUPLING_MIN_BINS: f64 = 120.0;

/// Bins before a marker a local trend is fitted on (two hours at 1-minute bins).
pub(super) const TREND_BINS: i64 = 120;
/// A trend is taken when its slope is this many standard errors above zero (the dependence in the
/// standard error): a clear rise, not the wander of load swings. Only a rise: taking one out can
/// only lower a post-release excess, so it never raises an alarm; a falling slope carried forward
/// would, when load that fell swings back (in the planner under load sd 0.1 with a 15-minute time
/// constant, taking both directions raised the false alarms from 0.87 to 1.77 per 30 days).
pub(super) const TREND_GATE_Z: f64 = 2.0;
/// The trend is carried forward at most this far past the marker (s): the hour of a release
/// window. A ramp that ends sooner is over-corrected (the test loses power, it does not alarm);
/// carried for only half the window, a ramp still rising in the second half alarmed in 42% of
/// releases inside a x1.5 two-hour ramp in the planner.
pub(super) const TREND_HORIZON_S: f64 = 3600.0;

/// A local linear trend of a signal's bin means before a marker (a morning traffic ramp, the
/// steep part of the daily cycle), frozen at the marker: values are compared after taking out
/// `slope` × (time − `at`), carried at most `TREND_HORIZON_S` past it. `weights`: the slope
/// estimator's weight per bin, for the exact variance of a contrast that subtracts it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Trend {
    /// Per second of log latency.
    pub(super) slope: f64,
    pub(super) at: f64,
    pub(super) weights: Vec<(i64, f64)>,
    /// The variogram of the window's residuals about the line (lags beyond it: its last value):
    /// the dependence of what is left once the trend is out.
    pub(super) gamma: Vec<f64>,
}

impl Trend {
    /// Log latency `y` at `time` with the trend taken out (relative to the marker).
    pub(super) fn detrend(&self, y: f64, time: f64) -> f64 {
        y - self.slope * (time - self.at).min(TREND_HORIZON_S)
    }

    /// The trend's shift (in bins of the slope's unit) between two blocks: the mean of the post
    /// block's (clamped) offsets from the marker minus the base block's.
    pub(super) fn shift_bins(&self, base: (i64, i64), post: (i64, i64), at_bin: f64, bin_s: f64) -> f64 {
        let h = TREND_HORIZON_S / bin_s;
        let mean = |(a, b): (i64, i64), clamp: bool| {
            let n = (b - a).max(1) as f64;
            (a..b).map(|i| if clamp { (i as f64 + 0.5 - at_bin).min(h) } else { i as f64 + 0.5 - at_bin }).sum::<f64>() / n
        };
        mean(post, true) - mean(base, false)
    }
}

/// The dependence of one signal's bin means: variogram and probe noise of a bin mean.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Dependence {
    pub(super) gamma: Vec<f64>,
    pub(super) nugget: f64,
    /// How much the load part was widened for busy hours' wider swings (1: not widened).
    pub(super) swing: f64,
}

impl Dependence {
    /// The load's own variance (the variogram's sill above the probe noise of a bin mean): what
    /// two probes sent at the same moment share.
    pub(super) fn load_var(&self) -> f64 {
        (self.gamma.last().copied().unwrap_or(0.0) - self.nugget).max(0.0)
    }

    /// The design effect of a before/after comparison of blocks `a` and `b`: the variance of the
    /// difference of their means under this dependence, over what independent probes would give
    /// (at least 1).
    pub(super) fn design_effect(&self, a: (i64, i64), b: (i64, i64)) -> f64 {
        self.contrast(a, b, None, 1.0, 0.0).0
    }

    /// A before/after contrast of blocks `a` and `b` (taking out `trend` when given): its design
    /// effect, and the variance it has beyond probe noise — the shared load's part, which every
    /// scenario of the target feels alike (a scenario's own test adds it to its own probe
    /// variance instead of scaling by the pooled design effect: its probe noise is larger).
    /// `extra`: shared variance from elsewhere (the daily shape's error).
    pub(super) fn contrast(&self, a: (i64, i64), b: (i64, i64), trend: Option<&Trend>, bin_s: f64, extra: f64) -> (f64, f64) {
        let iid = self.nugget * (1.0 / (a.1 - a.0).max(1) as f64 + 1.0 / (b.1 - b.0).max(1) as f64);
        let var = extra
            + match trend {
                Some(tr) => self.detrended_var(a, b, tr, bin_s),
                None => contrast_var(&self.gamma, a, b),
            };
        ((var / iid).max(1.0), (var - iid).max(0.0))
    }

    /// The variance of the contrast that also takes out a frozen trend (its slope estimated from
    /// the bins before the marker, so its error adds to the contrast's), under the dependence
    /// left once the trend is out (the trend window's residual variogram: the history's counts
    /// the trend itself as variance).
    fn detrended_var(&self, a: (i64, i64), b: (i64, i64), trend: &Trend, bin_s: f64) -> f64 {
        let (na, nb) = ((a.1 - a.0).max(1) as f64, (b.1 - b.0).max(1) as f64);
        let shift = trend.shift_bins(a, b, trend.at / bin_s, bin_s);
        let mut w: Vec<(i64, f64)> = (a.0..a.1).map(|i| (i, -1.0 / na)).chain((b.0..b.1).map(|i| (i, 1.0 / nb))).collect();
        w.extend(trend.weights.iter().map(|(i, c)| (*i, -shift * c)));
        weights_var(&trend.gamma, &w)
    }
}

/// A target's binned history: closed bins (dense, one per bin index), the open bin, and the
/// variogram of each latency signal's bin means. The variogram leaves out the newest `delay`
/// bins (the continuous test's recent window), so a change being tested does not inflate the
/// variance it is tested against.
#[derive(Debug, Clone)]
pub(super) struct BinnedHistory {
    /// Bin index of `bins[0]`.
    pub(super) first: i64,
    pub(super) bins: VecDeque<HistBin>,
    pub(super) open: Option<(i64, OpenBin)>,
    pub(super) vario: [Variogram; 3],
    pub(super) k_max: usize,
    pub(super) cap: usize,
    pub(super) delay: usize,
}

impl BinnedHistory {
    pub(super) fn new(k_max: usize, cap: usize, delay: usize) -> Self {
        BinnedHistory { first: 0, bins: VecDeque::new(), open: None, vario: std::array::from_fn(|_| Variogram::new(k_max)), k_max, cap, delay }
    }

    /// The dependence of signal `k`'s residuals, or of the load-adjusted residuals r − b·x: the
    /// history's variogram, its load part (above the nugget) widened where the hours at the
    /// level latency is at now swing more than the history's average (`local_scale`).
    pub(super) fn dependence(&self, k: usize, slope: Option<f64>) -> Option<Dependence> {
        let v = &self.vario[k];
        let (mut gamma, nugget) = (v.curve(slope)?, v.nugget()?);
        let scale = self.local_scale(k, slope, nugget);
        if scale > 1.0 {
            // Only the part the local swing was measured on: up to its level at `LOCAL_LAGS`
            // (what grows beyond, the daily cycle and slow drift, is not the load's swing).
            let top = gamma.get(LOCAL_LAGS).copied().unwrap_or(nugget);
            gamma.iter_mut().skip(1).for_each(|g| *g += (scale - 1.0) * (g.min(top) - nugget).max(0.0));
        }
        Some(Dependence { gamma, nugget, swing: scale })
    }

    /// How much more the load swings at the level latency is at now than over the whole
    /// history (at least 1, at most `MAX_LOCAL_SCALE`). Busy hours swing more than quiet ones
    /// (a queue's latency varies more the fuller it runs), and a variogram averaged over 12
    /// hours understates the busy hours' swings by as much as it overstates the quiet ones'
    /// (in the planner, a load sd 50% larger at the busiest hour than on average tripled the
    /// false alarms under load sd 0.1). The bins whose level (the mean of the hour around them)
    /// is nearest the last hour's, `LOCAL_SHARE` of them, give the variogram's load part at
    /// lags up to `LOCAL_LAGS` (short enough that the daily cycle adds little), and the ratio
    /// to all bins' is the scale, where the history shows swings at those lags at all (their
    /// load part over two standard errors). Never below 1: a quiet hour's estimate is too
    /// uncertain to narrow the yardstick on.
    fn local_scale(&self, k: usize, slope: Option<f64>, nugget: f64) -> f64 {
        let end = self.end() - self.first;
        let in_vario = (end - self.delay as i64).max(0) as usize;
        let value = |h: &HistBin| -> Option<f64> {
            if !h.usable(k) {
                return None;
            }
            match slope {
                None => Some(h.mean[k] as f64),
                Some(b) => (h.x_n > 0).then(|| h.mean[k] as f64 - b * h.x as f64),
            }
        };
        let x: Vec<Option<f64>> = self.bins.iter().map(value).collect();
        // Prefix sums of the values for the hour-long levels.
        let mut sum = vec![(0.0, 0usize); x.len() + 1];
        for (i, v) in x.iter().enumerate() {
            sum[i + 1] = (sum[i].0 + v.unwrap_or(0.0), sum[i].1 + usize::from(v.is_some()));
        }
        let mean = |a: usize, b: usize| {
            let (s, n) = (sum[b].0 - sum[a].0, sum[b].1 - sum[a].1);
            (n >= LEVEL_BINS / 4).then(|| s / n as f64)
        };
        let Some(now) = mean(x.len().saturating_sub(LEVEL_BINS), x.len()) else { return 1.0 };
        let half = LEVEL_BINS / 2;
        let far: Vec<Option<f64>> = (0..in_vario).map(|i| mean(i.saturating_sub(half), (i + half + 1).min(x.len())).map(|l| (l - now).abs())).collect();
        let mut d: Vec<f64> = far.iter().flatten().copied().collect();
        if d.len() < 4 * LEVEL_BINS {
            return 1.0;
        }
        let cut = (d.len() as f64 * LOCAL_SHARE) as usize;
        let (_, limit, _) = d.select_nth_unstable_by(cut, f64::total_cmp);
        let limit = *limit;
        let near: Vec<bool> = far.iter().map(|f| f.is_some_and(|f| f <= limit)).collect();
        // NaN for a bin without a value: its pairs drop out below (a flat array keeps the
        // 60 × 720 pairs of every look cheap).
        let xs: Vec<f64> = x[..in_vario].iter().map(|v| v.unwrap_or(f64::NAN)).collect();
        // Per block of `LOCAL_LAGS` starting bins, the pairs' excess over the nugget, of all pairs
        // and of the local ones. The blocks' scatter is each mean's error (pairs that overlap in
        // time are far from independent).
        let nb = in_vario / LOCAL_LAGS + 1;
        let mut blocks = vec![[(0.0, 0.0); 2]; nb];
        for lag in 1..=LOCAL_LAGS {
            for i in 0..in_vario.saturating_sub(lag) {
                let d = xs[i + lag] - xs[i];
                if d.is_nan() {
                    continue;
                }
                let e = d.powi(2) / 2.0 - nugget;
                let block = &mut blocks[i / LOCAL_LAGS];
                block[0] = (block[0].0 + e, block[0].1 + 1.0);
                if near[i] && near[i + lag] {
                    block[1] = (block[1].0 + e, block[1].1 + 1.0);
                }
            }
        }
        // (mean, standard error) over the blocks of kind `j`.
        let mean_se = |j: usize| -> Option<(f64, f64)> {
            let used: Vec<(f64, f64)> = blocks.iter().map(|b| b[j]).filter(|b| b.1 > 0.0).collect();
            let n: f64 = used.iter().map(|b| b.1).sum();
            if n < MIN_LOCAL_PAIRS || used.len() < 4 {
                return None;
            }
            let m = used.iter().map(|b| b.0).sum::<f64>() / n;
            let k = used.len() as f64;
            Some((m, (used.iter().map(|b| (b.1 / n).powi(2) * (b.0 / b.1 - m).powi(2)).sum::<f64>() * k / (k - 1.0)).sqrt()))
        };
        let (Some(all), Some((local, local_se))) = (mean_se(0), mean_se(1)) else { return 1.0 };
        // Without clear swings at these lags (independent probes, a daily cycle alone) the
        // ratio is one of noise.
        if all.0 <= 2.0 * all.1 {
            return 1.0;
        }
        // The local swing one standard error up: estimated from a few hours, it scatters by about
        // a third, and a yardstick taken too narrow costs far more false alarms in the tail the
        // tests look at than one taken as wide costs power.
        let r = (local + local_se) / all.0;
        if r.is_finite() { r.clamp(1.0, MAX_LOCAL_SCALE) } else { 1.0 }
    }

    /// The dependence of the bins' capped bad counts before bin `to` (bins without probes and
    /// outage bins left out). A goodput test that takes them as independent draws is too sure of
    /// itself wherever failures come and go together: SLO misses rise and fall with load (in the
    /// planner, a TTFT SLO under load sd 0.1 with a 15-minute time constant raised 22 false
    /// alarms a month that way), and a daily cycle moves them too.
    /// `errors_only`: of the failures alone (`HistBin::counts`).
    pub(super) fn count_dependence(&self, cap: u32, to: i64, errors_only: bool) -> Option<Vec<f64>> {
        let x: Vec<Option<f64>> =
            (self.first..to).map(|b| self.get(b).filter(|h| h.good + h.bad > 0 && !h.outage()).map(|h| f64::from(h.counts(errors_only).1.min(cap)))).collect();
        count_variogram(&x, self.k_max)
    }

    /// How the bins' capped SLO-miss counts move with signal `k`'s bin mean (misses per bin per
    /// unit of log latency) over the bins before `to`: a miss is a latency above a threshold, so
    /// the load that moves latency moves the misses (failures are left out: they only add
    /// noise). An instrumental-variable slope: the count and
    /// the bin mean against the mean of the two neighbouring bins, which shares the load but
    /// none of the bin's own probes (a slow probe raises its bin's mean and may miss the SLO; a
    /// plain regression would count that as load). `None` where the neighbours do not show the
    /// load clearly (their covariance with the bin under three standard errors).
    pub(super) fn count_coupling(&self, k: usize, cap: u32, to: i64) -> Option<f64> {
        let level = |b: i64| self.get(b).filter(|h| h.usable(k)).map(|h| h.mean[k] as f64);
        let count = |b: i64| self.get(b).filter(|h| h.good + h.bad > 0 && !h.outage()).map(|h| f64::from(h.slo_missed.min(cap)));
        let rows: Vec<(f64, f64, f64)> =
            (self.first + 1..to.min(self.end()) - 1).filter_map(|b| Some((count(b)?, level(b)?, (level(b - 1)? + level(b + 1)?) / 2.0))).collect();
        let n = rows.len() as f64;
        if n < COUPLING_MIN_BINS {
            return None;
        }
        let mean = |f: fn(&(f64, f64, f64)) -> f64| rows.iter().map(f).sum::<f64>() / n;
        let (my, mx, mz) = (mean(|r| r.0), mean(|r| r.1), mean(|r| r.2));
        let cov = |f: fn(&(f64, f64, f64)) -> f64, m: f64| rows.iter().map(|r| (f(r) - m) * (r.2 - mz)).sum::<f64>() / (n - 1.0);
        let (cyz, cxz) = (cov(|r| r.0, my), cov(|r| r.1, mx));
        let var = |f: fn(&(f64, f64, f64)) -> f64, m: f64| rows.iter().map(|r| (f(r) - m).powi(2)).sum::<f64>() / (n - 1.0);
        let se_xz = (var(|r| r.1, mx) * var(|r| r.2, mz) / n).sqrt();
        (cxz > 3.0 * se_xz).then(|| (cyz / cxz).max(0.0))
    }

    pub(super) fn get(&self, bin: i64) -> Option<&HistBin> {
        let i = bin - self.first;
        if i < 0 { None } else { self.bins.get(i as usize) }
    }

    /// Index one past the last closed bin.
    pub(super) fn end(&self) -> i64 {
        self.first + self.bins.len() as i64
    }

    pub(super) fn push(&mut self, bin: i64, b: HistBin) {
        if self.bins.is_empty() || bin - self.end() > self.cap as i64 {
            self.bins.clear();
            self.vario = std::array::from_fn(|_| Variogram::new(self.k_max));
            self.first = bin;
        }
        while self.end() < bin {
            self.push_back(HistBin::empty());
        }
        if bin == self.end() {
            self.push_back(b);
        }
        while self.bins.len() > self.cap {
            let in_vario = self.bins.len().saturating_sub(self.delay);
            if in_vario > 0 {
                for (k, v) in self.vario.iter_mut().enumerate() {
                    v.update(&self.bins, 0, k, Some(in_vario), -1.0);
                }
            }
            self.bins.pop_front();
            self.first += 1;
        }
    }

    pub(super) fn push_back(&mut self, mut b: HistBin) {
        for k in 0..3 {
            if b.n[k] == 0 {
                continue;
            }
            let Some(r) = self.incident_reference(k, 0, 1) else { continue };
            let dev = |x: f32| (x as f64 - r.median) / r.scale;
            let d = dev(b.mean[k]);
            let prev = self.bins.back().filter(|p| p.n[k] > 0).map(|p| (p.excluded[k], dev(p.mean[k])));
            if let Some((true, p)) = prev {
                // The incident goes on, or ends inside this bin: out on its side, beyond
                // `INCIDENT_EDGE_SCALES` or nearer the incident's level than the reference's.
                let run: Vec<f64> =
                    self.bins.iter().rev().take_while(|p| p.n[k] > 0 && p.excluded[k]).take(INCIDENT_REFERENCE).map(|p| dev(p.mean[k])).collect();
                let level = run.iter().sum::<f64>() / run.len().max(1) as f64;
                b.excluded[k] = d.signum() == p.signum() && d.abs() > INCIDENT_EDGE_SCALES.min(level.abs() / 2.0);
                continue;
            }
            // One bin far out, or the last few bins out together on one side (a smaller shift
            // that lasts: their mean against the spread of such means).
            let mut block = 0;
            for &size in &INCIDENT_BLOCKS {
                let members: Vec<f64> = self.bins.iter().rev().take(size - 1).filter(|p| p.usable(k)).map(|p| p.mean[k] as f64).collect();
                if members.len() + 1 != size {
                    continue;
                }
                // Against the bins before the block, so its own bins never widen the yardstick.
                let Some(rb) = self.incident_reference(k, size - 1, size) else { continue };
                let x = b.mean[k] as f64;
                if members.iter().any(|m| (m - rb.median).signum() != (x - rb.median).signum()) {
                    continue;
                }
                let far = |scale: f64| ((members.iter().sum::<f64>() + x) / size as f64 - rb.median).abs() > INCIDENT_SCALES * scale;
                if far(rb.spread) && (size < VARIOGRAM_CHECKED_BLOCK || far(self.block_contrast_sd(k, size))) {
                    block = size;
                    break;
                }
            }
            b.excluded[k] = d.abs() > INCIDENT_SCALES || block > 0;
            if !b.excluded[k] {
                continue;
            }
            // It began in the bins before, those the variogram has not taken yet (`delay`): the
            // block's, and back from it over the bins out on the same side (the one it began in).
            let newest_out = self.bins.len().saturating_sub(self.delay);
            for (j, i) in (newest_out..self.bins.len()).rev().take(block.max(1)).enumerate() {
                let p = &mut self.bins[i];
                let e = dev(p.mean[k]);
                if p.n[k] == 0 || p.excluded[k] || e.signum() != d.signum() || (j + 1 >= block && e.abs() <= INCIDENT_EDGE_SCALES) {
                    break;
                }
                p.excluded[k] = true;
            }
        }
        self.bins.push_back(b);
        if let Some(i) = self.bins.len().checked_sub(1 + self.delay) {
            for (k, v) in self.vario.iter_mut().enumerate() {
                v.update(&self.bins, i, k, None, 1.0);
            }
        }
    }

    pub(super) fn rebuild(&mut self) {
        self.vario = std::array::from_fn(|_| Variogram::new(self.k_max));
        for i in 0..self.bins.len().saturating_sub(self.delay) {
            for (k, v) in self.vario.iter_mut().enumerate() {
                v.update(&self.bins, i, k, None, 1.0);
            }
        }
    }

    /// The standard deviation the variogram gives the mean of `size` bins against the
    /// `INCIDENT_REFERENCE` bins before them (0 before it can).
    fn block_contrast_sd(&self, k: usize, size: usize) -> f64 {
        let (r, b) = (INCIDENT_REFERENCE as i64, size as i64);
        self.vario[k].curve(None).map_or(0.0, |g| contrast_var(&g, (0, r), (r, r + b)).sqrt())
    }

    /// What the mean of the newest `size` bins of signal `k` (a new bin's: 1) is judged an
    /// incident against (`INCIDENT_SCALES`): the median of the unflagged bins among the
    /// `INCIDENT_REFERENCE` bins before the last `skip`, and the robust standard deviation of
    /// their means over `size` bins in a row (so an incident's own bins never widen the yardstick
    /// that flags them). `None` when half of those bins are flagged already — the change has
    /// lasted: it is a step, not an incident, and from then on the bins after it are the
    /// reference — or too few are left.
    pub(super) fn incident_reference(&self, k: usize, skip: usize, size: usize) -> Option<IncidentReference> {
        let window: Vec<&HistBin> = self.bins.iter().rev().skip(skip).filter(|b| b.n[k] > 0).take(INCIDENT_REFERENCE).collect();
        if 2 * window.iter().filter(|b| b.excluded[k]).count() >= INCIDENT_REFERENCE {
            return None;
        }
        let recent: Vec<f64> = window.iter().filter(|b| !b.excluded[k]).map(|b| b.mean[k] as f64).collect();
        if recent.len() < INCIDENT_MIN_REFERENCE {
            return None;
        }
        let means = recent.windows(size.max(1)).map(|w| w.iter().sum::<f64>() / w.len() as f64).collect();
        let (median, scale) = median_and_robust_sd(recent);
        // Means of independent bins vary by 1/√size of a bin's spread at least.
        let spread = median_and_robust_sd(means).1.max(scale / (size.max(1) as f64).sqrt());
        Some(IncidentReference { median, scale, spread })
    }

    /// The local rising trend of signal `k` over the `TREND_BINS` before bin `to` (bin means
    /// adjusted for the load reading with `adjust`; incident bins left out), when its slope is at
    /// least `TREND_GATE_Z` standard errors above zero. Needs half the bins.
    pub(super) fn trend(&self, k: usize, to: i64, adjust: Option<Adjust>, bin_s: f64) -> Option<Trend> {
        let pts: Vec<(i64, f64)> = (to - TREND_BINS..to)
            .filter_map(|i| {
                let b = self.get(i).filter(|b| b.usable(k))?;
                let x = if b.x_n > 0 { b.x } else { f32::NAN };
                Some((i, adjusted(b.mean[k] as f64, x, adjust)))
            })
            .collect();
        if (pts.len() as i64) < TREND_BINS / 2 {
            return None;
        }
        let n = pts.len() as f64;
        let t_mean = pts.iter().map(|p| p.0 as f64).sum::<f64>() / n;
        let sxx: f64 = pts.iter().map(|p| (p.0 as f64 - t_mean).powi(2)).sum();
        let weights: Vec<(i64, f64)> = pts.iter().map(|p| (p.0, (p.0 as f64 - t_mean) / sxx)).collect();
        let slope: f64 = weights.iter().zip(&pts).map(|(w, p)| w.1 * p.1).sum();
        // The slope's standard error from the variogram of the residuals about the fitted line in
        // this window: the history's variogram counts a trend as variance (a line adds ½b²k² at
        // lag k), so against it no trend could ever stand out.
        let y_mean = pts.iter().map(|p| p.1).sum::<f64>() / n;
        let resid: Vec<Option<f64>> = {
            let mut r = vec![None; TREND_BINS as usize];
            for p in &pts {
                r[(p.0 - (to - TREND_BINS)) as usize] = Some(p.1 - y_mean - slope * (p.0 as f64 - t_mean));
            }
            r
        };
        let gamma = residual_variogram(&resid, (TREND_BINS / 2) as usize)?;
        let se = weights_var(&gamma, &weights).sqrt();
        (slope.is_finite() && se > 0.0 && slope >= TREND_GATE_Z * se).then(|| Trend { slope: slope / bin_s, at: to as f64 * bin_s, weights, gamma })
    }

    /// How signal `k`'s bin means move with the load reading's level over the `span` bins before
    /// bin `to` (usable bins with a reading; at least half the window): the least-squares
    /// slope of the means on the readings and its standard error, from the variogram of the
    /// residuals about the fitted line (neighbouring bins' residuals are not independent). A
    /// ramp's rise is a change of level, which the history's increments see only at lags longer
    /// than the load slope's; the level relation over the ramp sees it. `season` gives a bin's
    /// daily shapes (latency's, the reading's), added back: the usual day's cycle moves both,
    /// and is most of what the relation is learned from where load does not swing.
    pub(super) fn reading_level_slope(&self, k: usize, span: i64, to: i64, season: impl Fn(i64) -> (f64, f64)) -> Option<(f64, f64)> {
        let span = span.max(2);
        let pts: Vec<(i64, f64, f64)> = (to - span..to)
            .filter_map(|i| {
                let b = self.get(i).filter(|b| b.usable(k) && b.x_n > 0 && b.x.is_finite())?;
                let (sy, sx) = season(i);
                Some((i, b.x as f64 + sx, b.mean[k] as f64 + sy))
            })
            .collect();
        if (pts.len() as i64) < span / 2 {
            return None;
        }
        let n = pts.len() as f64;
        let (x_mean, y_mean) = (pts.iter().map(|p| p.1).sum::<f64>() / n, pts.iter().map(|p| p.2).sum::<f64>() / n);
        let sxx: f64 = pts.iter().map(|p| (p.1 - x_mean).powi(2)).sum();
        if sxx.is_nan() || sxx <= 0.0 {
            return None;
        }
        let weights: Vec<(i64, f64)> = pts.iter().map(|p| (p.0, (p.1 - x_mean) / sxx)).collect();
        let slope: f64 = weights.iter().zip(&pts).map(|(w, p)| w.1 * p.2).sum();
        let mut resid = vec![None; span as usize];
        for p in &pts {
            resid[(p.0 - (to - span)) as usize] = Some(p.2 - y_mean - slope * (p.1 - x_mean));
        }
        let gamma = residual_variogram(&resid, (span / 2) as usize)?;
        let se = weights_var(&gamma, &weights).sqrt();
        (slope.is_finite() && se.is_finite()).then_some((slope, se))
    }

    /// Mean of the bin means of signal `k` over [from, to) (bins without probes skipped; with
    /// `robust`, incident bins too) and how many bins counted.
    pub(super) fn block_mean(&self, k: usize, range: (i64, i64), robust: bool) -> (f64, usize) {
        self.block_mean_of(range, |b| (if robust { b.usable(k) } else { b.n[k] > 0 }).then(|| b.mean[k] as f64))
    }

    /// The same of the load-adjusted bin means r − `slope`·x, over the usable bins with a load
    /// reading.
    pub(super) fn block_mean_adjusted(&self, k: usize, range: (i64, i64), slope: f64) -> (f64, usize) {
        self.block_mean_of(range, |b| (b.usable(k) && b.x_n > 0).then(|| b.mean[k] as f64 - slope * b.x as f64))
    }

    /// Mean of `value` over the bins of [from, to) that give one, and how many did.
    fn block_mean_of(&self, (from, to): (i64, i64), value: impl Fn(&HistBin) -> Option<f64>) -> (f64, usize) {
        let (sum, n) = (from..to).filter_map(|bin| self.get(bin).and_then(&value)).fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
        (if n > 0 { sum / n as f64 } else { f64::NAN }, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, StandardNormal};

    #[test]
    fn contrast_variance_of_independent_bins_is_the_textbook_one() {
        let gamma = vec![0.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0];
        let v = contrast_var(&gamma, (0, 4), (4, 6));
        assert!((v - 2.0 * (1.0 / 4.0 + 1.0 / 2.0)).abs() < 1e-12, "{v}");
        // A random walk (γ(k) = k/2): mean of [2, 4) minus mean of [0, 2) has variance 1.5.
        let walk: Vec<f64> = (0..10).map(|k| k as f64 / 2.0).collect();
        let v = contrast_var(&walk, (0, 2), (2, 4));
        assert!((v - 1.5).abs() < 1e-12, "{v}");
    }

    #[test]
    fn load_that_lasts_minutes_raises_the_design_effect() {
        // Bins of 30 probes (sd 0.5) under an AR(1) load offset (sd 0.1, lag-1 correlation
        // e^(-1/5)): a before/after comparison of an hour and half an hour varies far more than
        // independent probes would say; without load the factor stays near 1.
        let mut rng = SmallRng::seed_from_u64(3);
        for (load_sd, lo, hi) in [(0.0, 1.0, 1.3), (0.1, 4.0, 60.0)] {
            let mut h = BinnedHistory::new(150, 720, 0);
            let rho = (-1.0f64 / 5.0).exp();
            let mut l = 0.0;
            for bin in 0..720 {
                let z: f64 = StandardNormal.sample(&mut rng);
                l = rho * l + load_sd * (1.0 - rho * rho).sqrt() * z;
                h.push(bin, probes(&mut rng, |e| l + 0.5 * e));
            }
            let deff = h.dependence(0, None).expect("enough history").design_effect((600, 660), (663, 693));
            assert!(deff >= lo && deff <= hi, "load sd {load_sd}: design effect {deff}");
        }
    }

    #[test]
    fn an_incident_s_partial_edges_are_left_out_with_it() {
        // Bins of 30 probes (sd 0.5); a 2x incident (+0.69) over bins 200..215 that begins and
        // ends inside a bin (half of bins 199 and 215 at +0.35), a lone half-size bin later, a
        // 1.5x incident (+0.41, under 5 robust deviations a bin) over bins 350..365, and a 1.3x
        // one (+0.26, about 3) over bins 500..515.
        let flagged = |delay: usize| {
            let mut rng = SmallRng::seed_from_u64(8);
            let mut h = BinnedHistory::new(150, 720, delay);
            for bin in 0..600i64 {
                let shift = match bin {
                    200..215 => std::f64::consts::LN_2,
                    199 | 215 | 300 => std::f64::consts::LN_2 / 2.0,
                    350..365 => 1.5f64.ln(),
                    500..515 => 1.3f64.ln(),
                    _ => 0.0,
                };
                h.push(bin, probes(&mut rng, |e| shift + 0.5 * e));
            }
            h.bins.iter().enumerate().filter(|(_, b)| b.excluded[0]).map(|(i, _)| i as i64 + h.first).collect::<Vec<i64>>()
        };
        let f = flagged(30);
        let within = |f: &[i64], r: std::ops::Range<i64>| f.iter().filter(|b| r.contains(b)).count();
        assert_eq!(f[..32], (199..216).chain(350..365).collect::<Vec<_>>(), "the larger incidents and their edges");
        assert!(
            f[32..].iter().all(|b| (495..520).contains(b)) && within(&f, 500..515) >= 12 && f.len() - 32 <= within(&f, 500..515) + 3,
            "most of the 1.3x incident: {f:?}"
        );
        // Without a delay the bins before are in the variogram already and stay.
        let f = flagged(0);
        assert_eq!(f[..16], (200..216).collect::<Vec<_>>(), "the incident and its end");
        assert!(f[16..].iter().all(|b| (350..365).contains(b) || (500..515).contains(b)) && within(&f, 350..365) >= 12, "most of the 1.5x incident: {f:?}");
    }

    /// Adds one TTFT residual `r` to a bin.
    fn add(open: &mut OpenBin, r: f64) {
        open.n[0] += 1;
        open.sum[0] += r;
        open.sum_sq[0] += r * r;
    }

    /// A closed bin of 30 TTFT residuals `value(e)`, e standard normal.
    fn probes(rng: &mut SmallRng, value: impl Fn(f64) -> f64) -> HistBin {
        let mut open = OpenBin::default();
        for _ in 0..30 {
            let e: f64 = StandardNormal.sample(rng);
            add(&mut open, value(e));
        }
        open.close()
    }

    /// 720 bins of 30 probes (sd 0.5) under an AR(1) load (lag-1 correlation e^(-1/5)) whose
    /// level and sd are `level(bin)` and `sd(bin)`.
    fn history_under(seed: u64, level: impl Fn(usize) -> f64, sd: impl Fn(usize) -> f64) -> BinnedHistory {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut h = BinnedHistory::new(150, 720, 30);
        let rho = (-1.0f64 / 5.0).exp();
        let mut z = 0.0;
        for bin in 0..720 {
            let e: f64 = StandardNormal.sample(&mut rng);
            z = rho * z + (1.0 - rho * rho).sqrt() * e;
            h.push(bin as i64, probes(&mut rng, |e| level(bin) + sd(bin) * z + 0.5 * e));
        }
        h
    }

    #[test]
    fn busy_hours_that_swing_more_widen_the_yardstick_now() {
        // The last five hours busier (level +0.4) and swinging with sd 0.2 against 0.05 before:
        // at a busy hour the load part is about twice the history's average (5 seeds: scale
        // 2.00–2.54, the local swing taken one standard error up). With the same swing all day
        // the yardstick stays about as the history gives it (scale 1–1.10).
        for seed in 0..5 {
            // Busier over two hours (a morning ramp), swinging more as it gets busier.
            let ramp = |b: usize| ((b as f64 - 300.0) / 120.0).clamp(0.0, 1.0);
            let busy = history_under(seed, |b| 0.4 * ramp(b), |b| 0.05 + 0.15 * ramp(b));
            let nugget = busy.vario[0].nugget().expect("nugget");
            let scale = busy.local_scale(0, None, nugget);
            assert!(scale >= 1.5, "seed {seed}: busy hours' scale {scale}");
            let plain = contrast_var(&busy.vario[0].curve(None).expect("curve"), (600, 660), (665, 690));
            let dep = busy.dependence(0, None).expect("dependence");
            assert_eq!(dep.swing, scale, "the scale in use is the one reported");
            let widened = contrast_var(&dep.gamma, (600, 660), (665, 690));
            assert!(widened > 1.3 * plain, "seed {seed}: {widened} against {plain}");
            let even = history_under(seed, |_| 0.0, |_| 0.125);
            let scale = even.local_scale(0, None, even.vario[0].nugget().expect("nugget"));
            assert!(scale < 1.3, "seed {seed}: even swings' scale {scale}");
        }
    }

    #[test]
    fn the_count_coupling_is_how_slo_misses_move_with_load() {
        // Bins of 30 probes, log latency = load (AR(1), sd 0.1, 15 bins) + 0.5 N, an SLO at 2.2
        // probe sd above the median: misses per bin rise by 30 φ(z)/0.5 per unit of load (about
        // 2.1; 10 histories: 0.71–1.37 of it, median 1.00). Failures that no load moves add
        // noise, not coupling.
        let mut rng = SmallRng::seed_from_u64(11);
        let (thr, sd) = (2.2 * 0.5, 0.5);
        let phi = |z: f64| (-z * z / 2.0).exp() / (std::f64::consts::TAU).sqrt();
        let mut ratios = Vec::new();
        for error_share in [0.0, 0.02] {
            for _ in 0..10 {
                let mut h = BinnedHistory::new(150, 720, 0);
                let rho = (-1.0f64 / 15.0).exp();
                let (mut l, mut truth) = (0.0, 0.0);
                for bin in 0..720 {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    l = rho * l + 0.1 * (1.0 - rho * rho).sqrt() * z;
                    truth += 30.0 * phi((thr - l) / sd) / sd / 720.0;
                    let mut open = OpenBin::default();
                    for _ in 0..30 {
                        let e: f64 = StandardNormal.sample(&mut rng);
                        let r = l + sd * e;
                        add(&mut open, r);
                        let missed = r > thr;
                        let failed = rng.random_bool(error_share);
                        open.good += u32::from(!missed && !failed);
                        open.bad += u32::from(missed || failed);
                        open.slo_missed += u32::from(missed && !failed);
                    }
                    h.push(bin, open.close());
                }
                let beta = h.count_coupling(0, 8, 720).expect("the load shows in the neighbours");
                ratios.push(beta / truth);
            }
        }
        ratios.sort_by(f64::total_cmp);
        let median = (ratios[9] + ratios[10]) / 2.0;
        assert!((0.8..1.25).contains(&median), "coupling over truth: {ratios:?}");
        assert!(ratios[0] > 0.4 && ratios[19] < 2.0, "coupling over truth: {ratios:?}");
    }
}
