//! The latest readings of every source, with a short history by time, so a probe that finished
//! can be joined with the snapshot that was current at its send time and at its first token
//! without the probe itself reading anything while it runs.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::reading::Reading;

/// Readings kept per source (at a 5 s interval: the last ~10 minutes).
const HISTORY: usize = 128;
/// A reading older than this many intervals at the looked-up time is stale and not joined.
const STALE_INTERVALS: u32 = 3;

struct Entry {
    /// `None`: describes every target.
    target: Option<String>,
    interval: Duration,
    ring: VecDeque<(Instant, Reading)>,
}

/// The combined reading current at some instant, and the age of its oldest part.
#[derive(Debug, Clone, PartialEq)]
pub struct Joined {
    pub reading: Reading,
    pub age: Duration,
}

/// Shared by the scrape loops (writers) and the trace sink (reader).
#[derive(Default)]
pub struct SnapshotCache {
    sources: Mutex<HashMap<String, Entry>>,
}

impl SnapshotCache {
    /// Declares a source so its readings can be stored.
    pub fn register(&self, source: &str, target: Option<&str>, interval: Duration) {
        let entry = Entry { target: target.map(str::to_owned), interval, ring: VecDeque::new() };
        self.lock().insert(source.to_owned(), entry);
    }

    /// Stores a reading taken at `at`. Readings of an undeclared source are ignored.
    pub fn push(&self, source: &str, at: Instant, reading: Reading) {
        if let Some(entry) = self.lock().get_mut(source) {
            if entry.ring.len() == HISTORY {
                entry.ring.pop_front();
            }
            entry.ring.push_back((at, reading));
        }
    }

    /// What the sources of `target` (its own and the global ones) said last before `at`.
    /// `None` when no fresh reading exists.
    pub fn at(&self, target: &str, at: Instant) -> Option<Joined> {
        let sources = self.lock();
        let mut joined: Option<Joined> = None;
        // Target-specific sources first, so their values win over global ones.
        let mut entries: Vec<&Entry> = sources.values().filter(|e| e.target.as_deref().is_none_or(|t| t == target)).collect();
        entries.sort_by_key(|e| e.target.is_none());
        for entry in entries {
            let Some((taken, reading)) = entry.ring.iter().rev().find(|(t, _)| *t <= at) else { continue };
            let age = at.duration_since(*taken);
            if age > entry.interval * STALE_INTERVALS {
                continue;
            }
            match &mut joined {
                None => joined = Some(Joined { reading: reading.clone(), age }),
                Some(j) => {
                    j.reading.fill_from(reading);
                    j.age = j.age.max(age);
                }
            }
        }
        joined.filter(|j| !j.reading.is_empty())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(n: f64) -> Reading {
        Reading { requests_waiting: Some(n), ..Reading::default() }
    }

    #[test]
    fn picks_the_reading_current_at_each_instant() {
        let cache = SnapshotCache::default();
        cache.register("e", Some("a"), Duration::from_secs(1));
        let t0 = Instant::now();
        cache.push("e", t0, waiting(1.0));
        cache.push("e", t0 + Duration::from_millis(1000), waiting(2.0));
        assert_eq!(cache.at("a", t0 + Duration::from_millis(500)).unwrap(), Joined { reading: waiting(1.0), age: Duration::from_millis(500) });
        assert_eq!(cache.at("a", t0 + Duration::from_millis(1200)).unwrap().reading, waiting(2.0));
        assert!(cache.at("a", t0 - Duration::from_millis(1)).is_none(), "nothing before the first reading");
        assert!(cache.at("a", t0 + Duration::from_secs(10)).is_none(), "stale after 3 intervals");
        assert!(cache.at("b", t0 + Duration::from_millis(500)).is_none(), "another target's source");
    }

    #[test]
    fn target_sources_win_and_global_ones_fill_in() {
        let cache = SnapshotCache::default();
        cache.register("gpu", None, Duration::from_secs(1));
        cache.register("eng", Some("a"), Duration::from_secs(1));
        let t0 = Instant::now();
        cache.push("gpu", t0, Reading { requests_waiting: Some(9.0), gpu_power_watts: Some(300.0), ..Reading::default() });
        cache.push("eng", t0 + Duration::from_millis(200), waiting(1.0));
        let j = cache.at("a", t0 + Duration::from_millis(300)).unwrap();
        assert_eq!(j.reading.requests_waiting, Some(1.0));
        assert_eq!(j.reading.gpu_power_watts, Some(300.0));
        assert_eq!(j.age, Duration::from_millis(300));
    }
}
