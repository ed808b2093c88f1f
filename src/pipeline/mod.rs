//! The one pipeline every driver (the continuous prober, `probe --once`, bench sweeps,
//! `workload accuracy`) shares: `scheduler` sends each probe at its time through `exec`, which
//! returns an `Outcome`; the `recorder` measures it and fans it out to the sinks.

pub mod exec;
pub mod once;
pub mod recorder;
pub mod scheduler;
