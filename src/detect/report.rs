//! The exported state: per target the pooled rows and per scenario the rows of each signal,
//! with their estimates, the release window and the behaviour-check comparison
//! (`Detector::report`).

use super::covariates::CacheWarmup;
use super::math::{Z95, binomial_sf, proportion_delta, quantile_se};
use super::release::looks_within;
use super::state::{ChecksReport, Detector, Estimate, ScenarioState, Signal, SignalReport, SignalState, TargetState};

/// What the tests take out or widen, the target's and so the same for all its rows; evaluated
/// once per target (a shape's amplitude is 144 evaluations of it).
struct TargetShapes {
    /// Per signal: the busy hours' widening (the one frozen at the marker while a window is
    /// open, else the history's current one; 1 for goodput).
    swing: [f64; 4],
    /// Per signal: the daily shape's amplitude (0 for goodput).
    daily: [f64; 4],
    /// The offered-load reading's daily shape's amplitude.
    reading: f64,
}

impl TargetShapes {
    fn of(t: &TargetState) -> TargetShapes {
        TargetShapes {
            swing: std::array::from_fn(|k| match (Signal::ALL[k], t.armed_until) {
                (Signal::Goodput, _) => 1.0,
                (_, Some(_)) => t.dependence[k].as_ref().map_or(1.0, |d| d.swing),
                (_, None) => t.hist.dependence(k, None).map_or(1.0, |d| d.swing),
            }),
            daily: std::array::from_fn(|k| if Signal::ALL[k] == Signal::Goodput { 0.0 } else { t.daily[k].amplitude() }),
            reading: t.reading_daily.amplitude(),
        }
    }
}

impl Detector {
    /// The exported state: per target, the four pooled rows (scenario `None`) then four rows per
    /// scenario, in first-seen order.
    pub fn report(&self) -> Vec<SignalReport> {
        let mut out = Vec::new();
        for t in &self.targets {
            let shapes = TargetShapes::of(t);
            for signal in Signal::ALL {
                let k = signal.index();
                let mut row = self.row_report(t, None, signal, &t.pooled[k], &shapes);
                (row.continuous_evidence, row.continuous_threshold) = t.continuous[k];
                out.push(row);
            }
            for sc in &t.scenarios {
                for signal in Signal::ALL {
                    out.push(self.row_report(t, Some(sc), signal, &sc.rows[signal.index()], &shapes));
                }
            }
        }
        out
    }

    /// Behaviour-check failures of the release window (from the grace window on) against the
    /// goodput baseline's bins before the (first) marker of the chain; outage bins left out.
    fn checks_report(&self, t: &TargetState) -> Option<ChecksReport> {
        let s = &self.settings;
        let (marker, frozen_at) = (t.marker?, t.frozen_at?);
        let count = |(a, b): (i64, i64)| {
            (a.max(t.hist.first)..b)
                .filter_map(|x| t.hist.get(x))
                .filter(|h| !h.outage())
                .fold((0u64, 0u64), |(n, f), h| (n + (h.good + h.bad) as u64, f + h.check_bad as u64))
        };
        let (baseline_probes, baseline_failed) = count((self.bin_of(frozen_at - s.goodput_baseline_s), self.bin_of(frozen_at)));
        let post0 = self.bin_after(marker + s.release_grace_s);
        let (probes, failed) = count((post0, t.hist.end()));
        if baseline_probes < s.min_goodput_baseline as u64 || probes == 0 {
            return None;
        }
        let window_bins = ((s.armed_window_s - s.release_grace_s) / s.bin_s).floor() as i64;
        let p = binomial_sf(failed as f64, (failed + baseline_failed) as f64, probes as f64 / (probes + baseline_probes) as f64);
        let p_value = (p * looks_within(window_bins) as f64).min(1.0);
        let threshold = (6.0 / s.armed_alpha).ln();
        let rise = failed as f64 / probes as f64 - baseline_failed as f64 / baseline_probes as f64;
        let regressed = t.looked && rise >= s.goodput_min_effect && -(p_value.max(1e-300)).ln() >= threshold;
        Some(ChecksReport { baseline_probes, baseline_failed, probes, failed, p_value, threshold, regressed })
    }

    /// One row of target `t` (`only`: a scenario's, else pooled); `shapes` are the target's
    /// (taken once per report).
    fn row_report(&self, t: &TargetState, only: Option<&ScenarioState>, signal: Signal, r: &SignalState, shapes: &TargetShapes) -> SignalReport {
        let s = &self.settings;
        let scs: Vec<&ScenarioState> = match only {
            Some(sc) => vec![sc],
            None => t.scenarios.iter().collect(),
        };
        let k = signal.index();
        let (mut samples, mut baseline) = (0u64, 0u64);
        let (mut median_ratio, mut p95_ratio, mut bad_delta) = (None, None, None);
        let (mut error_delta, mut slo_miss_delta) = (None, None);
        if signal == Signal::Goodput {
            // The pooled row tells errors from SLO misses: bad probes without a latency (failed,
            // failed checks included) and with one (answered, too slow), each share against the
            // baseline bins' (outage bins left out there, as in the goodput baseline).
            if let (None, Some(frozen_at), Some(m)) = (only, t.frozen_at, t.marker) {
                let count = |(a, b): (i64, i64), outage_out: bool| {
                    (a.max(t.hist.first)..b).filter_map(|x| t.hist.get(x)).filter(|h| !(outage_out && h.outage())).fold((0u64, 0u64, 0u64), |(n, e, m), h| {
                        (n + u64::from(h.good + h.bad), e + u64::from(h.bad.saturating_sub(h.slo_missed)), m + u64::from(h.slo_missed))
                    })
                };
                let base = count((self.bin_of(frozen_at - s.goodput_baseline_s), self.bin_of(frozen_at)), true);
                let post = count((self.bin_after(m + s.release_grace_s), t.hist.end()), false);
                error_delta = delta_estimate(base.1, base.0, post.1, post.0);
                slo_miss_delta = delta_estimate(base.2, base.0, post.2, post.0);
            }
            let post0 = t.marker.map(|m| self.bin_after(m + s.release_grace_s));
            let frozen = match only {
                Some(sc) => sc.goodput.frozen.as_ref(),
                None => t.good_frozen.as_ref(),
            };
            let (mut n, mut bad) = (0u64, 0u64);
            if let Some(p0) = post0 {
                match only {
                    Some(sc) => sc.goodput.bins.iter().filter(|b| b.bin >= p0).for_each(|b| {
                        n += (b.good + b.bad) as u64;
                        bad += b.bad as u64;
                    }),
                    None => (p0.max(t.hist.first)..t.hist.end()).filter_map(|b| t.hist.get(b)).for_each(|b| {
                        n += (b.good + b.bad) as u64;
                        bad += b.bad as u64;
                    }),
                }
            }
            samples = n;
            match frozen {
                Some(f) => {
                    baseline = f.n;
                    bad_delta = delta_estimate(f.bad, f.n, bad, n);
                }
                None => baseline = scs.iter().flat_map(|sc| sc.goodput.bins.iter()).map(|b| (b.good + b.bad) as u64).sum(),
            }
        } else {
            let (mut med, mut p95) = (Vec::new(), Vec::new());
            for sc in &scs {
                let lk = &sc.latency[k];
                samples += lk.post.n;
                match &lk.frozen {
                    Some(f) => {
                        baseline += f.m as u64;
                        if lk.post.recent.len() >= 5 {
                            let mut v: Vec<f32> = lk.post.recent.iter().map(|x| x.1).collect();
                            v.sort_by(|a, b| a.total_cmp(b));
                            if let (Some((m, sm)), Some((q, sq))) = (quantile_se(&v, 0.5), quantile_se(&v, 0.95)) {
                                med.push((m - f.median, sm * sm + f.se_median * f.se_median));
                                p95.push((q - f.p95, sq * sq + f.se_p95 * f.se_p95));
                            }
                        }
                    }
                    None => baseline += lk.values.len() as u64,
                }
            }
            median_ratio = combine_log_ratios(&med);
            p95_ratio = combine_log_ratios(&p95);
        }
        SignalReport {
            target: t.name.clone(),
            scenario: only.map(|s| s.name.clone()),
            signal,
            state: r.state,
            source: r.source,
            armed: t.armed_until.is_some(),
            pending: t.armed_until.is_some() && !t.looked,
            incident_hold: signal != Signal::Goodput && t.armed_until.is_some() && t.incident_at_marker,
            late_onset: only.is_none() && t.armed_until.is_some() && t.late_onset[k],
            version: t.version.clone(),
            detectable: if only.is_none() { t.detectable[k] } else { None },
            marker_s: t.marker,
            changed_s: r.changed,
            samples,
            baseline_samples: baseline,
            median_ratio,
            p95_ratio,
            bad_delta,
            error_delta,
            slo_miss_delta,
            log_evidence: r.log_e,
            p_value: (-r.max_log_e).exp().min(1.0),
            threshold: self.threshold(signal),
            continuous_evidence: 0.0,
            continuous_threshold: 0.0,
            load_slope: if signal == Signal::Goodput {
                0.0
            } else {
                match (t.armed_until, t.adjust[k]) {
                    (Some(_), Some(a)) => a.slope,
                    (Some(_), None) => 0.0,
                    (None, _) => t.hist.vario[k].load_slope().unwrap_or(0.0),
                }
            },
            daily_amplitude: shapes.daily[k],
            reading_daily_amplitude: shapes.reading,
            swing_scale: shapes.swing[k],
            load_sensitivity: match (only, signal) {
                (Some(sc), Signal::Ttft | Signal::Tpot | Signal::E2e) => sc.latency[k].frozen.as_ref().and_then(|f| f.sensitivity.relative).unwrap_or(1.0),
                _ => 1.0,
            },
            trend_per_hour: if signal == Signal::Goodput {
                None
            } else {
                t.trend[k].as_ref().filter(|_| t.marker.is_some()).map(|tr| (tr.slope * 3600.0).exp())
            },
            checks: if signal == Signal::Goodput && only.is_none() { self.checks_report(t) } else { None },
            warmup: t.cache_ref.filter(|_| t.marker.is_some()).map(|c| CacheWarmup {
                hit_rate_before: c.mean,
                margin: c.margin,
                hit_rate_after: (t.post_hit.1 > 0).then(|| t.post_hit.0 / t.post_hit.1 as f64),
                held_probes: t.warm_held,
                cold: t.cold_now,
            }),
        }
    }
}

/// Inverse-variance weighted mean of log ratios, as a ratio with its 95% interval.
fn combine_log_ratios(parts: &[(f64, f64)]) -> Option<Estimate> {
    if parts.is_empty() {
        return None;
    }
    let (mut sw, mut swx) = (0.0, 0.0);
    for (x, v) in parts {
        let w = 1.0 / v.max(1e-12);
        sw += w;
        swx += w * x;
    }
    let (mean, se) = (swx / sw, (1.0 / sw).sqrt());
    Some(Estimate { value: mean.exp(), low: (mean - Z95 * se).exp(), high: (mean + Z95 * se).exp() })
}

/// The change of a bad share, post minus pre, with its 95% interval (Agresti–Caffo).
fn delta_estimate(pre_bad: u64, pre_n: u64, post_bad: u64, post_n: u64) -> Option<Estimate> {
    let (point, centre, var) = proportion_delta(pre_bad, pre_n, post_bad, post_n)?;
    let half = Z95 * var.sqrt();
    Some(Estimate { value: point, low: centre - half, high: centre + half })
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::state::{Cause, Detector, MarkerTime, Observation, Signal, State};
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn the_goodput_row_tells_errors_from_slo_misses() {
        // Baseline: 1% errors and 2% SLO misses (answered, with their latency).
        let obs = |r: &mut SmallRng, errors: f64, misses: f64| {
            if r.random_bool(errors) {
                Observation { good: Some(false), ..Observation::default() }
            } else if r.random_bool(misses) {
                Observation { good: Some(false), ..probe(r, 3.0) }
            } else {
                probe(r, 1.0)
            }
        };
        for (errors, misses, more_errors) in [(0.06, 0.02, true), (0.01, 0.08, false)] {
            let mut rng = SmallRng::seed_from_u64(53);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, _, _| obs(r, 0.01, 0.02));
            d.mark_release("t", "v2", t, MarkerTime::Stated, t);
            let end = feed(&mut d, &mut rng, t, 1800, |r, _, _| obs(r, errors, misses));
            d.tick(end);
            let row = pooled(&d, Signal::Goodput);
            let (e, m) = (row.error_delta.expect("errors"), row.slo_miss_delta.expect("SLO misses"));
            let (rose, held) = if more_errors { (e, m) } else { (m, e) };
            assert!(rose.low > 0.02 && held.low < 0.0 && held.high > 0.0, "errors {e:?}, SLO misses {m:?}");
            let v = super::super::verdict::verdict(&d.report(), "t", Some("v2"), d.settings()).expect("a verdict");
            let g = v.signals.iter().find(|s| s.signal == "goodput").expect("goodput");
            assert_eq!(g.error_fraction_delta, row.error_delta);
            assert_eq!(g.slo_miss_fraction_delta, row.slo_miss_delta);
        }
        // Scenario rows carry no split.
        let mut d = Detector::new(quiet());
        let mut rng = SmallRng::seed_from_u64(54);
        let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, _, _| obs(r, 0.01, 0.02));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        feed(&mut d, &mut rng, t, 900, |r, _, _| obs(r, 0.01, 0.02));
        assert!(d.report().iter().filter(|r| r.scenario.is_some()).all(|r| r.error_delta.is_none() && r.slo_miss_delta.is_none()));
    }

    #[test]
    fn a_release_that_breaks_answers_is_regressed_on_checks() {
        let mut rng = SmallRng::seed_from_u64(51);
        let mut d = Detector::new(quiet());
        // 6 hours of baseline, 0.5% failures none of which a check failure.
        let t =
            feed(
                &mut d,
                &mut rng,
                0.0,
                21_600,
                |r, _, _| if r.random_bool(0.005) { Observation { good: Some(false), ..Observation::default() } } else { probe(r, 1.0) },
            );
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        let checks = |d: &Detector| pooled(d, Signal::Goodput).checks.expect("a goodput baseline");
        // A version whose answers fail a check 10% of the time.
        let end = feed(&mut d, &mut rng, t, 900, |r, _, _| {
            if r.random_bool(0.1) { Observation { good: Some(false), check_failed: true, ..Observation::default() } } else { probe(r, 1.0) }
        });
        d.tick(end);
        let c = checks(&d);
        assert!(c.regressed && c.failed > 20 && c.baseline_failed == 0, "{c:?}");
        let v = super::super::verdict::verdict(&d.report(), "t", Some("v2"), d.settings()).expect("a verdict");
        assert_eq!(v.state, super::super::verdict::VerdictState::Regressed);
        assert!(v.signals.iter().any(|s| s.signal == "checks" && s.state == "regressed"));
        // The same window without check failures: not regressed on checks.
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, _, _| probe(r, 1.0));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        let end = feed(&mut d, &mut rng, t, 900, |r, _, _| probe(r, 1.0));
        d.tick(end);
        assert!(!checks(&d).regressed);
    }

    #[test]
    fn report_has_pooled_and_scenario_rows_and_labels() {
        let mut rng = SmallRng::seed_from_u64(19);
        let mut d = Detector::new(quiet());
        feed(&mut d, &mut rng, 0.0, 30, |r, _, _| probe(r, 1.0));
        let rows = d.report();
        assert_eq!(rows.len(), 4 + 4 * 3);
        assert_eq!(rows.iter().filter(|r| r.scenario.is_none()).count(), 4);
        let labels: Vec<&str> = rows[..4].iter().map(|r| r.signal.as_str()).collect();
        assert_eq!(labels, ["ttft", "tpot", "e2e", "goodput"]);
        assert_eq!(rows[0].state.as_str(), "watching");
        assert_eq!(Cause::Continuous.as_str(), "continuous");
        assert_eq!(State::Recovered.as_str(), "recovered");
    }
}
