//! A finite run's outcomes kept for its caller: what `keep` makes of each recorded probe
//! (a bench record, a `--once` timeline, an accuracy figure), in recording order.

use std::sync::Mutex;

use super::Sink;
use crate::probe::measure::Sample;
use crate::probe::outcome::Outcome;

type Keep<T> = Box<dyn Fn(&Outcome, Option<&Sample>) -> T + Send + Sync>;

pub struct Collect<T> {
    keep: Keep<T>,
    items: Mutex<Vec<T>>,
}

impl<T: Send> Collect<T> {
    pub fn new(keep: impl Fn(&Outcome, Option<&Sample>) -> T + Send + Sync + 'static) -> Self {
        Collect { keep: Box::new(keep), items: Mutex::new(Vec::new()) }
    }

    /// Reads everything kept so far, leaving it in the sink (a look while the run goes on).
    pub fn peek<R>(&self, read: impl FnOnce(&[T]) -> R) -> R {
        read(&self.items.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Everything kept so far, leaving the sink empty.
    pub fn take(&self) -> Vec<T> {
        std::mem::take(&mut *self.items.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl<T: Send> Sink for Collect<T> {
    fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        let item = (self.keep)(outcome, sample);
        self.items.lock().unwrap_or_else(|e| e.into_inner()).push(item);
    }
}
