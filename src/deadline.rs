//! Deadline arithmetic that cannot panic: `Instant + Duration` overflows on absurd durations,
//! so every deadline computed from configured or server-given values goes through here.

use std::time::{Duration, Instant};

/// The farthest a deadline is ever set: far beyond any configured limit (config caps durations
/// at 30 days) yet always representable.
const FAR: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// `t + d`, or `t` plus ten years when that overflows (effectively "never").
pub fn after(t: Instant, d: Duration) -> Instant {
    t.checked_add(d.min(FAR)).or_else(|| t.checked_add(Duration::from_secs(24 * 3600))).unwrap_or(t)
}

/// Waits until `deadline` on the runtime's timer (millisecond ticks, so up to about a
/// millisecond late). For sends not released by the scheduler's dispatcher (bench, `--once`);
/// lag is measured and exported either way.
pub async fn wait_until(deadline: Instant) {
    if deadline > Instant::now() {
        tokio::time::sleep_until(deadline.into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_panics() {
        let now = Instant::now();
        assert_eq!(after(now, Duration::from_secs(1)), now + Duration::from_secs(1));
        assert!(after(now, Duration::MAX) > now + Duration::from_secs(365 * 24 * 3600));
    }
}
