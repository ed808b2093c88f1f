//! The detector's snapshot: the baselines as versioned JSON, and restoring them and the release window
//! open at the time.

use std::num::NonZeroU32;

use serde::{Deserialize, Serialize};

use super::baseline::{Ewma, GoodBin};
use super::daily::{HOUR_S, HourSum, KEEP_HOURS, SHAPE_REFIT_S};
use super::history::HistBin;
use super::state::{Detector, GoodputKey, ScenarioState, SignalState};
use super::tail::{BINS, TailHistory};
// ---- snapshot ----

use super::state::MAX_VERSION_CHARS;

/// Format version of `Detector::snapshot`.
const SNAPSHOT_VERSION: u32 = 2;

#[derive(Serialize, Deserialize)]
pub(super) struct Snapshot {
    pub version: u32,
    pub saved_at: f64,
    pub targets: Vec<SnapTarget>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct SnapTarget {
    pub(super) name: String,
    pub(super) first_seen: f64,
    pub(super) history_first: i64,
    pub(super) history: Vec<HistBin>,
    pub(super) scenarios: Vec<SnapScenario>,
    /// The release window open when the snapshot was taken (absent in files of older builds).
    #[serde(default)]
    pub(super) release: Option<SnapRelease>,
    /// Per latency signal and then the offered-load reading, the hourly sums the daily shapes
    /// are fitted to (absent in files of older builds, the reading's too: learned afresh).
    #[serde(default)]
    pub(super) daily: Vec<Vec<HourSum>>,
}

/// An open release window: its version, its marker's time and when its baselines were frozen
/// (earlier than the marker when it followed another release).
#[derive(Serialize, Deserialize)]
pub(super) struct SnapRelease {
    pub(super) version: String,
    pub(super) at: f64,
    pub(super) frozen_at: f64,
    /// Its marker holds an incident running at it (absent in files of older builds: no).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) incident_hold: bool,
}

#[derive(Serialize, Deserialize)]
pub(super) struct SnapScenario {
    pub(super) name: String,
    pub(super) first_seen: f64,
    pub(super) latency: Vec<SnapLatency>,
    pub(super) goodput_bins: Vec<GoodBin>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct SnapLatency {
    pub(super) times: Vec<f64>,
    pub(super) values: Vec<f32>,
    /// The load reading of each value (absent in files of older builds).
    #[serde(default)]
    pub(super) loads: Vec<Option<f32>>,
    /// The replica of each value (absent in files of older builds, and where no value has one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) replicas: Vec<Option<u32>>,
    pub(super) level: Ewma,
    pub(super) anchor: Option<f64>,
    /// The tail test's hourly histograms of departures (absent in files of older builds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) tail: Vec<(i64, Vec<u32>)>,
}

/// What `restore` took over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    pub keys: usize,
    pub latency_samples: usize,
    /// Release windows re-opened.
    pub releases: usize,
}

impl Detector {
    /// The most bytes a snapshot of these settings takes, with room to spare: per key 3 latency
    /// signals of `baseline_max_samples` values (64 bytes each at most: time, value, reading,
    /// replica) and the tail test's hourly histograms (96 counts of up to 11 bytes), and its
    /// goodput bins; per target (at most one per key) the history's bins (1 KiB each at most)
    /// and the daily shapes' hours. A state file larger than this is not a snapshot of this
    /// prober's, and is not read.
    pub fn snapshot_max_bytes(&self) -> u64 {
        let s = &self.settings;
        let count = |x: f64| if x.is_finite() { x.max(0.0) as u64 + 2 } else { 0 };
        let hours = count(s.history_s / 3600.0);
        let per_key = 3 * (s.baseline_max_samples as u64 * 64 + hours * BINS as u64 * 11) + count((s.goodput_baseline_s + s.armed_window_s) / s.bin_s) * 64;
        let per_target = count(s.history_s / s.bin_s) * 1024 + 4 * 168 * 128;
        (s.max_keys as u64).saturating_mul(per_key + per_target).saturating_add(1 << 20)
    }

    /// The baselines (raw values, long-run levels, binned history) as versioned JSON. The release
    /// window open at the time is saved with them. Size is bounded by `max_keys × 3 ×
    /// baseline_max_samples` values (about 25 bytes each; 11 more with a replica) and as many
    /// hourly histograms of the tail test's departures as `history_s` has hours (96 counts each,
    /// 200–500 bytes) plus the bins of `history_s` per target.
    pub fn snapshot(&self) -> Vec<u8> {
        let snap = Snapshot {
            version: SNAPSHOT_VERSION,
            saved_at: self.last_now,
            targets: self
                .targets
                .iter()
                .map(|t| SnapTarget {
                    name: t.name.clone(),
                    first_seen: t.first_seen,
                    history_first: t.hist.first,
                    history: t.hist.bins.iter().copied().collect(),
                    scenarios: t
                        .scenarios
                        .iter()
                        .map(|sc| SnapScenario {
                            name: sc.name.clone(),
                            first_seen: sc.first_seen,
                            latency: sc
                                .latency
                                .iter()
                                .map(|l| SnapLatency {
                                    times: l.times.iter().copied().collect(),
                                    values: l.values.iter().copied().collect(),
                                    loads: l.loads.iter().map(|x| x.is_finite().then_some(*x)).collect(),
                                    replicas: if l.replicas.iter().any(Option::is_some) {
                                        l.replicas.iter().map(|r| r.map(NonZeroU32::get)).collect()
                                    } else {
                                        Vec::new()
                                    },
                                    level: l.level,
                                    anchor: l.anchor,
                                    tail: l.tail.hours.iter().cloned().collect(),
                                })
                                .collect(),
                            goodput_bins: sc.goodput.bins.iter().copied().collect(),
                        })
                        .collect(),
                    daily: t.daily.iter().chain([&t.reading_daily]).map(|d| d.hours.iter().copied().collect()).collect(),
                    release: match (t.armed_until, &t.version, t.marker, t.frozen_at) {
                        (Some(_), Some(version), Some(at), Some(frozen_at)) => {
                            Some(SnapRelease { version: version.clone(), at, frozen_at, incident_hold: t.marker_holds_incident })
                        }
                        _ => None,
                    },
                })
                .collect(),
        };
        serde_json::to_vec(&snap).unwrap_or_default()
    }

    /// Replaces every baseline with those of `bytes` (from `snapshot`), dropping values and bins
    /// older than the windows before `now` and anything beyond the caps. An open release
    /// window is opened again; states of closed windows start afresh.
    pub fn restore(&mut self, bytes: &[u8], now: f64) -> Result<Restored, String> {
        let snap: Snapshot = serde_json::from_slice(bytes).map_err(|e| format!("not a detector snapshot: {e}"))?;
        if snap.version != SNAPSHOT_VERSION {
            return Err(format!("snapshot version {} (this build reads {SNAPSHOT_VERSION})", snap.version));
        }
        let s = self.settings.clone();
        let mut targets = Vec::new();
        let mut keys = 0;
        let mut samples = 0;
        let oldest_bin = self.bin_of(now - s.history_s);
        let now_bin = self.bin_of(now);
        let mut releases = Vec::new();
        for st in snap.targets {
            if let Some(r) = st.release {
                releases.push((st.name.clone(), r));
            }
            let mut t = self.new_target(&st.name, st.first_seen);
            for (i, b) in st.history.into_iter().enumerate() {
                let bin = st.history_first.saturating_add(i as i64);
                // A damaged bin is kept as an empty one: the bins must stay one per index.
                let finite = b.mean.iter().chain(&b.nugget).all(|x| x.is_finite());
                let b = if finite { b } else { HistBin::empty() };
                if bin >= oldest_bin && bin < now_bin {
                    t.hist.bins.push_back(b);
                    if t.hist.bins.len() == 1 {
                        t.hist.first = bin;
                    }
                }
                if t.hist.bins.len() >= t.hist.cap {
                    break;
                }
            }
            t.hist.rebuild();
            // The daily shapes: the hours of the last week before now, in order, fitted as at
            // the last refit before the snapshot (the bins hold the residuals about that shape).
            let now_hour = (now / HOUR_S).floor() as i64;
            for (d, hours) in t.daily.iter_mut().chain([&mut t.reading_daily]).zip(st.daily) {
                for h in hours.into_iter().filter(|h| h.sum.is_finite() && h.hour <= now_hour && h.hour > now_hour.saturating_sub(KEEP_HOURS as i64)) {
                    if d.hours.back().is_none_or(|b| b.hour < h.hour) {
                        d.hours.push_back(h);
                    }
                }
                d.refit((snap.saved_at.min(now) / SHAPE_REFIT_S).floor() * SHAPE_REFIT_S);
            }
            for ss in st.scenarios {
                if keys >= s.max_keys {
                    break;
                }
                if ss.latency.len() != 3 {
                    return Err(format!("{}/{}: {} latency signals, expected 3", st.name, ss.name, ss.latency.len()));
                }
                let mut sc = ScenarioState {
                    name: ss.name,
                    first_seen: ss.first_seen,
                    latency: Default::default(),
                    goodput: GoodputKey::default(),
                    rows: [SignalState::default(); 4],
                };
                for (lk, sl) in sc.latency.iter_mut().zip(ss.latency) {
                    if sl.times.len() != sl.values.len() {
                        return Err("latency times and values differ in length".to_string());
                    }
                    let from = now - s.value_retention_s();
                    let loads = sl.loads.into_iter().map(|x| x.filter(|x| x.is_finite()).unwrap_or(f32::NAN)).chain(std::iter::repeat(f32::NAN));
                    let replicas = sl.replicas.into_iter().map(|r| r.and_then(NonZeroU32::new)).chain(std::iter::repeat(None));
                    for (((tm, v), x), r) in sl.times.into_iter().zip(sl.values).zip(loads).zip(replicas) {
                        if tm.is_finite() && v.is_finite() && tm >= from && tm <= now {
                            lk.times.push_back(tm);
                            lk.values.push_back(v);
                            lk.loads.push_back(x);
                            lk.replicas.push_back(r);
                        }
                    }
                    while lk.times.len() > s.baseline_max_samples {
                        lk.times.pop_front();
                        lk.values.pop_front();
                        lk.loads.pop_front();
                        lk.replicas.pop_front();
                    }
                    samples += lk.times.len();
                    lk.level = if sl.level.mean.is_finite() && sl.level.var.is_finite() && sl.level.var >= 0.0 { sl.level } else { Ewma::default() };
                    lk.anchor = sl.anchor.filter(|a| a.is_finite());
                    lk.tail = TailHistory::restored(sl.tail, now, s.history_s);
                }
                let keep_from = self.bin_of(now - s.goodput_baseline_s - s.armed_window_s);
                let cap = ((s.goodput_baseline_s + s.armed_window_s) / s.bin_s).ceil() as usize + 2;
                sc.goodput.bins = ss.goodput_bins.into_iter().filter(|b| b.bin >= keep_from && b.bin <= now_bin).take(cap).collect();
                t.scenarios.push(sc);
                keys += 1;
            }
            targets.push(t);
        }
        self.targets = targets;
        self.keys = keys;
        self.last_now = self.last_now.max(now);
        // Release windows still open: frozen and armed again from the restored values and bins,
        // judged at once on the probes since their markers (a version string is bounded like a
        // marker's).
        let mut reopened = 0;
        for (target, r) in releases {
            let version: String = r.version.chars().take(MAX_VERSION_CHARS).collect();
            if self.reopen(&target, &version, (r.at, r.frozen_at), r.incident_hold, now) {
                reopened += 1;
            }
        }
        Ok(Restored { keys, latency_samples: samples, releases: reopened })
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::state::{Detector, Marked, MarkerTime, Observation, Signal, State};
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn snapshot_round_trips_and_restart_still_detects() {
        let mut rng = SmallRng::seed_from_u64(17);
        let mut d = Detector::new(quiet());
        let replica = |i: usize| std::num::NonZeroU32::new(i as u32 + 1);
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, s, now| Observation { replica: replica(s), load: Some(3.0 + (now / 600.0).sin()), ..probe(r, 1.0) });
        let bytes = d.snapshot();
        let mut e = Detector::new(quiet());
        let restored = e.restore(&bytes, t - 1.0).expect("restore");
        assert_eq!(restored.keys, 3);
        // Each value comes back with its replica.
        assert!(e.targets[0].scenarios.iter().enumerate().all(|(i, sc)| {
            let l = &sc.latency[0];
            l.replicas.len() == l.values.len() && l.replicas.iter().all(|r| *r == replica(i))
        }));
        // The values of a baseline window before the oldest marker whose window may still be
        // open (two hours), up to the cap per key.
        assert_eq!(restored.latency_samples, 3 * quiet().baseline_max_samples, "{restored:?}");
        assert_eq!(restored.releases, 0);
        // Restoring what a restored detector saves changes nothing.
        let again = e.snapshot();
        let mut f = Detector::new(quiet());
        f.restore(&again, t - 1.0).expect("restore");
        assert!(f.snapshot() == again, "snapshot of the restored detector is the same");
        // The restarted detector has the baseline: a release right away is tested.
        e.mark_release("t", "v2", t + 10.0, MarkerTime::Stated, t + 10.0);
        feed(&mut e, &mut rng, t + 10.0, 600, |r, _, _| probe(r, 2.0));
        assert_eq!(pooled(&e, Signal::Ttft).state, State::Regressed);
        assert!(e.restore(b"{not json", t).is_err());
        // The daily shape's hours come back with the rest.
        assert!(f.targets[0].daily[0].hours.len() >= 2 && f.targets[0].daily[0].hours == d.targets[0].daily[0].hours);
        // The tail test's hourly histograms of departures too (two hours of them).
        let tail = &d.targets[0].scenarios[0].latency[0].tail;
        assert!(tail.hours.len() >= 2 && f.targets[0].scenarios[0].latency[0].tail == *tail);
        // The reading's too (a fourth entry); a file of an older build, without it, learns it afresh.
        assert!(f.targets[0].reading_daily.hours.len() >= 2 && f.targets[0].reading_daily.hours == d.targets[0].reading_daily.hours);
        let mut snap: serde_json::Value = serde_json::from_slice(&again).expect("json");
        let daily = snap.pointer_mut("/targets/0/daily").and_then(|v| v.as_array_mut()).expect("daily hours");
        assert_eq!(daily.len(), 4);
        daily.truncate(3);
        let mut g = Detector::new(quiet());
        g.restore(&serde_json::to_vec(&snap).expect("json"), t - 1.0).expect("restore an older file");
        assert!(g.targets[0].reading_daily.hours.is_empty() && g.targets[0].daily[0].hours == d.targets[0].daily[0].hours);
        let future = String::from_utf8(bytes).unwrap().replacen("\"version\":2", "\"version\":99", 1);
        assert!(e.restore(future.as_bytes(), t).unwrap_err().contains("version 99"));
    }

    #[test]
    fn a_release_window_open_at_a_restart_is_judged_after_it() {
        // Released 2x slower; the prober restarts 8 minutes later, before any look. The restored
        // window keeps its version and baselines, judges the probes from before and after the
        // restart, and the same version marked again (discovery, a pipeline's retry) is the same
        // release.
        let mut rng = SmallRng::seed_from_u64(29);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        assert!(matches!(d.mark_release("t", "v2", t, MarkerTime::Stated, t), Marked::Armed { .. }));
        let t2 = feed(&mut d, &mut rng, t, 480, |r, _, _| probe(r, 2.0));
        assert_eq!(pooled(&d, Signal::Ttft).state, State::Watching, "no look before the restart");
        let bytes = d.snapshot();
        let mut e = Detector::new(quiet());
        let restored = e.restore(&bytes, t2 + 30.0).expect("restore");
        assert_eq!(restored.releases, 1);
        let row = pooled(&e, Signal::Ttft);
        assert!(row.armed && row.version.as_deref() == Some("v2"), "{row:?}");
        assert_eq!(e.mark_release("t", "v2", t2 + 40.0, MarkerTime::Stated, t2 + 40.0), Marked::Repeated { first_at: t });
        feed(&mut e, &mut rng, t2 + 30.0, 900, |r, _, _| probe(r, 2.0));
        assert_eq!(pooled(&e, Signal::Ttft).state, State::Regressed);
        let alarm = first_alarm(&mut e, Signal::Ttft, t).expect("an alarm event after the restart");
        assert!(alarm < 1800.0, "{alarm}");

        // A window that closed before the restart is not opened again.
        let mut f = Detector::new(quiet());
        let restored = f.restore(&bytes, t + 3600.0 + 60.0).expect("restore");
        assert_eq!(restored.releases, 0);
        assert!(!pooled(&f, Signal::Ttft).armed);
    }
}
