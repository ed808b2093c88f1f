//! A lean HTTP/1.1 client for the probe requests of plain-`http` targets. The answer is read on
//! the probe's own task from one reused buffer: no connection task and no body channel between
//! the socket and the parser, so a streamed frame costs one task wake-up and no copy (through
//! the general client it cost two wake-ups, a channel hand-over and a `Bytes` per frame, which
//! was most of the prober's CPU per frame and its timing error at high concurrency).
//!
//! What it does not do — TLS, HTTP/2, proxies, redirects, credentials in the URL — stays with
//! the general client (`reqwest`); [`Client::for_target`] says when this one applies.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::ops::Range;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::client::idle::{IDLE_TIMEOUT, LearnedClose, SETTLE_TIME, keep_alive_timeout, retire_before};
use crate::client::receive_stamp;
use crate::config::{HttpVersion, Target};
use crate::probe::handover::{Write, WriteError, Written, open_and_silent};

/// Idle connections kept per target; more are closed when they come back.
const MAX_IDLE: usize = 4096;
/// A response head larger than this is refused (hyper's limit is of the same order).
const MAX_HEAD_BYTES: usize = 64 << 10;
/// Header fields per response head.
const MAX_HEADERS: usize = 100;
/// Interim (`1xx`) answers skipped before a request's final answer; a server that sends more
/// (an endless `100 Continue`) is a malformed answer, not a loop that holds a core until the
/// probe's deadline.
pub const MAX_INTERIM_ANSWERS: usize = 8;
/// Longest chunk-size line (size, extensions) or trailer line.
const MAX_LINE_BYTES: usize = 4096;
/// The read buffer; streamed frames are far smaller, a larger body is read in pieces.
const READ_BUF_BYTES: usize = 16 << 10;
/// A probe ends at its stream's end marker, before the body's own end (the last chunk) is
/// read; the rest is read in the background, within these bounds, so that the connection can
/// be kept alive. Beyond them it is closed.
const DRAIN_TIME: Duration = Duration::from_secs(1);
const DRAIN_BYTES: usize = 64 << 10;

/// Why a request got no usable answer head. The text names addresses, never the URL.
#[derive(Debug)]
pub enum SendError {
    /// No connection within the connect timeout.
    ConnectTimeout(String),
    /// Resolving or connecting failed, or the connection closed or broke before an answer.
    Connect(String),
    /// The answer's head is not valid HTTP/1.1 (bad status line or field, a bare LF, conflicting
    /// framing, too large): the server answered, wrongly, so this is not a connection failure.
    InvalidAnswer(String),
}

/// The lean client of one target: where to connect, and its idle connections.
pub struct Client {
    host: Host,
    port: u16,
    /// The `Host` header: the URL's host, with its port when the URL names one.
    authority: String,
    /// `base_url`'s path (a proxy mount point), prepended to every request path.
    prefix: String,
    connect_timeout: Duration,
    user_agent: &'static str,
    /// Oldest first: checked out from the back (the warmest), expired from the front.
    idle: Mutex<VecDeque<(Conn, Instant)>>,
    /// The shortest idle time after which a kept-alive connection was found closed by the
    /// server, and when that was seen. The server's idle timeout is at most that, so
    /// connections are retired before it (`retire_before`): a request written just as the
    /// server closes would be lost, while one found closed beforehand only costs a new
    /// connection, opened before the send time.
    learned: Mutex<LearnedClose>,
}

enum Host {
    Ip(std::net::IpAddr),
    Name(String),
}

impl Client {
    /// The lean client for a target, or `None` where the general client must send: `https`,
    /// HTTP/2, redirects followed, credentials in the URL, or a proxy set in the environment.
    pub fn for_target(config: &Target, user_agent: &'static str) -> Option<Client> {
        let url = reqwest::Url::parse(&config.base_url).ok()?;
        let proxied = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"].iter().any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
        if url.scheme() != "http"
            || !url.username().is_empty()
            || url.password().is_some()
            || config.follow_redirects
            || config.http_version == HttpVersion::Http2PriorKnowledge
            || proxied
        {
            return None;
        }
        let host_text = url.host_str()?;
        let host = match host_text.trim_start_matches('[').trim_end_matches(']').parse() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => Host::Name(host_text.to_owned()),
        };
        let authority = match url.port() {
            Some(port) => format!("{host_text}:{port}"),
            None => host_text.to_owned(),
        };
        Some(Client {
            host,
            port: url.port_or_known_default()?,
            authority,
            prefix: url.path().trim_end_matches('/').to_owned(),
            connect_timeout: config.timeouts.connect,
            user_agent,
            idle: Mutex::new(VecDeque::new()),
            learned: Mutex::new(LearnedClose::default()),
        })
    }

    /// The request `POST prefix+path`, ready to send, with a kept-alive connection checked out
    /// for it when one is idle.
    pub fn prepare(self: &Arc<Self>, path: &str, headers: &HeaderMap, body: &[u8]) -> Request {
        let conn = self.checkout();
        Request { client: self.clone(), bytes: Arc::new(self.request_bytes(path, headers, body)), reused: conn.is_some(), conn, unconnected: None }
    }

    fn answer(self: &Arc<Self>, (head, conn): (Head, Conn)) -> Response {
        Response { head, conn: Some(conn), client: self.clone(), draining: false }
    }

    fn request_bytes(&self, path: &str, headers: &HeaderMap, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + body.len());
        for piece in ["POST ", &self.prefix, path, " HTTP/1.1\r\nhost: ", &self.authority, "\r\nuser-agent: ", self.user_agent, "\r\n"] {
            out.extend_from_slice(piece.as_bytes());
        }
        for (name, value) in headers {
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
        out.extend_from_slice(body);
        out
    }

    /// The most recently returned idle connection that is still open and silent.
    fn checkout(&self) -> Option<Conn> {
        let limit = self.learned_limit();
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        while let Some((conn, since)) = idle.pop_back() {
            if since.elapsed() >= conn.idle_limit.min(limit) {
                continue;
            }
            if open_and_silent(conn.stream.as_fd()) {
                return Some(conn);
            }
            self.closed_while_idle(&conn, Instant::now());
        }
        None
    }

    /// How long a connection may stay idle by what the server was seen to do (`learned`).
    fn learned_limit(&self) -> Duration {
        self.learned.lock().unwrap_or_else(|e| e.into_inner()).limit()
    }

    /// A kept-alive connection was found closed by the server at `at`, after lying idle.
    fn closed_while_idle(&self, conn: &Conn, at: Instant) {
        if let Some(since) = conn.idle_since {
            self.note_idle_close(at.saturating_duration_since(since));
        }
    }

    /// The server closed a kept-alive connection that had been idle for `idle`.
    fn note_idle_close(&self, idle: Duration) {
        self.learned.lock().unwrap_or_else(|e| e.into_inner()).note(idle);
    }

    /// Keeps a connection for reuse, idle from now (its answer just ended); ones idle past
    /// their limit are closed here, so a pool that shrinks does not hold open sockets forever.
    /// A buffer grown for a large head goes back to its usual size.
    fn checkin(&self, conn: Conn) {
        self.checkin_idle_since(conn, Instant::now());
    }

    /// Keeps a connection for reuse that has been idle since `since` (the server's idle clock
    /// has run from then, whatever the prober did with it meanwhile).
    fn checkin_idle_since(&self, mut conn: Conn, since: Instant) {
        (conn.start, conn.end) = (0, 0);
        conn.idle_since = Some(since);
        conn.buf.truncate(READ_BUF_BYTES);
        conn.buf.shrink_to_fit();
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        while idle.front().is_some_and(|(conn, since)| since.elapsed() >= conn.idle_limit) {
            idle.pop_front();
        }
        if idle.len() < MAX_IDLE {
            idle.push_back((conn, since));
        }
    }

    async fn connect(&self) -> Result<Conn, SendError> {
        let started = Instant::now();
        let addrs: Vec<SocketAddr> = match &self.host {
            Host::Ip(ip) => vec![SocketAddr::new(*ip, self.port)],
            Host::Name(name) => match tokio::time::timeout(self.connect_timeout, tokio::net::lookup_host((name.as_str(), self.port))).await {
                Err(_) => return Err(SendError::ConnectTimeout(format!("resolving {name} took longer than {:?}", self.connect_timeout))),
                Ok(Err(e)) => return Err(SendError::Connect(format!("resolving {name}: {e}"))),
                Ok(Ok(a)) => a.collect(),
            },
        };
        let mut last = SendError::Connect(format!("no address for {}", self.authority));
        for addr in addrs {
            let Some(left) = self.connect_timeout.checked_sub(started.elapsed()) else {
                break;
            };
            match tokio::time::timeout(left, TcpStream::connect(addr)).await {
                Err(_) => last = SendError::ConnectTimeout(format!("connecting to {addr} took longer than {:?}", self.connect_timeout)),
                Ok(Err(e)) => last = SendError::Connect(format!("connecting to {addr}: {e}")),
                Ok(Ok(stream)) => {
                    // Small requests, and a prober that must not wait on Nagle.
                    let _ = stream.set_nodelay(true);
                    // Frames are timed by their arrival on the host, not by when they are read.
                    receive_stamp::enable(&stream);
                    return Ok(Conn { stream, buf: vec![0; READ_BUF_BYTES], start: 0, end: 0, arrived: None, idle_limit: IDLE_TIMEOUT, idle_since: None });
                }
            }
        }
        Err(last)
    }
}

/// A request ready to send: its bytes, and the idle connection checked out for it (none: a
/// new one is opened when it is sent).
pub struct Request {
    client: Arc<Client>,
    /// Shared with the dispatcher's write (moved in, not copied).
    bytes: Arc<Vec<u8>>,
    conn: Option<Conn>,
    /// Whether `conn` came from the pool: only a kept-alive connection can have been closed by
    /// the server while idle, before it saw this request (the one case sent again).
    reused: bool,
    /// Why `connect_first` could not open a connection: the send reports it.
    unconnected: Option<SendError>,
}

impl Request {
    /// Opens a connection for a request sent at once (closed loop), when it has none, so that
    /// "sent" is stamped at the write and TCP set-up is not in its TTFT. A failure is kept and
    /// reported by the send, which does not connect again.
    pub async fn connect_first(&mut self) {
        if self.conn.is_none() {
            match self.client.connect().await {
                Ok(conn) => self.conn = Some(conn),
                Err(e) => self.unconnected = Some(e),
            }
        }
    }

    /// Opens a connection for the request now, when it has none, or its kept-alive one has
    /// been closed by the server since it was checked out or will have been idle past its
    /// limit by `by` (its send time); unless that takes past `by`. A failure is left for the
    /// send, which connects again and reports it.
    pub async fn connect_before(&mut self, by: Instant) {
        if let Some(conn) = self.conn.as_ref().filter(|_| self.reused) {
            let limit = conn.idle_limit.min(self.client.learned_limit());
            let expires = conn.idle_since.is_some_and(|since| by.saturating_duration_since(since) >= limit);
            if !open_and_silent(conn.stream.as_fd()) {
                self.client.closed_while_idle(conn, Instant::now());
                (self.conn, self.reused) = (None, false);
            } else if expires {
                (self.conn, self.reused) = (None, false);
            }
        }
        if self.conn.is_some() {
            return;
        }
        if let Ok(Ok(conn)) = tokio::time::timeout_at(by.into(), self.client.connect()).await {
            self.conn = Some(conn);
        }
    }

    /// A request that will not be sent (refused at its send time): its connection, never
    /// written to, goes back to the pool instead of being closed, idle since it last was.
    pub fn withdraw(&mut self) {
        if let Some(conn) = self.conn.take() {
            let since = conn.idle_since.unwrap_or_else(Instant::now);
            self.client.checkin_idle_since(conn, since);
        }
    }

    /// The dispatcher's write of this request at its send time, when it has a connection. A
    /// kept-alive connection is checked for a close again at the write itself (a server closing
    /// it while idle can do so at any moment up to then).
    pub fn handover(&self) -> Option<Write> {
        Write::new(self.conn.as_ref()?.stream.as_fd(), self.bytes.clone(), self.reused)
    }

    /// Sends the request and returns once the answer's head is in. `written`: what the
    /// dispatcher already wrote of it on its connection (see `handover`); the rest is written
    /// here. The request goes once more, on a new connection, only when its connection came
    /// from the pool and was found closed or broken before a byte of the request was written
    /// (the server closed it while idle and cannot have seen it), as the general client does.
    /// Never once a byte went out, nor on a new connection: the server may have taken it, and a
    /// resend would hide a server that drops requests.
    pub async fn send(self, written: Option<Written>) -> Result<Response, SendError> {
        let Request { client, bytes, conn, reused, unconnected } = self;
        if let Some(e) = unconnected {
            return Err(e);
        }
        if let Some(conn) = conn {
            let idle_since = conn.idle_since;
            let result = match written {
                None if reused && !open_and_silent(conn.stream.as_fd()) => {
                    Err((Instant::now(), Exchange::Unsent(SendError::Connect("kept-alive connection closed while idle".into()))))
                }
                None => exchange(conn, &bytes, false).await.map_err(|e| (Instant::now(), e)),
                Some(Written { result: Ok(n), .. }) => exchange(conn, &bytes[n.min(bytes.len())..], n > 0).await.map_err(|e| (Instant::now(), e)),
                Some(Written { at, result: Err(WriteError::Unsent(e)) }) => Err((at, Exchange::Unsent(SendError::Connect(e)))),
                Some(Written { result: Err(WriteError::Broken(e)), .. }) => Err((Instant::now(), Exchange::Failed(SendError::Connect(e)))),
            };
            match result {
                Ok(answer) => return Ok(client.answer(answer)),
                Err((at, Exchange::Unsent(_))) if reused => {
                    if let Some(since) = idle_since {
                        client.note_idle_close(at.saturating_duration_since(since));
                    }
                }
                Err((_, Exchange::Unsent(e) | Exchange::Failed(e))) => return Err(e),
            }
        }
        let conn = client.connect().await?;
        match exchange(conn, &bytes, false).await {
            Ok(answer) => Ok(client.answer(answer)),
            Err(Exchange::Unsent(e) | Exchange::Failed(e)) => Err(e),
        }
    }
}

/// A connection with its read buffer: `buf[start..end]` is read but not yet handed out.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// When the newest bytes in `buf` reached the host (the kernel's stamp of the last read);
    /// `None` where the kernel gave none.
    arrived: Option<Instant>,
    /// How long it may stay idle in the pool: `IDLE_TIMEOUT`, or less when the server named
    /// its keep-alive timeout.
    idle_limit: Duration,
    /// When it last went back to the pool (`None`: it has not carried a request yet).
    idle_since: Option<Instant>,
}

impl Conn {
    /// Reads more bytes after the unread ones, making room first (moving them to the front,
    /// or growing the buffer up to `limit`). `Ok(0)` is the end of the stream.
    async fn fill(&mut self, limit: usize) -> std::io::Result<usize> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            } else if self.buf.len() < limit {
                let grown = (self.buf.len() * 2).min(limit);
                self.buf.resize(grown, 0);
            } else {
                return Err(std::io::Error::other(format!("more than {limit} bytes without an end")));
            }
        }
        let buf = &mut self.buf[self.end..];
        let room = buf.len();
        loop {
            self.stream.readable().await?;
            // A short read took everything the socket held (TCP copies every queued segment),
            // so readiness is cleared now, saving the read that would only say "would block"
            // (a system call per streamed frame). Data arriving meanwhile is not lost: the
            // clearing is skipped when the reactor saw a new event since `readable`.
            let (mut got, mut stamp) = (None, None);
            let read = self.stream.try_io(Interest::READABLE, || {
                let (n, at) = receive_stamp::try_read(&self.stream, buf)?;
                stamp = at;
                if n == 0 || n == room {
                    return Ok(n);
                }
                got = Some(n);
                Err(std::io::ErrorKind::WouldBlock.into())
            });
            let n = match (read, got) {
                (_, Some(n)) | (Ok(n), None) => n,
                (Err(e), None) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                (Err(e), None) => return Err(e),
            };
            self.end += n;
            self.arrived = stamp.and_then(receive_stamp::to_instant);
            return Ok(n);
        }
    }
}

enum Exchange {
    /// The connection was closed or broke before a byte of the request was written (sent
    /// again on a new connection when it was a kept-alive one).
    Unsent(SendError),
    Failed(SendError),
}

/// A parsed answer head.
pub struct Head {
    pub status: reqwest::StatusCode,
    pub headers: HeaderMap,
    /// How its body is delimited.
    pub body: TransferDecoder,
    /// Whether the connection can carry another request after this answer.
    pub keep_alive: bool,
    /// The server's `Keep-Alive: timeout=` (how long it keeps the connection open while idle).
    pub keep_alive_timeout: Option<Duration>,
}

/// Writes the request (`started`: its first bytes already went out on this connection) and
/// reads the answer's head (skipping `1xx` interim answers, at most `MAX_INTERIM_ANSWERS`).
async fn exchange(mut conn: Conn, request: &[u8], started: bool) -> Result<(Head, Conn), Exchange> {
    let mut done = 0;
    while done < request.len() {
        match conn.stream.write(&request[done..]).await {
            Ok(0) => return Err(Exchange::Failed(SendError::Connect("sending the request: the connection took no more bytes".into()))),
            Ok(n) => done += n,
            Err(e) if started || done > 0 => return Err(Exchange::Failed(SendError::Connect(format!("sending the request: {e}")))),
            Err(e) => return Err(Exchange::Unsent(SendError::Connect(format!("sending the request: {e}")))),
        }
    }
    let (mut answered, mut interim) = (false, 0);
    loop {
        match parse_head(&conn.buf[conn.start..conn.end]) {
            Ok(Some((len, head))) => {
                conn.start += len;
                if head.status.is_informational() && head.status != reqwest::StatusCode::SWITCHING_PROTOCOLS {
                    interim += 1;
                    if interim > MAX_INTERIM_ANSWERS {
                        let detail = format!("more than {MAX_INTERIM_ANSWERS} interim (1xx) answers before a final one");
                        return Err(Exchange::Failed(SendError::InvalidAnswer(detail)));
                    }
                    continue;
                }
                conn.idle_limit = head.keep_alive_timeout.map_or(IDLE_TIMEOUT, retire_before);
                return Ok((head, conn));
            }
            // A head that does not end within the limit is refused here rather than by `fill`,
            // so that it is told apart from a connection that broke.
            Ok(None) if conn.end - conn.start >= MAX_HEAD_BYTES => {
                return Err(Exchange::Failed(SendError::InvalidAnswer(format!("answer head larger than {MAX_HEAD_BYTES} bytes"))));
            }
            Ok(None) => {}
            Err(e) => return Err(Exchange::Failed(SendError::InvalidAnswer(format!("invalid answer head: {e}")))),
        }
        match conn.fill(MAX_HEAD_BYTES).await {
            Ok(0) if !answered => return Err(Exchange::Failed(SendError::Connect("connection closed before an answer".into()))),
            Ok(0) => return Err(Exchange::Failed(SendError::Connect("connection closed inside the answer head".into()))),
            Ok(_) => answered = true,
            Err(e) => return Err(Exchange::Failed(SendError::Connect(format!("reading the answer head: {e}")))),
        }
    }
}

/// Parses an answer head from the front of `input`: `None` while incomplete, else its length
/// and the head. Framing follows RFC 9112 §6.3 (no body for 1xx/204/304; chunked wins over a
/// length; else a length; else the body runs to the end of the connection).
pub fn parse_head(input: &[u8]) -> Result<Option<(usize, Head)>, String> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut fields);
    let len = match parsed.parse(input) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    // httparse takes a bare LF as a line end; RFC 9112 §2.2 lets a recipient refuse it, and a
    // head whose lines a proxy and the prober could split differently is not trusted.
    if input[..len].iter().enumerate().any(|(i, b)| *b == b'\n' && (i == 0 || input[i - 1] != b'\r')) {
        return Err("a header line ended by a bare LF".into());
    }
    let status = parsed.code.and_then(|c| reqwest::StatusCode::from_u16(c).ok()).ok_or("invalid status code")?;
    let mut headers = HeaderMap::with_capacity(parsed.headers.len());
    let (mut chunked, mut other_coding, mut length, mut close) = (false, false, None::<u64>, parsed.version == Some(0));
    let mut keep_alive_for = None;
    for field in parsed.headers.iter() {
        let (Ok(name), Ok(value)) = (HeaderName::from_bytes(field.name.as_bytes()), HeaderValue::from_bytes(field.value)) else {
            continue;
        };
        if name == reqwest::header::TRANSFER_ENCODING {
            // The last coding decides: chunked, or a body that runs to the end.
            for coding in value.to_str().unwrap_or("").split(',').map(str::trim).filter(|c| !c.is_empty()) {
                chunked = coding.eq_ignore_ascii_case("chunked");
                other_coding = !chunked;
            }
        } else if name == reqwest::header::CONTENT_LENGTH {
            // Digits only: `parse` would also take a sign ("+5").
            let digits = value.to_str().ok().map(str::trim).filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
            let n: u64 = digits.and_then(|v| v.parse().ok()).ok_or("invalid content-length")?;
            if length.is_some_and(|l| l != n) {
                return Err("conflicting content-length values".into());
            }
            length = Some(n);
        } else if name.as_str() == "keep-alive" {
            keep_alive_for = value.to_str().ok().and_then(keep_alive_timeout).or(keep_alive_for);
        } else if name == reqwest::header::CONNECTION {
            let v = value.to_str().unwrap_or("");
            if v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")) {
                close = true;
            } else if v.split(',').any(|t| t.trim().eq_ignore_ascii_case("keep-alive")) && parsed.version == Some(0) {
                close = false;
            }
        }
        headers.append(name, value);
    }
    let code = status.as_u16();
    let body = if status.is_informational() || code == 204 || code == 304 {
        TransferDecoder::Done
    } else if chunked {
        TransferDecoder::chunked()
    } else if other_coding {
        TransferDecoder::ToEnd
    } else {
        match length {
            Some(0) => TransferDecoder::Done,
            Some(n) => TransferDecoder::Length(n),
            None => TransferDecoder::ToEnd,
        }
    };
    // A body that runs to the end, or a length beside a transfer coding, ends the connection.
    let keep_alive = !close && !matches!(body, TransferDecoder::ToEnd) && !(length.is_some() && (chunked || other_coding)) && code != 101;
    Ok(Some((len, Head { status, headers, body, keep_alive, keep_alive_timeout: keep_alive_for })))
}

/// The answer to a [`Request::send`]: status, head, and the body read piece by piece.
pub struct Response {
    /// Its `body` decoder advances as the body is read; `keep_alive` turns false when the
    /// connection ends.
    pub head: Head,
    conn: Option<Conn>,
    client: Arc<Client>,
    /// Set on the background reader of a dropped answer's rest (see `Drop`).
    draining: bool,
}

impl Drop for Response {
    /// An answer dropped before its body's end keeps its connection when the rest is already
    /// buffered, or comes within `DRAIN_TIME` and `DRAIN_BYTES`; else the connection closes.
    fn drop(&mut self) {
        if self.draining || !self.head.keep_alive || self.conn.is_none() {
            return;
        }
        while let Some(conn) = self.conn.as_mut() {
            if conn.start == conn.end || self.head.body.is_done() {
                break;
            }
            match self.head.body.decode(&conn.buf[conn.start..conn.end]) {
                Ok(step) if step.used > 0 => conn.start += step.used,
                _ => return,
            }
        }
        if self.head.body.is_done() {
            if let Some(conn) = self.conn.take().filter(|c| c.start == c.end) {
                self.client.checkin(conn);
            }
            return;
        }
        let head = Head {
            status: self.head.status,
            headers: HeaderMap::new(),
            body: std::mem::replace(&mut self.head.body, TransferDecoder::Done),
            keep_alive: true,
            keep_alive_timeout: None,
        };
        let rest = Response { head, conn: self.conn.take(), client: self.client.clone(), draining: true };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let mut rest = rest;
                rest.read_rest(DRAIN_TIME).await;
            });
        }
    }
}

impl Response {
    /// When the bytes last handed out (the head, then each body piece) reached the host, by
    /// the kernel's stamp of the read that brought the newest of them.
    pub fn arrived(&self) -> Option<Instant> {
        self.conn.as_ref()?.arrived
    }

    /// The next piece of the body as it came off the wire (chunk framing removed), lent from
    /// the connection's buffer; `None` at its end, when a kept-alive connection goes back to
    /// the pool. `Err` says why the body broke off.
    pub async fn chunk(&mut self) -> Result<Option<&[u8]>, String> {
        let range = loop {
            let Some(conn) = self.conn.as_mut() else {
                return Ok(None);
            };
            if self.head.body.is_done() {
                let conn = self.conn.take().expect("checked above");
                // Bytes after the end are not ours to read: such a connection is closed.
                if self.head.keep_alive && conn.start == conn.end {
                    self.client.checkin(conn);
                }
                return Ok(None);
            }
            if conn.start < conn.end {
                let base = conn.start;
                let step = self.head.body.decode(&conn.buf[base..conn.end])?;
                conn.start += step.used;
                if let Some(data) = step.data {
                    break base + data.start..base + data.end;
                }
                if step.used > 0 || self.head.body.is_done() {
                    continue;
                }
            }
            match conn.fill(READ_BUF_BYTES).await {
                Ok(0) => {
                    self.head.keep_alive = false;
                    if matches!(self.head.body, TransferDecoder::ToEnd) {
                        self.head.body = TransferDecoder::Done;
                        continue;
                    }
                    self.conn = None;
                    return Err("connection closed before the end of the body".into());
                }
                Ok(_) => {}
                Err(e) => {
                    self.conn = None;
                    return Err(format!("reading the body: {e}"));
                }
            }
        };
        Ok(self.conn.as_ref().map(|c| &c.buf[range]))
    }
}

impl Response {
    /// Reads what is left of the body (after a stream's end marker: the last chunk), briefly,
    /// so that the connection is back in the pool before the caller's next request; whatever
    /// has not come by then is left to the background drain of `Drop`.
    pub async fn settle(&mut self) {
        self.read_rest(SETTLE_TIME).await;
    }

    /// Reads the body to its end (the connection then goes back to the pool) within `time`
    /// and `DRAIN_BYTES`; past the byte bound the connection is closed.
    async fn read_rest(&mut self, time: Duration) {
        let mut read = 0;
        let rest = async {
            while let Ok(Some(piece)) = self.chunk().await {
                read += piece.len();
                if read > DRAIN_BYTES {
                    self.conn = None;
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(time, rest).await;
    }
}

/// How an answer's body is delimited, and how far it has been read.
#[derive(Debug, Clone, PartialEq)]
pub enum TransferDecoder {
    /// This many bytes are left.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked(Chunked),
    /// Everything up to the end of the connection.
    ToEnd,
    Done,
}

/// Where a chunked body's decoder stands (RFC 9112 §7.1; as strict as hyper: CRLF only).
#[derive(Debug, Clone, PartialEq)]
pub enum Chunked {
    /// In a chunk-size line: the size so far, its hex digits, the line's bytes.
    Size {
        size: u64,
        digits: u8,
        line: usize,
    },
    /// After the size: spaces or an extension up to CR.
    Extension {
        size: u64,
        line: usize,
    },
    /// CR seen; LF must follow.
    SizeLf {
        size: u64,
    },
    /// Data bytes left in this chunk.
    Data(u64),
    /// After a chunk's data: CR then LF.
    DataCr,
    DataLf,
    /// After the last (zero) chunk: a trailer line, or the final CRLF.
    TrailerStart,
    Trailer {
        line: usize,
    },
    TrailerLf {
        empty: bool,
    },
}

/// What one [`TransferDecoder::decode`] step took from its input.
#[derive(Debug, PartialEq)]
pub struct DecodeStep {
    /// Input bytes consumed.
    pub used: usize,
    /// Body data within the input (always inside the consumed bytes).
    pub data: Option<Range<usize>>,
}

impl TransferDecoder {
    /// A chunked body's decoder at its start.
    pub fn chunked() -> TransferDecoder {
        TransferDecoder::Chunked(Chunked::Size { size: 0, digits: 0, line: 0 })
    }

    pub fn is_done(&self) -> bool {
        matches!(self, TransferDecoder::Done)
    }

    /// Takes framing bytes from `input` up to the next body data, and that data as far as it
    /// is in `input`. Never panics on any input; a framing error is the reason the body broke
    /// off.
    pub fn decode(&mut self, input: &[u8]) -> Result<DecodeStep, String> {
        match self {
            TransferDecoder::Done => Ok(DecodeStep { used: 0, data: None }),
            TransferDecoder::ToEnd => Ok(DecodeStep { used: input.len(), data: (!input.is_empty()).then_some(0..input.len()) }),
            TransferDecoder::Length(left) => {
                let n = (*left).min(input.len() as u64) as usize;
                *left -= n as u64;
                if *left == 0 {
                    *self = TransferDecoder::Done;
                }
                Ok(DecodeStep { used: n, data: (n > 0).then_some(0..n) })
            }
            TransferDecoder::Chunked(state) => {
                let (step, end) = decode_chunked(state, input)?;
                if end {
                    *self = TransferDecoder::Done;
                }
                Ok(step)
            }
        }
    }
}

/// [`TransferDecoder::decode`] for a chunked body; `true` once its end is taken.
fn decode_chunked(state: &mut Chunked, input: &[u8]) -> Result<(DecodeStep, bool), String> {
    let mut i = 0;
    while i < input.len() {
        if let Chunked::Data(left) = state {
            let n = (*left).min((input.len() - i) as u64) as usize;
            *left -= n as u64;
            if *left == 0 {
                *state = Chunked::DataCr;
            }
            return Ok((DecodeStep { used: i + n, data: Some(i..i + n) }, false));
        }
        let b = input[i];
        i += 1;
        if chunk_byte(state, b)? {
            return Ok((DecodeStep { used: i, data: None }, true));
        }
    }
    Ok((DecodeStep { used: i, data: None }, false))
}

/// One framing byte of a chunked body; `true` at the end of the body.
fn chunk_byte(state: &mut Chunked, b: u8) -> Result<bool, String> {
    let long = |line: usize| if line > MAX_LINE_BYTES { Err(format!("chunk line longer than {MAX_LINE_BYTES} bytes")) } else { Ok(line + 1) };
    *state = match *state {
        Chunked::Size { size, digits, line } => match b {
            b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                if digits >= 16 {
                    return Err("chunk size too large".into());
                }
                let d = (b as char).to_digit(16).expect("a hex digit") as u64;
                Chunked::Size { size: (size << 4) | d, digits: digits + 1, line: long(line)? }
            }
            _ if digits == 0 => return Err("invalid chunk size".into()),
            b'\r' => Chunked::SizeLf { size },
            b' ' | b'\t' | b';' => Chunked::Extension { size, line: long(line)? },
            _ => return Err("invalid chunk size".into()),
        },
        Chunked::Extension { size, line } => match b {
            b'\r' => Chunked::SizeLf { size },
            b'\n' => return Err("invalid chunk extension".into()),
            _ => Chunked::Extension { size, line: long(line)? },
        },
        Chunked::SizeLf { size } => match b {
            b'\n' if size == 0 => Chunked::TrailerStart,
            b'\n' => Chunked::Data(size),
            _ => return Err("invalid chunk size line end".into()),
        },
        Chunked::Data(_) => unreachable!("data is taken before framing bytes"),
        Chunked::DataCr => match b {
            b'\r' => Chunked::DataLf,
            _ => return Err("chunk data longer than its size".into()),
        },
        Chunked::DataLf => match b {
            b'\n' => Chunked::Size { size: 0, digits: 0, line: 0 },
            _ => return Err("invalid chunk data end".into()),
        },
        Chunked::TrailerStart => match b {
            b'\r' => Chunked::TrailerLf { empty: true },
            _ => Chunked::Trailer { line: 1 },
        },
        Chunked::Trailer { line } => match b {
            b'\r' => Chunked::TrailerLf { empty: false },
            _ => Chunked::Trailer { line: long(line)? },
        },
        Chunked::TrailerLf { empty } => match b {
            b'\n' if empty => return Ok(true),
            b'\n' => Chunked::TrailerStart,
            _ => return Err("invalid trailer line end".into()),
        },
    };
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(mut decoder: TransferDecoder, pieces: &[&[u8]]) -> Result<(Vec<u8>, bool), String> {
        let mut out = Vec::new();
        for piece in pieces {
            let mut rest: &[u8] = piece;
            loop {
                let step = decoder.decode(rest)?;
                if let Some(r) = step.data.clone() {
                    out.extend_from_slice(&rest[r]);
                }
                rest = &rest[step.used..];
                if step.used == 0 || rest.is_empty() {
                    break;
                }
            }
        }
        Ok((out, decoder.is_done()))
    }

    #[test]
    fn chunked_body_with_extensions_and_trailers_decodes_in_any_split() {
        let wire = b"5;name=value\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-trailer: 1\r\n\r\n";
        for cut in 0..wire.len() {
            let (data, done) = decode_all(TransferDecoder::chunked(), &[&wire[..cut], &wire[cut..]]).unwrap();
            assert_eq!(data, b"helloabcdefghijklmnopqrstuvwxyz", "cut at {cut}");
            assert!(done, "cut at {cut}");
        }
    }

    #[test]
    fn chunked_framing_errors_are_errors() {
        for wire in [&b"zz\r\n"[..], b"5\r\nhello!\r\n", b"5\nhello\r\n", b"\r\n", b"11111111111111111\r\n"] {
            assert!(decode_all(TransferDecoder::chunked(), &[wire]).is_err(), "{:?}", String::from_utf8_lossy(wire));
        }
    }

    #[test]
    fn a_length_ends_the_body_exactly() {
        let (data, done) = decode_all(TransferDecoder::Length(5), &[b"hel", b"lo"]).unwrap();
        assert_eq!((data.as_slice(), done), (&b"hello"[..], true));
        let mut d = TransferDecoder::Length(2);
        assert_eq!(d.decode(b"abcd").unwrap(), DecodeStep { used: 2, data: Some(0..2) });
        assert!(d.is_done());
    }

    #[test]
    fn head_framing_follows_the_rfc() {
        let head = |text: &str| parse_head(text.as_bytes()).unwrap().unwrap().1;
        assert_eq!(head("HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\n").body, TransferDecoder::Length(3));
        let h = head("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n");
        assert!(matches!(h.body, TransferDecoder::Chunked(_)) && !h.keep_alive, "chunked wins; a length beside it closes");
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert!(h.body == TransferDecoder::ToEnd && !h.keep_alive);
        assert_eq!(head("HTTP/1.1 204 No Content\r\ncontent-length: 9\r\n\r\n").body, TransferDecoder::Done);
        assert!(!head("HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 1\r\n\r\n").keep_alive);
        assert!(!head("HTTP/1.0 200 OK\r\ncontent-length: 1\r\n\r\n").keep_alive);
        assert!(head("HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n").keep_alive);
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-").unwrap().is_none());
        assert!(parse_head(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: +1\r\n\r\n").is_err(), "digits only");
        assert!(parse_head(b"HTTP/1.1 200 OK\ncontent-length: 1\n\n").is_err(), "bare LF");
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nx-a: 1\n\r\n").is_err(), "one bare LF");
    }

    #[test]
    fn a_named_keep_alive_timeout_retires_the_connection_before_it() {
        let head = |text: &str| parse_head(text.as_bytes()).unwrap().unwrap().1;
        assert_eq!(head("HTTP/1.1 200 OK\r\nkeep-alive: timeout=5, max=100\r\ncontent-length: 0\r\n\r\n").keep_alive_timeout, Some(Duration::from_secs(5)));
        assert_eq!(head("HTTP/1.1 200 OK\r\nKeep-Alive: max=9,TIMEOUT=1\r\ncontent-length: 0\r\n\r\n").keep_alive_timeout, Some(Duration::from_secs(1)));
        assert_eq!(head("HTTP/1.1 200 OK\r\nkeep-alive: timeout=abc\r\ncontent-length: 0\r\n\r\n").keep_alive_timeout, None);
    }
}
