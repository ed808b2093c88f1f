//! The live step loop: one task drives the engine in wall-clock time.
//!
//! The loop plans a step, sleeps until its absolute end time, then hands each emitted token to
//! its request's channel. Idle, it waits on a `Notify`. A closed channel means the client left:
//! before each step such requests are aborted (queued ones before any prefill) and their KV
//! blocks freed.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::engine::{Emit, Engine, SeqId, SeqSpec};

pub struct Driver {
    inner: Mutex<Inner>,
    notify: Notify,
    epoch: Instant,
}

struct Inner {
    engine: Engine,
    subs: HashMap<SeqId, mpsc::UnboundedSender<Emit>, BuildHasherDefault<SeqIdHasher>>,
}

/// The engine hands sequence ids out in order (they never come from a client, so there is no
/// flooding to defend against): one multiplication spreads them over the table, where SipHash
/// cost more than the rest of the lookup done once per emitted token.
#[derive(Default)]
struct SeqIdHasher(u64);

impl Hasher for SeqIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A submitted request: its token stream and what the engine decided up front.
pub struct Ticket {
    pub id: SeqId,
    pub rx: mpsc::UnboundedReceiver<Emit>,
    /// Tokens this request will generate.
    pub target: u32,
}

impl Inner {
    /// Aborts requests whose client went away (their receiver is gone), so a request whose
    /// client disconnected while queued is dropped before its prefill, as vLLM aborts it.
    fn reap_departed(&mut self) {
        let gone: Vec<SeqId> = self.subs.iter().filter(|(_, tx)| tx.is_closed()).map(|(id, _)| *id).collect();
        for id in gone {
            self.subs.remove(&id);
            self.engine.abort(id);
        }
    }
}

impl Driver {
    pub fn new(engine: Engine) -> Arc<Self> {
        Arc::new(Driver { inner: Mutex::new(Inner { engine, subs: HashMap::default() }), notify: Notify::new(), epoch: Instant::now() })
    }

    /// Runs `f` on the engine, mutably (e.g. to change its profile at run time).
    pub fn with_engine_mut<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> R {
        f(&mut self.lock().engine)
    }

    /// Nanoseconds on the engine clock.
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    pub fn submit(&self, spec: &SeqSpec) -> Ticket {
        let (tx, rx) = mpsc::unbounded_channel();
        let now = self.now_ns();
        let (id, target) = {
            let mut g = self.lock();
            let (id, target) = g.engine.submit(spec, now);
            g.subs.insert(id, tx);
            (id, target)
        };
        self.notify.notify_one();
        Ticket { id, rx, target }
    }

    /// Runs `f` on the engine under the lock (for metrics pages).
    pub fn with_engine<R>(&self, f: impl FnOnce(&Engine) -> R) -> R {
        f(&self.lock().engine)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The step loop; returns when `stop` is cancelled.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        loop {
            let notified = self.notify.notified();
            let plan = {
                let mut g = self.lock();
                g.reap_departed();
                g.engine.step(self.now_ns())
            };
            let Some(plan) = plan else {
                tokio::select! {
                    _ = notified => continue,
                    _ = stop.cancelled() => return self.close_all(),
                }
            };
            let deadline = self.epoch + std::time::Duration::from_nanos(plan.end_ns);
            tokio::select! {
                _ = tokio::time::sleep_until(deadline.into()) => {}
                _ = stop.cancelled() => return self.close_all(),
            }
            self.deliver(plan.emits);
        }
    }

    /// Ends every open stream (their channels close) so a graceful shutdown can finish.
    fn close_all(&self) {
        self.lock().subs.clear();
    }

    fn deliver(&self, emits: Vec<Emit>) {
        let mut g = self.lock();
        for e in emits {
            let gone = match g.subs.get(&e.id) {
                Some(tx) => tx.send(e).is_err(),
                None => false,
            };
            if gone {
                g.subs.remove(&e.id);
                g.engine.abort(e.id);
            } else if e.finish.is_some() {
                g.subs.remove(&e.id);
            }
        }
    }
}
