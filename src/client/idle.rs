//! When a kept-alive connection stops being reused, on either client. A server closes a
//! connection once it has been idle for its keep-alive timeout (uvicorn, and so vLLM and SGLang,
//! after 5 s), and a request written just as it does is lost; one sent on a new connection
//! instead only costs the connect. So a connection is retired before the server's timeout: the
//! one it names (`Keep-Alive: timeout=N`), or the shortest idle time after which it was seen to
//! close one, each less a margin (`retire_before`).

use std::time::{Duration, Instant};

/// A kept-alive connection is not reused after this long idle, whatever the server says.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a finished probe waits for its answer's body to end (the last chunk after the
/// stream's end marker), so that the connection is free for the next request; past it, the
/// lean client drains the rest in the background and the general client leaves it to hyper.
pub const SETTLE_TIME: Duration = Duration::from_millis(5);

/// How long a learned idle close is kept (see `LearnedClose`): a server restart that closed
/// connections early does not cut reuse for longer.
const LEARNED_FOR: Duration = Duration::from_secs(600);

/// How long a connection may stay idle when its server closes idle ones after `timeout`: a
/// second less (half of it below two seconds), since the server's clock started when it wrote
/// its answer's end, before the prober read it.
pub fn retire_before(timeout: Duration) -> Duration {
    timeout.saturating_sub(Duration::from_secs(1)).max(timeout / 2).min(IDLE_TIMEOUT)
}

/// The `timeout=` of a `Keep-Alive` header value (`timeout=5, max=100`), in whole seconds.
pub fn keep_alive_timeout(value: &str) -> Option<Duration> {
    value.split(',').find_map(|p| {
        let (name, secs) = p.split_once('=')?;
        let secs = secs.trim();
        (name.trim().eq_ignore_ascii_case("timeout") && !secs.is_empty() && secs.len() <= 9 && secs.bytes().all(|b| b.is_ascii_digit()))
            .then(|| Duration::from_secs(secs.parse().unwrap_or(0)))
    })
}

/// The shortest idle time after which the server was seen to have closed a kept-alive
/// connection, and when that was seen. The server's idle timeout is at most that.
#[derive(Debug, Default, Clone, Copy)]
pub struct LearnedClose(Option<(Duration, Instant)>);

impl LearnedClose {
    /// How long a connection may stay idle by what was learned: `IDLE_TIMEOUT` when nothing
    /// was, or it was learned longer than `LEARNED_FOR` ago (then it is forgotten).
    pub fn limit(&mut self) -> Duration {
        match self.0 {
            Some((_, seen)) if seen.elapsed() >= LEARNED_FOR => {
                self.0 = None;
                IDLE_TIMEOUT
            }
            Some((idle, _)) => retire_before(idle),
            None => IDLE_TIMEOUT,
        }
    }

    /// The server closed a kept-alive connection that had been idle for `idle`.
    pub fn note(&mut self, idle: Duration) {
        if self.0.is_none_or(|(shortest, _)| idle < shortest) {
            self.0 = Some((idle, Instant::now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_or_learned_timeout_retires_connections_before_it() {
        for odd in ["timeout=", "timeout=-1", "timeout=1.5", "max=3", "timeout=99999999999999"] {
            assert_eq!(keep_alive_timeout(odd), None, "{odd}");
        }
        assert_eq!(keep_alive_timeout("max=9,TIMEOUT=1"), Some(Duration::from_secs(1)));
        assert_eq!(retire_before(Duration::from_secs(5)), Duration::from_secs(4));
        assert_eq!(retire_before(Duration::from_secs(1)), Duration::from_millis(500));
        assert_eq!(retire_before(Duration::ZERO), Duration::ZERO, "timeout=0: never reused");
        assert_eq!(retire_before(Duration::from_secs(600)), IDLE_TIMEOUT);
        let mut learned = LearnedClose::default();
        assert_eq!(learned.limit(), IDLE_TIMEOUT);
        learned.note(Duration::from_secs(6));
        learned.note(Duration::from_secs(8));
        assert_eq!(learned.limit(), Duration::from_secs(5), "the shortest, less the margin");
    }
}
