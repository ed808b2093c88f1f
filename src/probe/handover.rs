//! How the dispatcher hands a probe its send time. The probe task parks at a [`Gate`] a little
//! before its intended time with its request ready; at that time the dispatcher, on its own
//! promptly waking thread, opens the gate. When the probe left a [`Write`] there (its request
//! bytes and a kept-alive connection), the dispatcher writes the request itself: a runtime busy
//! with streamed frames then delays reading the answer, never the send (which would be
//! schedule lag). A kept-alive connection is checked for a close once more right before the
//! first byte: a server closing it while idle can do so at any moment until then, and a
//! request it cannot have seen goes on a new connection instead of failing the probe.
//! Otherwise the gate only releases the probe, which sends when it next runs.
//! A gate can also refuse the probe at its send time (the target's in-flight cap): it is then
//! never sent.

use std::io::Write as _;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A request the dispatcher writes at the send time, on its own handle to the connection (so
/// that the probe ending meanwhile never leaves it writing to a closed or reused descriptor).
pub struct Write {
    socket: std::net::TcpStream,
    bytes: Arc<Vec<u8>>,
    /// A kept-alive connection: the server may close it while idle at any moment, so it is
    /// checked again right before the write.
    kept_alive: bool,
}

impl Write {
    /// `None` when the descriptor cannot be duplicated (out of descriptors): the probe then
    /// sends itself. `kept_alive`: the connection has carried an earlier request.
    pub fn new(socket: BorrowedFd<'_>, bytes: Arc<Vec<u8>>, kept_alive: bool) -> Option<Write> {
        let socket = std::net::TcpStream::from(socket.try_clone_to_owned().ok()?);
        Some(Write { socket, bytes, kept_alive })
    }

    /// Writes as much as the socket takes now, never blocking (the socket is non-blocking);
    /// the probe writes the rest. A kept-alive connection found closed at this moment gets no
    /// byte (`Unsent`): the server closed it while idle, never saw the request, and the probe
    /// sends it on a new connection. The check is the kernel's, not the reactor's, so a close
    /// that arrived a moment ago counts.
    fn run(mut self) -> Written {
        let at = Instant::now();
        if self.kept_alive && !open_and_silent(self.socket.as_fd()) {
            return Written { at, result: Err(WriteError::Unsent("kept-alive connection closed while idle".into())) };
        }
        let mut done = 0;
        while done < self.bytes.len() {
            match self.socket.write(&self.bytes[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if done == 0 => return Written { at, result: Err(WriteError::Unsent(format!("sending the request: {e}"))) },
                Err(e) => return Written { at, result: Err(WriteError::Broken(format!("sending the request: {e}"))) },
            }
        }
        Written { at, result: Ok(done) }
    }
}

/// Whether a connection is still open with nothing to read, asked of the kernel (a peek that
/// does not wait): a runtime's reactor may not have seen yet a close that has already arrived.
pub fn open_and_silent(socket: BorrowedFd<'_>) -> bool {
    let mut byte = 0u8;
    // SAFETY: a one-byte buffer of ours; MSG_PEEK leaves any byte in the socket.
    let n = unsafe { libc::recv(socket.as_raw_fd(), (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    // Closed (0), reset, or bytes nobody asked for: not reusable.
    n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
}

/// What the dispatcher did with a [`Write`]: when it started writing, and how many bytes the
/// socket took.
#[derive(Debug)]
pub struct Written {
    pub at: Instant,
    pub result: Result<usize, WriteError>,
}

/// Why the dispatcher's write failed.
#[derive(Debug)]
pub enum WriteError {
    /// Not a byte of the request went out: the connection was closed or broken before it.
    Unsent(String),
    /// The connection broke after part of the request went out: the server may have seen it.
    Broken(String),
}

/// How a gate opened.
#[derive(Debug)]
pub enum Opened {
    /// The dispatcher wrote the request (all of it, or the first `result` bytes).
    Written(Written),
    /// Released at the send time: send now.
    Released,
    /// Refused at the send time (the target's in-flight cap): never send.
    Refused,
    /// The dispatcher stopped before the send time: the probe keeps its time itself.
    Abandoned,
}

/// The dispatcher's side of a gate.
pub struct Opener {
    write: Arc<Mutex<Option<Write>>>,
    open: tokio::sync::oneshot::Sender<Opened>,
}

/// The probe's side of a gate.
pub struct Gate {
    write: Arc<Mutex<Option<Write>>>,
    opened: tokio::sync::oneshot::Receiver<Opened>,
}

/// A new gate: the opener goes to the dispatcher, the gate to the probe.
pub fn gate() -> (Opener, Gate) {
    let write = Arc::new(Mutex::new(None));
    let (open, opened) = tokio::sync::oneshot::channel();
    (Opener { write: write.clone(), open }, Gate { write, opened })
}

impl Opener {
    /// Opens the gate: writes the request the probe left, if it left one in time.
    pub fn open(self) {
        let write = self.write.lock().unwrap_or_else(|e| e.into_inner()).take();
        let _ = self.open.send(write.map_or(Opened::Released, |w| Opened::Written(w.run())));
    }

    /// Refuses the probe: the request it left is never written.
    pub fn refuse(self) {
        self.write.lock().unwrap_or_else(|e| e.into_inner()).take();
        let _ = self.open.send(Opened::Refused);
    }
}

impl Gate {
    /// Leaves `write` for the dispatcher and waits for the gate to open. A write left after
    /// the gate opened is taken back (the probe sends itself).
    pub async fn pass(mut self, write: Option<Write>) -> Opened {
        if write.is_some() {
            *self.write.lock().unwrap_or_else(|e| e.into_inner()) = write;
        }
        (&mut self.opened).await.unwrap_or(Opened::Abandoned)
    }
}

impl Drop for Gate {
    /// A probe that ends before its send time (shutdown) takes its request back, so the
    /// dispatcher never sends a request nobody reads.
    fn drop(&mut self) {
        self.write.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        client.set_nonblocking(true).unwrap();
        (client, listener.accept().unwrap().0)
    }

    #[tokio::test]
    async fn the_opener_writes_what_the_probe_left() {
        let (client, mut server) = pair();
        let (opener, gate) = gate();
        let write = Write::new(client.as_fd(), Arc::new(b"GET / HTTP/1.1\r\n\r\n".to_vec()), false);
        let before = Instant::now();
        let passing = tokio::spawn(gate.pass(write));
        tokio::task::yield_now().await;
        // The probe task may not have run yet: open from another thread once it has.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        std::thread::spawn(move || opener.open()).join().unwrap();
        match passing.await.unwrap() {
            Opened::Written(w) => {
                assert!(w.at >= before);
                assert_eq!(w.result.unwrap(), 18);
            }
            other => panic!("expected a write, got {other:?}"),
        }
        let mut got = [0u8; 18];
        server.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"GET / HTTP/1.1\r\n\r\n");
    }

    #[tokio::test]
    async fn a_gate_opened_before_the_write_came_releases_and_takes_it_back() {
        let (client, mut server) = pair();
        let (opener, gate) = gate();
        let probe_side = gate.write.clone();
        opener.open();
        let opened = gate.pass(Write::new(client.as_fd(), Arc::new(b"late".to_vec()), false)).await;
        assert!(matches!(opened, Opened::Released));
        assert!(probe_side.lock().unwrap().is_none(), "the late write was taken back");
        server.set_nonblocking(true).unwrap();
        assert_eq!(server.read(&mut [0u8; 4]).map_err(|e| e.kind()).unwrap_err(), std::io::ErrorKind::WouldBlock, "nothing was sent");
    }

    #[tokio::test]
    async fn a_dropped_gate_leaves_nothing_to_write_and_a_dropped_opener_abandons() {
        let (client, _server) = pair();
        let (opener, gate) = gate();
        let slot = gate.write.clone();
        let passing = tokio::spawn(gate.pass(Write::new(client.as_fd(), Arc::new(b"x".to_vec()), false)));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        passing.abort();
        let _ = passing.await;
        assert!(slot.lock().unwrap().is_none(), "an ended probe's request is never written");
        drop(opener);

        let (opener, gate) = super::gate();
        drop(opener);
        assert!(matches!(gate.pass(None).await, Opened::Abandoned));
    }

    #[tokio::test]
    async fn a_refused_gate_never_writes() {
        let (client, mut server) = pair();
        let (opener, gate) = gate();
        let passing = tokio::spawn(gate.pass(Write::new(client.as_fd(), Arc::new(b"refused".to_vec()), false)));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        opener.refuse();
        assert!(matches!(passing.await.unwrap(), Opened::Refused));
        server.set_nonblocking(true).unwrap();
        assert_eq!(server.read(&mut [0u8; 7]).map_err(|e| e.kind()).unwrap_err(), std::io::ErrorKind::WouldBlock, "nothing was sent");
    }

    #[test]
    fn a_broken_connection_is_an_error_and_a_full_one_a_partial_write() {
        let (client, server) = pair();
        drop(server);
        std::thread::sleep(std::time::Duration::from_millis(20));
        // The first write may still be taken (the reset comes back with it); the next fails.
        let mut last = Ok(0);
        for _ in 0..3 {
            last = Write::new(client.as_fd(), Arc::new(b"after close".to_vec()), false).unwrap().run().result;
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(matches!(last, Err(WriteError::Unsent(_))), "writing to a closed peer fails before a byte went out: {last:?}");

        let (client, _server) = pair();
        let big = Arc::new(vec![b'a'; 64 << 20]);
        let written = Write::new(client.as_fd(), big.clone(), false).unwrap().run();
        let n = written.result.unwrap();
        assert!(n > 0 && n < big.len(), "a full socket takes part and the write does not block ({n})");
    }

    #[test]
    fn a_kept_alive_connection_closed_by_the_peer_gets_no_byte() {
        let (client, server) = pair();
        drop(server);
        // Wait for the close to reach the client's socket, by the kernel's own account.
        while open_and_silent(client.as_fd()) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let written = Write::new(client.as_fd(), Arc::new(b"never".to_vec()), true).unwrap().run();
        assert!(matches!(written.result, Err(WriteError::Unsent(_))), "{written:?}");
        // Not one byte was written: a write would have drawn a reset, and reading shows the
        // clean close (0) instead.
        let mut client = client;
        client.set_nonblocking(false).unwrap();
        assert_eq!(client.read(&mut [0u8; 8]).unwrap(), 0, "the peer's close, not a reset from a write");

        let (client, mut server) = pair();
        let written = Write::new(client.as_fd(), Arc::new(b"open".to_vec()), true).unwrap().run();
        assert_eq!(written.result.unwrap(), 4, "an open kept-alive connection is written to");
        let mut got = [0u8; 4];
        server.read_exact(&mut got).unwrap();
    }
}
