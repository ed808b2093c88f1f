//! Covariates the release tests take into account: the offered-load reading that latency is
//! adjusted for, and the prefix-cache hit rate that marks a cold cache after a rollout
//! (docs/detection.md, "Load-aware tests" and "Cold caches after a rollout").

use serde::Serialize;

/// A load adjustment frozen at a marker: latency residuals move by `slope` per unit of the load
/// reading; values are compared at the reading `x_ref` (the baseline's mean).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Adjust {
    pub(super) slope: f64,
    pub(super) x_ref: f64,
}

/// A log latency adjusted to the reference load (unchanged without a reading or an adjustment).
pub(super) fn adjusted(y: f64, load: f32, adjust: Option<Adjust>) -> f64 {
    match adjust {
        Some(a) if load.is_finite() => y - a.slope * (load as f64 - a.x_ref),
        _ => y,
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
    use super::super::state::{Detector, Observation, Signal, State};
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
        d.mark_release("t", "v2", t, t);
        feed(&mut d, &mut rng, t, 3600, |r, _, now| cached(r, 0.7 * ((now - t) / 900.0).min(1.0), 1.0));
        assert_eq!(first_alarm(&mut d, Signal::Ttft, t), None, "a warming cache is no regression");
        let w = pooled(&d, Signal::Ttft).warmup.expect("the hit rate was read");
        assert!((w.hit_rate_before - 0.7).abs() < 0.01 && w.held_probes > 300, "{w:?}");
        // Without the reading the same warm-up alarms: the hold is what keeps it quiet.
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| Observation { cache_hit: None, ..cached(r, 0.7, 1.0) });
        d.mark_release("t", "v2", t, t);
        feed(&mut d, &mut rng, t, 3600, |r, _, now| Observation { cache_hit: None, ..cached(r, 0.7 * ((now - t) / 900.0).min(1.0), 1.0) });
        assert!(first_alarm(&mut d, Signal::Ttft, t).is_some());
        // A release that turns the cache off: held for `cache_warmup_max_s`, then tested, and
        // the row says the hit rate fell.
        let mut d = Detector::new(DetectSettings { cache_warmup_max_s: 600.0, ..quiet() });
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| cached(r, 0.7, 1.0));
        d.mark_release("t", "v2", t, t);
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
            d.mark_release("t", "v2", t, t);
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
            d.mark_release("t", "v2", t, t);
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
