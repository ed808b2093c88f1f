//! Wall-clock time as Unix seconds, for what is compared across processes and restarts (release
//! markers, detector snapshots, bench slots, the mock's `created` fields). Durations inside one
//! run use `Instant`.

/// Seconds since the Unix epoch; 0 for a clock set before 1970.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}
