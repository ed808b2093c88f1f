//! Concurrent comparison of two groups of probes over the same recent window: the new version's
//! replicas against the old version's during a rollout (canary), or one replica against its
//! peers of the same version (outlier). Both groups see the same time and load, so there is no
//! drift to allow for beyond `tolerance`.
//!
//! The test (docs/detection.md, "Canary and outlier comparisons") is a mixture likelihood ratio
//! on the difference of the groups' winsorized mean log latency, against "no worse than
//! `tolerance`", over a small grid of slowdowns; goodput compares bad shares the same way. Unlike
//! the release detector it needs no design effect: the groups are compared within two-minute
//! blocks of time (stratified), so the load of each block cancels in its difference even where one
//! group's probes come later than the other's. Only probes of the last `window_s` count, and a
//! group needs `min_samples` in blocks the other shares before it is judged.

use std::collections::{BTreeMap, VecDeque};

use super::math::{Z95, median_and_robust_sd};
use super::state::{Estimate, Signal};

/// Latency slowdowns (multiples of the tolerance) the evidence is mixed over.
const LATENCY_GRID: [f64; 4] = [1.10, 1.21, 1.46, 2.14];
/// Goodput alternatives: the bad fraction this much above the reference's.
const GOODPUT_GRID: [f64; 3] = [0.01, 0.02, 0.04];
/// Values kept per group and signal (the newest).
const MAX_SAMPLES: usize = 4096;

/// Settings of a comparison (`detect.tuning` supplies `tolerance` and `clip_sigmas`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareSettings {
    /// Only probes of this many recent seconds count.
    pub window_s: f64,
    /// A group needs this many probes of a signal before it is judged.
    pub min_samples: usize,
    /// Slowdown still counted as equal (the null is "ratio ≤ tolerance").
    pub tolerance: f64,
    pub clip_sigmas: f64,
    /// False-alarm probability of one comparison (per signal).
    pub alpha: f64,
}

impl CompareSettings {
    /// The canary comparison of a rollout from the detector's settings: every probe since the
    /// rollout began, the latency tolerance and winsorizing of `detect.tuning`, and the release
    /// test's budget for one latency signal (`armed_alpha` / 6) per signal.
    pub fn canary(s: &crate::config::DetectSettings) -> CompareSettings {
        CompareSettings { window_s: f64::INFINITY, min_samples: 30, tolerance: s.latency_tolerance, clip_sigmas: s.clip_sigmas, alpha: s.armed_alpha / 6.0 }
    }
}

impl Default for CompareSettings {
    fn default() -> Self {
        CompareSettings { window_s: 900.0, min_samples: 30, tolerance: 1.05, clip_sigmas: 3.0, alpha: 0.0025 }
    }
}

/// The probes of one group: (time, value, replica) per latency signal, (time, bad, replica) for
/// goodput; `replica` is the caller's number for the replica probed.
#[derive(Debug, Clone, Default)]
pub struct Group {
    latency: [VecDeque<(f64, f64, u32)>; 3],
    outcomes: VecDeque<(f64, bool, u32)>,
}

/// One observation (the detector's `Observation`: seconds, `good: None` = not counted).
pub use super::state::Observation;

impl Group {
    pub fn observe(&mut self, obs: &Observation, now: f64) {
        self.observe_replica(obs, now, 0);
    }

    /// A probe of replica number `replica`: the comparison clusters its variance by replica.
    pub fn observe_replica(&mut self, obs: &Observation, now: f64, replica: u32) {
        let Some(good) = obs.good else { return };
        for (i, v) in [obs.ttft, obs.tpot, obs.e2e].into_iter().enumerate() {
            if let Some(v) = v.filter(|v| v.is_finite() && *v > 0.0) {
                push(&mut self.latency[i], (now, v.ln(), replica));
            }
        }
        push(&mut self.outcomes, (now, !good, replica));
    }

    /// Drops what is older than the window.
    pub fn expire(&mut self, now: f64, window_s: f64) {
        let cut = now - window_s;
        for q in &mut self.latency {
            while q.front().is_some_and(|(t, _, _)| *t < cut) {
                q.pop_front();
            }
        }
        while self.outcomes.front().is_some_and(|(t, _, _)| *t < cut) {
            self.outcomes.pop_front();
        }
    }

    /// Probes of `signal` in the window.
    pub fn samples(&self, signal: Signal) -> usize {
        match latency_index(signal) {
            Some(i) => self.latency[i].len(),
            None => self.outcomes.len(),
        }
    }

    /// Merges `other` into this group (a version's replicas pooled).
    pub fn extend(&mut self, other: &Group) {
        for (mine, theirs) in self.latency.iter_mut().zip(&other.latency) {
            mine.extend(theirs.iter().copied());
        }
        self.outcomes.extend(other.outcomes.iter().copied());
    }
}

fn push<T>(q: &mut VecDeque<T>, v: T) {
    if q.len() >= MAX_SAMPLES {
        q.pop_front();
    }
    q.push_back(v);
}

fn latency_index(signal: Signal) -> Option<usize> {
    match signal {
        Signal::Ttft => Some(0),
        Signal::Tpot => Some(1),
        Signal::E2e => Some(2),
        Signal::Goodput => None,
    }
}

/// The outcome of comparing `new` with `reference` for one signal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    pub regressed: bool,
    /// Both groups had enough probes to be judged.
    pub judged: bool,
    /// Latency: new/reference ratio of the (winsorized) geometric means, with a 95% interval;
    /// goodput: new − reference bad fraction.
    pub effect: Option<Estimate>,
    /// ln of the mixture likelihood ratio, and the threshold ln(1/α).
    pub log_evidence: f64,
    pub threshold: f64,
    pub new_samples: usize,
    pub reference_samples: usize,
}

/// Compares `new` with `reference` on `signal`.
pub fn compare(new: &Group, reference: &Group, signal: Signal, s: &CompareSettings) -> Comparison {
    compare_with(new, reference, signal, s, &[])
}

/// Compares `new` with `reference` on `signal`, the replicas' variance τ² pooled with what the
/// replicas of `before` (one group per replica, probed before the rollout) show of it. During a
/// rollout τ² comes from a few replicas — two degrees of freedom with four — and is often
/// estimated near zero by chance, which makes a replica that differs look like its version's
/// doing; the replicas before the rollout add their own degrees of freedom.
pub fn compare_with(new: &Group, reference: &Group, signal: Signal, s: &CompareSettings, before: &[Group]) -> Comparison {
    let threshold = (1.0 / s.alpha).ln();
    let mut v = Comparison {
        regressed: false,
        judged: false,
        effect: None,
        log_evidence: 0.0,
        threshold,
        new_samples: new.samples(signal),
        reference_samples: reference.samples(signal),
    };
    if v.new_samples < s.min_samples || v.reference_samples < s.min_samples {
        return v;
    }
    let (d, var, null, grid): (f64, f64, f64, Vec<f64>) = match latency_index(signal) {
        Some(i) => {
            let r: Vec<f64> = reference.latency[i].iter().map(|(_, y, _)| *y).collect();
            // As wide as the largest slowdown weighed, beyond clip sd (see `clip_bounds`).
            let reach = s.tolerance.ln() + LATENCY_GRID[LATENCY_GRID.len() - 1].ln();
            let Some((lo, hi)) = clip_bounds(&r, s.clip_sigmas, reach) else { return v };
            let clip = |q: &VecDeque<(f64, f64, u32)>| q.iter().map(|(t, y, r)| (*t, y.clamp(lo, hi), *r)).collect::<Vec<_>>();
            let prior = ReplicaSpread::of(before.iter().map(|g| clip(&g.latency[i])));
            let Some(st) = Stratified::of(&clip(&new.latency[i]), &clip(&reference.latency[i]), s.min_samples, prior) else { return v };
            let tol = s.tolerance.ln();
            (st.d, st.var, tol, LATENCY_GRID.iter().map(|g| tol + g.ln()).collect())
        }
        None => {
            let bad = |g: &Group| g.outcomes.iter().map(|(t, b, r)| (*t, f64::from(u8::from(*b)), *r)).collect::<Vec<_>>();
            let prior = ReplicaSpread::of(before.iter().map(bad));
            let Some(st) = Stratified::of(&bad(new), &bad(reference), s.min_samples, prior) else { return v };
            // The variance from the pooled share (one more bad and one more good in each group:
            // no zero variance from two clean groups).
            let p = ((st.sum.0 + st.sum.1 + 1.0) / (st.n.0 + st.n.1 + 2.0)).clamp(1e-4, 1.0 - 1e-4);
            (st.d, p * (1.0 - p) / st.w + st.between, 0.0, GOODPUT_GRID.to_vec())
        }
    };
    let logs: Vec<f64> = grid.iter().map(|dk| ((d - null) * (dk - null) - 0.5 * (dk - null).powi(2)) / var).collect();
    v.log_evidence = super::math::log_sum_exp(&logs) - (grid.len() as f64).ln();
    v.regressed = v.log_evidence >= threshold;
    v.judged = true;
    let half = Z95 * var.sqrt();
    v.effect = Some(match latency_index(signal) {
        Some(_) => Estimate { value: d.exp(), low: (d - half).exp(), high: (d + half).exp() },
        None => Estimate { value: d, low: d - half, high: d + half },
    });
    v
}

/// Probes are compared within time blocks this long: the shared load of a block cancels in its
/// difference, even when one group's probes come later than the other's (the new version's
/// replicas start one after another during a rollout, while the load moves).
const BLOCK_S: f64 = 120.0;

/// The difference of two groups' means stratified by time block (Cochran–Mantel–Haenszel
/// weights): d = Σ w_b (ȳ_new,b − ȳ_ref,b) / W with w_b = n_b m_b / (n_b + m_b), over the blocks
/// where both groups have probes; Var(d) = s² / W with s² the variance within block and group,
/// plus the replicas' part: a replica that is slower or faster than its version's others for as
/// long as it serves moves its group's mean by its share of the probes, with a variance τ²
/// estimated from how far the replicas of each version stray from their group within blocks.
struct Stratified {
    d: f64,
    var: f64,
    /// W = Σ w_b.
    w: f64,
    /// The replicas' part of Var(d): τ² (Σ new shares² + Σ reference shares²).
    between: f64,
    /// Values summed (new, reference) and probes counted, in the matched blocks.
    sum: (f64, f64),
    n: (f64, f64),
}

impl Stratified {
    /// `None` when either group has fewer than `min` probes in blocks the other shares.
    /// `prior`: the replicas' spread seen before (pooled with this one's by degrees of freedom).
    fn of(new: &[(f64, f64, u32)], reference: &[(f64, f64, u32)], min: usize, prior: Option<ReplicaSpread>) -> Option<Stratified> {
        // Per block: (n, Σy, Σy²) of each group.
        let mut blocks: BTreeMap<i64, [(f64, f64, f64); 2]> = BTreeMap::new();
        for (g, values) in [new, reference].into_iter().enumerate() {
            for (t, y, _) in values {
                let b = &mut blocks.entry(block_of(*t)).or_default()[g];
                *b = (b.0 + 1.0, b.1 + y, b.2 + y * y);
            }
        }
        let shared = |g: &[(f64, f64, f64); 2]| g[0].0 > 0.0 && g[1].0 > 0.0;
        let (mut w, mut wd, mut ss, mut dof) = (0.0, 0.0, 0.0, 0.0);
        let (mut sum, mut n) = ((0.0, 0.0), (0.0, 0.0));
        for [a, b] in blocks.values().filter(|g| shared(g)) {
            let wb = a.0 * b.0 / (a.0 + b.0);
            w += wb;
            wd += wb * (a.1 / a.0 - b.1 / b.0);
            for g in [a, b] {
                ss += (g.2 - g.1 * g.1 / g.0).max(0.0);
                dof += g.0 - 1.0;
            }
            sum = (sum.0 + a.1, sum.1 + b.1);
            n = (n.0 + a.0, n.1 + b.0);
        }
        if n.0 < min as f64 || n.1 < min as f64 || w <= 0.0 {
            return None;
        }
        let s2 = if dof > 0.0 { ss / dof } else { 0.0 };
        // Per group and replica: deviations from the block's group mean.
        let (mut spread, mut spread_dof, mut replicas, mut shares) = (0.0, 0.0, 0.0, 0.0);
        for (g, values) in [new, reference].into_iter().enumerate() {
            let per = replica_deviations(values, |b| blocks.get(&b).filter(|x| shared(x)).map(|x| x[g].1 / x[g].0));
            let total: f64 = per.values().map(|e| e.0).sum();
            shares += per.values().map(|e| (e.0 / total).powi(2)).sum::<f64>();
            // Σ n_r ē_r² has expectation (R − 1)(s² + n̄ τ²) about (with n̄ the mean probes of a
            // replica), from R − 1 degrees of freedom.
            spread += per.values().map(|e| e.1 * e.1 / e.0).sum::<f64>();
            spread_dof += per.len() as f64 - 1.0;
            replicas += per.len() as f64;
        }
        let now = (spread_dof > 0.0).then(|| ReplicaSpread { tau2: (spread / spread_dof - s2) / ((n.0 + n.1) / replicas), dof: spread_dof });
        let tau2 = ReplicaSpread::pooled([now, prior]).max(0.0);
        let between = tau2 * shares;
        Some(Stratified { d: wd / w, var: s2.max(1e-12) / w + between, w, between, sum, n })
    }
}

/// The replicas' variance τ² (a replica's persistent offset from its peers): an unbiased
/// moment estimate (it may be negative; clipped at 0 only when used) and its degrees of freedom.
#[derive(Debug, Clone, Copy)]
struct ReplicaSpread {
    tau2: f64,
    dof: f64,
}

impl ReplicaSpread {
    /// From replicas' (time, value, _) probes, one series per replica, compared within time
    /// blocks (the load of a block cancels): Σ_r n_r ē_r² over R − 1 against the probes' own
    /// variance within blocks, as `Stratified` does within a version. `None` with fewer than
    /// two replicas.
    fn of(replicas: impl Iterator<Item = Vec<(f64, f64, u32)>>) -> Option<ReplicaSpread> {
        // One series, each probe numbered by its replica's place.
        let values: Vec<(f64, f64, u32)> =
            replicas.filter(|r| !r.is_empty()).enumerate().flat_map(|(i, r)| r.into_iter().map(move |(t, y, _)| (t, y, i as u32))).collect();
        let mut blocks: BTreeMap<i64, (f64, f64, f64)> = BTreeMap::new();
        for (t, y, _) in &values {
            let b = blocks.entry(block_of(*t)).or_default();
            *b = (b.0 + 1.0, b.1 + y, b.2 + y * y);
        }
        let (ss, dof) = blocks.values().fold((0.0, 0.0), |(ss, dof), b| (ss + (b.2 - b.1 * b.1 / b.0).max(0.0), dof + b.0 - 1.0));
        let per = replica_deviations(&values, |b| blocks.get(&b).map(|x| x.1 / x.0));
        if per.len() < 2 || dof <= 0.0 {
            return None;
        }
        let spread: f64 = per.values().map(|e| e.1 * e.1 / e.0).sum();
        let total: f64 = per.values().map(|e| e.0).sum();
        let k = per.len() as f64;
        Some(ReplicaSpread { tau2: (spread / (k - 1.0) - ss / dof) / (total / k), dof: k - 1.0 })
    }

    /// The degrees-of-freedom weighted mean of the estimates there are (0 with none).
    fn pooled(parts: [Option<ReplicaSpread>; 2]) -> f64 {
        let (sum, dof) = parts.iter().flatten().fold((0.0, 0.0), |(s, d), p| (s + p.tau2 * p.dof, d + p.dof));
        if dof > 0.0 { sum / dof } else { 0.0 }
    }
}

/// The time block of a probe sent at `t`.
fn block_of(t: f64) -> i64 {
    (t / BLOCK_S).floor() as i64
}

/// Per replica: its probes and the sum of their deviations from their block's mean (`block_mean`,
/// `None` for a block left out): the load of the block taken out.
fn replica_deviations(values: &[(f64, f64, u32)], block_mean: impl Fn(i64) -> Option<f64>) -> BTreeMap<u32, (f64, f64)> {
    let mut per: BTreeMap<u32, (f64, f64)> = BTreeMap::new();
    for (t, y, r) in values {
        if let Some(m) = block_mean(block_of(*t)) {
            let e = per.entry(*r).or_default();
            *e = (e.0 + 1.0, e.1 + y - m);
        }
    }
    per
}

/// Winsorizing bounds from the reference: median ± (k robust sd (1.4826 × MAD) + `reach`). The
/// `reach` (the largest log slowdown weighed) keeps a tight reference group from clipping a real
/// slowdown to a few of its own sd; one 10x probe stays bounded all the same.
fn clip_bounds(values: &[f64], k: f64, reach: f64) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let (m, sd) = median_and_robust_sd(values.to_vec());
    Some((m - k * sd - reach, m + k * sd + reach))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    fn lognormal(rng: &mut SmallRng, median: f64, sigma: f64) -> f64 {
        let u1: f64 = rng.random::<f64>().max(1e-12);
        let u2: f64 = rng.random();
        median * (sigma * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()).exp()
    }

    fn group(rng: &mut SmallRng, n: usize, factor: f64, bad: f64) -> Group {
        spread_group(rng, n, factor, bad, 0.5)
    }

    fn spread_group(rng: &mut SmallRng, n: usize, factor: f64, bad: f64, sigma: f64) -> Group {
        let mut g = Group::default();
        for i in 0..n {
            let ok = rng.random::<f64>() >= bad;
            let t = lognormal(rng, 0.2 * factor, sigma);
            let obs = Observation { ttft: ok.then_some(t), tpot: None, e2e: ok.then_some(t * 2.0), good: Some(ok), ..Default::default() };
            g.observe(&obs, i as f64);
        }
        g
    }

    #[test]
    fn a_slower_group_is_regressed_and_an_equal_one_is_not() {
        let s = CompareSettings::default();
        let mut rng = SmallRng::seed_from_u64(3);
        let old = group(&mut rng, 300, 1.0, 0.0);
        let slow = group(&mut rng, 300, 1.3, 0.0);
        let v = compare(&slow, &old, Signal::Ttft, &s);
        assert!(v.regressed && v.judged, "{v:?}");
        let e = v.effect.unwrap();
        assert!(e.low < 1.3 && 1.3 < e.high, "interval brackets the true ratio: {e:?}");
        let mut false_alarms = 0;
        for seed in 0..200 {
            let mut rng = SmallRng::seed_from_u64(100 + seed);
            let a = group(&mut rng, 300, 1.0, 0.0);
            let b = group(&mut rng, 300, 1.0, 0.0);
            false_alarms += usize::from(compare(&a, &b, Signal::Ttft, &s).regressed);
        }
        assert!(false_alarms <= 2, "{false_alarms} of 200 equal pairs flagged at alpha 0.25%");
    }

    #[test]
    fn a_tight_reference_does_not_clip_a_real_slowdown_away() {
        // Precisely timed, quiet servers: log sd 0.01, so clip sd alone would cap the shift at 3%.
        let s = CompareSettings::default();
        let mut rng = SmallRng::seed_from_u64(5);
        let old = spread_group(&mut rng, 100, 1.0, 0.0, 0.01);
        let slow = spread_group(&mut rng, 100, 1.3, 0.0, 0.01);
        let v = compare(&slow, &old, Signal::Ttft, &s);
        let e = v.effect.unwrap();
        assert!(v.regressed && e.low < 1.3 && 1.3 < e.high, "{v:?}");
        let same = compare(&spread_group(&mut rng, 100, 1.0, 0.0, 0.01), &old, Signal::Ttft, &s);
        assert!(!same.regressed, "{same:?}");
    }

    #[test]
    fn few_probes_are_not_judged_and_goodput_is_compared() {
        let s = CompareSettings::default();
        let mut rng = SmallRng::seed_from_u64(9);
        let v = compare(&group(&mut rng, 10, 3.0, 0.0), &group(&mut rng, 300, 1.0, 0.0), Signal::Ttft, &s);
        assert!(!v.judged && !v.regressed);
        let v = compare(&group(&mut rng, 600, 1.0, 0.08), &group(&mut rng, 600, 1.0, 0.0), Signal::Goodput, &s);
        assert!(v.regressed, "{v:?}");
    }

    /// A rollout under load that rises while it runs: the old replicas are probed early, the new
    /// version's later, when everything is slower. Compared block by block, the load cancels; a
    /// real slowdown of the new version in the same rollout is still found.
    #[test]
    fn load_that_moves_during_the_rollout_is_no_canary_regression() {
        let s = CompareSettings::default();
        let mut rng = SmallRng::seed_from_u64(11);
        let rollout = |rng: &mut SmallRng, factor: f64| {
            let (mut old, mut new) = (Group::default(), Group::default());
            for i in 0..1200 {
                let t = i as f64;
                // Load doubles latency over the 20 minutes; the new version's share of the
                // probes grows from 0 to 1 as its replicas replace the old ones.
                let load = 2f64.powf(t / 1200.0);
                let is_new = rng.random::<f64>() < t / 1200.0;
                let y = lognormal(rng, 0.2 * load * if is_new { factor } else { 1.0 }, 0.3);
                let obs = Observation { ttft: Some(y), tpot: None, e2e: Some(y), good: Some(true), ..Default::default() };
                if is_new { new.observe(&obs, t) } else { old.observe(&obs, t) }
            }
            (new, old)
        };
        let (new, old) = rollout(&mut rng, 1.0);
        let v = compare(&new, &old, Signal::Ttft, &s);
        assert!(v.judged && !v.regressed, "{v:?}");
        let e = v.effect.unwrap();
        assert!(e.low < 1.0 && 1.0 < e.high, "the interval brackets no change: {e:?}");
        // Pooled over the whole rollout, the new group's mean is from later, slower minutes.
        let mean = |g: &Group| g.latency[0].iter().map(|x| x.1).sum::<f64>() / g.latency[0].len() as f64;
        let naive = mean(&new) - mean(&old);
        assert!(naive.exp() > 1.2, "{naive}");
        let (slow, old) = rollout(&mut rng, 1.3);
        let v = compare(&slow, &old, Signal::Ttft, &s);
        assert!(v.regressed && v.effect.unwrap().low < 1.3 && 1.3 < v.effect.unwrap().high, "{v:?}");
    }

    /// Replicas that differ for as long as they serve (another GPU, a noisy neighbour: log
    /// offsets with sd 0.15): one new replica against three old ones of an equal version. Without
    /// the replicas' part of the variance a third of such rollouts are beyond z 2.8 (31 of 100
    /// here); with it, 1 is flagged. The price: one replica of a version 2x slower cannot be told
    /// from a slow replica for sure, and τ² from three replicas has two degrees of freedom, so
    /// about 0.6 of them are found (53 of 100 here).
    #[test]
    fn a_replica_that_differs_from_its_peers_is_not_the_version_s_doing() {
        let s = CompareSettings::default();
        let rollout = |seed: u64, factor: f64| {
            let mut rng = SmallRng::seed_from_u64(seed);
            let offsets: Vec<f64> = (0..4).map(|_| 0.15 * lognormal(&mut rng, 1.0, 1.0).ln()).collect();
            let (mut old, mut new) = (Group::default(), Group::default());
            for i in 0..1200 {
                let r = (i % 4) as u32;
                let y = lognormal(&mut rng, 0.2 * offsets[r as usize].exp() * if r == 0 { factor } else { 1.0 }, 0.3);
                let obs = Observation { ttft: Some(y), tpot: None, e2e: Some(y), good: Some(true), ..Default::default() };
                if r == 0 { new.observe_replica(&obs, i as f64, r) } else { old.observe_replica(&obs, i as f64, r) }
            }
            (new, old)
        };
        let (mut flagged, mut unclustered, mut found) = (0, 0, 0);
        for seed in 0..100 {
            let (new, old) = rollout(seed, 1.0);
            let v = compare(&new, &old, Signal::Ttft, &s);
            flagged += usize::from(v.regressed);
            let all = |g: &Group| g.latency[0].iter().map(|(t, y, _)| (*t, *y, 0)).collect::<Vec<_>>();
            let st = Stratified::of(&all(&new), &all(&old), 30, None).unwrap();
            unclustered += usize::from((st.d - s.tolerance.ln()) / st.var.sqrt() > 2.8);
            let (slow, old) = rollout(1000 + seed, 2.0);
            found += usize::from(compare(&slow, &old, Signal::Ttft, &s).regressed);
        }
        assert!(unclustered >= 20, "{unclustered} of 100 equal rollouts beyond z 2.8 without the replicas' part");
        assert!(flagged <= 5, "{flagged} of 100 equal rollouts flagged");
        assert!(found >= 40, "{found} of 100 rollouts 2x slower found");
    }

    /// The same replicas that differ (log offsets sd 0.15), one new against three old: τ² from
    /// four replicas has two degrees of freedom and often comes out near zero. With each
    /// replica's probes of the 15 minutes before the rollout (three more degrees of freedom)
    /// fewer equal rollouts are called regressed (10 of 500 without, none with them here), and
    /// a 2x slower version is found as often (287 and 286 of 500).
    #[test]
    fn the_replicas_spread_before_the_rollout_steadies_the_canary() {
        let s = CompareSettings::default();
        const NEW: usize = 1;
        let rollout = |seed: u64, factor: f64| {
            let mut rng = SmallRng::seed_from_u64(seed);
            let offsets: Vec<f64> = (0..4).map(|_| 0.15 * lognormal(&mut rng, 1.0, 1.0).ln()).collect();
            let draw = |rng: &mut SmallRng, r: usize, f: f64| {
                let y = lognormal(rng, 0.2 * offsets[r].exp() * f, 0.3);
                Observation { ttft: Some(y), tpot: None, e2e: Some(y), good: Some(true), ..Default::default() }
            };
            let mut before = vec![Group::default(); 4];
            for i in 0..900 {
                before[i % 4].observe(&draw(&mut rng, i % 4, 1.0), i as f64);
            }
            let (mut old, mut new) = (Group::default(), Group::default());
            for i in 900..2100 {
                let r = i % 4;
                if r < NEW {
                    new.observe_replica(&draw(&mut rng, r, factor), i as f64, r as u32);
                } else {
                    old.observe_replica(&draw(&mut rng, r, 1.0), i as f64, r as u32);
                }
            }
            (new, old, before)
        };
        let (mut alone, mut with_before, mut found_alone, mut found_with) = (0, 0, 0, 0);
        for seed in 0..500 {
            let (new, old, before) = rollout(seed, 1.0);
            alone += usize::from(compare(&new, &old, Signal::Ttft, &s).regressed);
            with_before += usize::from(compare_with(&new, &old, Signal::Ttft, &s, &before).regressed);
            let (new, old, before) = rollout(5000 + seed, 2.0);
            found_alone += usize::from(compare(&new, &old, Signal::Ttft, &s).regressed);
            found_with += usize::from(compare_with(&new, &old, Signal::Ttft, &s, &before).regressed);
        }
        assert!(with_before < alone, "{with_before} of 500 equal rollouts flagged with the spread before, {alone} without");
        assert!(found_with * 10 >= found_alone * 9, "2x found {found_with} of 500 with the spread before, {found_alone} without");
    }

    #[test]
    fn the_window_expires_old_probes() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut g = group(&mut rng, 100, 1.0, 0.0);
        g.expire(150.0, 100.0);
        assert_eq!(g.samples(Signal::Ttft), 50);
        assert_eq!(g.samples(Signal::Goodput), 50);
    }
}
