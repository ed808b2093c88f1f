//! The one pipeline every driver (the continuous prober, `probe --once`, bench sweeps,
//! `workload accuracy`) shares: `scheduler` sends each probe at its time through `exec`, which
//! returns an `Outcome`; the `recorder` measures it and fans it out to the sinks. `context` is
//! what a run's probes share; `sequence` sends the later probes of a conversation or cache pair
//! on the task of the first.

pub mod context;
pub mod exec;
pub mod once;
pub mod recorder;
pub mod scheduler;
pub mod sequence;
