//! The daily shape: how a target's latency moves over the day, learned from earlier days, so the
//! tests take the daily cycle out as a known trend instead of counting it as variance
//! (docs/detection.md, "The daily shape").
//!
//! Per latency signal the residuals are summed per hour (the probes a release window or a
//! regression holds left out). The shape is three harmonics of the day fitted to the differences
//! of consecutive hours: a difference cancels the level, so a level that moved (a release that
//! stayed, a new anchor) is one outlying difference, trimmed, not a shape. It is used once the
//! hours span two days and the harmonics are clearly there; until then it is 0 and the tests are
//! as without it.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

pub(super) const HOUR_S: f64 = 3600.0;
/// How often the shape is refitted (s): it is the day's, and each refit re-expresses the history.
pub(super) const SHAPE_REFIT_S: f64 = 6.0 * HOUR_S;
const DAY_S: f64 = 86_400.0;
const HARMONICS: usize = 3;
/// Coefficients: cos and sin of each harmonic, and a constant (a drift over days, not used).
const P: usize = 2 * HARMONICS + 1;
const H: usize = 2 * HARMONICS;
/// Hours kept: a week.
pub(super) const KEEP_HOURS: usize = 7 * 24;
/// An hour counts with this many probes.
const MIN_HOUR_PROBES: u32 = 30;
/// Differences of consecutive hours the fit needs, over at least two days.
const MIN_PAIRS: usize = 40;
const MIN_SPAN_HOURS: i64 = 48;
/// The harmonics are used when their Wald statistic exceeds this (χ² with 6 degrees of freedom:
/// p = 0.001): a flat day stays flat.
const GATE_CHI2: f64 = 22.46;
/// Differences further than this many robust standard deviations from the first fit are left
/// out of the second (a level step, an incident's edge).
const TRIM_SIGMAS: f64 = 4.0;

/// One hour's residuals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct HourSum {
    pub(super) hour: i64,
    pub(super) n: u32,
    pub(super) sum: f64,
}

#[derive(Debug, Clone, Default)]
pub(super) struct DailyShape {
    pub(super) hours: VecDeque<HourSum>,
    /// The fitted harmonics (cos, sin per harmonic) when in use, and their covariance.
    coef: Option<([f64; H], [[f64; H]; H])>,
}

/// One difference of consecutive complete hours: its weight, the change of the mean, the change
/// of the regressors, and each hour's index and probes.
#[derive(Clone, Copy)]
struct Row {
    w: f64,
    y: f64,
    x: [f64; P],
    a: (i64, u32),
    b: (i64, u32),
}

fn regressors(t: f64) -> [f64; P] {
    let mut x = [0.0; P];
    let w = std::f64::consts::TAU * t.rem_euclid(DAY_S) / DAY_S;
    for j in 0..HARMONICS {
        let a = (j + 1) as f64 * w;
        x[2 * j] = a.cos();
        x[2 * j + 1] = a.sin();
    }
    x[P - 1] = 1.0;
    x
}

impl DailyShape {
    /// A residual of a probe at `now` (not held by a release window or a regression).
    pub(super) fn add(&mut self, now: f64, r: f64) {
        if !(now.is_finite() && r.is_finite()) {
            return;
        }
        let hour = (now / HOUR_S).floor() as i64;
        match self.hours.back_mut() {
            Some(h) if h.hour == hour => {
                h.n = h.n.saturating_add(1);
                h.sum += r;
            }
            Some(h) if h.hour > hour => {}
            _ => {
                self.hours.push_back(HourSum { hour, n: 1, sum: r });
                while self.hours.len() > KEEP_HOURS || self.hours.front().is_some_and(|f| f.hour <= hour.saturating_sub(KEEP_HOURS as i64)) {
                    self.hours.pop_front();
                }
            }
        }
    }

    /// The shape at time `t` (log latency; 0 while none is in use). Its mean over a day is 0.
    pub(super) fn value(&self, t: f64) -> f64 {
        match &self.coef {
            Some((c, _)) => regressors(t).iter().zip(c).map(|(x, b)| x * b).sum(),
            None => 0.0,
        }
    }

    /// The variance that the shape's estimation error adds to a contrast of the mean of bins
    /// `b` with the mean of bins `a` (bins of `bin_s` seconds; 0 while none is in use). Small
    /// across an hour; across the continuous test's six hours it is a few percent of the
    /// variance of a load that swings for a quarter hour, which at that test's error level
    /// doubles its false alarms when left out.
    pub(super) fn contrast_var(&self, a: (i64, i64), b: (i64, i64), bin_s: f64) -> f64 {
        let Some((_, cov)) = &self.coef else { return 0.0 };
        let mean = |(from, to): (i64, i64)| {
            let mut m = [0.0; H];
            let n = (to - from).max(1) as f64;
            for bin in from..to {
                let x = regressors((bin as f64 + 0.5) * bin_s);
                m.iter_mut().zip(x).for_each(|(m, x)| *m += x / n);
            }
            m
        };
        let (ma, mb) = (mean(a), mean(b));
        let g: Vec<f64> = mb.iter().zip(ma).map(|(b, a)| b - a).collect();
        (0..H).map(|i| (0..H).map(|j| g[i] * cov[i][j] * g[j]).sum::<f64>()).sum::<f64>().max(0.0)
    }

    pub(super) fn in_use(&self) -> bool {
        self.coef.is_some()
    }

    /// Half the range of the shape over a day (0 while none is in use), from its values every
    /// 10 minutes.
    pub(super) fn amplitude(&self) -> f64 {
        if self.coef.is_none() {
            return 0.0;
        }
        let v = (0..144).map(|i| self.value(i as f64 * 600.0));
        let (lo, hi) = v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)));
        (hi - lo) / 2.0
    }

    /// Refits the shape from the complete hours before `now` (the current hour is still open).
    pub(super) fn refit(&mut self, now: f64) {
        let current = (now / HOUR_S).floor() as i64;
        let hours: Vec<&HourSum> = self.hours.iter().filter(|h| h.hour < current && h.n >= MIN_HOUR_PROBES).collect();
        let rows: Vec<Row> = hours
            .windows(2)
            .filter(|w| w[0].hour.checked_add(1) == Some(w[1].hour))
            .map(|w| {
                let (a, b) = (w[0], w[1]);
                let (xa, xb) = (regressors((a.hour as f64 + 0.5) * HOUR_S), regressors((b.hour as f64 + 0.5) * HOUR_S));
                let mut x = [0.0; P];
                for i in 0..P - 1 {
                    x[i] = xb[i] - xa[i];
                }
                x[P - 1] = 1.0;
                let w = 1.0 / (1.0 / a.n as f64 + 1.0 / b.n as f64);
                Row { w, y: b.sum / b.n as f64 - a.sum / a.n as f64, x, a: (a.hour, a.n), b: (b.hour, b.n) }
            })
            .collect();
        let span = match (hours.first(), hours.last()) {
            (Some(a), Some(b)) => b.hour.saturating_sub(a.hour),
            _ => 0,
        };
        self.coef = None;
        if rows.len() < MIN_PAIRS || span < MIN_SPAN_HOURS {
            return;
        }
        let Some(first) = fit(&rows) else { return };
        // Trim outlying differences (robust scale of the weighted residuals), then refit.
        let resid: Vec<f64> = rows.iter().map(|r| (r.y - dot(&r.x, &first.beta)) * r.w.sqrt()).collect();
        let mut abs: Vec<f64> = resid.iter().map(|e| e.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let scale = 1.4826 * abs[abs.len() / 2];
        let kept: Vec<Row> = rows.iter().zip(&resid).filter(|(_, e)| scale <= 0.0 || e.abs() <= TRIM_SIGMAS * scale).map(|(r, _)| *r).collect();
        if kept.len() < MIN_PAIRS {
            return;
        }
        let Some(f) = fit(&kept) else { return };
        if f.wald >= GATE_CHI2 {
            let mut c = [0.0; H];
            c.copy_from_slice(&f.beta[..H]);
            self.coef = Some((c, f.cov));
        }
    }
}

struct Fit {
    beta: [f64; P],
    /// Wald statistic of the harmonics (all but the constant) being 0, with the differences
    /// taken as independent (conservative for the gate: a difference shares an hour with the
    /// next, and the smooth harmonics' differences cancel much of that).
    wald: f64,
    /// The harmonics' covariance with each hour's mean taken as independent of the others
    /// (the errors of consecutive differences share an hour: a sandwich estimate).
    cov: [[f64; H]; H],
}

fn dot(x: &[f64; P], b: &[f64; P]) -> f64 {
    x.iter().zip(b).map(|(a, c)| a * c).sum()
}

/// m += w · u u'.
fn add_outer(m: &mut [[f64; P]; P], u: &[f64; P], w: f64) {
    for (row, ui) in m.iter_mut().zip(u) {
        row.iter_mut().zip(u).for_each(|(c, uj)| *c += w * ui * uj);
    }
}

/// Weighted least squares of y on x, with the residual variance from the fit.
fn fit(rows: &[Row]) -> Option<Fit> {
    let mut xtx = [[0.0; P]; P];
    let mut xty = [0.0; P];
    for r in rows {
        add_outer(&mut xtx, &r.x, r.w);
        xty.iter_mut().zip(r.x).for_each(|(s, x)| *s += r.w * x * r.y);
    }
    let inv = invert(xtx)?;
    let mut beta = [0.0; P];
    for i in 0..P {
        beta[i] = (0..P).map(|j| inv[i][j] * xty[j]).sum();
    }
    let dof = rows.len().checked_sub(P).filter(|d| *d > 0)? as f64;
    let s2 = rows.iter().map(|r| r.w * (r.y - dot(&r.x, &beta)).powi(2)).sum::<f64>() / dof;
    if !(s2 > 0.0 && s2.is_finite()) {
        return None;
    }
    let cov = sandwich(rows, &inv, s2);
    // Wald: b_h' (cov_hh)^-1 b_h with cov = s2 · inv; (cov_hh)^-1 from inverting the block.
    let h = 2 * HARMONICS;
    let mut block = [[0.0; P]; P];
    for i in 0..P {
        for j in 0..P {
            block[i][j] = if i < h && j < h {
                inv[i][j] * s2
            } else if i == j {
                1.0
            } else {
                0.0
            };
        }
    }
    let bi = invert(block)?;
    let wald: f64 = (0..h).map(|i| (0..h).map(|j| beta[i] * bi[i][j] * beta[j]).sum::<f64>()).sum();
    (beta.iter().all(|b| b.is_finite()) && wald.is_finite()).then_some(Fit { beta, wald, cov })
}

/// Cov(β̂) = A⁻¹ (Σₕ vₕ uₕuₕ') A⁻¹ for hour means with independent errors of variance
/// vₕ = s²/nₕ (the weights' model), where uₕ = Σ w·x over the differences hour h enters (+ as
/// the later hour, − as the earlier): the harmonics' block.
fn sandwich(rows: &[Row], inv: &[[f64; P]; P], s2: f64) -> [[f64; H]; H] {
    let mut u: std::collections::BTreeMap<i64, (u32, [f64; P])> = std::collections::BTreeMap::new();
    for r in rows {
        for ((hour, n), sign) in [(r.b, 1.0), (r.a, -1.0)] {
            let e = u.entry(hour).or_insert((n, [0.0; P]));
            e.1.iter_mut().zip(r.x).for_each(|(u, x)| *u += sign * r.w * x);
        }
    }
    let mut meat = [[0.0; P]; P];
    for (n, uh) in u.values() {
        add_outer(&mut meat, uh, s2 / f64::from((*n).max(1)));
    }
    let mut cov = [[0.0; H]; H];
    for (i, row) in cov.iter_mut().enumerate() {
        for (j, c) in row.iter_mut().enumerate() {
            *c = (0..P).map(|a| (0..P).map(|b| inv[i][a] * meat[a][b] * inv[b][j]).sum::<f64>()).sum();
        }
    }
    cov
}

/// Gauss–Jordan with partial pivoting; `None` when singular.
fn invert(mut a: [[f64; P]; P]) -> Option<[[f64; P]; P]> {
    let mut inv = [[0.0; P]; P];
    for (i, row) in inv.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    for c in 0..P {
        let pivot = (c..P).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[pivot][c].abs() < 1e-12 {
            return None;
        }
        a.swap(c, pivot);
        inv.swap(c, pivot);
        let d = a[c][c];
        for j in 0..P {
            a[c][j] /= d;
            inv[c][j] /= d;
        }
        for i in 0..P {
            if i != c {
                let f = a[i][c];
                if f != 0.0 {
                    for j in 0..P {
                        a[i][j] -= f * a[c][j];
                        inv[i][j] -= f * inv[c][j];
                    }
                }
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use rand_distr::{Distribution, StandardNormal};

    /// Residuals of a ±20% daily cycle (in log), probe noise sd 0.5, 0.5 probes/s.
    fn feed(d: &mut DailyShape, rng: &mut SmallRng, from_h: i64, hours: i64, level: impl Fn(f64) -> f64) {
        for i in 0..(hours * 1800) {
            let t = from_h as f64 * HOUR_S + i as f64 * 2.0;
            let z: f64 = StandardNormal.sample(rng);
            d.add(t, (1.0 + 0.2 * (std::f64::consts::TAU * t / DAY_S + 1.0).sin()).ln() + level(t) + 0.5 * z);
        }
    }

    #[test]
    fn the_daily_cycle_is_learned_from_two_days_and_not_from_half_of_one() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut d = DailyShape::default();
        feed(&mut d, &mut rng, 0, 12, |_| 0.0);
        d.refit(12.0 * HOUR_S);
        assert!(!d.in_use(), "12 hours are no day");
        // Two more days, and the level steps up by 0.3 for good at hour 30 (a release that stayed).
        feed(&mut d, &mut rng, 12, 50, |t| if t >= 30.0 * HOUR_S { 0.3 } else { 0.0 });
        d.refit(62.0 * HOUR_S);
        assert!(d.in_use());
        // Half its range over the day: (ln 1.2 − ln 0.8) / 2.
        assert!((d.amplitude() - 0.2027).abs() < 0.01, "amplitude {}", d.amplitude());
        // The shape's change over an hour matches the cycle's, wherever in the day.
        for h in 0..24 {
            let (a, b) = (h as f64 * HOUR_S, (h as f64 + 1.0) * HOUR_S);
            let truth = |t: f64| (1.0 + 0.2 * (std::f64::consts::TAU * t / DAY_S + 1.0).sin()).ln();
            let err = (d.value(b) - d.value(a)) - (truth(b) - truth(a));
            assert!(err.abs() < 0.01, "hour {h}: off by {err}");
        }
    }

    /// The variance `contrast_var` states for the shape's error is the error's variance: 400
    /// fits of three days whose hourly means swing independently (sd 0.02) about a ±20% cycle, the error of the last 30 minutes against the
    /// 6 hours before them.
    #[test]
    fn the_shape_s_error_is_as_large_as_its_stated_variance() {
        let mut rng = SmallRng::seed_from_u64(9);
        let truth = |t: f64| (1.0 + 0.2 * (std::f64::consts::TAU * t / DAY_S + 1.0).sin()).ln();
        let (mut err2, mut stated, mut fits) = (0.0, 0.0, 0.0);
        for rep in 0..400 {
            let mut d = DailyShape::default();
            for hour in 0..72 {
                let z: f64 = StandardNormal.sample(&mut rng);
                let mean = truth((hour as f64 + 0.5) * HOUR_S) + 0.02 * z;
                d.hours.push_back(HourSum { hour, n: 1800, sum: 1800.0 * mean });
            }
            d.refit(72.0 * HOUR_S);
            if !d.in_use() {
                continue;
            }
            // Minute bins; the recent window ends somewhere in the next day.
            let end = 72 * 60 + (rep % 24) * 60;
            let (a, b) = ((end - 390, end - 30), (end - 30, end));
            let block = |f: &dyn Fn(f64) -> f64, (x, y): (i64, i64)| (x..y).map(|i| f((i as f64 + 0.5) * 60.0)).sum::<f64>() / (y - x) as f64;
            let e = (block(&|t| d.value(t), b) - block(&|t| d.value(t), a)) - (block(&truth, b) - block(&truth, a));
            err2 += e * e;
            stated += d.contrast_var(a, b, 60.0);
            fits += 1.0;
        }
        assert!(fits >= 390.0, "the cycle is found: {fits}");
        let ratio = err2 / stated;
        assert!((0.75..1.33).contains(&ratio), "squared error over stated variance: {ratio}");
    }

    #[test]
    fn a_flat_day_has_no_shape_and_hostile_input_is_ignored() {
        let mut rng = SmallRng::seed_from_u64(4);
        let mut d = DailyShape::default();
        for i in 0..(72 * 1800) {
            let z: f64 = StandardNormal.sample(&mut rng);
            d.add(i as f64 * 2.0, 0.5 * z);
        }
        d.add(f64::NAN, 1.0);
        d.add(10.0, f64::INFINITY);
        d.add(-1e300, 1.0);
        d.refit(72.0 * HOUR_S);
        assert!(!d.in_use(), "noise alone is no daily shape");
        assert!(d.hours.len() <= KEEP_HOURS);
        assert_eq!((d.value(5.0), d.amplitude()), (0.0, 0.0));
    }
}
