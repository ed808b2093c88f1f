//! The release-armed tests: arming a release window at a marker and freezing the baselines
//! before it, the looks of the window and the tests at each look (per scenario and pooled), and
//! the recovery test that clears a regressed row (docs/detection.md, "Release-armed tests").

use std::num::NonZeroU32;

use super::baseline::{BASELINE_SPANS, GoodFrozen, LatencyFrozen, LatencyPost, Part};
use super::covariates::{Adjust, CacheRef, ReplicaOffsets};
use super::daily::DailyShape;
use super::history::{HistBin, MIN_VARIANCE_CUT, TREND_GATE_Z, Trend, bin_centre, bin_index, contrast_var, independent_design_effect};
use super::math::{binomial_sf, exceedance_cov_ratio, normal_quantile, normal_sf};
use super::sensitivity::{SENSITIVITY_SPAN_S, sensitivities};
use super::state::{Cause, Detector, Signal, SignalState, State, StateChange, TargetState};
use super::tail::departure;
use crate::config::DetectSettings;

/// Post-grace bins counted as looks (bins after the grace window): every bin from 4 up to 12 (a
/// rollout's first quarter hour is when a verdict matters most), every 5 up to 30, every 10 up to
/// 120, then every 30. The tests spend their error level over the looks
/// a window holds (Bonferroni), so each look is valid whatever the dependence between looks. The
/// first look waits for 4 bins: the persistence check needs two halves of at least 2 bins, so a
/// warm-up that outlasts the grace window by up to 2 bins is never a regression.
pub(super) fn is_look(e: i64) -> bool {
    match e {
        ..=3 => false,
        4..=12 => true,
        13..=30 => e % 5 == 0,
        31..=120 => e % 10 == 0,
        _ => e % 30 == 0,
    }
}

pub(super) fn looks_within(bins: i64) -> usize {
    (0..=bins).filter(|e| is_look(*e)).count().max(1)
}

/// The power at which `SignalReport::detectable` is the smallest effect found.
pub const DETECTABLE_POWER: f64 = 0.8;

/// A latency signal's error level: the pooled tests hold half (mean and exceedance 0.2 each, tail
/// 0.1); each of k scenarios holds 1/k of the other half, its own mean and exceedance tests
/// `SCENARIO_OWN_SHARE` each and its contrast with the other scenarios `SCENARIO_CONTRAST_SHARE`.
const SCENARIO_OWN_SHARE: f64 = 0.1875;
const SCENARIO_CONTRAST_SHARE: f64 = 0.125;
/// The most bins the level relation of latency and the load reading is fitted over (a day at
/// 1-minute bins): its standard error costs the square of the bins.
const LEVEL_SPAN_MAX_BINS: i64 = 1440;

/// The whole baseline window's index in `BASELINE_SPANS`.
const FULL_SPAN: usize = BASELINE_SPANS.len() - 1;

/// Bins of the recovery test's recent window.
const RECOVERY_BINS: i64 = 10;
/// Post-release probes a scenario needs before it takes part in a latency test.
const MIN_POST: f64 = 5.0;

/// One test at one look.
#[derive(Debug, Clone, Copy)]
struct TestResult {
    /// One-look p-value, and adjusted for the looks and the test's share of the error level.
    p: f64,
    p_adj: f64,
    /// Both halves of the post-grace probes show the effect on their own (persistence).
    confirmed: bool,
    /// The halves did, but the change began after the marker (`persists`).
    late_onset: bool,
}

impl TestResult {
    /// A test at a look: its one-look p, adjusted for the looks and the test's share of the
    /// error level, whether its estimate reaches the tolerance, and its halves (`persists`).
    fn new(p: f64, (looks, share): (f64, f64), large: bool, (persist, late_onset): (bool, bool)) -> Self {
        TestResult { p, p_adj: (p * looks / share).min(1.0), confirmed: persist && large, late_onset: late_onset && large }
    }

    fn passes(&self, alpha: f64) -> bool {
        self.p_adj <= alpha && self.confirmed
    }
}

/// How many times the early half's z the late half's may reach, and by how much more (z over
/// √2), before the change is taken to have begun after the marker.
const LATE_ONSET_RATIO: f64 = 4.0;
const LATE_ONSET_Z: f64 = 3.09;

/// Persistence at a look: each half of the post-release probes (early, late: one-look p and
/// whether the estimate reaches the tolerance) shows the change on its own, and the change
/// began at the marker. A release's effect begins there and stays; one the late half shows
/// more than `LATE_ONSET_RATIO` times as strongly as the early half (z against z), the
/// difference beyond `LATE_ONSET_Z` √2, began later in the window: an incident that started
/// after the marker, not the release. The halves share the baseline, which correlates their z
/// and only narrows the difference's spread (√2 is its most). A ramp of the effect from the
/// marker (a rolling update) puts the early half at about a third of the late or more.
/// Returns (persists, began after the marker).
fn persists(early: Option<(f64, bool)>, late: Option<(f64, bool)>, confirm_alpha: f64) -> (bool, bool) {
    let (Some((pe, le)), Some((pl, ll))) = (early, late) else { return (false, false) };
    let z = |p: f64| -normal_quantile(p.clamp(1e-300, 1.0));
    let (ze, zl) = (z(pe), z(pl));
    let late_onset = ze * LATE_ONSET_RATIO < zl && zl - ze > LATE_ONSET_Z * std::f64::consts::SQRT_2;
    let shown = pe <= confirm_alpha && le && pl <= confirm_alpha && ll;
    (shown && !late_onset, shown && late_onset)
}

impl Detector {
    /// Opens target `ti`'s release window for `version` at `at` against the baselines frozen
    /// before (`freeze`): resets the rows not held as regressed, takes the probes since `at` into
    /// the window and looks at once if the window already holds a look. `incident_hold`: an
    /// incident flagged in the bin before `at` is not the release's (`mark_release`).
    pub(super) fn arm(&mut self, ti: usize, version: &str, at: f64, incident_hold: bool, now: f64) {
        let s = self.settings.clone();
        let regressed = |r: &SignalState| r.state == State::Regressed;
        let t = &mut self.targets[ti];
        t.version = Some(version.to_owned());
        t.marker = Some(at);
        t.armed_until = Some(at + s.armed_window_s);
        t.looked = false;
        t.detectable = [None; 4];
        t.warm_held = 0;
        t.post_first = None;
        t.post_hit = (0.0, 0);
        t.cold_now = false;
        // An incident that began before the release and still runs at its marker is not the
        // release's: the window's latency probes wait until a closed bin after the marker is no
        // longer flagged (`incident_end`: that bin; the history's end while it runs).
        t.marker_holds_incident = incident_hold;
        t.late_onset = [false; 4];
        t.late_onset_looks = 0;
        let marker_bin = bin_index(at, s.bin_s);
        let incident_end = (incident_hold && t.hist.get(marker_bin - 1).is_some_and(HistBin::incident)).then(|| {
            let end = t.hist.end();
            (marker_bin..end).find(|b| !t.hist.get(*b).is_some_and(HistBin::incident)).unwrap_or(end)
        });
        t.incident_at_marker = incident_end.is_some_and(|e| e >= t.hist.end());
        let keep = |r: &mut SignalState| {
            if !regressed(r) {
                *r = SignalState::default();
            }
        };
        t.pooled.iter_mut().for_each(keep);
        for (k, r) in t.pooled.iter().enumerate() {
            if !regressed(r) {
                t.recovery_ref[k] = None;
            }
        }
        // The new version's probes so far (a late marker): into its window as if on time. A
        // probe's cache reading is its bin's mean here (the values keep no reading of their own).
        let post_from = at + s.release_grace_s;
        let (hist, cache_ref) = (&t.hist, t.cache_ref);
        let bin_s = s.bin_s;
        let cold_at = |time: f64| {
            time < post_from + s.cache_warmup_max_s
                && cache_ref.is_some_and(|c| c.cold(hist.get(bin_index(time, bin_s)).filter(|b| b.h_n > 0).map(|b| b.h as f64)))
        };
        for (b, h) in (bin_index(post_from, bin_s).max(hist.first)..hist.end()).filter_map(|b| hist.get(b).map(|h| (b, h))) {
            if h.h_n > 0 && (b as f64 + 1.0) * bin_s > post_from {
                t.post_hit.0 += h.h as f64 * h.h_n as f64;
                t.post_hit.1 += h.h_n as u64;
            }
        }
        for sc in &mut t.scenarios {
            sc.rows.iter_mut().for_each(keep);
            for (k, lk) in sc.latency.iter_mut().enumerate() {
                let mut post = LatencyPost::default();
                if let Some(f) = &lk.frozen {
                    for i in (0..lk.times.len()).filter(|&i| lk.times[i] >= post_from) {
                        let time = lk.times[i];
                        if cold_at(time) {
                            if k == 0 {
                                t.warm_held += 1;
                            }
                            continue;
                        }
                        if incident_end.is_some_and(|e| bin_index(time, bin_s) <= e) {
                            continue;
                        }
                        t.post_first = Some(t.post_first.map_or(time, |p| p.min(time)));
                        let y = detrended(lk.value(i, t.adjust[k]), time, t.trend[k].as_ref(), &t.daily[k])
                            - t.replicas[k].of(lk.replicas.get(i).copied().flatten());
                        let r = departure(&lk.times, &lk.values, i, time, lk.values[i] as f64).unwrap_or(f64::NAN);
                        post.add(f, y, r);
                        post.push(time, y, r, usize::MAX);
                    }
                } else if regressed(&sc.rows[k]) {
                    post.recent = lk.post.recent.iter().copied().filter(|(time, _, _)| *time >= post_from).collect();
                }
                lk.post = post;
            }
        }
        // The look the window would have had last by now, so a late marker judges at once.
        let current = self.bin_of(now);
        let post0 = self.bin_after(post_from);
        if let Some(e) = (0..=current - post0).rev().find(|e| is_look(*e)) {
            let end = (post0 + e) as f64 * s.bin_s;
            for signal in Signal::ALL {
                self.release_look(ti, signal, at, end, (post0, post0 + e));
            }
        }
    }

    /// The release-armed tests of one signal at a look: per scenario and pooled, the mean of
    /// winsorized log latency and the share above the baseline quantile (latency), or the capped
    /// bad count per bin (goodput).
    pub(super) fn release_look(&mut self, ti: usize, signal: Signal, marker: f64, end: f64, post: (i64, i64)) {
        self.targets[ti].looked = true;
        let mut detectable = None;
        let s = &self.settings;
        let alpha = self.alpha(signal);
        // Latency probes held as cache warm-up do not count: the window starts after them.
        let post_start = match self.targets[ti].post_first {
            Some(first) if signal != Signal::Goodput => (marker + s.release_grace_s).max(first),
            _ => marker + s.release_grace_s,
        };
        let post = if signal == Signal::Goodput { post } else { (post.0.max(self.bin_of(post_start)).min(post.1 - 1), post.1) };
        let mid = (post_start + end) / 2.0;
        let window_bins = ((s.armed_window_s - s.release_grace_s) / s.bin_s).floor() as i64;
        let looks = looks_within(window_bins) as f64;
        let t = &self.targets[ti];
        let mut scen: Vec<Option<[TestResult; 3]>> = vec![None; t.scenarios.len()];
        let mut pooled: Vec<TestResult> = Vec::new();
        if signal == Signal::Goodput {
            let outage = |bin: i64| t.hist.get(bin).is_some_and(HistBin::outage);
            let mid_bin = (post.0 + post.1) / 2;
            let split = |bins: Vec<(i64, u32, u32)>| {
                let all: Vec<(u32, u32)> = bins.iter().map(|b| (b.1, b.2)).collect();
                let early: Vec<(u32, u32)> = bins.iter().filter(|b| b.0 < mid_bin).map(|b| (b.1, b.2)).collect();
                let late: Vec<(u32, u32)> = bins.iter().filter(|b| b.0 >= mid_bin).map(|b| (b.1, b.2)).collect();
                (all, early, late)
            };
            // The bins' dependence, from the pooled counts' variogram frozen at the marker; a
            // scenario's counts hold more chance and less shared load, so it is conservative for them.
            let frozen_at = t.frozen_at.unwrap_or(marker);
            let base = (self.bin_of(frozen_at - s.goodput_baseline_s), self.bin_of(frozen_at));
            let deff = match (&t.good_frozen, &t.good_gamma) {
                (Some(f), Some(gamma)) => independent_design_effect(gamma, f.var(), base, post).max(coupled_design_effect(t, f, base, post, s.bin_s)),
                _ => 1.0,
            };
            let verdict = |f: &GoodFrozen, bins: Vec<(i64, u32, u32)>, share: f64| {
                let (all, early, late) = split(bins);
                let p = f.tail(&all, deff);
                let half = |b: &[(u32, u32)]| (!b.is_empty()).then(|| (f.tail(b, deff), true));
                TestResult::new(p, (looks, share), true, persists(half(&early), half(&late), s.confirm_alpha))
            };
            let k = t.scenarios.iter().filter(|sc| sc.goodput.frozen.is_some()).count().max(1) as f64;
            if let Some(f) = &t.good_frozen {
                let bins: Vec<(i64, u32, u32)> =
                    (post.0.max(t.hist.first)..post.1).filter_map(|b| t.hist.get(b).filter(|h| !h.outage()).map(|h| (b, h.good, h.bad))).collect();
                if !bins.is_empty() {
                    let n: u32 = bins.iter().map(|b| b.1 + b.2).sum();
                    let p0 = f.p_bad();
                    let sd = (p0 * (1.0 - p0) * (1.0 / f64::from(n.max(1)) + 1.0 / f.n.max(1) as f64)).sqrt();
                    detectable = Some(sd * (normal_quantile(1.0 - alpha * 0.5 / looks) + normal_quantile(DETECTABLE_POWER)));
                    pooled.push(verdict(f, bins, 0.5));
                }
            }
            for (i, sc) in t.scenarios.iter().enumerate() {
                let Some(f) = &sc.goodput.frozen else { continue };
                let bins: Vec<(i64, u32, u32)> =
                    sc.goodput.bins.iter().filter(|b| b.bin >= post.0 && b.bin < post.1 && !outage(b.bin)).map(|b| (b.bin, b.good, b.bad)).collect();
                if !bins.is_empty() {
                    let v = verdict(f, bins, 0.5 / k);
                    scen[i] = Some([v, v, v]);
                }
            }
        } else {
            let k = signal.index();
            let tol = s.latency_tolerance.ln();
            let frozen_at = t.frozen_at.unwrap_or(marker);
            let base = (self.bin_of(frozen_at - s.latency_baseline_s), self.bin_of(frozen_at));
            // The daily shape's own error moves every scenario alike (it cancels in the contrast
            // of scenarios): shared variance.
            let dependence = |base: (i64, i64)| {
                let shape_var = t.daily[k].contrast_var(base, post, s.bin_s);
                t.dependence[k].as_ref().map_or((1.0, 0.0), |d| d.contrast(base, post, t.trend[k].as_ref(), s.bin_s, shape_var))
            };
            // (design effect, shared variance) of the contrast with each newest part of the
            // baseline window (`BASELINE_SPANS`, the whole window last), for the mean tests'
            // choice of it; the other tests take the whole window's.
            let span_dep = BASELINE_SPANS.map(|frac| dependence((self.bin_of(frozen_at - frac * s.latency_baseline_s), base.1)));
            let (deff, shared) = span_dep[FULL_SPAN];
            let deff_raw = t.dependence_raw[k].as_ref().map_or(1.0, |d| d.design_effect(base, post));
            // (part, frozen) per scenario in the test: all post probes, early half, late half.
            // Persistence (each half must show the change on its own) asks it of the bins no
            // incident flagged (`HistBin::excluded`) where they are most of a half: a quarter
            // hour of 2x latency that fills part of one half and a few minutes of the other made
            // both halves "show" it, and with three days of history half the incidents that
            // began well after the marker raised an alarm that way. Where flagged bins are most
            // of a half (a large step from the marker on), the half is kept whole.
            let flagged = |time: f64| t.hist.get(self.bin_of(time)).is_some_and(|b| b.excluded[k]);
            let mostly_clean = |from: f64, to: f64| {
                let bins = (self.bin_of(from)..=self.bin_of(to)).filter_map(|b| t.hist.get(b).filter(|h| h.n[k] > 0));
                let (n, out) = bins.fold((0u32, 0u32), |(n, o), h| (n + 1, o + u32::from(h.excluded[k])));
                2 * out < n
            };
            let keep = |from: f64, to: f64| {
                let clean = mostly_clean(from, to);
                move |time: f64| !(clean && flagged(time))
            };
            let (keep_early, keep_late) = (keep(post_start, mid), keep(mid, end));
            let mut parts: Vec<(usize, [Part; 3], &LatencyFrozen)> = Vec::new();
            for (i, sc) in t.scenarios.iter().enumerate() {
                let lk = &sc.latency[k];
                let Some(f) = &lk.frozen else { continue };
                let all = lk.post.all(f);
                if all.n >= MIN_POST {
                    parts.push((i, [all, lk.post.span_where(f, post_start, mid, keep_early), lk.post.span_where(f, mid, f64::INFINITY, keep_late)], f));
                }
            }
            let kk = parts.len().max(1) as f64;
            // The load's share of a probe's variance: the correlation of two probes sent at the
            // same moment, the largest there is (for the exceedance counts' dependence below).
            let probe_var = {
                let (v, n) = parts.iter().fold((0.0, 0.0), |(v, n), (_, p, f)| (v + p[0].n * f.var, n + p[0].n));
                if n > 0.0 { v / n } else { f64::NAN }
            };
            let rho = t.dependence[k].as_ref().map_or(0.0, |d| d.load_var() / probe_var);
            // For a weighted set of scenarios: p of "no slower than the baseline" for the mean,
            // and whether the estimate reaches the tolerance. The pooled set's probe variance is
            // scaled by the design effect; one scenario's gets the shared load's variance added,
            // scaled by how much that scenario feels the load (its own probe noise is larger than
            // the pooled set's, so the pooled ratio would overstate its dependence many times).
            // The part of the baseline window (index into `BASELINE_SPANS`) whose contrast with
            // the post probes of `sel` is narrowest under the dependence: from probe counts and
            // the history alone, never the values. Ties go to the longest. For the pooled test
            // only: a scenario's own test that chose its part too raised the false alarms where
            // scenarios feel the load x0.5–1.5 from 0.99 to 1.23 a month (release alarms 21 →
            // 29 in 1,000 days; its share of the load is learned, and a short part leans on it).
            let best_span = |sel: &[(f64, Part, &LatencyFrozen)]| -> usize {
                let total: f64 = sel.iter().filter(|x| x.1.n >= 2.0).map(|x| x.0).sum();
                let cost = |j: usize| {
                    let deff_j = span_dep[j].0;
                    let mut v = 0.0;
                    for (w, p, f) in sel.iter().filter(|x| x.1.n >= 2.0) {
                        let m = f.spans[j].0;
                        if m < 2.0 {
                            return f64::INFINITY;
                        }
                        v += (w / total).powi(2) * f.var * (1.0 / p.n + 1.0 / m);
                    }
                    v * deff_j
                };
                (0..BASELINE_SPANS.len()).rev().min_by(|a, b| cost(*a).total_cmp(&cost(*b))).unwrap_or(FULL_SPAN)
            };
            let mean = |sel: &[(f64, Part, &LatencyFrozen)], own: bool, span: usize| -> Option<(f64, bool)> {
                let total: f64 = sel.iter().filter(|x| x.1.n >= 2.0).map(|x| x.0).sum();
                if total <= 0.0 {
                    return None;
                }
                let (deff, shared) = span_dep[span];
                let (mut d, mut v) = (0.0, 0.0);
                for (w, p, f) in sel {
                    if p.n < 2.0 {
                        continue;
                    }
                    let w = w / total;
                    let (m, base_mean) = f.spans[span];
                    d += w * (p.mean - base_mean);
                    v += w * w * (p.var.max(f.var) / p.n + f.var / m.max(1.0));
                }
                let v = if own { v + shared * own_scale(sel.iter().map(|x| x.2)) } else { v * deff };
                Some((normal_sf(d / v.sqrt()), d >= tol))
            };
            // The exceedance and tail tests: probes above each scenario's own baseline quantile
            // (`tail` false: the exceedance quantile, true: the tail's), after against before,
            // exactly: given the total above, the post count is binomial with the post share of
            // the probes (two Poisson rates compared; for a share of 10% slightly conservative
            // against Fisher's test), counts and sizes divided by their design effect. That is
            // not the mean's: a load shift moves few probes across a high quantile, so the load's
            // part of a count's variance is the mean's scaled by the exceedances' covariance per
            // unit of probe correlation (`exceedance_cov_ratio`, at the largest correlation: an
            // upper bound). With the mean's design effect the tail test found the slowest 3% of
            // requests made 3x slower in 14% of trials within an hour. Returns p and whether the
            // share's rise reaches the tolerance.
            let counts = |sel: &[(Part, &LatencyFrozen)], tail: bool, own: bool| -> Option<(f64, bool)> {
                let (mut k1, mut m, mut k2, mut n, mut tol_e) = (0.0, 0.0, 0.0, 0.0, 0.0);
                // The tail's counts are departures from the recent level over the history, whose
                // dependence is the dispersion of the history's hourly counts (at least 1).
                let mut dispersion: f64 = 1.0;
                for (p, f) in sel {
                    let (base, base_m, post, post_n, tolerance) = if tail {
                        let Some(r) = f.tail else { continue };
                        dispersion = dispersion.max(r.dispersion);
                        (r.above, r.m, p.above_tail, p.tail_n, r.tolerance)
                    } else {
                        (f.above, f.m as f64, p.above, p.n, f.above_tolerance)
                    };
                    // One more above and one more probe: a new probe exceeds the j-th smallest
                    // of m exchangeable values with probability (m − j + 1)/(m + 1), one more
                    // than the baseline's own count above it (a p99 of 36 probes is their
                    // largest, which 1 in 37 new probes exceed, not none: with 10 scenarios at
                    // 0.01 probes/s each this raised 62 false tail alarms in 300 days).
                    k1 += base * base_m + 1.0;
                    m += base_m + 1.0;
                    k2 += post * post_n;
                    n += post_n;
                    tol_e += post_n * tolerance;
                }
                if n < 1.0 || m < 1.0 {
                    return None;
                }
                let p0 = (k1 / m).clamp(1.0 / m, 1.0 - 1.0 / m);
                // One scenario's probes share its own part of the load (its sensitivity).
                let scale = if own { own_scale(sel.iter().map(|x| x.1)) } else { 1.0 };
                let kappa = exceedance_cov_ratio(normal_quantile(1.0 - p0), rho * scale) / (p0 * (1.0 - p0));
                let load = if own { shared * scale / (probe_var * (1.0 / n + 1.0 / m)) } else { deff - 1.0 };
                let d = if tail {
                    dispersion
                } else if load.is_finite() {
                    1.0 + kappa * load.max(0.0)
                } else {
                    deff
                };
                let p = binomial_sf(k2 / d, (k1 + k2) / d, n / (n + m));
                Some((p, k2 / n - k1 / m >= tol_e / n))
            };
            // The post-grace probes of the window and of each half: all, early, late; the mean
            // and the exceedance test, each with `share` of the signal's error level, the mean's
            // against the baseline part `span`.
            let verdicts = |sel: &[(f64, [Part; 3], &LatencyFrozen)], share: f64, own: bool, span: usize| -> Option<[TestResult; 2]> {
                let pick = |j: usize| sel.iter().map(|(w, p, f)| (*w * p[j].n / p[0].n.max(1.0), p[j], *f)).collect::<Vec<_>>();
                let exceed = |j: usize| counts(&pick(j).iter().map(|(_, p, f)| (*p, *f)).collect::<Vec<_>>(), false, own);
                let result = |test: &dyn Fn(usize) -> Option<(f64, bool)>| {
                    let (p, large) = test(0)?;
                    Some(TestResult::new(p, (looks, share), large, persists(test(1), test(2), s.confirm_alpha)))
                };
                Some([result(&|j| mean(&pick(j), own, span))?, result(&exceed)?])
            };
            let all: Vec<(f64, [Part; 3], &LatencyFrozen)> = parts.iter().map(|(_, p, f)| (p[0].n, *p, *f)).collect();
            let pooled_span = best_span(&all.iter().map(|(w, p, f)| (*w, p[0], *f)).collect::<Vec<_>>());
            // The smallest slowdown the pooled mean test would find with DETECTABLE_POWER at this
            // look: its standard error (probe-weighted, times the design effect) times the sum
            // of the two normal quantiles.
            let total: f64 = all.iter().map(|x| x.1[0].n).sum();
            if total >= 2.0 {
                let var: f64 =
                    all.iter().map(|(w, p, f)| (w / total).powi(2) * (p[0].var.max(f.var) / p[0].n.max(1.0) + f.var / f.spans[pooled_span].0.max(1.0))).sum();
                let z = normal_quantile(1.0 - alpha * 0.2 / looks) + normal_quantile(DETECTABLE_POWER);
                detectable = Some((z * (var * span_dep[pooled_span].0).sqrt()).exp());
            }
            // Pooled: mean and exceedance 0.4 of the pooled share each, tail 0.2.
            if let Some(v) = verdicts(&all, 0.2, false, pooled_span) {
                pooled.extend(v);
            }
            let pick = |j: usize| all.iter().map(|(_, p, f)| (p[j], *f)).collect::<Vec<_>>();
            if let Some((p, large)) = counts(&pick(0), true, false) {
                pooled.push(TestResult::new(p, (looks, 0.1), large, persists(counts(&pick(1), true, false), counts(&pick(2), true, false), s.confirm_alpha)));
            }
            // Each scenario against the others at the same time (the contrast): the shared load
            // and the daily cycle move them all and cancel, save for how differently scenarios
            // feel load (`sensitivity`); what is left is the probes' own noise. It finds
            // a regression of one scenario under load that its own before/after test cannot
            // see. A regression of all scenarios moves no contrast: the pooled tests find it.
            let contrast = |i: usize, j: usize| -> Option<(f64, bool)> {
                let change = |p: &Part, f: &LatencyFrozen| (p.mean - f.mean, p.var.max(f.var) / p.n + f.var / f.m as f64);
                let (_, me, fi) = parts.iter().find(|x| x.0 == i)?;
                if me[j].n < 2.0 {
                    return None;
                }
                let others: Vec<(f64, (f64, f64))> = parts.iter().filter(|x| x.0 != i && x.1[j].n >= 2.0).map(|(_, p, f)| (p[j].n, change(&p[j], f))).collect();
                let total: f64 = others.iter().map(|o| o.0).sum();
                if total <= 0.0 {
                    return None;
                }
                let (d_o, v_o) = others.iter().fold((0.0, 0.0), |(d, v), (n, (dc, vc))| (d + n / total * dc, v + (n / total).powi(2) * vc));
                let (d_i, v_i) = change(&me[j], fi);
                let d = d_i - d_o;
                let v = v_i + v_o + fi.sensitivity.contrast * shared;
                Some((normal_sf(d / v.sqrt()), d >= tol))
            };
            for (i, p, f) in &parts {
                // The scenario's share: its own mean and exceedance tests and the contrast.
                scen[*i] = verdicts(&[(1.0, *p, *f)], SCENARIO_OWN_SHARE / kk, true, FULL_SPAN).map(|[m, e]| {
                    // Alone (no other scenario to compare with), the contrast passes nothing.
                    let c = contrast(*i, 0).map_or(TestResult::new(1.0, (1.0, 1.0), false, (false, false)), |(p, large)| {
                        TestResult::new(p, (looks, SCENARIO_CONTRAST_SHARE / kk), large, persists(contrast(*i, 1), contrast(*i, 2), s.confirm_alpha))
                    });
                    [m, e, c]
                });
            }
            self.targets[ti].alarm_deff[k] = deff_raw;
        }
        self.targets[ti].detectable[signal.index()] = detectable;
        self.apply_release_look(ti, signal, end, &pooled, &scen, alpha);
    }

    fn apply_release_look(&mut self, ti: usize, signal: Signal, now: f64, pooled: &[TestResult], scen: &[Option<[TestResult; 3]>], alpha: f64) {
        let k = signal.index();
        let attribution = self.settings.attribution_alpha;
        let baseline = self.baseline_ref(ti, signal);
        let t = &mut self.targets[ti];
        let evidence = |v: &TestResult| -(v.p_adj.max(1e-300)).ln();
        let mut events = Vec::new();
        let all = pooled.iter().chain(scen.iter().flatten().flatten());
        let best = all.clone().map(evidence).fold(f64::NEG_INFINITY, f64::max);
        let any_pass = all.clone().any(|v| v.passes(alpha));
        // A change held back at this look as one that began after the marker.
        let late_onset = all.clone().any(|v| v.late_onset && v.p_adj <= alpha);
        t.late_onset[k] = late_onset;
        t.late_onset_looks += u32::from(late_onset);
        let pooled_pass = pooled.iter().any(|v| v.passes(alpha));
        {
            let r = &mut t.pooled[k];
            if best.is_finite() {
                r.log_e = best;
                r.max_log_e = r.max_log_e.max(best);
            }
            if r.state == State::Watching && any_pass {
                *r = SignalState { state: State::Regressed, source: Some(Cause::Release), changed: Some(now), ..*r };
                t.recovery_ref[k] = baseline;
                events.push((None, State::Regressed));
            }
        }
        let pooled_release = t.pooled[k].state == State::Regressed && t.pooled[k].source == Some(Cause::Release);
        for (i, sc) in t.scenarios.iter_mut().enumerate() {
            let Some(v) = scen.get(i).copied().flatten() else { continue };
            let r = &mut sc.rows[k];
            let le = v.iter().map(evidence).fold(f64::NEG_INFINITY, f64::max);
            r.log_e = le;
            r.max_log_e = r.max_log_e.max(le);
            let own = v.iter().any(|x| x.passes(alpha));
            let attributed = pooled_pass && pooled_release && v.iter().any(|x| x.p <= attribution && x.confirmed);
            if r.state == State::Watching && (own || attributed) {
                *r = SignalState { state: State::Regressed, source: Some(Cause::Release), changed: Some(now), ..*r };
                events.push((Some(sc.name.clone()), State::Regressed));
            }
        }
        let name = t.name.clone();
        for (scenario, state) in events {
            self.events.push(StateChange { target: name.clone(), scenario, signal, state, source: Cause::Release, at: now });
        }
    }

    /// The reference of a release alarm's recovery test: the baseline bins, and the baseline bad
    /// fraction (goodput).
    fn baseline_ref(&self, ti: usize, signal: Signal) -> Option<(i64, i64, f64)> {
        let s = &self.settings;
        let t = &self.targets[ti];
        let marker = t.frozen_at?;
        if signal == Signal::Goodput {
            let f = t.good_frozen.as_ref()?;
            Some((self.bin_of(marker - s.goodput_baseline_s), self.bin_of(marker), f.p_bad()))
        } else {
            Some((self.bin_of(marker - s.latency_baseline_s), self.bin_of(marker), 0.0))
        }
    }

    /// "No longer worse": a regressed row recovers when its last `RECOVERY_BINS` bins are below
    /// the still-regressed alternative with confidence 1 − `recovery_alpha`, and (latency) their
    /// estimated change below the tolerance.
    pub(super) fn recovery(&mut self, ti: usize, signal: Signal, bin: i64, now: f64) {
        let s = &self.settings;
        let k = signal.index();
        let t = &self.targets[ti];
        let pooled = t.pooled[k];
        let any = pooled.state == State::Regressed || t.scenarios.iter().any(|sc| sc.rows[k].state == State::Regressed);
        if !any {
            return;
        }
        let z_rec = normal_quantile(1.0 - s.recovery_alpha);
        // Hysteresis: the change must also be back below the tolerance an alarm needs. A change
        // between the two (a ramp early on: above 1.05, clearly below the continuous test's 1.20)
        // would otherwise recover and alarm again at once.
        let tol = s.latency_tolerance.ln();
        let continuous = pooled.source == Some(Cause::Continuous);
        let recent = (bin + 1 - RECOVERY_BINS, bin + 1);
        let since = |r: &SignalState| r.changed.map_or(i64::MAX, |c| self.bin_after(c));
        let mut recovered_pooled = false;
        if pooled.state == State::Regressed
            && recent.0 >= since(&pooled)
            && let Some((a, b, p0)) = t.recovery_ref[k]
        {
            recovered_pooled = if signal == Signal::Goodput {
                let me = if continuous { s.continuous_goodput_min_effect } else { s.goodput_min_effect };
                // A continuous alarm counted failures only (continuous.rs): so does its recovery.
                let bins: Vec<(u32, u32)> = (recent.0..recent.1).filter_map(|x| t.hist.get(x)).filter(|h| !h.outage()).map(|h| h.counts(continuous)).collect();
                bad_share_below(&bins, p0 + me, z_rec)
            } else {
                let me = if continuous { s.continuous_latency_min_effect } else { s.latency_min_effect }.ln();
                // The variance of independent bins times the design effect at the alarm: the
                // history now holds the regression itself, which would inflate a fresh estimate.
                match t.hist.vario[k].nugget() {
                    Some(nugget) => {
                        let (mr, nr) = t.hist.block_mean(k, (a, b), true);
                        let (mb, nb) = t.hist.block_mean(k, recent, false);
                        let var = nugget * (1.0 / nr.max(1) as f64 + 1.0 / nb.max(1) as f64) * t.alarm_deff[k];
                        nr > 0 && nb as i64 * 2 >= RECOVERY_BINS && (mb - mr - me) / var.sqrt() <= -z_rec && mb - mr < tol
                    }
                    None => false,
                }
            };
        }
        // Scenario rows: their own recent probes against their frozen baseline.
        let from = recent.0 as f64 * s.bin_s;
        let mut recovered_scen = vec![false; t.scenarios.len()];
        for (i, sc) in t.scenarios.iter().enumerate() {
            let r = &sc.rows[k];
            if r.state != State::Regressed || recent.0 < since(r) {
                continue;
            }
            recovered_scen[i] = if signal == Signal::Goodput {
                let Some(f) = &sc.goodput.frozen else { continue };
                let bins: Vec<(u32, u32)> = sc.goodput.bins.iter().filter(|b| b.bin >= recent.0 && b.bin < recent.1).map(|b| (b.good, b.bad)).collect();
                bad_share_below(&bins, f.p_bad() + s.goodput_min_effect, z_rec)
            } else {
                let lk = &sc.latency[k];
                let Some(f) = &lk.frozen else { continue };
                let p = lk.post.span(f, from, f64::INFINITY);
                p.n >= MIN_POST && {
                    let var = (p.var.max(f.var) / p.n + f.var / f.m as f64) * t.alarm_deff[k];
                    (p.mean - f.mean - s.latency_min_effect.ln()) / var.sqrt() <= -z_rec && p.mean - f.mean < tol
                }
            };
        }
        let t = &mut self.targets[ti];
        let mut events = Vec::new();
        if recovered_pooled {
            t.pooled[k].state = State::Recovered;
            t.pooled[k].changed = Some(now);
            t.recovery_ref[k] = None;
            events.push((None, t.pooled[k].source.unwrap_or(Cause::Release)));
        }
        for (sc, rec) in t.scenarios.iter_mut().zip(recovered_scen) {
            if rec {
                sc.rows[k].state = State::Recovered;
                sc.rows[k].changed = Some(now);
                events.push((Some(sc.name.clone()), Cause::Release));
            }
        }
        let name = t.name.clone();
        for (scenario, source) in events {
            self.events.push(StateChange { target: name.clone(), scenario, signal, state: State::Recovered, source, at: now });
        }
    }
}

/// The design effect the goodput counts carry from latency: SLO misses are latencies above a
/// threshold, so the load that moves latency moves them. Their part of the contrast's variance is
/// the count coupling squared times the load's part of the latency contrast (the raw latency
/// dependence frozen at the marker). The counts' own variogram says the same far less surely:
/// a few misses a bin over 12 hours estimate the load's tenth of their variance to about half,
/// and a day whose estimate fell short alarmed on a load swing (in the planner, a TTFT SLO under
/// load sd 0.1 with a 15-minute time constant: 37 release alarms in 1,000 days, against 9
/// without the SLO). The detector does not know which latency an SLO bounds; each signal's
/// coupling sees only the load it shares with the counts, so the largest is taken. 1 where no
/// signal's coupling is known.
fn coupled_design_effect(t: &TargetState, f: &GoodFrozen, base: (i64, i64), post: (i64, i64), bin_s: f64) -> f64 {
    let iid = f.var() * (1.0 / (base.1 - base.0).max(1) as f64 + 1.0 / (post.1 - post.0).max(1) as f64);
    let load = (0..3)
        .filter_map(|k| {
            let (beta, d) = (t.good_coupling[k]?, t.dependence_raw[k].as_ref()?);
            Some(beta * beta * d.contrast(base, post, None, bin_s, 0.0).1)
        })
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max);
    if iid > 0.0 { 1.0 + load / iid } else { 1.0 }
}

/// Freezes target `t`'s baselines at `at`: the load adjustment, cache reference, trend and
/// dependence from the history before it, each scenario's latency values and goodput bins of the
/// baseline windows before it.
pub(super) fn freeze(t: &mut TargetState, at: f64, s: &DetectSettings) {
    t.frozen_at = Some(at);
    // The load adjustment: the slope from the history's increments, compared at the
    // baseline hour's mean reading; taken only where it narrows the test (the variance of
    // the baseline against the first ten minutes after the grace window, adjusted against
    // raw, both from the history before the marker).
    let (b0, b1) = (bin_index(at - s.latency_baseline_s, s.bin_s), bin_index(at, s.bin_s));
    let (xs, xn) = (b0..b1).filter_map(|b| t.hist.get(b)).filter(|b| b.x_n > 0).fold((0.0, 0usize), |(a, n), b| (a + b.x as f64, n + 1));
    let p0 = b1 + (s.release_grace_s / s.bin_s).ceil() as i64;
    t.dependence_raw = std::array::from_fn(|k| t.hist.dependence(k, None));
    let swings = |k: usize| {
        let slope = t.hist.vario[k].load_slope()?;
        let adj = t.hist.dependence(k, Some(slope))?;
        let raw = t.dependence_raw[k].as_ref()?;
        let narrower = contrast_var(&adj.gamma, (b0, b1), (p0, p0 + 10)) < (1.0 - MIN_VARIANCE_CUT) * contrast_var(&raw.gamma, (b0, b1), (p0, p0 + 10));
        (xn > 0 && narrower).then(|| Adjust { slope, x_ref: xs / xn as f64, levels: false })
    };
    // Where load does not swing, the increments above cannot see how latency moves with the
    // reading (the reading's own noise is most of them), and a ramp was left to the local
    // trend's extrapolation, which a ramp that began just before the marker defeats. Then the
    // level relation over the whole history is taken: the bin means against the readings (the
    // daily cycle and ramps give the readings their spread), where its slope is over
    // `TREND_GATE_Z` standard errors and with it taken out no clear rise is left before the
    // marker. Fitted over the two hours before the marker only, 15% of releases inside a ramp
    // still alarmed (22% without it); over the history, 2%.
    let levels = |k: usize| {
        if xn == 0 {
            return None;
        }
        let a = Adjust { slope: level_slope(t, k, b1, s)?, x_ref: xs / xn as f64, levels: true };
        t.hist.trend(k, b1, Some(a), s.bin_s).is_none().then_some(a)
    };
    t.adjust = std::array::from_fn(|k| swings(k).or_else(|| levels(k)));
    t.cache_ref = CacheRef::from_bins((b0..b1).filter_map(|b| t.hist.get(b)).map(|b| (b.h, b.h_n)));
    t.trend = std::array::from_fn(|k| t.hist.trend(k, b1, t.adjust[k], s.bin_s));
    t.dependence = std::array::from_fn(|k| match t.adjust[k] {
        Some(a) => t.hist.dependence(k, Some(a.slope)),
        None => t.dependence_raw[k].clone(),
    });
    let (g0, g1) = (bin_index(at - s.goodput_baseline_s, s.bin_s), bin_index(at, s.bin_s));
    let pooled_bins = (g0..g1).filter_map(|b| t.hist.get(b)).filter(|b| !b.outage()).map(|b| (b.good, b.bad));
    let total: u64 = pooled_bins.clone().map(|(g, b)| (g + b) as u64).sum();
    t.good_frozen = if total >= s.min_goodput_baseline as u64 { GoodFrozen::from_bins(pooled_bins) } else { None };
    t.good_gamma = t.good_frozen.as_ref().and_then(|f| t.hist.count_dependence(f.cap, g1, false));
    t.good_coupling = match &t.good_frozen {
        Some(f) => std::array::from_fn(|k| t.hist.count_coupling(k, f.cap, g1)),
        None => [None; 3],
    };
    let from = at - s.latency_baseline_s;
    for k in 0..3 {
        let (a, tr, daily) = (t.adjust[k], t.trend[k].as_ref(), &t.daily[k]);
        // Each scenario's baseline values as the tests compare them, with their replica.
        let vals: Vec<Vec<(f64, f64, Option<NonZeroU32>)>> = t
            .scenarios
            .iter()
            .map(|sc| {
                let lk = &sc.latency[k];
                (0..lk.times.len())
                    .filter(|&i| lk.times[i] >= from && lk.times[i] <= at)
                    .map(|i| (lk.times[i], detrended(lk.value(i, a), lk.times[i], tr, daily), lk.replicas.get(i).copied().flatten()))
                    .collect()
            })
            .collect();
        let winsorized: Vec<Vec<(Option<NonZeroU32>, f64)>> = (t.scenarios.iter().zip(&vals))
            .map(|(sc, v)| {
                let (lo, hi) = sc.latency[k].level.bounds(s.clip_sigmas);
                v.iter().map(|&(_, y, r)| (r, y.clamp(lo, hi))).collect()
            })
            .collect();
        t.replicas[k] = ReplicaOffsets::fit(winsorized.iter().map(Vec::as_slice));
        for (sc, v) in t.scenarios.iter_mut().zip(vals) {
            let lk = &mut sc.latency[k];
            let v: Vec<(f64, f32)> = v.into_iter().map(|(tm, y, r)| (tm, (y - t.replicas[k].of(r)) as f32)).collect();
            lk.frozen = if v.len() >= s.min_latency_baseline {
                LatencyFrozen::from_values(
                    &v,
                    at,
                    s.latency_baseline_s,
                    lk.level.bounds(s.clip_sigmas),
                    lk.tail.freeze(at, s.tail_quantile, s.latency_tolerance.ln(), s.min_latency_baseline),
                    s,
                )
            } else {
                None
            };
        }
    }
    for sc in &mut t.scenarios {
        let hist = &t.hist;
        let g = &mut sc.goodput;
        let bins = g.bins.iter().filter(|b| b.bin >= g0 && b.bin < g1 && !hist.get(b.bin).is_some_and(HistBin::outage)).map(|b| (b.good, b.bad));
        let total: u64 = bins.clone().map(|(g, b)| (g + b) as u64).sum();
        g.frozen = if total >= s.min_goodput_baseline as u64 { GoodFrozen::from_bins(bins) } else { None };
    }
    // How much each scenario feels the shared load, from its values (adjusted as the tests adjust
    // them, the daily shape out, winsorized) over the hours before the marker.
    let from = at - s.history_s.min(SENSITIVITY_SPAN_S);
    for k in 0..3 {
        let (a, daily) = (t.adjust[k], &t.daily[k]);
        let series: Vec<Vec<(i64, f64)>> = t
            .scenarios
            .iter()
            .map(|sc| {
                let lk = &sc.latency[k];
                let (lo, hi) = lk.level.bounds(s.clip_sigmas);
                (0..lk.times.len())
                    .filter(|&i| lk.times[i] >= from && lk.times[i] <= at)
                    .map(|i| (bin_index(lk.times[i], s.bin_s), (lk.value(i, a) - daily.value(lk.times[i])).clamp(lo, hi)))
                    .collect()
            })
            .collect();
        for (sc, found) in t.scenarios.iter_mut().zip(sensitivities(&series)) {
            if let (Some(f), Some(x)) = (sc.latency[k].frozen.as_mut(), found) {
                f.sensitivity = x;
            }
        }
    }
}

/// The level relation of signal `k`'s latency and the offered-load reading over the history
/// before bin `to` (at most `LEVEL_SPAN_MAX_BINS`), where its slope is over `TREND_GATE_Z`
/// standard errors.
pub(super) fn level_slope(t: &TargetState, k: usize, to: i64, s: &DetectSettings) -> Option<f64> {
    let span = ((s.history_s / s.bin_s).round() as i64).min(LEVEL_SPAN_MAX_BINS);
    let season = |b: i64| {
        let c = bin_centre(b, s.bin_s);
        (t.daily[k].value(c), t.reading_daily.value(c))
    };
    let (slope, se) = t.hist.reading_level_slope(k, span, to, season)?;
    (slope > TREND_GATE_Z * se).then_some(slope)
}

/// The scale of the shared load's variance for one scenario's own test (its sensitivity; the
/// largest where a set is given).
fn own_scale<'a>(fs: impl Iterator<Item = &'a LatencyFrozen>) -> f64 {
    fs.map(|f| f.sensitivity.own).fold(0.0, f64::max)
}

/// A log latency with the release window's frozen trend (where there is one) and the daily shape
/// (where one is in use) taken out: the value the release tests compare.
pub(super) fn detrended(y: f64, time: f64, trend: Option<&Trend>, daily: &DailyShape) -> f64 {
    trend.map_or(y, |tr| tr.detrend(y, time)) - daily.value(time)
}

/// Whether the bad share of `bins` is below `limit` with confidence given by `z` (normal
/// approximation, the variance at the larger of the share and the limit). Needs 20 probes.
fn bad_share_below(bins: &[(u32, u32)], limit: f64, z: f64) -> bool {
    let n: f64 = bins.iter().map(|(g, b)| (g + b) as f64).sum();
    if n < 20.0 {
        return false;
    }
    let p = bins.iter().map(|(_, b)| *b as f64).sum::<f64>() / n;
    let v = (p * (1.0 - p)).max(limit.clamp(0.0, 1.0) * (1.0 - limit.clamp(0.0, 1.0))).max(1e-9);
    (p - limit) / (v / n).sqrt() <= -z
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::state::{Marked, MarkerTime, Observation};
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, StandardNormal};

    #[test]
    fn quiet_streams_stay_watching() {
        // 10 release windows without a change; the budget is 1.5% per window for the target.
        let mut alarms = 0;
        for seed in 0..10 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
            d.mark_release("t", "v2", t, MarkerTime::Stated, t);
            let end = feed(&mut d, &mut rng, t, 3600, |r, _, _| probe(r, 1.0));
            alarms += d.drain_events().iter().filter(|e| e.state == State::Regressed).count();
            d.tick(end);
            assert!(!pooled(&d, Signal::Ttft).armed, "the window closed");
        }
        assert_eq!(alarms, 0, "{alarms} false alarms in 10 windows");
    }

    #[test]
    fn doubling_is_detected_at_the_first_look_after_the_grace_window() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        feed(&mut d, &mut rng, t, 600, |r, _, _| probe(r, 2.0));
        let at = first_alarm(&mut d, Signal::Ttft, t).expect("2x detected within 10 min");
        assert!((540.0..=600.0).contains(&at), "detected {at} s after the marker");
        let r = pooled(&d, Signal::Ttft);
        assert_eq!((r.state, r.source), (State::Regressed, Some(Cause::Release)));
        assert!(r.log_evidence >= r.threshold && r.p_value <= 0.015 / 6.0, "{r:?}");
        let m = r.median_ratio.expect("median ratio");
        assert!(m.low < 2.0 && 2.0 < m.high && m.low > 1.5, "{m:?}");
        let regressed = d.report().iter().filter(|r| r.scenario.is_some() && r.signal == Signal::Ttft && r.state == State::Regressed).count();
        assert_eq!(regressed, 3, "every scenario is named");
    }

    #[test]
    fn a_rollout_warm_up_is_no_regression() {
        // 2x for 5 minutes and 10% errors for 2 minutes after the marker, then healed.
        let mut alarms = 0;
        for seed in 0..5 {
            let mut rng = SmallRng::seed_from_u64(100 + seed);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
            d.mark_release("t", "v2", t, MarkerTime::Stated, t);
            feed(&mut d, &mut rng, t, 3600, |r, _, now| {
                if now - t < 120.0 && r.random_bool(0.1) {
                    return Observation { good: Some(false), ..Observation::default() };
                }
                probe(r, if now - t < 300.0 { 2.0 } else { 1.0 })
            });
            alarms += d.drain_events().iter().filter(|e| e.state == State::Regressed).count();
        }
        assert_eq!(alarms, 0);
    }

    #[test]
    fn one_slower_scenario_is_found_and_named() {
        let mut rng = SmallRng::seed_from_u64(9);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        feed(&mut d, &mut rng, t, 1200, |r, s, _| probe(r, if s == 1 { 1.6 } else { 1.0 }));
        assert!(first_alarm(&mut d, Signal::Ttft, t).is_some(), "the pooled row regressed");
        let rows = d.report();
        let state = |name: &str| rows.iter().find(|r| r.scenario.as_deref() == Some(name) && r.signal == Signal::Ttft).map(|r| r.state);
        assert_eq!(state("b"), Some(State::Regressed));
        assert_eq!((state("a"), state("c")), (Some(State::Watching), Some(State::Watching)));
    }

    #[test]
    fn a_slower_cache_miss_mode_is_detected() {
        // 70% prefix-cache hits at 100 ms, misses at 3x; the release makes misses 1.5x slower.
        let bimodal = |r: &mut SmallRng, miss_factor: f64| {
            let miss = r.random_bool(0.3);
            let median = if miss { 0.3 * miss_factor } else { 0.1 };
            Observation { ttft: Some(lognormal(r, median, 0.3)), tpot: None, e2e: None, good: Some(true), ..Default::default() }
        };
        let mut rng = SmallRng::seed_from_u64(21);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| bimodal(r, 1.0));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        feed(&mut d, &mut rng, t, 1800, |r, _, _| bimodal(r, 1.5));
        assert!(first_alarm(&mut d, Signal::Ttft, t).is_some_and(|at| at <= 1800.0));
    }

    #[test]
    fn a_ramp_before_the_marker_is_taken_out_and_a_regression_on_it_still_found() {
        // Latency rises 1.4x an hour (a morning ramp) from two hours before the marker on.
        let ramp = |now: f64| (1.4f64.ln() * (now - 7200.0).max(0.0) / 3600.0).exp();
        let run = |factor: f64, seed: u64| {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 14_400, |r, _, now| probe(r, ramp(now)));
            d.mark_release("t", "v2", t, MarkerTime::Stated, t);
            feed(&mut d, &mut rng, t, 1800, |r, _, now| probe(r, ramp(now) * factor));
            let trend = pooled(&d, Signal::Ttft).trend_per_hour;
            (first_alarm(&mut d, Signal::Ttft, t), trend)
        };
        let (alarm, trend) = run(1.0, 41);
        assert_eq!(alarm, None, "the ramp alone is no regression");
        assert!(trend.is_some_and(|f| (f - 1.4).abs() < 0.15), "{trend:?}");
        assert!(run(1.5, 42).0.is_some(), "a 1.5x release during the ramp is still found");
    }

    /// Latency that wanders (±15% over a 4-hour cycle) and a 1.5x release at its steepest fall:
    /// the whole hour before the marker is about 17% above the first probes after it, which eats most
    /// of the slowdown and, with the wander's variance, all of the test's power; the newest
    /// quarter of it is 7% above them, and the mean test compares with the part whose contrast
    /// the history's dependence says is narrowest.
    #[test]
    fn a_release_during_a_fall_is_compared_with_the_newest_part_of_the_baseline() {
        let wander = |now: f64| (0.15 * (std::f64::consts::TAU * now / 14_400.0).sin()).exp();
        let mut found = 0;
        for seed in 0..4 {
            let mut rng = SmallRng::seed_from_u64(300 + seed);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, _, now| probe(r, wander(now)));
            d.mark_release("t", "v2", t, MarkerTime::Stated, t);
            feed(&mut d, &mut rng, t, 900, |r, _, now| probe(r, 1.5 * wander(now)));
            found += usize::from(first_alarm(&mut d, Signal::Ttft, t).is_some());
        }
        assert_eq!(found, 4, "{found} of 4 releases found within 15 minutes");
    }

    #[test]
    fn a_late_marker_tests_the_probes_since_its_time() {
        let mut rng = SmallRng::seed_from_u64(32);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        // Released at t, 2x slower from then on; the marker comes 20 minutes later with its time.
        let told = feed(&mut d, &mut rng, t, 1200, |r, _, _| probe(r, 2.0));
        assert_eq!(d.mark_release("t", "v2", t, MarkerTime::Stated, told), Marked::Armed { at: t, chained: false });
        assert!(ttft_alarm(&d.drain_events()), "judged at once from the probes since its time");
        let row = pooled(&d, Signal::Ttft);
        assert_eq!((row.marker_s, row.armed), (Some(t), true));
        assert!(row.samples >= 800, "the post-grace probes since t count: {}", row.samples);
        // A time older than marker_max_delay_s is taken as that long ago; a future one as now.
        let mut e = Detector::new(quiet());
        let max = e.settings().marker_max_delay_s;
        assert_eq!(e.mark_release("t", "v2", 0.0, MarkerTime::Stated, 10_000.0), Marked::Armed { at: 10_000.0 - max, chained: false });
        assert_eq!(e.mark_release("u", "v2", 20_000.0, MarkerTime::Stated, 10_000.0), Marked::Armed { at: 10_000.0, chained: false });
        assert_eq!(e.mark_release("u", "v2", f64::NAN, MarkerTime::Stated, 10_000.0), Marked::Ignored);
    }

    #[test]
    fn an_incident_earlier_in_the_day_does_not_widen_the_release_test() {
        // 15 minutes at 3x, two hours before the release; the release is 1.3x slower.
        let deff_and_alarm = |incident: bool| {
            let mut rng = SmallRng::seed_from_u64(33);
            let mut d = Detector::new(quiet());
            let slow = |t: f64| if incident && (14_400.0..15_300.0).contains(&t) { 3.0 } else { 1.0 };
            let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, _, t| probe(r, slow(t)));
            d.mark_release("t", "v2", t, MarkerTime::Stated, t);
            feed(&mut d, &mut rng, t, 1800, |r, _, _| probe(r, 1.3));
            let tt = &d.targets[0];
            let base = (d.bin_of(t - 3600.0), d.bin_of(t));
            let deff = tt.dependence[0].as_ref().expect("dependence").design_effect(base, (base.1 + 5, base.1 + 30));
            // Before the marker (the release's own shift after it is flagged too).
            let excluded = tt.hist.bins.iter().zip(tt.hist.first..).filter(|(b, i)| b.excluded[0] && *i < base.1).count();
            (deff, ttft_alarm(&d.drain_events()), excluded)
        };
        let (clean, found_clean, _) = deff_and_alarm(false);
        let (after_incident, found, excluded) = deff_and_alarm(true);
        assert!((13..=17).contains(&excluded), "the incident's bins are left out: {excluded}");
        assert!(after_incident < 1.5 * clean, "design effect {after_incident} after the incident, {clean} without");
        assert!(found_clean && found, "the release is found with and without the incident");
    }

    /// A change the late half shows far more strongly than the early one began after the
    /// marker; one that holds from the marker, or ramps up from it, persists.
    #[test]
    fn persistence_asks_that_the_change_began_at_the_marker() {
        let half = |z: f64| Some((normal_sf(z), true));
        assert_eq!(persists(half(6.0), half(6.5), 0.05), (true, false), "the same change in both halves");
        assert_eq!(persists(half(3.0), half(9.0), 0.05), (true, false), "a ramp from the marker: the early half a third of the late");
        assert_eq!(persists(half(2.0), half(20.0), 0.05), (false, true), "a change that began in the late half");
        assert_eq!(persists(half(1.0), half(4.0), 0.05), (false, false), "the early half must show it on its own");
        assert_eq!(persists(Some((1e-9, false)), half(6.0), 0.05), (false, false), "nor reach the tolerance");
        assert_eq!(persists(None, half(6.0), 0.05), (false, false));
        assert_eq!(persists(Some((0.0, true)), Some((0.0, true)), 0.05), (true, false), "p underflowed in both halves");
    }

    /// A quarter hour of 2x latency that begins 25 or 30 minutes after the marker is in the late
    /// half of every look that sees it; its early half is clean. Asked only to show the change,
    /// one scenario's early half passed by chance in 4 of these 20 runs (at 1 probe/s).
    #[test]
    fn an_incident_that_begins_half_an_hour_after_the_marker_is_no_release_regression() {
        let (mut alarms, mut held_back) = (Vec::new(), 0);
        for (offset, seed) in [1500.0, 1800.0].into_iter().flat_map(|o| (0..10).map(move |s| (o, s))) {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, _, _| probe(r, 1.0));
            d.mark_release("t", "v2", t, MarkerTime::Stated, t);
            let slow = move |now: f64| if (t + offset..t + offset + 900.0).contains(&now) { 2.0 } else { 1.0 };
            feed(&mut d, &mut rng, t, 3600, |r, _, now| probe(r, slow(now)));
            if first_alarm(&mut d, Signal::Ttft, t).is_some() {
                alarms.push((offset, seed));
            }
            held_back += u32::from(d.targets[0].late_onset_looks > 0);
        }
        assert!(alarms.is_empty(), "alarms (offset, seed): {alarms:?}");
        // The four that alarmed before were held back, and said so (`SignalReport::late_onset`).
        assert!(held_back >= 4, "{held_back} windows held a change back");
    }

    /// A quarter hour of 2x latency that begins 28 minutes after the marker fills most of the
    /// window's late half and a few minutes of its early one; those minutes must not make the
    /// early half "show" a change the rest of it does not. A 2x step from the marker on is
    /// still found at the first look.
    #[test]
    fn an_incident_late_in_the_window_is_no_release_regression() {
        let run = |seed: u64, incident: (f64, f64)| {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, _, _| probe(r, 1.0));
            d.mark_release("t", "v2", t, MarkerTime::Stated, t);
            let slow = |now: f64| if (t + incident.0..t + incident.1).contains(&now) { 2.0 } else { 1.0 };
            feed(&mut d, &mut rng, t, 3600, |r, _, now| probe(r, slow(now)));
            first_alarm(&mut d, Signal::Ttft, t)
        };
        let alarms: Vec<u64> = (0..8).filter(|seed| run(*seed, (1680.0, 2580.0)).is_some()).collect();
        assert!(alarms.is_empty(), "alarms for the incident with seeds {alarms:?}");
        let step = run(0, (0.0, f64::INFINITY));
        assert!(step.is_some_and(|s| s <= 600.0), "a 2x step from the marker: {step:?}");
    }

    /// A quarter hour of 2x latency that began 3 minutes before a marker of stated time, sent on
    /// time, is not the release's: the window's latency probes wait until it ends. A 2x shift
    /// that began there and stays is found once its bins are no longer flagged (delayed, not
    /// dropped). A marker whose time is when it was seen (discovery, a behaviour change) may
    /// follow its own release's slowdown, so it holds nothing: the same incident alarms, and a
    /// shift that stays is found at the first looks. A restart while the incident runs keeps
    /// the hold (the snapshot's window says its marker holds).
    #[test]
    fn an_incident_running_at_a_marker_of_stated_time_is_not_the_releases() {
        let run = |seed: u64, stays: bool, time: MarkerTime, restart: bool| {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 21_420, |r, _, _| probe(r, 1.0));
            let (start, marker) = (t, t + 180.0);
            let slow = move |now: f64| if stays || now < start + 900.0 { 2.0 } else { 1.0 };
            let t = feed(&mut d, &mut rng, t, 180, |r, _, now| probe(r, slow(now)));
            d.mark_release("t", "v2", marker, time, marker);
            // 8 minutes in, the incident (a quarter hour from 3 minutes before) still runs.
            let t = feed(&mut d, &mut rng, t, 480, |r, _, now| probe(r, slow(now)));
            assert_eq!(pooled(&d, Signal::Ttft).incident_hold, time == MarkerTime::Stated, "seed {seed}");
            if restart {
                let bytes = d.snapshot();
                d = Detector::new(quiet());
                assert_eq!(d.restore(&bytes, t).map(|r| r.releases), Ok(1));
                assert_eq!(pooled(&d, Signal::Ttft).incident_hold, time == MarkerTime::Stated, "after the restart (seed {seed})");
            }
            feed(&mut d, &mut rng, t, 3120, |r, _, now| probe(r, slow(now)));
            if !stays {
                assert!(!pooled(&d, Signal::Ttft).incident_hold, "the incident ended (seed {seed})");
            }
            first_alarm(&mut d, Signal::Ttft, marker)
        };
        for restart in [false, true] {
            let alarms: Vec<u64> = (0..8).filter(|seed| run(*seed, false, MarkerTime::Stated, restart).is_some()).collect();
            assert!(alarms.is_empty(), "alarms for the incident with seeds {alarms:?} (restart {restart})");
        }
        let stays = run(0, true, MarkerTime::Stated, false);
        assert!(stays.is_some_and(|s| s > 600.0), "a shift from before the marker that stays, found late: {stays:?}");
        let seen: Vec<u64> = (0..8).filter(|seed| run(*seed, false, MarkerTime::Seen, false).is_some()).collect();
        assert!(seen.len() >= 6, "a marker of the time it was seen holds nothing: alarms with seeds {seen:?}");
        let stays = run(0, true, MarkerTime::Seen, false);
        assert!(stays.is_some_and(|s| s <= 600.0), "a shift that stays, marker of the time it was seen: {stays:?}");
    }

    #[test]
    fn the_slowest_few_percent_made_slower_is_found_by_the_tail_test() {
        // The median holds; the slowest 5% of requests (their own draw) become 3x slower. (The
        // planner measures the power for 3%: docs/detection.md.)
        let tailed = |r: &mut SmallRng, slower: bool| {
            let z: f64 = StandardNormal.sample(r);
            let f = if slower && z > normal_quantile(0.95) { 3.0 } else { 1.0 };
            Observation { ttft: Some(0.2 * (0.5 * z).exp() * f), tpot: None, e2e: None, good: Some(true), ..Default::default() }
        };
        let mut rng = SmallRng::seed_from_u64(34);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, _, _| tailed(r, false));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        feed(&mut d, &mut rng, t, 3600, |r, _, _| tailed(r, true));
        assert!(first_alarm(&mut d, Signal::Ttft, t).is_some(), "the tail test sees it");
        let median = pooled(&d, Signal::Ttft).median_ratio.expect("median ratio");
        assert!((0.9..1.1).contains(&median.value), "the median held: {median:?}");
    }

    #[test]
    fn thin_baselines_make_no_tail_alarm() {
        // Ten scenarios at 0.01 probes/s each: about 36 probes in a baseline hour, whose p99 is
        // their largest, which 1 in 37 new probes exceed. Counted as none above, an unchanged
        // release alarmed on the tail test in about one release in five.
        let names: Vec<String> = (0..10).map(|i| format!("s{i}")).collect();
        let mut alarmed = 0;
        for seed in 0..20 {
            let mut rng = SmallRng::seed_from_u64(500 + seed);
            let mut d = Detector::new(quiet());
            let marker = 6.0 * 3600.0;
            for i in 0..(7 * 360) {
                let t = i as f64 * 10.0;
                if i == 6 * 360 {
                    d.mark_release("t", "v2", marker, MarkerTime::Stated, marker);
                }
                d.observe("t", &names[i % 10], probe(&mut rng, 1.0), t);
            }
            alarmed += usize::from(first_alarm(&mut d, Signal::Ttft, marker).is_some());
        }
        assert_eq!(alarmed, 0, "unchanged releases alarmed");
    }

    #[test]
    fn a_release_is_pending_from_its_marker_until_the_first_look() {
        let mut rng = SmallRng::seed_from_u64(36);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        assert!(!pooled(&d, Signal::Ttft).pending, "no marker, nothing pending");
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        // The grace window (300 s) and 3 of the 4 bins before the first look.
        let t2 = feed(&mut d, &mut rng, t, 480, |r, _, _| probe(r, 1.0));
        assert!(pooled(&d, Signal::Goodput).pending && pooled(&d, Signal::Ttft).pending);
        feed(&mut d, &mut rng, t2, 120, |r, _, _| probe(r, 1.0));
        assert!(!pooled(&d, Signal::Ttft).pending, "the first look has come");
        assert!(pooled(&d, Signal::Ttft).armed);
    }

    fn flaky(r: &mut SmallRng, p: f64) -> Observation {
        if r.random_bool(p) { Observation { good: Some(false), ..Observation::default() } } else { probe(r, 1.0) }
    }

    #[test]
    fn goodput_drop_is_detected_and_an_outage_is_not_a_goodput_regression() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7 * 3600, |r, _, _| flaky(r, 0.005));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        feed(&mut d, &mut rng, t, 1200, |r, _, _| flaky(r, 0.05));
        assert!(first_alarm(&mut d, Signal::Goodput, t).is_some());
        let r = pooled(&d, Signal::Goodput);
        let delta = r.bad_delta.expect("bad delta");
        assert!(delta.low > 0.0 && delta.value > 0.02, "{delta:?}");
        assert_eq!(pooled(&d, Signal::Ttft).state, State::Watching);

        // A 90 s total outage ten minutes after a release: availability, not a regression.
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7 * 3600, |r, _, _| flaky(r, 0.005));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        feed(&mut d, &mut rng, t, 3600, |r, _, now| if (600.0..690.0).contains(&(now - t)) { flaky(r, 1.0) } else { flaky(r, 0.005) });
        assert_eq!(first_alarm(&mut d, Signal::Goodput, t), None);
    }

    /// Three scenarios that feel a shared load (log sd 0.2, 5 minutes) by 0.5, 1 and 1.5 at
    /// 1 probe/s: at the marker each scenario's row reports its own sensitivity, in that order,
    /// near 0.5, 1 and 1.5 of the pooled one; before any marker, 1 (assumed).
    #[test]
    fn each_scenario_reports_how_much_it_feels_the_shared_load() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut d = Detector::new(quiet());
        let (mut load, a) = (0.0_f64, (-1.0_f64 / 300.0).exp());
        let factors = [0.5, 1.0, 1.5];
        let t = feed(&mut d, &mut rng, 0.0, 5 * 3600, |r, i, _| {
            if i == 0 {
                let z: f64 = StandardNormal.sample(r);
                load = a * load + (1.0 - a * a).sqrt() * 0.2 * z;
            }
            probe(r, (factors[i] * load).exp())
        });
        let sensitivity = |d: &Detector| -> Vec<f64> {
            let rows = d.report();
            SC.iter().map(|n| rows.iter().find(|r| r.scenario.as_deref() == Some(n) && r.signal == Signal::Ttft).expect("row").load_sensitivity).collect()
        };
        assert_eq!(sensitivity(&d), vec![1.0; 3], "not learned before a marker");
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        feed(&mut d, &mut rng, t, 600, |r, _, _| probe(r, 1.0));
        let got = sensitivity(&d);
        assert!((0.3..0.7).contains(&got[0]) && (0.8..1.2).contains(&got[1]) && (1.3..1.7).contains(&got[2]), "{got:?}");
    }

    /// One scenario of six 1.5x slower under a shared load that swings (log sd 0.2, 5 minutes)
    /// at 0.6 probes/s: the scenario's own before/after test carries the load's variance; its
    /// contrast with the other scenarios at the same time does not. Found within the hour in 15
    /// of these 20 runs (9 of 20 without the contrast test), and nothing alarms on the same
    /// streams without the slowdown.
    #[test]
    fn one_scenario_slower_under_shared_load_is_found_against_the_others() {
        let run = |seed: u64, factor: f64| {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut d = Detector::new(quiet());
            let (mut load, a) = (0.0_f64, (-5.0_f64 / 300.0).exp());
            let names = ["a", "b", "c", "d", "e", "f"];
            let marker = 4.0 * 3600.0;
            for i in 0..((5.0 * 3600.0 / 5.0 * 3.0) as usize) {
                let t = i as f64 * 5.0 / 3.0;
                if i == (marker * 3.0 / 5.0) as usize {
                    d.mark_release("t", "v2", marker, MarkerTime::Stated, marker);
                }
                let z: f64 = StandardNormal.sample(&mut rng);
                load = load * a.powf(1.0 / 3.0) + 0.2 * (1.0 - a.powf(2.0 / 3.0)).sqrt() * z;
                let sc = rng.random_range(0..names.len());
                let f = if t >= marker && sc == 0 { factor } else { 1.0 };
                d.observe("t", names[sc], probe(&mut rng, f * load.exp()), t);
            }
            d.drain_events().iter().any(|e| e.state == State::Regressed && e.signal == Signal::Ttft && e.at >= marker)
        };
        let found = (0..20).filter(|&seed| run(800 + seed, 1.5)).count();
        assert!(found >= 13, "found in {found} of 20 (9 without the contrast)");
        let false_alarms = (0..20).filter(|&seed| run(800 + seed, 1.0)).count();
        assert_eq!(false_alarms, 0);
    }

    #[test]
    fn slo_misses_that_come_and_go_with_load_are_no_goodput_regression() {
        // Load swinging over a quarter hour (log latency sd 0.2) and an SLO at 2.5x the median:
        // the miss share rises and falls with the load, so the bins' bad counts move together.
        // Taken as independent bins, releases of an unchanged service alarmed on goodput.
        let mut alarmed = 0;
        for seed in 0..20 {
            let mut rng = SmallRng::seed_from_u64(700 + seed);
            let mut d = Detector::new(quiet());
            let (mut load, a) = (0.0_f64, (-2.0_f64 / 900.0).exp());
            let marker = 7.0 * 3600.0;
            for i in 0..(8 * 1800) {
                let t = i as f64 * 2.0;
                if i == 7 * 1800 {
                    d.mark_release("t", "v2", marker, MarkerTime::Stated, marker);
                }
                let z: f64 = StandardNormal.sample(&mut rng);
                load = load * a + 0.2 * (1.0 - a * a).sqrt() * z;
                let ttft = lognormal(&mut rng, 0.2, 0.5) * load.exp();
                let obs = Observation { ttft: Some(ttft), good: Some(ttft <= 0.5), ..Observation::default() };
                d.observe("t", SC[i % 3], obs, t);
            }
            alarmed += usize::from(first_alarm(&mut d, Signal::Goodput, marker).is_some());
        }
        assert!(alarmed <= 1, "{alarmed} of 20 unchanged releases alarmed on goodput");
    }

    #[test]
    fn regression_recovers_and_window_ends() {
        let mut rng = SmallRng::seed_from_u64(11);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        let t1 = feed(&mut d, &mut rng, t, 600, |r, _, _| probe(r, 2.0));
        assert_eq!(pooled(&d, Signal::Ttft).state, State::Regressed);
        // Rolled back: the next probes look like the baseline again.
        let t2 = feed(&mut d, &mut rng, t1, 1200, |r, _, _| probe(r, 1.0));
        let r = pooled(&d, Signal::Ttft);
        assert_eq!(r.state, State::Recovered, "{r:?}");
        assert!(d.drain_events().iter().any(|e| e.state == State::Recovered && e.scenario.is_none()));
        d.tick(t2 + 2.0 * 3600.0);
        let r = pooled(&d, Signal::Ttft);
        assert_eq!((r.state, r.armed), (State::Watching, false));
    }

    #[test]
    fn looks_are_spread_over_the_window() {
        let looks: Vec<i64> = (0..=57).filter(|e| is_look(*e)).collect();
        assert_eq!(looks, [4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 20, 25, 30, 40, 50]);
        assert_eq!(looks_within(57), 15);
    }
}
