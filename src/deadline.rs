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

/// Asks the kernel to wake the calling thread promptly: timer slack of 1 µs instead of 50
/// (its sleeps end on time), and on Linux 6.12 or later a 0.1 ms time slice, so that waking
/// it preempts a thread busy with streamed frames on the same core instead of waiting out
/// that thread's slice (up to a few milliseconds of schedule lag under load). Only for a
/// thread that sleeps nearly all the time (the dispatcher); neither call needs privileges,
/// and where one is refused the thread simply keeps the defaults.
pub fn prefer_prompt_wakeups() {
    #[cfg(target_os = "linux")]
    linux::prefer_prompt_wakeups();
}

#[cfg(target_os = "linux")]
mod linux {
    /// `struct sched_attr` (include/uapi/linux/sched/types.h), first version.
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
        util_min: u32,
        util_max: u32,
    }

    const SLICE_NS: u64 = 100_000;
    const TIMER_SLACK_NS: libc::c_ulong = 1_000;

    pub fn prefer_prompt_wakeups() {
        // SAFETY: prctl with PR_SET_TIMERSLACK takes a plain integer and changes only the
        // calling thread's timer slack.
        let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0) };
        // SAFETY: getpriority reads the thread's nice value (0 = the calling thread); errno
        // is not needed, a failure only means the nice value written back is 0.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            policy: libc::SCHED_OTHER as u32,
            flags: 0,
            // Written back unchanged: lowering it would need privileges.
            nice,
            priority: 0,
            runtime: SLICE_NS,
            deadline: 0,
            period: 0,
            util_min: 0,
            util_max: 0,
        };
        // SAFETY: sched_setattr reads `size` bytes from a valid, initialised `sched_attr` for
        // the calling thread (pid 0); it does not keep the pointer.
        let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
        if r != 0 {
            tracing::debug!("sched_setattr (short time slice) refused: {}", std::io::Error::last_os_error());
        }
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

    #[test]
    fn prompt_wakeups_are_asked_for_without_harm() {
        std::thread::spawn(|| {
            prefer_prompt_wakeups();
            #[cfg(target_os = "linux")]
            {
                // SAFETY: PR_GET_TIMERSLACK reads the calling thread's timer slack.
                let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
                assert_eq!(slack, 1_000, "timer slack 1 µs");
            }
            let t = Instant::now();
            std::thread::sleep(Duration::from_millis(2));
            assert!(t.elapsed() >= Duration::from_millis(2), "sleeps still last as long as asked");
        })
        .join()
        .unwrap();
    }
}
