//! What every probe of a run shares (`RunContext`: the recorder, the stop and abort tokens,
//! the in-flight hook, tracing) and a probe's in-flight slot, which cannot leak.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client::TargetRuntime;
use crate::pipeline::recorder::RecorderHandle;

/// Called with (target, in-flight count) whenever the count changes.
pub type InFlightHook = Arc<dyn Fn(&str, i64) + Send + Sync>;

/// Shared by all schedules of a run.
#[derive(Clone)]
pub struct RunContext {
    pub recorder: RecorderHandle,
    /// Cancelled: stop scheduling new probes.
    pub stop: CancellationToken,
    /// Cancelled: end running probes now (`cancelled`).
    pub abort: CancellationToken,
    pub tracker: TaskTracker,
    pub on_in_flight: InFlightHook,
    /// Trace ids for every probe of this run, sampled at this ratio; `None`: tracing is off
    /// (no `traceparent`, no exemplars). Per run, so two probers in one process never share it.
    pub trace_ratio: Option<f64>,
}

/// A probe's in-flight slot once it has one: whichever of the probe and the dispatcher lets go
/// of the cell last gives the slot back, so it cannot leak either way.
pub type SlotCell = Arc<Mutex<Option<InFlightSlot>>>;

/// One taken in-flight slot of a target, given back when dropped: whatever ends the probe
/// task (its end, a panic, the runtime shutting down), the slot cannot leak.
pub struct InFlightSlot {
    target: Arc<TargetRuntime>,
    hook: InFlightHook,
}

impl InFlightSlot {
    /// The in-flight cap: a slot, or `None` (the probe is dropped) when `cap` are in flight.
    pub fn take(target: &Arc<TargetRuntime>, cap: usize, hook: &InFlightHook) -> Option<InFlightSlot> {
        let in_flight = target.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        if in_flight > cap {
            target.in_flight.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        hook(&target.name, in_flight as i64);
        Some(InFlightSlot { target: target.clone(), hook: hook.clone() })
    }
}

impl Drop for InFlightSlot {
    fn drop(&mut self) {
        let now = self.target.in_flight.fetch_sub(1, Ordering::AcqRel).saturating_sub(1);
        (self.hook)(&self.target.name, now as i64);
    }
}
