//! Covariates the release tests take into account: the offered-load reading that latency is
//! adjusted for, the replica a probe was served by, and the prefix-cache hit rate that marks a
//! cold cache after a rollout (docs/detection.md, "Load-aware tests", "Replicas that differ" and
//! "Cold caches after a rollout").

use std::collections::HashMap;
use std::num::NonZeroU32;

use serde::Serialize;

/// A load adjustment frozen at a marker: latency residuals move by `slope` per unit of the load
/// reading; values are compared at the reading `x_ref` (the baseline's mean).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Adjust {
    pub(super) slope: f64,
    pub(super) x_ref: f64,
    /// The slope is the level relation over the history (no load swings to learn it from),
    /// not the increments'.
    pub(super) levels: bool,
}

/// A log latency adjusted to the reference load (unchanged without a reading or an adjustment).
pub(super) fn adjusted(y: f64, load: f32, adjust: Option<Adjust>) -> f64 {
    match adjust {
        Some(a) if load.is_finite() => y - a.slope * (load as f64 - a.x_ref),
        _ => y,
    }
}

/// The replica that served a probe, as the detector keys it: a 32-bit FNV-1a hash of the name
/// the prober keys it by (the node discovery read for it, else its endpoint), so the detector
/// keeps no names per probe.
pub fn replica_id(name: &str) -> NonZeroU32 {
    let h = name.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ b as u32).wrapping_mul(0x0100_0193));
    NonZeroU32::new(h).unwrap_or(NonZeroU32::MIN)
}

/// Each replica's lasting offset from the others in the baseline hour (log latency), frozen at a
/// marker: a replica on a slower GPU or beside a noisy neighbour. Both sides of a release test
/// take it out of a probe of that replica, so a change in which replicas the probes reach (a
/// replica held while it warms up, a replica gone) does not read as a change of the service —
/// post-stratification by replica. A replica the baseline did not see keeps its offset.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct ReplicaOffsets(Vec<(NonZeroU32, f64)>);

impl ReplicaOffsets {
    /// Replicas the baseline keeps offsets for (the most probed; the rest count as unseen).
    const MAX_REPLICAS: usize = 64;
    /// Probes a replica needs in the baseline for an offset of its own.
    const MIN_PROBES: usize = 30;

    /// From the baseline's values grouped by scenario, each value with its replica (values
    /// without one are left out). Deviations from each scenario's mean are pooled by replica; the
    /// between-replica variance τ² is the method-of-moments estimate over the within-replica
    /// noise, and each replica's mean deviation is shrunk by τ² / (τ² + σ²/n): replicas that do
    /// not differ get no offset, a replica seen a few times a small one.
    pub(super) fn fit<'a>(scenarios: impl Iterator<Item = &'a [(Option<NonZeroU32>, f64)]>) -> ReplicaOffsets {
        let mut by: HashMap<NonZeroU32, (usize, f64, f64)> = HashMap::new();
        for vals in scenarios {
            let with: Vec<(NonZeroU32, f64)> = vals.iter().filter_map(|&(r, y)| Some((r?, y))).filter(|v| v.1.is_finite()).collect();
            if with.len() < 2 {
                continue;
            }
            let mean = with.iter().map(|v| v.1).sum::<f64>() / with.len() as f64;
            for (r, y) in with {
                let d = y - mean;
                let e = by.entry(r).or_default();
                e.0 += 1;
                e.1 += d;
                e.2 += d * d;
            }
        }
        // (replica, probes, sum of deviations, sum of their squares)
        let mut groups: Vec<(NonZeroU32, usize, f64, f64)> = by.into_iter().filter(|g| g.1.0 >= Self::MIN_PROBES).map(|(r, (k, s, q))| (r, k, s, q)).collect();
        groups.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        groups.truncate(Self::MAX_REPLICAS);
        let r = groups.len();
        let m: usize = groups.iter().map(|g| g.1).sum();
        if r < 2 || m <= r {
            return ReplicaOffsets::default();
        }
        let centre = groups.iter().map(|g| g.2).sum::<f64>() / m as f64;
        let between: f64 = groups.iter().map(|g| g.1 as f64 * (g.2 / g.1 as f64 - centre).powi(2)).sum();
        let within = (groups.iter().map(|g| g.3 - g.2 * g.2 / g.1 as f64).sum::<f64>() / (m - r) as f64).max(f64::MIN_POSITIVE);
        let spread = m as f64 - groups.iter().map(|g| (g.1 * g.1) as f64).sum::<f64>() / m as f64;
        let tau2 = (between - (r - 1) as f64 * within) / spread;
        if !(tau2 > 0.0 && tau2.is_finite()) {
            return ReplicaOffsets::default();
        }
        ReplicaOffsets(groups.into_iter().map(|(id, k, s, _)| (id, (s / k as f64 - centre) * tau2 / (tau2 + within / k as f64))).collect())
    }

    /// The offset to take out of a probe of `replica` (0: none, or not in the baseline).
    pub(super) fn of(&self, replica: Option<NonZeroU32>) -> f64 {
        replica.and_then(|r| self.0.iter().find(|g| g.0 == r)).map_or(0.0, |g| g.1)
    }
}

/// A release's prefix-cache warm-up as the detector saw it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CacheWarmup {
    /// The baseline hour's mean hit rate, and how far below it a reading counts as cold.
    pub hit_rate_before: f64,
    pub margin: f64,
    /// The mean hit rate of the probes since the grace window (`None`: no reading yet).
    pub hit_rate_after: Option<f64>,
    /// Probes held out as warm-up so far.
    pub held_probes: u64,
    /// The cache is still cold: the last probe with a reading was held (or would have been, had
    /// the hold not ended).
    pub cold: bool,
}

impl CacheWarmup {
    /// The mean hit rate since the grace window is below the baseline's by more than the margin:
    /// a slowdown found now may be the cold cache (or a cache the release broke).
    pub fn explains_slowdown(&self) -> bool {
        self.hit_rate_after.is_some_and(|h| h < self.hit_rate_before - self.margin)
    }
}

/// The baseline hour's prefix-cache hit rate, frozen at a marker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct CacheRef {
    pub(super) mean: f64,
    pub(super) margin: f64,
}

impl CacheRef {
    /// Bins of the baseline with a hit-rate reading it needs.
    const MIN_BINS: usize = 10;
    /// The smallest drop of the hit rate that counts as cold, whatever the baseline's spread.
    const MIN_MARGIN: f64 = 0.05;

    /// From the bins' mean readings, each with its count of probes (probe-weighted mean; margin 3
    /// standard deviations of the bin means, at least `MIN_MARGIN`).
    pub(super) fn from_bins(bins: impl Iterator<Item = (f32, u32)>) -> Option<CacheRef> {
        let v: Vec<(f64, f64)> = bins.filter(|&(h, h_n)| h_n > 0 && h.is_finite()).map(|(h, h_n)| (h as f64, h_n as f64)).collect();
        if v.len() < Self::MIN_BINS {
            return None;
        }
        let w: f64 = v.iter().map(|x| x.1).sum();
        let mean = v.iter().map(|x| x.0 * x.1).sum::<f64>() / w;
        let m = v.iter().map(|x| x.0).sum::<f64>() / v.len() as f64;
        let sd = (v.iter().map(|x| (x.0 - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt();
        Some(CacheRef { mean, margin: (3.0 * sd).max(Self::MIN_MARGIN) })
    }

    pub(super) fn cold(&self, hit: Option<f64>) -> bool {
        hit.is_some_and(|h| h < self.mean - self.margin)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::state::{Detector, MarkerTime, Observation, Signal, State};
    use crate::config::DetectSettings;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, StandardNormal};

    /// 70% prefix-cache hits at 100 ms, misses at 3x, with the engine's hit-rate reading.
    fn cached(r: &mut SmallRng, hit_share: f64, factor: f64) -> Observation {
        let miss = !r.random_bool(hit_share.clamp(0.0, 1.0));
        let median = if miss { 0.3 } else { 0.1 };
        Observation { ttft: Some(lognormal(r, median, 0.3) * factor), cache_hit: Some(hit_share), good: Some(true), ..Observation::default() }
    }

    #[test]
    fn a_cold_cache_after_the_rollout_is_warm_up_and_a_cache_that_stays_cold_is_named() {
        // Restarts empty the cache: the hit share recovers from 0 to 0.7 over 15 minutes.
        let mut rng = SmallRng::seed_from_u64(31);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| cached(r, 0.7, 1.0));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        feed(&mut d, &mut rng, t, 3600, |r, _, now| cached(r, 0.7 * ((now - t) / 900.0).min(1.0), 1.0));
        assert_eq!(first_alarm(&mut d, Signal::Ttft, t), None, "a warming cache is no regression");
        let w = pooled(&d, Signal::Ttft).warmup.expect("the hit rate was read");
        assert!((w.hit_rate_before - 0.7).abs() < 0.01 && w.held_probes > 300, "{w:?}");
        // Without the reading the same warm-up alarms: the hold is what keeps it quiet.
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| Observation { cache_hit: None, ..cached(r, 0.7, 1.0) });
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        feed(&mut d, &mut rng, t, 3600, |r, _, now| Observation { cache_hit: None, ..cached(r, 0.7 * ((now - t) / 900.0).min(1.0), 1.0) });
        assert!(first_alarm(&mut d, Signal::Ttft, t).is_some());
        // A release that turns the cache off: held for `cache_warmup_max_s`, then tested, and
        // the row says the hit rate fell.
        let mut d = Detector::new(DetectSettings { cache_warmup_max_s: 600.0, ..quiet() });
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| cached(r, 0.7, 1.0));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        feed(&mut d, &mut rng, t, 3000, |r, _, _| cached(r, 0.0, 1.0));
        let at = first_alarm(&mut d, Signal::Ttft, t).expect("a cache that stays cold is a regression");
        assert!(at > 300.0 + 600.0, "not before the warm-up allowance: {at}");
        assert!(pooled(&d, Signal::Ttft).warmup.is_some_and(|w| w.explains_slowdown() && w.cold));
    }

    /// A rolling update: four replicas replaced one every five minutes, each 2x slower and
    /// failing 5% of requests for its first five minutes. Replica discovery marks the probes of a
    /// replica that came up less than the grace ago; those are held out of the release tests.
    #[test]
    fn the_warm_up_of_replicas_a_rolling_update_brings_up_is_held() {
        let rolling = |flag: bool, factor: f64| {
            let mut rng = SmallRng::seed_from_u64(37);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
            d.mark_release("t", "v2", t, MarkerTime::Stated, t);
            feed(&mut d, &mut rng, t, 3600, |r, _, now| {
                let replica = r.random_range(0..4);
                let start = t + 300.0 * replica as f64;
                let (new, warming) = (now >= start, now >= start && now < start + 300.0);
                let f = if new { factor } else { 1.0 } * if warming { 2.0 } else { 1.0 };
                let failed = warming && r.random_bool(0.05);
                Observation { good: Some(!failed), replica_warming: flag && warming, ..probe(r, f) }
            });
            let events = d.drain_events();
            let alarm = |s: Signal| events.iter().any(|e| e.scenario.is_none() && e.signal == s && e.state == State::Regressed);
            (alarm(Signal::Ttft), alarm(Signal::Goodput))
        };
        assert_eq!(rolling(true, 1.0), (false, false), "held: no alarm");
        assert_eq!(rolling(false, 1.0), (true, true), "the same probes unmarked: both alarm");
        assert!(rolling(true, 1.5).0, "a new version 1.5x slower is still found");
    }

    /// Four replicas, one 1.8x faster than the other three: while it is held (it came up with
    /// the release and warms up for half an hour) the probes reach only the slower three, which
    /// reads as a 1.16x slowdown of the service unless each replica's offset is taken out.
    #[test]
    fn a_replica_held_out_of_the_mix_is_no_regression_once_replicas_are_known() {
        const OFFSET: [f64; 4] = [-0.45, 0.15, 0.15, 0.15];
        let run = |known: bool, factor: f64| {
            let mut rng = SmallRng::seed_from_u64(41);
            let mut d = Detector::new(quiet());
            let served = |r: &mut SmallRng, warming: bool, factor: f64| {
                let j = r.random_range(0..4usize);
                let replica = known.then(|| super::replica_id(&format!("10.0.0.{j}:8000")));
                Observation { replica, replica_warming: warming && j == 0, ..probe(r, factor * OFFSET[j].exp()) }
            };
            let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| served(r, false, 1.0));
            d.mark_release("t", "v2", t, MarkerTime::Stated, t);
            feed(&mut d, &mut rng, t, 2400, |r, _, now| served(r, now < t + 1800.0, factor));
            let offsets = d.targets[0].replicas[0].clone();
            (offsets, first_alarm(&mut d, Signal::Ttft, t))
        };
        let (none, alarm) = run(false, 1.0);
        assert!(none.0.is_empty() && alarm.is_some(), "replicas unknown: the mix shift alarms");
        let (offsets, alarm) = run(true, 1.0);
        let fast = offsets.of(Some(super::replica_id("10.0.0.0:8000")));
        assert!((fast + 0.45).abs() < 0.08, "the fast replica's offset from the mean of all: {fast}");
        assert_eq!(alarm, None, "replicas known: the same probes are no regression");
        assert!(run(true, 1.25).1.is_some_and(|at| at <= 900.0), "a 1.25x release is still found within 15 minutes");
    }

    #[test]
    fn replicas_that_do_not_differ_get_no_offset() {
        let mut rng = SmallRng::seed_from_u64(43);
        let scenario = |rng: &mut SmallRng, offsets: &[f64]| -> Vec<(Option<std::num::NonZeroU32>, f64)> {
            (0..3000)
                .map(|i| {
                    let j = i % offsets.len();
                    let z: f64 = StandardNormal.sample(rng);
                    (std::num::NonZeroU32::new(j as u32 + 1), offsets[j] + 0.5 * z)
                })
                .collect()
        };
        let same: Vec<_> = (0..3).map(|_| scenario(&mut rng, &[0.0; 4])).collect();
        let fit = super::ReplicaOffsets::fit(same.iter().map(Vec::as_slice));
        assert!(fit.0.iter().all(|g| g.1.abs() < 0.02), "no lasting offsets, none (or next to none) taken out: {fit:?}");
        let differ: Vec<_> = (0..3).map(|_| scenario(&mut rng, &[0.2, 0.0, 0.0, -0.2])).collect();
        let fit = super::ReplicaOffsets::fit(differ.iter().map(Vec::as_slice));
        let got: Vec<f64> = (1..=4).map(|j| fit.of(std::num::NonZeroU32::new(j))).collect();
        assert!(got.iter().zip([0.2, 0.0, 0.0, -0.2]).all(|(g, w)| (g - w).abs() < 0.03), "{got:?}");
        assert_eq!(fit.of(None), 0.0);
        assert_eq!(fit.of(std::num::NonZeroU32::new(9)), 0.0, "a replica the baseline did not see keeps its offset");
        // Hostile values: nothing panics, nothing non-finite comes out.
        let odd = [vec![(std::num::NonZeroU32::new(1), f64::NAN), (std::num::NonZeroU32::new(2), f64::INFINITY), (None, 1.0)]];
        assert!(super::ReplicaOffsets::fit(odd.iter().map(Vec::as_slice)).0.is_empty());
    }

    /// No load swings: latency follows the day (±20%) and a morning ramp (x2 over an hour)
    /// that began ten minutes before the marker, and the offered-load reading follows both. The
    /// history's increments cannot see the relation (the reading's noise is most of them); its
    /// levels over the history can, and the ramp after the marker is taken out with it. With
    /// days of history the daily shapes take the cycle out of latency and of the reading alike,
    /// and the relation is found in what is left (the ramp).
    #[test]
    fn a_ramp_the_reading_follows_is_taken_out_by_the_level_relation() {
        let run = |with_reading: bool, days: f64| {
            let mut rng = SmallRng::seed_from_u64(47);
            let mut d = Detector::new(quiet());
            let t = 43_200.0 + days * 86_400.0;
            let ramp_start = t - 600.0;
            let traffic = |now: f64| 0.18 * (std::f64::consts::TAU * now / 86_400.0).sin() + 2f64.ln() * ((now - ramp_start) / 3600.0).clamp(0.0, 1.0);
            let obs = |r: &mut SmallRng, _: usize, now: f64| {
                let noise: f64 = StandardNormal.sample(r);
                let reading = with_reading.then_some(3.0 + traffic(now) + 0.02 * noise);
                Observation { load: reading, ..probe(r, traffic(now).exp()) }
            };
            let t = feed(&mut d, &mut rng, 0.0, t as usize, obs);
            d.mark_release("t", "v2", t, MarkerTime::Stated, t);
            let shapes = (d.targets[0].daily[0].in_use(), d.targets[0].reading_daily.in_use());
            // The reading's shape is exported with every row of the target.
            let amplitude = pooled(&d, Signal::Goodput).reading_daily_amplitude;
            let slope = d.targets[0].adjust[0].map(|a| a.slope);
            feed(&mut d, &mut rng, t, 3600, obs);
            (shapes, amplitude, slope, first_alarm(&mut d, Signal::Ttft, t))
        };
        for days in [0.0, 3.0] {
            let (shapes, amplitude, slope, alarm) = run(true, days);
            assert_eq!(shapes, (days > 0.0, days > 0.0), "{days} days: daily shapes of latency and reading in use");
            let expected = if days > 0.0 { 0.12..0.25 } else { 0.0..1e-12 };
            assert!(expected.contains(&amplitude), "{days} days: the reading's daily amplitude (0.18 drawn) {amplitude}");
            assert!(slope.is_some_and(|b| (0.8..1.2).contains(&b)), "{days} days: the level slope of log latency on the reading: {slope:?}");
            assert_eq!(alarm, None, "{days} days: the ramp is load, taken out");
        }
        let (_, _, none, alarm) = run(false, 0.0);
        assert_eq!(none, None);
        assert!(alarm.is_some(), "without the reading the ramp after the marker alarms");
    }

    #[test]
    fn a_load_reading_that_tracks_latency_narrows_the_release_test() {
        // Load swings (sd 0.15 in log latency, 5-minute time constant) that the engine's offered
        // load reading tracks; the release is 1.25x slower.
        let run = |with_reading: bool| {
            let mut rng = SmallRng::seed_from_u64(35);
            let mut d = Detector::new(quiet());
            let mut load = 0.0f64;
            let mut obs = |r: &mut SmallRng, _: usize, t: f64, factor: f64| {
                let a = (-1.0f64 / 300.0).exp();
                let z: f64 = StandardNormal.sample(r);
                load = load * a + 0.15 * (1.0 - a * a).sqrt() * z;
                let noise: f64 = StandardNormal.sample(r);
                let reading = with_reading.then_some(3.0 + load + 0.02 * noise);
                {
                    let _ = t;
                    Observation { load: reading, ..probe(r, factor * load.exp()) }
                }
            };
            let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, s, t| obs(r, s, t, 1.0));
            d.mark_release("t", "v2", t, MarkerTime::Stated, t);
            let base = (d.bin_of(t - 3600.0), d.bin_of(t));
            let tt = &d.targets[0];
            let deff = tt.dependence[0].as_ref().expect("dependence").design_effect(base, (base.1 + 5, base.1 + 15));
            let slope = tt.adjust[0].map(|a| a.slope);
            feed(&mut d, &mut rng, t, 900, |r, s, t| obs(r, s, t, 1.25));
            (deff, slope, first_alarm(&mut d, Signal::Ttft, t))
        };
        let (deff_raw, none, _) = run(false);
        let (deff_adj, slope, alarm) = run(true);
        assert_eq!(none, None, "no reading, no adjustment");
        assert!(slope.is_some_and(|b| (0.8..1.2).contains(&b)), "the slope of log latency on the reading: {slope:?}");
        assert!(deff_adj < deff_raw / 3.0, "design effect {deff_adj} adjusted, {deff_raw} raw");
        assert!(alarm.is_some_and(|at| at <= 900.0), "1.25x found within 15 minutes with the reading: {alarm:?}");
    }
}
