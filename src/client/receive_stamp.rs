//! Kernel receive stamps: when a read's bytes reached this host, not when the prober read them.
//!
//! A busy or just-woken prober reads a frame some time after it arrived (a wake-up from idle
//! takes about 0.15 ms on a VM; at 1,000 streams a frame waits its turn behind the others that
//! came in the same engine step, milliseconds). With `SO_TIMESTAMPNS` the kernel stamps each
//! segment as it is queued on the host (for loopback, as the sender writes it), and a TCP read
//! reports the stamp of the newest segment it took. Frames read together therefore share the
//! newest one's stamp: never later than the read, so never worse than the read time.
//!
//! The kernel turns stamping on for the host a moment after the first socket asks (deferred
//! work); reads before that carry no stamp, and their read time stands.
//!
//! The stamp is on the wall clock; [`to_instant`] puts it on the monotonic clock every timeline
//! uses, by reading both clocks at once.

use std::time::{Duration, Instant, SystemTime};

use tokio::net::TcpStream;

/// Asks the kernel to stamp what this socket receives (on a listening socket: what every
/// connection it accepts receives, from its first byte). `false` where it cannot (then reads
/// carry no stamp and the read time stands).
pub fn enable(socket: &impl std::os::fd::AsFd) -> bool {
    #[cfg(target_os = "linux")]
    return linux::enable(std::os::fd::AsRawFd::as_raw_fd(&socket.as_fd()));
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket;
        false
    }
}

/// Reads into `buf` without waiting, as `TcpStream::try_read` does: the byte count and, where
/// the kernel stamped the bytes, the receive time of the newest segment read. Errors as
/// `try_read`'s (`WouldBlock` included); call it inside `try_io` for the reactor to see them.
pub fn try_read(socket: &TcpStream, buf: &mut [u8]) -> std::io::Result<(usize, Option<SystemTime>)> {
    #[cfg(target_os = "linux")]
    // SAFETY: `buf` is valid for writes of its length and borrowed mutably for the call.
    return unsafe { linux::recv(std::os::fd::AsRawFd::as_raw_fd(socket), buf.as_mut_ptr(), buf.len()) };
    #[cfg(not(target_os = "linux"))]
    socket.try_read(buf).map(|n| (n, None))
}

/// [`try_read`] into memory not yet initialised (a `ReadBuf`'s unfilled part): the first `n`
/// bytes of `buf` are initialised when it returns `Ok((n, _))`.
pub fn try_read_uninit(socket: &TcpStream, buf: &mut [std::mem::MaybeUninit<u8>]) -> std::io::Result<(usize, Option<SystemTime>)> {
    #[cfg(target_os = "linux")]
    // SAFETY: `buf` is valid for writes of its length and borrowed mutably for the call; the
    // kernel only writes bytes into it, never reads them.
    return unsafe { linux::recv(std::os::fd::AsRawFd::as_raw_fd(socket), buf.as_mut_ptr().cast(), buf.len()) };
    #[cfg(not(target_os = "linux"))]
    {
        for b in buf.iter_mut() {
            b.write(0);
        }
        // SAFETY: every byte was initialised just above.
        let buf = unsafe { &mut *(buf as *mut [std::mem::MaybeUninit<u8>] as *mut [u8]) };
        socket.try_read(buf).map(|n| (n, None))
    }
}

/// The monotonic instant of a wall-clock stamp: now, less how long ago the stamp was by the
/// wall clock. `None` when the stamp is after now (the wall clock was set back since): the
/// caller keeps its read time. A wall clock set forward meanwhile makes the stamp look older;
/// callers bound it below by the previous event of the same exchange.
pub fn to_instant(stamp: SystemTime) -> Option<Instant> {
    let (wall, now) = (SystemTime::now(), Instant::now());
    let ago: Duration = wall.duration_since(stamp).ok()?;
    now.checked_sub(ago)
}

#[cfg(target_os = "linux")]
mod linux {
    use std::time::{Duration, SystemTime};

    pub fn enable(fd: i32) -> bool {
        let on: libc::c_int = 1;
        // SAFETY: setsockopt reads an initialised `c_int` of the given length; the descriptor is
        // the caller's open socket.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        r == 0
    }

    /// # Safety
    /// `buf` must be valid for writes of `len` bytes for the duration of the call.
    pub unsafe fn recv(fd: i32, buf: *mut u8, len: usize) -> std::io::Result<(usize, Option<SystemTime>)> {
        let mut iov = libc::iovec { iov_base: buf.cast(), iov_len: len };
        // Room for one `SCM_TIMESTAMPNS` (a header and a timespec), aligned as `cmsghdr` needs.
        let mut control = [0u64; 8];
        // SAFETY: an all-zero `msghdr` is valid (no name, no buffers); the fields set below
        // point at `iov` and `control`, which outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: recvmsg writes at most `iov_len` bytes into `buf` (valid for them, by the
        // caller's promise) and at most `msg_controllen` bytes into `control`.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut stamp = None;
        // SAFETY: the CMSG macros walk the control messages the kernel wrote into `control`,
        // within `msg_controllen`; each header is checked before its data is read, and the data
        // is read unaligned.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let len = (*c).cmsg_len as usize;
                if (*c).cmsg_level == libc::SOL_SOCKET
                    && (*c).cmsg_type == libc::SCM_TIMESTAMPNS
                    && len >= libc::CMSG_LEN(std::mem::size_of::<libc::timespec>() as u32) as usize
                {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    stamp = wall_time(ts.tv_sec, ts.tv_nsec);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Ok((n as usize, stamp))
    }

    fn wall_time(secs: i64, nanos: i64) -> Option<SystemTime> {
        let secs = u64::try_from(secs).ok()?;
        let nanos = u32::try_from(nanos).ok().filter(|n| *n < 1_000_000_000)?;
        SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[tokio::test]
    async fn a_stamp_is_the_kernels_receive_time_not_the_read_time() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut sender = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (receiver, _) = listener.accept().unwrap();
        receiver.set_nonblocking(true).unwrap();
        let receiver = TcpStream::from_std(receiver).unwrap();
        let stamped = enable(&receiver);
        // The kernel turns stamping on for the whole host a moment after the first socket asks
        // (deferred work); until then reads carry no stamp. Wait for it with a first message.
        let mut buf = [0u8; 64];
        for _ in 0..100 {
            sender.write_all(b"x").unwrap();
            std::thread::sleep(Duration::from_millis(10));
            if matches!(try_read(&receiver, &mut buf), Ok((_, Some(_)))) || !cfg!(target_os = "linux") {
                break;
            }
        }
        let before = Instant::now();
        sender.write_all(b"frame").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let (n, stamp) = try_read(&receiver, &mut buf).unwrap();
        let read_at = Instant::now();
        assert_eq!(&buf[..n], b"frame");
        if cfg!(target_os = "linux") {
            assert!(stamped);
            let at = to_instant(stamp.expect("a stamped read")).expect("a stamp before now");
            assert!(at >= before - Duration::from_millis(5), "stamped before it was sent");
            assert!(read_at.duration_since(at) >= Duration::from_millis(45), "the stamp is the arrival, 50 ms before the read");
        }
    }

    #[test]
    fn a_stamp_after_now_is_not_used() {
        assert_eq!(to_instant(SystemTime::now() + Duration::from_secs(60)), None);
        let ago = to_instant(SystemTime::now() - Duration::from_millis(10)).unwrap();
        assert!(Instant::now().duration_since(ago) >= Duration::from_millis(10));
    }
}
