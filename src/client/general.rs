//! The general client of one target (reqwest on hyper: TLS, HTTP/2, proxies, redirects) and
//! what it learned of the server's idle close. hyper's pool reuses a kept-alive connection by
//! its own idle timeout only, and a server that closes idle connections sooner can close one
//! just as a request is written to it: that request is lost as `connect` ("connection closed
//! before message completed"). So the pool's idle timeout follows the server by the lean
//! client's rule (`idle`): below the `Keep-Alive: timeout=N` it names, and below the shortest
//! idle time after which it was seen to close a connection, each less a margin. hyper checks
//! the timeout when it takes a connection from its pool; another timeout is another client
//! (and pool), built off the probe's path.
//!
//! A close is seen without reaching into hyper. Each answer names its connection (its local
//! address). The first request after an answer ended is given that connection, the most
//! recently idle one, unless the server closed it; so when its answer comes on a connection
//! never seen before, the server closed the earlier one after at most the time between. A
//! request that fails teaches nothing: a server that read it and dropped it looks the same.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context;
use hyper_util::client::legacy::connect::HttpInfo;

use crate::client::idle::{IDLE_TIMEOUT, LearnedClose, keep_alive_timeout, retire_before};
use crate::config::{HttpVersion, Target};

/// hyper gives a connection back to its pool from a task of its own, a moment after the
/// answer's end reached the prober; a request sent within that moment can open a new
/// connection while the earlier one is still open. A gap this short teaches nothing.
const MIN_LEARNED_IDLE: Duration = Duration::from_millis(10);

/// Connections remembered as seen; past this, learning pauses until every connection that
/// could be unknown has left the pool (`blind_for`).
const MAX_SEEN: usize = 4096;

/// The general client of one target.
pub struct General {
    config: Target,
    user_agent: &'static str,
    state: Mutex<State>,
}

struct State {
    client: reqwest::Client,
    /// Counts the clients built: a connection belongs to the pool of the client it came from.
    generation: u64,
    /// The client's pool idle timeout.
    pool_idle: Duration,
    /// The pool idle timeout of a client being built.
    building: Option<Duration>,
    /// One of a client that could not be built (not tried again).
    failed: Option<Duration>,
    learning: Learning,
}

/// What the answers told of the server's idle close.
#[derive(Default)]
struct Learning {
    /// The `Keep-Alive: timeout=` of the server's last HTTP/1.1 answer.
    named: Option<Duration>,
    learned: LearnedClose,
    /// The connection whose answer ended last, for the next request to find idle.
    last_end: Option<Idle>,
    /// Connections that carried an answer (by local address): when last seen, and whether an
    /// answer on it has not yet ended.
    seen: HashMap<SocketAddr, (Instant, bool)>,
    /// `seen` is pruned when it holds this many.
    prune_at: usize,
    /// No close is learned before this (`seen` overflowed and was cleared).
    blind_until: Option<Instant>,
}

#[derive(Clone, Copy)]
struct Idle {
    conn: SocketAddr,
    since: Instant,
    generation: u64,
}

/// A request on its way: the client that sends it, and what its answer is judged by.
pub struct Sending {
    pub client: reqwest::Client,
    turn: Turn,
}

/// When a request went out, with which client and pool timeout, and which connection it
/// should find idle.
#[derive(Clone, Copy)]
struct Turn {
    at: Instant,
    generation: u64,
    pool_idle: Duration,
    expected: Option<Idle>,
}

/// What an answer's head says of its connection.
struct Head {
    conn: SocketAddr,
    /// The request itself was answered (not a redirect's next hop), over HTTP/1.1.
    first_http1: bool,
    /// The connection can carry another request.
    keep_alive: bool,
    named: Option<Duration>,
}

/// The connection of an answer that can carry another request once the answer ends.
pub struct Reusable {
    general: Arc<General>,
    conn: SocketAddr,
    generation: u64,
}

impl General {
    pub fn new(config: &Target, user_agent: &'static str) -> anyhow::Result<Arc<General>> {
        let client = build_client(config, user_agent, IDLE_TIMEOUT)?;
        Ok(Arc::new(General::with(config.clone(), user_agent, client, IDLE_TIMEOUT, Learning::default())))
    }

    fn with(config: Target, user_agent: &'static str, client: reqwest::Client, pool_idle: Duration, learning: Learning) -> General {
        let state = State { client, generation: 0, pool_idle, building: None, failed: None, learning };
        General { config, user_agent, state: Mutex::new(state) }
    }

    /// The general client of one replica of this target: the same client and pool to start
    /// with (its pool keeps each host's connections apart) and what was learned so far, then
    /// its own learning.
    pub fn for_replica(&self, config: Target) -> Arc<General> {
        let s = self.lock();
        let learning = Learning { named: s.learning.named, learned: s.learning.learned, ..Learning::default() };
        Arc::new(General::with(config, self.user_agent, s.client.clone(), s.pool_idle, learning))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The client requests are built with.
    pub fn client(&self) -> reqwest::Client {
        self.lock().client.clone()
    }

    /// A request goes out now.
    pub fn sending(&self) -> Sending {
        let mut s = self.lock();
        let generation = s.generation;
        let expected = s.learning.last_end.take().filter(|idle| idle.generation == generation);
        Sending { client: s.client.clone(), turn: Turn { at: Instant::now(), generation, pool_idle: s.pool_idle, expected } }
    }

    /// An answer's head came for `sending` (`first`: to the request itself, not after a
    /// redirect): learns the server's idle close from it; its connection where it can carry
    /// another request.
    pub fn answered(self: &Arc<Self>, sending: &Sending, response: &reqwest::Response, first: bool) -> Option<Reusable> {
        let http1 = response.version() == reqwest::Version::HTTP_11;
        let headers = response.headers();
        let close =
            headers.get_all(reqwest::header::CONNECTION).iter().any(|v| v.to_str().is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"))));
        let head = Head {
            conn: response.extensions().get::<HttpInfo>()?.local_addr(),
            first_http1: first && http1,
            keep_alive: first && http1 && !close,
            named: headers.get("keep-alive").and_then(|v| v.to_str().ok()).and_then(keep_alive_timeout),
        };
        let rebuild = {
            let mut s = self.lock();
            let current = sending.turn.generation == s.generation;
            let longest = blind_for(&self.config, s.pool_idle);
            s.learning.answered(&sending.turn, &head, current, Instant::now(), longest);
            s.retune()
        };
        if let Some(pool_idle) = rebuild {
            // On a blocking thread, so that no probe waits for it.
            let general = self.clone();
            let build = move || general.rebuild(pool_idle);
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn_blocking(build)),
                Err(_) => build(),
            }
        }
        head.keep_alive.then(|| Reusable { general: self.clone(), conn: head.conn, generation: sending.turn.generation })
    }

    fn rebuild(&self, pool_idle: Duration) {
        let built = build_client(&self.config, self.user_agent, pool_idle);
        let mut s = self.lock();
        s.building = None;
        match built {
            Ok(client) => {
                s.client = client;
                s.pool_idle = pool_idle;
                s.generation += 1;
                s.learning.last_end = None;
            }
            Err(e) => {
                tracing::warn!(target_name = %self.config.name, error = %format!("{e:#}"), "could not build the HTTP client for the server's idle close");
                s.failed = Some(pool_idle);
            }
        }
    }
}

impl State {
    /// The pool idle timeout of a client to build, when what the server named or was seen to
    /// do asks for another one (none while one is being built).
    fn retune(&mut self) -> Option<Duration> {
        let want = self.learning.pool_idle();
        if want == self.pool_idle || self.building.is_some() || self.failed == Some(want) {
            return None;
        }
        self.building = Some(want);
        Some(want)
    }
}

impl Learning {
    /// The pool idle timeout that what was named and learned asks for.
    fn pool_idle(&mut self) -> Duration {
        self.learned.limit().min(self.named.map_or(IDLE_TIMEOUT, retire_before))
    }

    /// An answer's head came at `now` for a request sent at `turn` (`current`: by the client
    /// in use). `longest`: how long a connection the prober does not know of can stay in the
    /// pool.
    fn answered(&mut self, turn: &Turn, head: &Head, current: bool, now: Instant, longest: Duration) {
        let new = self.saw(head.conn, now, turn.pool_idle, longest);
        if let Some(expected) = turn.expected.filter(|_| head.first_http1 && new && current) {
            // The idle connection this request should have been given was gone: closed by the
            // server, unless it had outlived the pool's own timeout.
            let idle = turn.at.saturating_duration_since(expected.since);
            if expected.conn != head.conn && (MIN_LEARNED_IDLE..turn.pool_idle).contains(&idle) {
                self.learned.note(idle);
            }
        }
        if head.first_http1 {
            self.named = head.named;
        }
    }

    /// Notes that an answer came on `conn`; whether the connection was never seen before (false
    /// while learning is paused).
    fn saw(&mut self, conn: SocketAddr, now: Instant, pool_idle: Duration, longest: Duration) -> bool {
        let new = !self.seen.contains_key(&conn);
        if new && self.seen.len() >= self.prune_at.max(64) {
            // A connection idle past the pool's timeout has left the pool; one in use for
            // longer than a probe can take has been dropped.
            self.seen.retain(|_, (at, busy)| now.saturating_duration_since(*at) < if *busy { longest } else { pool_idle });
            if self.seen.len() >= MAX_SEEN {
                self.seen.clear();
                self.blind_until = Some(now + longest);
            }
            self.prune_at = (2 * self.seen.len()).clamp(64, MAX_SEEN);
        }
        self.seen.insert(conn, (now, true));
        new && self.blind_until.is_none_or(|until| now >= until)
    }

    /// The answer on `conn` ended at `now`: the connection is idle in the pool from then.
    fn ended(&mut self, conn: SocketAddr, generation: u64, now: Instant) {
        if let Some(seen) = self.seen.get_mut(&conn) {
            *seen = (now, false);
        }
        self.last_end = Some(Idle { conn, since: now, generation });
    }
}

impl Reusable {
    /// The answer ended: its connection is idle in the pool from now.
    pub fn ended(self) {
        let mut s = self.general.lock();
        if self.generation == s.generation {
            s.learning.ended(self.conn, self.generation, Instant::now());
        }
    }
}

/// How long a connection the prober does not know of can stay in the pool: in use for a whole
/// probe, then idle for the pool's timeout (a day at most, whatever the config says).
fn blind_for(config: &Target, pool_idle: Duration) -> Duration {
    config.timeouts.total.saturating_add(pool_idle).saturating_add(Duration::from_secs(60)).min(Duration::from_secs(86_400))
}

/// A client for one target: timeouts, TLS material, HTTP version, and `pool_idle`. It follows
/// no redirect: `TargetRuntime::send_general` does, where `follow_redirects` asks, so that it
/// can drop the secret headers on a hop to another origin (reqwest drops only `Authorization`
/// and cookies).
fn build_client(config: &Target, user_agent: &'static str, pool_idle: Duration) -> anyhow::Result<reqwest::Client> {
    let mut b = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(config.timeouts.connect)
        .tcp_nodelay(true)
        .pool_idle_timeout(pool_idle)
        .user_agent(user_agent);
    b = match config.http_version {
        HttpVersion::Auto => b,
        HttpVersion::Http1 => b.http1_only(),
        HttpVersion::Http2PriorKnowledge => b.http2_prior_knowledge(),
    };
    let tls = &config.tls;
    if let Some(ca) = &tls.ca_file {
        let pem = std::fs::read(ca).with_context(|| format!("reading tls.ca_file {}", ca.display()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).with_context(|| format!("tls.ca_file {} is not PEM certificates", ca.display()))?;
        b = b.tls_certs_merge(certs);
    }
    if let Some((cert, key)) = &tls.client_identity {
        let mut pem = std::fs::read(cert).with_context(|| format!("reading tls.client_cert_file {}", cert.display()))?;
        pem.push(b'\n');
        pem.extend(std::fs::read(key).with_context(|| format!("reading tls.client_key_file {}", key.display()))?);
        let identity = reqwest::Identity::from_pem(&pem).context("tls.client_cert_file/client_key_file: not a PEM certificate and private key")?;
        b = b.identity(identity);
    }
    if tls.insecure_skip_verify {
        tracing::warn!(target_name = %config.name, "tls.insecure_skip_verify: server certificates are NOT verified");
        b = b.tls_danger_accept_invalid_certs(true);
    }
    Ok(b.build()?)
}

/// The project's user agent on every request it makes.
pub const USER_AGENT: &str = concat!("llmprobe/", env!("CARGO_PKG_VERSION"));

/// A client for pages that are not a target's API (engine and GPU sources): no redirects, so
/// a request never goes to a host the config did not name.
pub fn plain_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder().user_agent(USER_AGENT).redirect(reqwest::redirect::Policy::none()).build()
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL_IDLE: Duration = IDLE_TIMEOUT;
    const LONGEST: Duration = Duration::from_secs(600);

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn head(port: u16) -> Head {
        Head { conn: addr(port), first_http1: true, keep_alive: true, named: None }
    }

    /// Connection `port` carried an answer that ended at `at`; the next request is sent `gap`
    /// later, expecting it idle.
    fn after_end(learning: &mut Learning, port: u16, at: Instant, gap: Duration) -> Turn {
        learning.answered(&Turn { at, generation: 0, pool_idle: POOL_IDLE, expected: None }, &head(port), true, at, LONGEST);
        learning.ended(addr(port), 0, at);
        let expected = learning.last_end.take();
        Turn { at: at + gap, generation: 0, pool_idle: POOL_IDLE, expected }
    }

    #[test]
    fn an_answer_on_a_new_connection_after_an_idle_one_teaches_the_close() {
        let (t0, mut learning) = (Instant::now(), Learning::default());
        let turn = after_end(&mut learning, 1, t0, Duration::from_secs(6));
        learning.answered(&turn, &head(2), true, turn.at, LONGEST);
        assert_eq!(learning.pool_idle(), Duration::from_secs(5), "closed after at most 6 s idle, less the margin");
    }

    #[test]
    fn answers_that_say_nothing_of_a_close_teach_nothing() {
        let t0 = Instant::now();
        let cases: [(&str, u16, Duration, bool, bool); 6] = [
            ("on the idle connection itself", 1, Duration::from_secs(6), true, true),
            ("on another connection already seen (the pool's order)", 3, Duration::from_secs(6), true, true),
            ("sooner than hyper gives a connection back", 2, Duration::from_millis(2), true, true),
            ("after the pool's own timeout", 2, POOL_IDLE, true, true),
            ("after a redirect, or over HTTP/2", 2, Duration::from_secs(6), false, true),
            ("by a client since replaced", 2, Duration::from_secs(6), true, false),
        ];
        for (case, port, gap, first_http1, current) in cases {
            let mut learning = Learning::default();
            learning.answered(&Turn { at: t0, generation: 0, pool_idle: POOL_IDLE, expected: None }, &head(3), true, t0, LONGEST);
            let turn = after_end(&mut learning, 1, t0, gap);
            learning.answered(&turn, &Head { first_http1, ..head(port) }, current, turn.at, LONGEST);
            assert_eq!(learning.pool_idle(), IDLE_TIMEOUT, "{case}");
        }
    }

    #[test]
    fn a_named_timeout_is_the_last_answers() {
        let (t0, mut learning) = (Instant::now(), Learning::default());
        let turn = Turn { at: t0, generation: 0, pool_idle: POOL_IDLE, expected: None };
        learning.answered(&turn, &Head { named: Some(Duration::from_secs(5)), ..head(1) }, true, t0, LONGEST);
        assert_eq!(learning.pool_idle(), Duration::from_secs(4));
        learning.answered(&turn, &head(1), true, t0, LONGEST);
        assert_eq!(learning.pool_idle(), IDLE_TIMEOUT);
    }

    #[test]
    fn too_many_connections_to_remember_pause_learning() {
        let (t0, mut learning) = (Instant::now(), Learning::default());
        let turn = Turn { at: t0, generation: 0, pool_idle: POOL_IDLE, expected: None };
        for port in 0..MAX_SEEN as u16 {
            learning.answered(&turn, &head(10_000 + port), true, t0, LONGEST);
        }
        assert!(learning.seen.len() <= MAX_SEEN);
        let turn = after_end(&mut learning, 1, t0, Duration::from_secs(6));
        learning.answered(&turn, &head(2), true, turn.at, LONGEST);
        assert_eq!(learning.pool_idle(), IDLE_TIMEOUT, "a connection forgotten may be an old one");
    }
}
