//! The continuous test: without a marker, the last `continuous_window_s` of a target against
//! the `continuous_reference_s` before them, every `continuous_look_s` (docs/detection.md,
//! "Continuous test").

use super::baseline::GoodFrozen;
use super::history::{contrast_var, independent_design_effect};
use super::math::normal_sf;
use super::release::level_slope;
use super::state::{Cause, Detector, Signal, SignalState, State, StateChange};

impl Detector {
    /// The continuous test's error level per look and signal: its false alarms, summed over the
    /// looks of `continuous_arl_days` and the four signals, are at most one.
    fn continuous_alpha(&self) -> f64 {
        let s = &self.settings;
        let looks = s.continuous_arl_days * 86_400.0 / s.continuous_look_s;
        1.0 / (4.0 * looks.max(1.0))
    }

    /// The continuous test of one signal: the last `continuous_window_s` against the
    /// `continuous_reference_s` before them (goodput: `goodput_baseline_s`), with the target's
    /// own dependence in the variance and both halves of the recent window required.
    pub(super) fn continuous_look(&mut self, ti: usize, signal: Signal, bin: i64, now: f64) {
        let s = &self.settings;
        let k = signal.index();
        let alpha = self.continuous_alpha();
        let threshold = (1.0 / alpha).ln();
        let w = (s.continuous_window_s / s.bin_s).round().max(1.0) as i64;
        let reference_s = if signal == Signal::Goodput { s.goodput_baseline_s } else { s.continuous_reference_s };
        let r = (reference_s / s.bin_s).round().max(1.0) as i64;
        let recent = (bin + 1 - w, bin + 1);
        let reference = (recent.0 - r, recent.0);
        // Persistence: each third of the recent window must show the change on its own, the
        // newest one included, so an incident that is over (the burn-rate alerts' business) or a
        // spike is not a regression, while a step or a creep that is still there is.
        let thirds = {
            let (a, b) = (recent.0 + w / 3, recent.0 + 2 * w / 3);
            [(recent.0, a), (a, b), (b, recent.1)]
        };
        let t = &self.targets[ti];
        if t.pooled[k].state == State::Regressed || t.hist.first > reference.0 {
            return;
        }
        let deff;
        let (p, confirmed, p_ref) = if signal == Signal::Goodput {
            // Failures only: SLO misses rise and fall with load, and at this test's error level
            // (one in 70,000 looks) the few-sd load excursions of a month multiply them more
            // than any count model of the reference hours allows (docs/detection.md). A
            // slow rise of SLO misses is the burn-rate alerts' and the latency tests' to see.
            let bins = |(a, b): (i64, i64)| (a..b).filter_map(|x| t.hist.get(x)).filter(|h| !h.outage()).map(|h| h.counts(true)).collect::<Vec<_>>();
            let refs = bins(reference);
            let total: u64 = refs.iter().map(|(g, b)| (g + b) as u64).sum();
            let Some(f) = GoodFrozen::from_bins(refs.iter().copied()).filter(|_| total >= s.min_goodput_baseline as u64) else { return };
            let now_bins = bins(recent);
            if now_bins.is_empty() {
                return;
            }
            // The bins' dependence from the counts' variogram before the recent window.
            deff = t.hist.count_dependence(f.cap, reference.1, true).map_or(1.0, |gamma| independent_design_effect(&gamma, f.var(), reference, recent));
            let confirmed = thirds.iter().all(|x| {
                let part = bins(*x);
                !part.is_empty() && f.tail(&part, deff) <= s.confirm_alpha
            });
            (f.tail(&now_bins, deff), confirmed, f.p_bad())
        } else {
            let tol = s.latency_tolerance.ln();
            // Unadjusted for load: adjusted by the current slope alone, this test raised a false
            // alarm every 2-4 days in the planner under load sd 0.2 with a reading
            // (docs/detection.md). The adjusted test only vetoes, below.
            let Some(dep) = t.hist.dependence(k, None) else { return };
            // The change of block `b` against the reference (block means from `mean`, variance
            // from `gamma`), and whether it reaches the tolerance; both blocks need half their bins.
            let test = |gamma: &[f64], mean: &dyn Fn((i64, i64)) -> (f64, usize), b: (i64, i64)| {
                let (mr, nr) = mean(reference);
                let (mb, nb) = mean(b);
                if (nr as i64) * 2 < reference.1 - reference.0 || (nb as i64) * 2 < b.1 - b.0 {
                    return None;
                }
                // The daily shape's own error adds to the load's variance (daily.rs).
                let var = contrast_var(gamma, reference, b) + t.daily[k].contrast_var(reference, b, s.bin_s);
                Some(((mb - mr) / var.max(1e-12).sqrt(), mb - mr >= tol))
            };
            // Incident bins are left out of both blocks: a quarter hour of 2x latency is the
            // burn-rate alerts' business, and a lasting change stops being flagged once the bins
            // before it have moved to it.
            let z = |b: (i64, i64)| test(&dep.gamma, &|r| t.hist.block_mean(k, r, true), b);
            let Some((zm, large)) = z(recent) else { return };
            deff = dep.design_effect(reference, recent);
            let confirmed = large && thirds.iter().all(|b| z(*b).is_some_and(|(x, l)| normal_sf(x) <= s.confirm_alpha && l));
            // A change the offered-load reading explains (traffic that rose and stays: a
            // morning ramp) is no regression: with a usable load slope, the change of the
            // load-adjusted residuals must pass too. A reading the regression itself moves (a
            // queue length) would hide a creep here; the offered load does not. Both slopes
            // the history gives are tried, the increments' and the level relation's (fitted
            // only when the raw test would alarm: a fit is O(bins²)): after a ramp the
            // increments' comes out a fraction of the level relation's (the reading's noise
            // is most of its increments), which left most of a ramp that holds unexplained.
            let raw_passes = normal_sf(zm) <= alpha && confirmed;
            let levels = if raw_passes { level_slope(t, k, recent.1, s) } else { None };
            let adjusted_p = [t.hist.vario[k].load_slope(), levels].into_iter().flatten().filter_map(|slope| {
                let dep = t.hist.dependence(k, Some(slope))?;
                let (za, large) = test(&dep.gamma, &|r| t.hist.block_mean_adjusted(k, r, slope), recent)?;
                Some(if large { normal_sf(za) } else { 1.0 })
            });
            (adjusted_p.fold(normal_sf(zm), f64::max), confirmed, 0.0)
        };
        let evidence = -(p.max(1e-300)).ln();
        let t = &mut self.targets[ti];
        t.continuous[k] = (evidence, threshold);
        let passes = p <= alpha && confirmed;
        let persisted = passes && t.continuous_passed[k];
        t.continuous_passed[k] = passes;
        if persisted {
            let name = t.name.clone();
            t.pooled[k] = SignalState { state: State::Regressed, source: Some(Cause::Continuous), changed: Some(now), ..t.pooled[k] };
            t.recovery_ref[k] = Some((reference.0, reference.1, p_ref));
            t.alarm_deff[k] = deff;
            // After a recovery, a new alarm needs two fresh looks again.
            t.continuous_passed[k] = false;
            self.events.push(StateChange { target: name, scenario: None, signal, state: State::Regressed, source: Cause::Continuous, at: now });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::state::{Cause, Detector, Observation, Signal, State};
    use crate::config::DetectSettings;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn silent_step_is_caught_by_the_continuous_detector() {
        let mut rng = SmallRng::seed_from_u64(13);
        let mut d = Detector::new(DetectSettings::default());
        // 7 h at 0.5 probes/s (the test compares the last 30 minutes with the 6 hours before),
        // then a 2x step without a marker. A step this large is treated as an incident (left to
        // the burn-rate alerts) until the bins before it have moved to it, about 30 minutes; the
        // continuous test then needs its whole window past that and two looks in a row.
        for i in 0..12_600 {
            d.observe("t", SC[i % 3], probe(&mut rng, 1.0), i as f64 * 2.0);
        }
        assert!(d.drain_events().is_empty(), "no alarm on the quiet warm-up");
        let mut caught = None;
        for i in 0..2700 {
            d.observe("t", SC[i % 3], probe(&mut rng, 2.0), 25_200.0 + i as f64 * 2.0);
            if d.drain_events().iter().any(|e| e.source == Cause::Continuous && e.signal == Signal::Ttft) {
                caught = Some(i);
                break;
            }
        }
        assert!(caught.is_some_and(|i| i >= 900), "a 2x step is no continuous alarm within its first 30 minutes: {caught:?}");
        assert!(caught.is_some(), "continuous detector missed a 2x step within 90 minutes");
        let r = pooled(&d, Signal::Ttft);
        assert_eq!((r.state, r.source), (State::Regressed, Some(Cause::Continuous)));
        assert!(r.continuous_evidence >= r.continuous_threshold, "{r:?}");
    }

    /// A slowdown that eases but stays (x1.3 for 90 minutes, then x1.12) is one continuous
    /// alarm, not one that recovers and comes back: x1.12 lies between the alarm's tolerance and
    /// the recovery's alternative (1.05 and 1.20), and the recovery also needs the change back
    /// below the tolerance (on a tight signal, log sd 0.2 as a TPOT's, the recovery test alone
    /// rejects "still 1.20x" at once).
    #[test]
    fn a_slowdown_that_eases_but_stays_is_one_continuous_alarm() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut d = Detector::new(DetectSettings::default());
        let tight = |r: &mut SmallRng, f: f64| Observation { ttft: Some(lognormal(r, 0.02, 0.2) * f), good: Some(true), ..Default::default() };
        for i in 0..12_600 {
            d.observe("t", SC[i % 3], tight(&mut rng, 1.0), i as f64 * 2.0);
        }
        assert!(d.drain_events().is_empty(), "no alarm on the quiet warm-up");
        let mut states = Vec::new();
        for i in 0..6300 {
            let f = if i < 2700 { 1.3 } else { 1.12 };
            d.observe("t", SC[i % 3], tight(&mut rng, f), 25_200.0 + i as f64 * 2.0);
            states.extend(d.drain_events().into_iter().filter(|e| e.scenario.is_none() && e.signal == Signal::Ttft).map(|e| (e.state, e.source)));
        }
        assert_eq!(states, vec![(State::Regressed, Cause::Continuous)], "one alarm while the slowdown stays");
    }

    /// Traffic that rises and stays (x1.5 over an hour, then held) is no continuous alarm when
    /// the offered-load reading rises with it (the slope learned from the load's swings); the
    /// same probes without a reading are one, and so is a leak that the reading does not show.
    #[test]
    fn a_rise_the_offered_load_explains_is_no_continuous_alarm() {
        let run = |reading: bool, in_reading: bool| {
            let mut rng = SmallRng::seed_from_u64(23);
            let mut d = Detector::new(DetectSettings::default());
            let mut alarmed = false;
            for i in 0..(12_600 + 5400) {
                let t = i as f64 * 2.0;
                // Load swings (a period of 433 s, out of step with the hour) teach the slope;
                // the rise starts at 7 h.
                let swing = 0.15 * (std::f64::consts::TAU * t / 433.0).sin();
                let rise = 1.5f64.ln() * ((t - 25_200.0) / 3600.0).clamp(0.0, 1.0);
                let o = probe(&mut rng, (swing + rise).exp());
                let load = reading.then_some(swing + if in_reading { rise } else { 0.0 });
                d.observe("t", SC[i % 3], Observation { load, ..o }, t);
                alarmed |= d.drain_events().iter().any(|e| e.source == Cause::Continuous && e.signal == Signal::Ttft && e.state == State::Regressed);
            }
            alarmed
        };
        assert!(!run(true, true), "a rise of traffic that the reading shows");
        assert!(run(false, false), "the same probes without a reading");
        assert!(run(true, false), "a slowdown the reading does not show (a leak)");
    }

    /// Without a marker, a rise of failures is a goodput regression; the same rise of SLO misses
    /// (probes that answered, too slowly) is not the continuous test's: it counts failures only.
    #[test]
    fn the_continuous_goodput_test_counts_failures_not_slo_misses() {
        let run = |misses: bool| {
            let mut rng = SmallRng::seed_from_u64(41);
            let mut d = Detector::new(DetectSettings::default());
            let obs = |r: &mut SmallRng, bad: f64| {
                let o = probe(r, 1.0);
                match (r.random_bool(bad), misses) {
                    (false, _) => o,
                    (true, true) => Observation { good: Some(false), ..o },
                    (true, false) => Observation { good: Some(false), ttft: None, ..o },
                }
            };
            let t = feed(&mut d, &mut rng, 0.0, 25_200, |r, _, _| obs(r, 0.01));
            assert!(d.drain_events().is_empty(), "no alarm on the quiet warm-up");
            feed(&mut d, &mut rng, t, 10_800, |r, _, _| obs(r, 0.06));
            d.drain_events().iter().any(|e| e.source == Cause::Continuous && e.signal == Signal::Goodput && e.state == State::Regressed)
        };
        assert!(run(false), "failures from 1% to 6% without a marker: a continuous goodput alarm");
        assert!(!run(true), "SLO misses from 1% to 6%: not the continuous test's");
    }
}
