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

/// How the calling thread was set up to wake (`prefer_prompt_wakeups`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wakeups {
    /// Real-time priority (`SCHED_FIFO` 1, the lowest): a wake-up runs at once, ahead of any
    /// normal thread on the core. Needs `CAP_SYS_NICE` or an `RLIMIT_RTPRIO` above 0.
    RealTime,
    /// A normal thread with a 0.1 ms time slice (Linux 6.12 or later): a wake-up preempts a
    /// busy thread when the kernel's fair scheduler finds the sleeper eligible, otherwise it
    /// waits for that thread's slice to end, up to a scheduler tick (4 ms at 250 Hz).
    ShortSlice,
    /// Neither was allowed: the kernel's defaults.
    Default,
}

impl Wakeups {
    pub fn as_str(self) -> &'static str {
        match self {
            Wakeups::RealTime => "real-time priority (SCHED_FIFO 1)",
            Wakeups::ShortSlice => "normal priority, 0.1 ms time slice",
            Wakeups::Default => "normal priority",
        }
    }
}

/// Asks the kernel to wake the calling thread promptly: timer slack of 1 µs instead of 50
/// (its sleeps end on time), then the lowest real-time priority where the process may have
/// one, else a 0.1 ms time slice (see [`Wakeups`]). Under load, a normal thread's wake-up
/// often waits for the busy thread's slice (a few milliseconds of schedule lag at 1,000
/// probes/s on a saturated core); the real-time one does not. Only for a thread that sleeps
/// nearly all the time and never spins (the dispatcher): the kernel's real-time throttling
/// bounds it even then. Children do not inherit the priority (`SCHED_RESET_ON_FORK`).
pub fn prefer_prompt_wakeups() -> Wakeups {
    #[cfg(target_os = "linux")]
    return linux::prefer_prompt_wakeups();
    #[cfg(not(target_os = "linux"))]
    Wakeups::Default
}

#[cfg(target_os = "linux")]
mod linux {
    use super::Wakeups;

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

    pub fn prefer_prompt_wakeups() -> Wakeups {
        // SAFETY: prctl with PR_SET_TIMERSLACK takes a plain integer and changes only the
        // calling thread's timer slack.
        let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0) };
        let param = libc::sched_param { sched_priority: 1 };
        // SAFETY: sched_setscheduler reads a valid `sched_param` for the calling thread (pid 0
        // is the thread on Linux); it does not keep the pointer.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) } == 0 {
            return Wakeups::RealTime;
        }
        tracing::debug!("real-time priority refused: {}", std::io::Error::last_os_error());
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
        if r == 0 {
            return Wakeups::ShortSlice;
        }
        tracing::debug!("sched_setattr (short time slice) refused: {}", std::io::Error::last_os_error());
        Wakeups::Default
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
            let mode = prefer_prompt_wakeups();
            #[cfg(target_os = "linux")]
            {
                // SAFETY: PR_GET_TIMERSLACK reads the calling thread's timer slack.
                let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
                // A real-time thread has none at all.
                assert!(slack == 1_000 || (mode == Wakeups::RealTime && slack == 0), "timer slack 1 µs or none: {slack}");
                // SAFETY: sched_getscheduler reads the calling thread's policy.
                let policy = unsafe { libc::sched_getscheduler(0) } & !libc::SCHED_RESET_ON_FORK;
                let expected = if mode == Wakeups::RealTime { libc::SCHED_FIFO } else { libc::SCHED_OTHER };
                assert_eq!(policy, expected, "the reported mode ({mode:?}) is the thread's policy");
                // Only this thread changed: a new thread starts with the defaults.
                let other = std::thread::spawn(|| unsafe { libc::sched_getscheduler(0) }).join().unwrap();
                assert_eq!(other, libc::SCHED_OTHER, "threads it starts do not inherit the priority");
            }
            let t = Instant::now();
            std::thread::sleep(Duration::from_millis(2));
            assert!(t.elapsed() >= Duration::from_millis(2), "sleeps still last as long as asked");
        })
        .join()
        .unwrap();
    }
}
