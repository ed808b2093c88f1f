//! The tail test's own history: each probe's departure from its scenario's recent level, counted
//! in hourly histograms over the history, and the reference the test compares with at a marker
//! (docs/detection.md, "The tail test").
//!
//! A departure is a probe's log latency less the median of the probes of its scenario just
//! before it. The level moves with load, the daily cycle, a ramp or an incident; the departure
//! does not, so hours of it are one sample whatever the load did, where the probes' own values
//! are comparable only over the hour before the marker. A release that slows the slowest few
//! percent of requests moves the share of departures above the history's p99; one that slows
//! every request moves the level, which the mean tests see, and the departures only while the
//! median catches up.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Probes before a probe whose median is its recent level: at most this many, no older than
/// `LEVEL_WINDOW_S`, and at least `LEVEL_MIN_PROBES` (fewer: the probe has no departure).
const LEVEL_PROBES: usize = 31;
const LEVEL_WINDOW_S: f64 = 600.0;
const LEVEL_MIN_PROBES: usize = 5;
/// The histograms' bins: `BINS` of `BIN_W` (log) from `BIN_LO`; departures outside fall in the
/// end bins.
pub(super) const BINS: usize = 96;
const BIN_LO: f64 = -2.0;
const BIN_W: f64 = 0.0625;
const HOUR_S: f64 = 3600.0;
/// Hours of history the reference needs (fewer: no tail test): the count's dispersion is read
/// from the hours' shares.
const MIN_HOURS: usize = 3;

/// The departure of the probe with log value `y` at `t` from the median of the (up to
/// `LEVEL_PROBES`) values before index `end` that are at most `LEVEL_WINDOW_S` older.
pub(super) fn departure(times: &VecDeque<f64>, values: &VecDeque<f32>, end: usize, t: f64, y: f64) -> Option<f64> {
    let end = end.min(times.len()).min(values.len());
    let mut level = [0f32; LEVEL_PROBES];
    let mut n = 0;
    for i in (0..end).rev() {
        if n == LEVEL_PROBES || times[i] < t - LEVEL_WINDOW_S {
            break;
        }
        if values[i].is_finite() {
            level[n] = values[i];
            n += 1;
        }
    }
    if n < LEVEL_MIN_PROBES || !y.is_finite() {
        return None;
    }
    let (below, mid, _) = level[..n].select_nth_unstable_by(n / 2, f32::total_cmp);
    let mid = *mid as f64;
    let median = if n % 2 == 1 { mid } else { (below.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64 + mid) / 2.0 };
    Some(y - median)
}

fn bin_of(r: f64) -> usize {
    ((r - BIN_LO) / BIN_W).floor().clamp(0.0, (BINS - 1) as f64) as usize
}

/// Upper edge of bin `b`.
fn edge(b: usize) -> f64 {
    BIN_LO + (b + 1) as f64 * BIN_W
}

/// Departures of one scenario × latency signal, one histogram per hour (hour index, counts).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct TailHistory {
    pub(super) hours: VecDeque<(i64, Vec<u32>)>,
}

/// The tail test's reference at a marker: the departure the history's p99 lies at (a bin's
/// upper edge), the share of departures above it, the share the tolerance moves above it, the
/// count of departures, and the dispersion of the hours' counts above it (at least 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct TailFrozen {
    pub(super) q: f64,
    pub(super) above: f64,
    pub(super) tolerance: f64,
    pub(super) m: f64,
    pub(super) dispersion: f64,
}

impl TailHistory {
    /// One departure at `t`, keeping the hours of the last `keep_s` seconds.
    pub(super) fn add(&mut self, t: f64, r: f64, keep_s: f64) {
        if !(t.is_finite() && r.is_finite()) {
            return;
        }
        let hour = (t / HOUR_S).floor() as i64;
        match self.hours.back_mut() {
            // A probe of an earlier hour (clocks of concurrent probes) joins the newest.
            Some((h, counts)) if *h >= hour => counts[bin_of(r)] += 1,
            _ => {
                let mut counts = vec![0; BINS];
                counts[bin_of(r)] += 1;
                self.hours.push_back((hour, counts));
            }
        }
        let oldest = hour.saturating_sub((keep_s / HOUR_S).ceil().max(1.0) as i64);
        while self.hours.front().is_some_and(|(h, _)| *h < oldest) {
            self.hours.pop_front();
        }
    }

    /// Restores the hours from a snapshot: only well-formed ones, in order, within `keep_s` of
    /// `now`.
    pub(super) fn restored(hours: Vec<(i64, Vec<u32>)>, now: f64, keep_s: f64) -> TailHistory {
        let newest = (now / HOUR_S).floor() as i64;
        let oldest = newest.saturating_sub((keep_s / HOUR_S).ceil().max(1.0) as i64);
        let mut t = TailHistory::default();
        for (h, counts) in hours {
            if counts.len() == BINS && h >= oldest && h <= newest && t.hours.back().is_none_or(|(last, _)| *last < h) {
                t.hours.push_back((h, counts));
            }
        }
        t
    }

    /// The reference at a marker at `at`: the hours up to `at`'s, with `quantile` (the tail
    /// test's, e.g. 0.99) and the tolerance's log width. `None` with fewer than `MIN_HOURS` hours
    /// or `min_count` departures.
    pub(super) fn freeze(&self, at: f64, quantile: f64, tol: f64, min_count: usize) -> Option<TailFrozen> {
        let last = (at / HOUR_S).floor() as i64;
        let hours: Vec<&Vec<u32>> = self.hours.iter().filter(|(h, c)| *h <= last && c.iter().any(|x| *x > 0)).map(|(_, c)| c).collect();
        let mut total = [0u64; BINS];
        for c in &hours {
            for (t, x) in total.iter_mut().zip(c.iter()) {
                *t += *x as u64;
            }
        }
        let m: u64 = total.iter().sum();
        if hours.len() < MIN_HOURS || m < min_count.max(1) as u64 {
            return None;
        }
        // The lowest edge with at most the quantile's share above it.
        // (The last bin has none above it, so one is always found.)
        let allowed = (1.0 - quantile) * m as f64;
        let mut above = m;
        let b = (0..BINS)
            .find(|&b| {
                above -= total[b];
                above as f64 <= allowed
            })
            .unwrap_or(BINS - 1);
        let q = edge(b);
        // Departures in (q − tol, q]: whole bins whose upper edge lies in that range.
        let tolerance = (0..=b).filter(|i| edge(*i) > q - tol).map(|i| total[i]).sum::<u64>() as f64 / m as f64;
        let p = above as f64 / m as f64;
        let dispersion = if p > 0.0 && p < 1.0 {
            let chi: f64 = hours
                .iter()
                .map(|c| {
                    let n = c.iter().map(|x| *x as f64).sum::<f64>();
                    let k = c[b + 1..].iter().map(|x| *x as f64).sum::<f64>();
                    (k - n * p).powi(2) / (n * p * (1.0 - p))
                })
                .sum();
            (chi / (hours.len() - 1) as f64).max(1.0)
        } else {
            1.0
        };
        Some(TailFrozen { q, above: p, tolerance, m: m as f64, dispersion })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use rand_distr::{Distribution, StandardNormal};

    fn normal(r: &mut SmallRng) -> f64 {
        StandardNormal.sample(r)
    }

    /// Departures of a stream whose level swings by ±0.5 over the hours.
    fn stream(
        r: &mut SmallRng,
        from: f64,
        seconds: f64,
        slower: bool,
        h: &mut TailHistory,
        times: &mut VecDeque<f64>,
        values: &mut VecDeque<f32>,
    ) -> (u64, u64) {
        let (mut n, mut above) = (0, 0);
        let mut t = from;
        while t < from + seconds {
            let level = 0.5 * (t / 7200.0).sin();
            let z = normal(r);
            let y = level + 0.5 * z + if slower && z > 1.88 { 3f64.ln() } else { 0.0 };
            if let Some(d) = departure(times, values, times.len(), t, y) {
                if slower {
                    n += 1;
                    above += u64::from(d > h.freeze(from, 0.99, 0.1, 30).unwrap().q);
                } else {
                    h.add(t, d, 43_200.0);
                }
            }
            times.push_back(t);
            values.push_back(y as f32);
            t += 6.0;
        }
        (n, above)
    }

    #[test]
    fn departures_keep_their_share_while_the_level_swings_and_show_a_slower_tail() {
        let mut r = SmallRng::seed_from_u64(3);
        let (mut h, mut times, mut values) = (TailHistory::default(), VecDeque::new(), VecDeque::new());
        stream(&mut r, 0.0, 43_200.0, false, &mut h, &mut times, &mut values);
        assert_eq!(h.hours.len(), 12);
        let f = h.freeze(43_200.0, 0.99, 0.1, 30).expect("12 hours");
        assert!((0.005..=0.01).contains(&f.above), "{f:?}");
        // The level swung by ±0.5 over those hours; the departures' share above the p99 held
        // within the binomial's spread, so the hours' dispersion is about 1.
        assert!(f.dispersion < 2.0, "{f:?}");
        let (n, above) = stream(&mut r, 43_200.0, 3600.0, true, &mut h, &mut times, &mut values);
        assert!(above as f64 / n as f64 > 0.02, "{above} of {n}");
    }

    #[test]
    fn few_hours_or_probes_give_no_reference_and_hostile_snapshots_are_dropped() {
        let mut h = TailHistory::default();
        for i in 0..1000 {
            h.add(i as f64, 0.0, 43_200.0);
        }
        assert!(h.freeze(1000.0, 0.99, 0.1, 30).is_none(), "one hour");
        h.add(f64::NAN, 1.0, 43_200.0);
        h.add(5.0, f64::INFINITY, 43_200.0);
        assert_eq!(h.hours.iter().map(|x| x.1.iter().sum::<u32>()).sum::<u32>(), 1000);
        let r =
            TailHistory::restored(vec![(0, vec![1; BINS]), (0, vec![1; BINS]), (1, vec![1; 3]), (-50, vec![1; BINS]), (2, vec![0; BINS])], 7300.0, 43_200.0);
        assert_eq!(r.hours.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 2]);
        let times: VecDeque<f64> = (0..4).map(f64::from).collect();
        let values: VecDeque<f32> = VecDeque::from(vec![0.0; 4]);
        assert_eq!(departure(&times, &values, 4, 4.0, 1.0), None, "fewer than 5 before");
        assert_eq!(departure(&times, &values, 99, 4.0, f64::NAN), None);
    }
}
