//! The online detector: takes the probes (per target pooled in time bins, per target × scenario ×
//! signal the recent raw values), release markers and the passing of time, and runs the tests at
//! the bins they end: the release-armed tests (`release`), the continuous test (`continuous`).
//! Its state and types live in `state`, its rows in `report`.
//!
//! Pure and I/O free: time is the `now` the caller passes (seconds, one clock throughout).

use super::baseline::GoodBin;
use super::covariates::adjusted;
use super::daily::SHAPE_REFIT_S;
use super::history::{OpenBin, bin_centre, bin_index};
use super::release::{detrended, freeze, is_look};
use super::state::{
    ANCHOR_PROBES, Detector, GoodputKey, Ignored, MAX_VERSION_CHARS, Marked, MarkerTime, Observation, REANCHOR, ScenarioState, Signal, SignalState, State,
    StateChange, TargetState,
};
use super::tail::departure;
use crate::config::DetectSettings;

/// Refits target `t`'s daily shapes at `end`; where one is or was in use, what holds values
/// about it is re-expressed with the new one (the history's bin means and readings, the stored
/// readings), so everything holds the residuals about one shape, and the variograms rebuilt.
fn refit_daily(t: &mut TargetState, end: f64, bin_s: f64) {
    let first = t.hist.first;
    let centre = |i: usize| bin_centre(first + i as i64, bin_s);
    let mut changed = false;
    for k in 0..3 {
        let old = t.daily[k].clone();
        t.daily[k].refit(end);
        if !(old.in_use() || t.daily[k].in_use()) {
            continue;
        }
        for (i, b) in t.hist.bins.iter_mut().enumerate() {
            if b.n[k] > 0 {
                b.mean[k] += (old.value(centre(i)) - t.daily[k].value(centre(i))) as f32;
            }
        }
        changed = true;
    }
    let old = t.reading_daily.clone();
    t.reading_daily.refit(end);
    if old.in_use() || t.reading_daily.in_use() {
        let shift = |tm: f64| (old.value(tm) - t.reading_daily.value(tm)) as f32;
        for (i, b) in t.hist.bins.iter_mut().enumerate() {
            if b.x_n > 0 {
                b.x += shift(centre(i));
            }
        }
        for lk in t.scenarios.iter_mut().flat_map(|sc| sc.latency.iter_mut()) {
            for (x, tm) in lk.loads.iter_mut().zip(&lk.times) {
                *x += shift(*tm);
            }
        }
        changed = true;
    }
    if changed {
        t.hist.rebuild();
    }
}

impl Detector {
    /// A detector with no baselines. Call `settings.validate()` first; invalid numbers make the
    /// tests meaningless but never panic.
    pub fn new(settings: DetectSettings) -> Self {
        Detector { settings, targets: Vec::new(), keys: 0, events: Vec::new(), ignored: Ignored::default(), last_now: 0.0 }
    }

    pub fn settings(&self) -> &DetectSettings {
        &self.settings
    }

    /// Input the detector did not use.
    pub fn ignored(&self) -> Ignored {
        self.ignored
    }

    /// Number of target × scenario keys held.
    pub fn keys(&self) -> usize {
        self.keys
    }

    /// The state changes since the last call.
    pub fn drain_events(&mut self) -> Vec<StateChange> {
        std::mem::take(&mut self.events)
    }

    /// Whether `drain_events` has anything (cheap).
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// A release of `target` to `version` that happened at `at`, told at `now`. Arms the tests
    /// for `armed_window_s` from `at`, the first `release_grace_s` of which do not decide; the
    /// probes since `at` count as if the marker had come on time (`at` is taken no earlier than
    /// `marker_max_delay_s` before `now`, nor after `now`).
    ///
    /// - The same version again while its window is open (a second pipeline step, discovery and
    ///   the API both marking one rollout) is the same release: nothing changes.
    /// - A first marker freezes every scenario's baseline (the baseline windows before `at`).
    /// - A marker while a window is open or a row is regressed keeps the baselines frozen before
    ///   (the last state not held as regressed) and tests the new version against them from its
    ///   own grace window on. Regressed rows stay regressed: only their recovery test clears
    ///   them, with an event. A marker never erases an alarm.
    ///
    /// - A marker whose time is the release's own (`MarkerTime::Stated`) and that comes on time
    ///   (within a bin of it), while the bin before it is flagged as an incident: the incident
    ///   began before the release, so the window's latency probes wait until it ends. A marker
    ///   seen late (discovery, a behaviour change) or sent late may follow a release whose own
    ///   slowdown flagged those bins, and holding would delay its alarm by half an hour.
    ///
    /// A marker for a target never seen is remembered (rows without a baseline stay out of the
    /// test).
    pub fn mark_release(&mut self, target: &str, version: &str, at: f64, time: MarkerTime, now: f64) -> Marked {
        // A time no clock gives would arm a window that never closes.
        if !(at.is_finite() && now.is_finite()) {
            return Marked::Ignored;
        }
        let version: String = version.chars().take(MAX_VERSION_CHARS).collect();
        let version = version.as_str();
        self.tick(now);
        let s = self.settings.clone();
        let at = at.min(now).max(now - s.marker_max_delay_s.min(s.armed_window_s));
        let ti = match self.targets.iter().position(|t| t.name == target) {
            Some(i) => i,
            None => {
                let t = self.new_target(target, now);
                self.targets.push(t);
                self.targets.len() - 1
            }
        };
        let t = &mut self.targets[ti];
        if t.armed_until.is_some() && t.version.as_deref() == Some(version) {
            return Marked::Repeated { first_at: t.marker.unwrap_or(at) };
        }
        let regressed = |r: &SignalState| r.state == State::Regressed;
        let chained =
            t.frozen_at.is_some() && (t.armed_until.is_some() || t.pooled.iter().any(regressed) || t.scenarios.iter().any(|sc| sc.rows.iter().any(regressed)));
        // A marker dated before the one it follows would test probes of the older version.
        let at = if chained { at.max(t.marker.unwrap_or(at)) } else { at };
        if !chained {
            freeze(t, at, &s);
        }
        let incident_hold = time == MarkerTime::Stated && now - at < s.bin_s;
        self.arm(ti, version, at, incident_hold, now);
        Marked::Armed { at, chained }
    }

    /// Re-opens a release window a snapshot saved: the baselines frozen at `frozen_at` again from
    /// the restored values and bins, the window of the marker at `at` with the probes since it
    /// (as a late marker's), holding an incident running at it where the marker did
    /// (`incident_hold`). Windows already closed by `now` are not re-opened.
    pub(super) fn reopen(&mut self, target: &str, version: &str, (at, frozen_at): (f64, f64), incident_hold: bool, now: f64) -> bool {
        let s = self.settings.clone();
        let Some(ti) = self.targets.iter().position(|t| t.name == target) else { return false };
        if !(at.is_finite() && frozen_at.is_finite() && frozen_at <= at && at <= now && at + s.armed_window_s > now) {
            return false;
        }
        freeze(&mut self.targets[ti], frozen_at, &s);
        self.arm(ti, version, at, incident_hold, now);
        true
    }

    /// Advances time without a probe: closes finished bins (running the looks they end), closes
    /// release windows and ages `recovered` rows.
    pub fn tick(&mut self, now: f64) {
        if !now.is_finite() {
            return;
        }
        self.last_now = self.last_now.max(now);
        let current = self.bin_of(now);
        for ti in 0..self.targets.len() {
            self.advance(ti, current);
        }
        let window = self.settings.armed_window_s;
        for t in &mut self.targets {
            if t.armed_until.is_some_and(|u| now >= u) {
                t.armed_until = None;
            }
            let age = |r: &mut SignalState| {
                if r.state == State::Recovered && r.changed.is_some_and(|c| now - c >= window) {
                    *r = SignalState::default();
                }
            };
            t.pooled.iter_mut().for_each(age);
            for sc in &mut t.scenarios {
                sc.rows.iter_mut().for_each(age);
            }
        }
    }

    /// Closes target `ti`'s open bin when time has reached bin `current`.
    fn advance(&mut self, ti: usize, current: i64) {
        let Some((bin, open)) = self.targets[ti].hist.open else { return };
        if bin >= current {
            return;
        }
        self.targets[ti].hist.open = None;
        self.targets[ti].hist.push(bin, open.close());
        self.bin_closed(ti, bin);
    }

    /// One probe of `target` × `scenario` at `now`.
    pub fn observe(&mut self, target: &str, scenario: &str, obs: Observation, now: f64) {
        let Some(good) = obs.good else {
            self.ignored.own_failures += 1;
            return;
        };
        if !now.is_finite() {
            self.ignored.bad_values += 1;
            return;
        }
        self.tick(now);
        let ti = match self.targets.iter().position(|t| t.name == target) {
            Some(i) => i,
            None => {
                if self.keys >= self.settings.max_keys {
                    self.ignored.over_key_cap += 1;
                    return;
                }
                let t = self.new_target(target, now);
                self.targets.push(t);
                self.targets.len() - 1
            }
        };
        let si = match self.targets[ti].scenarios.iter().position(|s| s.name == scenario) {
            Some(i) => i,
            None => {
                if self.keys >= self.settings.max_keys {
                    self.ignored.over_key_cap += 1;
                    return;
                }
                self.keys += 1;
                let t = &mut self.targets[ti];
                t.scenarios.push(ScenarioState {
                    name: scenario.to_string(),
                    first_seen: now,
                    latency: Default::default(),
                    goodput: GoodputKey::default(),
                    rows: [SignalState::default(); 4],
                });
                t.scenarios.len() - 1
            }
        };
        // A probe older than the open bin (clocks of concurrent probes) joins the open bin.
        let bin = self.bin_of(now).max(self.targets[ti].hist.open.map_or(i64::MIN, |o| o.0));
        let s = &self.settings;
        let t = &mut self.targets[ti];
        let hold = t.armed_until.is_some() || t.pooled.iter().any(|r| r.state == State::Regressed);
        let post_from = t.marker.map(|m| m + s.release_grace_s);
        let adjust = t.adjust;
        // The reading with its own daily shape out, as latency has its own out: the tests
        // adjust for the load's departures from the usual day (docs/detection.md, "The
        // reading's daily shape").
        let load = obs.load.filter(|x| x.is_finite()).map(|x| {
            if !hold {
                t.reading_daily.add(now, x);
            }
            x - t.reading_daily.value(now)
        });
        let hit = obs.cache_hit.filter(|h| h.is_finite());
        // A cold prefix cache after the release, or a replica that came up during the rollout
        // and is still warming up: the probe is warm-up, held out of the release tests.
        let mut warming = false;
        if let Some(p0) = post_from.filter(|p0| now >= *p0 && t.armed_until.is_some()) {
            if let Some(h) = hit {
                t.post_hit.0 += h;
                t.post_hit.1 += 1;
                t.cold_now = t.cache_ref.is_some_and(|c| c.cold(Some(h)));
            }
            let cold = now < p0 + s.cache_warmup_max_s && t.cache_ref.is_some_and(|c| c.cold(hit));
            // An incident running since before the marker ends at the first closed bin after
            // the marker that is not flagged; until then the latency probes wait (`arm`).
            // A closed bin that is not flagged ends it; none (the open bin lost at a restart) does not.
            if t.incident_at_marker && t.marker.is_some_and(|m| bin > bin_index(m, s.bin_s)) && t.hist.get(bin - 1).is_some_and(|b| !b.incident()) {
                t.incident_at_marker = false;
            }
            warming = cold || obs.replica_warming || t.incident_at_marker;
            if cold {
                t.warm_held += 1;
            } else if !warming && t.post_first.is_none() {
                t.post_first = Some(now);
            }
        }
        let open = &mut t.hist.open.get_or_insert((bin, OpenBin::default())).1;
        if let Some(x) = load {
            open.x_n += 1;
            open.x_sum += x;
        }
        if let Some(h) = hit {
            open.h_n += 1;
            open.h_sum += h;
        }
        // A replica's start-up failures are its warm-up too (a cold cache is slow, not failing:
        // its probes still count for goodput and the checks).
        let outcome_held = warming && obs.replica_warming;
        if !outcome_held {
            open.check_bad += u32::from(obs.check_failed && !good);
            open.slo_missed += u32::from(obs.missed_slo());
        }
        let load = load.map_or(f32::NAN, |x| x as f32);
        let sc = &mut t.scenarios[si];
        for (k, v) in [obs.ttft, obs.tpot, obs.e2e].into_iter().enumerate() {
            let Some(v) = v else { continue };
            if !(v.is_finite() && v > 0.0) {
                self.ignored.bad_values += 1;
                continue;
            }
            let y = v.ln();
            let lk = &mut sc.latency[k];
            let (lo, hi) = lk.level.bounds(s.clip_sigmas);
            let season = t.daily[k].value(now);
            if let Some(anchor) = lk.anchor {
                let raw = y.clamp(lo, hi) - anchor;
                // The daily shape learns from the residuals a release window or a regression
                // does not hold; the history holds them with the shape taken out.
                if !hold {
                    t.daily[k].add(now, raw);
                }
                let r = raw - season;
                open.n[k] += 1;
                open.sum[k] += r;
                open.sum_sq[k] += r * r;
            }
            if !hold || lk.level.n < ANCHOR_PROBES {
                lk.level.push(y, now, s.history_s / 2.0, s.clip_sigmas);
                let moved = lk.anchor.is_some_and(|a| (lk.level.mean - a).abs() > REANCHOR);
                if (lk.anchor.is_none() && lk.level.n >= ANCHOR_PROBES) || moved {
                    lk.anchor = Some(lk.level.mean);
                }
            } else {
                // The level holds still while a window is open, and resumes after it as if no
                // time had passed: weighted by the hour it held, the first probe after it moved
                // the level by up to 0.23 and could set a new anchor (a step in every residual
                // of the scenario; docs/detection.md, "The daily shape").
                lk.level.last = now;
            }
            // The departure from the recent level, before this probe joins the values; the tail
            // test's history holds it as the daily shape holds the residuals.
            let departure = departure(&lk.times, &lk.values, lk.times.len(), now, y).unwrap_or(f64::NAN);
            if !hold {
                lk.tail.add(now, departure, s.history_s);
            }
            lk.times.push_back(now);
            lk.values.push_back(y as f32);
            lk.loads.push_back(load);
            lk.replicas.push_back(obs.replica);
            let from = now - s.value_retention_s();
            while lk.times.front().is_some_and(|t0| *t0 < from) || lk.times.len() > s.baseline_max_samples {
                lk.times.pop_front();
                lk.values.pop_front();
                lk.loads.pop_front();
                lk.replicas.pop_front();
            }
            if warming {
                continue;
            }
            let y = detrended(adjusted(y, load, adjust[k]), now, t.trend[k].as_ref(), &t.daily[k]) - t.replicas[k].of(obs.replica);
            if let (Some(f), Some(p0)) = (&lk.frozen, post_from)
                && now >= p0
                && t.armed_until.is_some()
            {
                lk.post.add(f, y, departure);
            }
            if post_from.is_some_and(|p0| now >= p0) && (t.armed_until.is_some() || sc.rows[k].state == State::Regressed) {
                lk.post.push(now, y, departure, s.baseline_max_samples);
            }
        }
        if outcome_held {
            return;
        }
        if good {
            open.good += 1;
        } else {
            open.bad += 1;
        }
        let g = &mut sc.goodput;
        match g.bins.back_mut() {
            Some(last) if last.bin >= bin => {
                if good {
                    last.good += 1
                } else {
                    last.bad += 1
                }
            }
            _ => g.bins.push_back(GoodBin { bin, good: u32::from(good), bad: u32::from(!good) }),
        }
        let keep_from = bin - ((s.goodput_baseline_s + s.armed_window_s) / s.bin_s).ceil() as i64 - 1;
        while g.bins.front().is_some_and(|f| f.bin < keep_from) {
            g.bins.pop_front();
        }
    }

    /// Bin `bin` of target `ti` closed: the release looks it ends, the recovery tests, the
    /// continuous look.
    fn bin_closed(&mut self, ti: usize, bin: i64) {
        let s = self.settings.clone();
        let end = (bin + 1) as f64 * s.bin_s;
        if let (Some(marker), Some(_)) = (self.targets[ti].marker, self.targets[ti].armed_until) {
            let post0 = self.bin_after(marker + s.release_grace_s);
            let e = bin + 1 - post0;
            if is_look(e) {
                for signal in Signal::ALL {
                    self.release_look(ti, signal, marker, end, (post0, bin + 1));
                }
            }
        }
        for signal in Signal::ALL {
            self.recovery(ti, signal, bin, end);
        }
        // The daily shape is refitted every 6 hours, never while a release window is open (its
        // baseline and its probes are compared with one shape).
        let crossed = (end / SHAPE_REFIT_S).floor() != ((end - s.bin_s) / SHAPE_REFIT_S).floor();
        if crossed && self.targets[ti].armed_until.is_none() {
            refit_daily(&mut self.targets[ti], end, s.bin_s);
        }
        let look_bins = (s.continuous_look_s / s.bin_s).round().max(1.0) as i64;
        if s.continuous && self.targets[ti].armed_until.is_none() && (bin + 1).rem_euclid(look_bins) == 0 {
            for signal in Signal::ALL {
                self.continuous_look(ti, signal, bin, end);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    /// A ±20% daily cycle, probes at 0.5 a second over three scenarios (lognormal, sd 0.5).
    fn cycled(r: &mut SmallRng, t: f64, factor: f64) -> Observation {
        probe(r, factor * (1.0 + 0.2 * (std::f64::consts::TAU * t / 86_400.0 + 2.0).sin()))
    }

    fn feed_cycle(d: &mut Detector, rng: &mut SmallRng, from: f64, seconds: f64, factor: f64) -> f64 {
        let mut t = from;
        let mut i = 0;
        while t < from + seconds {
            d.observe("t", SC[i % 3], cycled(rng, t, factor), t);
            t += 2.0;
            i += 1;
        }
        t
    }

    /// The design effect of the baseline hour against the first ten minutes after the grace
    /// window, frozen at a marker at `t`, and whether a daily shape is in use.
    fn frozen_deff(d: &mut Detector, t: f64) -> (f64, bool) {
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        let base = (d.bin_of(t - 3600.0), d.bin_of(t));
        let tt = &d.targets[0];
        let dep = tt.dependence[0].as_ref().expect("dependence");
        (dep.design_effect(base, (base.1 + 5, base.1 + 15)), tt.daily[0].in_use())
    }

    #[test]
    fn the_daily_shape_from_earlier_days_takes_the_cycle_out_of_the_yardstick() {
        // The same hour of the day (the cycle falling fastest) after 12 hours of history and
        // after three days.
        let mut rng = SmallRng::seed_from_u64(61);
        let at = 86_400.0 * 3.0 + 8.0 * 3600.0;
        let mut short = Detector::new(quiet());
        feed_cycle(&mut short, &mut rng, at - 12.0 * 3600.0, 12.0 * 3600.0, 1.0);
        let (deff_short, shape_short) = frozen_deff(&mut short, at);
        let mut long = Detector::new(quiet());
        feed_cycle(&mut long, &mut rng, 0.0, at, 1.0);
        let (deff_long, shape_long) = (frozen_deff(&mut long, at).0, long.targets[0].daily[0].in_use());
        assert!(!shape_short && shape_long, "a shape only from earlier days");
        assert!(deff_long < 1.3 && deff_long < deff_short / 1.5, "design effect {deff_long} with the shape, {deff_short} without");
        // A release 1.25x slower is found within 15 minutes; the same hour unchanged is not.
        for (factor, alarm) in [(1.25, true), (1.0, false)] {
            let mut d = Detector::new(quiet());
            feed_cycle(&mut d, &mut rng, 0.0, at, 1.0);
            d.mark_release("t", "v2", at, MarkerTime::Stated, at);
            feed_cycle(&mut d, &mut rng, at, 900.0, factor);
            assert_eq!(first_alarm(&mut d, Signal::Ttft, at).is_some(), alarm, "x{factor}");
        }
    }

    #[test]
    fn a_window_s_close_does_not_move_the_level_in_one_probe() {
        let mut rng = SmallRng::seed_from_u64(63);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        feed(&mut d, &mut rng, t, 3590, |r, _, _| probe(r, 1.0));
        let level = |d: &Detector| d.targets[0].scenarios.iter().find(|s| s.name == "a").expect("a").latency[0].level.mean;
        let before = level(&d);
        // A 10x probe, the first after the window: one probe's weight, not the held hour's.
        d.observe("t", "a", probe(&mut rng, 10.0), t + 3601.0);
        assert!(d.targets[0].armed_until.is_none(), "the window has closed");
        assert!((level(&d) - before).abs() < 0.01, "level moved {} in one probe", level(&d) - before);
    }

    #[test]
    fn a_version_longer_than_the_bound_is_kept_cut_and_still_one_release() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 600, |r, _, _| probe(r, 1.0));
        let long = "v".repeat(10 * MAX_VERSION_CHARS);
        assert!(matches!(d.mark_release("t", &long, t, MarkerTime::Stated, t), Marked::Armed { .. }));
        // The same long version again is the same release, as cut.
        assert_eq!(d.mark_release("t", &long, t + 1.0, MarkerTime::Stated, t + 1.0), Marked::Repeated { first_at: t });
        let kept = d.targets[0].version.clone().unwrap_or_default();
        assert_eq!(kept.chars().count(), MAX_VERSION_CHARS);
    }

    #[test]
    fn a_repeated_marker_is_the_same_release_and_no_marker_clears_an_alarm() {
        let mut rng = SmallRng::seed_from_u64(31);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        assert_eq!(d.mark_release("t", "v2", t, MarkerTime::Stated, t), Marked::Armed { at: t, chained: false });
        let t2 = feed(&mut d, &mut rng, t, 1200, |r, _, _| probe(r, 1.5));
        assert!(ttft_alarm(&d.drain_events()), "v2 is slower");
        // The same version again (a second pipeline step, or discovery after the API): nothing
        // changes, not even the window's start.
        assert_eq!(d.mark_release("t", "v2", t2, MarkerTime::Stated, t2), Marked::Repeated { first_at: t });
        assert_eq!((pooled(&d, Signal::Ttft).state, pooled(&d, Signal::Ttft).marker_s), (State::Regressed, Some(t)));
        // Another version while v2's alarm is up: the alarm stays, and v3 is judged against the
        // baseline frozen before v2.
        assert!(matches!(d.mark_release("t", "v3", t2, MarkerTime::Stated, t2), Marked::Armed { chained: true, .. }));
        assert_eq!(pooled(&d, Signal::Ttft).state, State::Regressed);
        assert!(d.drain_events().is_empty(), "a marker raises or clears nothing by itself");
        // v3 is the fix: the recovery test clears the alarm, with an event.
        feed(&mut d, &mut rng, t2, 1800, |r, _, _| probe(r, 1.0));
        let events = d.drain_events();
        assert!(events.iter().any(|e| e.scenario.is_none() && e.signal == Signal::Ttft && e.state == State::Recovered), "{events:?}");
        assert!(!ttft_alarm(&events), "v3 is as fast as the baseline before v2");
    }

    #[test]
    fn dropped_probes_never_count() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 3600, |r, _, _| probe(r, 1.0));
        d.mark_release("t", "v2", t, MarkerTime::Stated, t);
        let huge = Observation { ttft: Some(100.0), tpot: Some(10.0), e2e: Some(1000.0), good: None, ..Default::default() };
        for i in 0..500 {
            d.observe("t", SC[i % 3], huge, t + i as f64);
        }
        let r = pooled(&d, Signal::Ttft);
        assert_eq!((r.state, r.samples), (State::Watching, 0));
        assert_eq!(pooled(&d, Signal::Goodput).samples, 0);
        assert_eq!(d.ignored().own_failures, 500);
    }

    #[test]
    fn keys_and_baselines_are_capped() {
        let s = DetectSettings { max_keys: 2, baseline_max_samples: 50, continuous: false, ..DetectSettings::default() };
        let mut d = Detector::new(s);
        let mut rng = SmallRng::seed_from_u64(23);
        feed(&mut d, &mut rng, 0.0, 300, |r, _, _| probe(r, 1.0));
        assert_eq!(d.keys(), 2);
        assert_eq!(d.ignored().over_key_cap, 100);
        let rows = d.report();
        let latency = rows.iter().filter(|r| r.scenario.is_some() && r.signal == Signal::Ttft);
        assert!(latency.clone().count() == 2 && latency.clone().all(|r| r.baseline_samples == 50));
    }

    #[test]
    fn hostile_snapshots_and_times_never_panic() {
        let mut rng = SmallRng::seed_from_u64(29);
        let mut d = Detector::new(DetectSettings::default());
        let t = feed(&mut d, &mut rng, 0.0, 3000, |r, _, _| probe(r, 1.0));
        let bytes = d.snapshot();
        // Damaged snapshots: every restore either fails with a message or yields a detector that
        // keeps working.
        for _ in 0..300 {
            let mut b = bytes.clone();
            for _ in 0..rng.random_range(1..8) {
                let i = rng.random_range(0..b.len());
                const BYTES: &[u8] = b"0123456789-.eE,:[]{}\"nu";
                b[i] = BYTES[rng.random_range(0..BYTES.len())];
            }
            let mut e = Detector::new(DetectSettings::default());
            if e.restore(&b, t).is_ok() {
                e.mark_release("t", "v2", t + 1.0, MarkerTime::Stated, t + 1.0);
                feed(&mut e, &mut rng, t + 1.0, 30, |r, _, _| probe(r, 2.0));
                let _ = e.report();
            }
        }
        // Times and values no clock or server should send.
        for now in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0e300, 1.0e300, 0.0, t + 1.0e9, t - 1.0e9] {
            d.observe("t", "a", Observation { ttft: Some(f64::NAN), tpot: Some(-1.0), e2e: Some(f64::INFINITY), good: Some(true), ..Default::default() }, now);
            d.observe("t", "a", probe(&mut rng, 1.0), now);
            d.mark_release("t", "v2", now, MarkerTime::Stated, now);
            d.tick(now);
            let _ = d.report();
        }
        assert!(d.ignored().bad_values > 0);
    }
}
