//! The mock's listener: connections that keep the kernel's receive stamp of their last read,
//! so that a request's arrival is when it reached the host, not when the mock got round to it.
//!
//! The mock's frame stamps (`mock_emitted_ns`) count from the request's arrival. Taken when the
//! handler ran, they left out the time the request waited for a busy mock (at 1,000 streams the
//! mock writes every stream's frame in one step, milliseconds of its core), and a client timed
//! against them was charged with that wait. The prober times its answers the same way
//! (`receive_stamp`).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::extract::FromRequestParts;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::http::request::Parts;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::client::receive_stamp;

/// A TCP listener whose connections are [`Stamped`], with `TCP_NODELAY` set.
pub struct StampedListener(TcpListener);

impl StampedListener {
    pub fn new(listener: TcpListener) -> Self {
        // On the listener, so that the host stamps from the start and a request sent before
        // its connection is accepted is stamped too (connections that complete their handshake
        // from now on inherit the option; `accept` asks again for any that did not).
        receive_stamp::enable(&listener);
        StampedListener(listener)
    }
}

impl Listener for StampedListener {
    type Io = Stamped;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Stamped, std::net::SocketAddr) {
        // axum's own accept loop (it logs and waits out errors such as running out of files).
        let (stream, addr) = Listener::accept(&mut self.0).await;
        // Every frame is its own small write: with Nagle's algorithm a frame waits for the ACK
        // of the one before (the client's delayed ACK), which skews TTFT and ITL by
        // milliseconds. Inference servers (uvicorn, the engines' own) set TCP_NODELAY too.
        let _ = stream.set_nodelay(true);
        // Again on the connection: one whose handshake completed before the listener asked
        // (a client that connected while the mock was starting) did not inherit it. Bytes
        // already queued carry their stamps all the same once the host stamps at all.
        receive_stamp::enable(&stream);
        (Stamped { stream, last: Arc::default() }, addr)
    }

    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.0.local_addr()
    }
}

/// A connection that notes when the bytes of its last read reached the host.
pub struct Stamped {
    stream: TcpStream,
    last: Arc<Mutex<Option<Instant>>>,
}

impl AsyncRead for Stamped {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.stream.poll_read_ready(cx))?;
            // SAFETY: the unfilled part is only written by the kernel's read; exactly the
            // bytes it reports read are then marked initialised and filled.
            let unfilled = unsafe { buf.unfilled_mut() };
            match this.stream.try_io(Interest::READABLE, || receive_stamp::try_read_uninit(&this.stream, unfilled)) {
                Ok((n, stamp)) => {
                    if n > 0 {
                        *this.last.lock().unwrap_or_else(|e| e.into_inner()) = stamp.and_then(receive_stamp::to_instant);
                    }
                    // SAFETY: the read initialised the first `n` unfilled bytes.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Stamped {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// A connection's receive stamps, as the handlers see them (axum's connect info).
#[derive(Clone)]
pub struct ConnStamps(Arc<Mutex<Option<Instant>>>);

impl Connected<IncomingStream<'_, StampedListener>> for ConnStamps {
    fn connect_info(stream: IncomingStream<'_, StampedListener>) -> Self {
        ConnStamps(stream.io().last.clone())
    }
}

/// Extracts when the request reached the host: call [`RequestArrival::at`] once its body has
/// been read. Without a stamped connection (a router called directly) it is the handler's
/// own time, as before.
pub struct RequestArrival(Option<ConnStamps>);

impl RequestArrival {
    /// The receive stamp of the connection's last read (the request's last bytes), or now.
    pub fn at(&self) -> Instant {
        let now = Instant::now();
        let stamp = self.0.as_ref().and_then(|c| *c.0.lock().unwrap_or_else(|e| e.into_inner()));
        stamp.filter(|at| *at <= now).unwrap_or(now)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RequestArrival {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(RequestArrival(parts.extensions.get::<ConnectInfo<ConnStamps>>().map(|c| c.0.clone())))
    }
}
