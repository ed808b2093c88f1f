//! One probe, below everything that sends it: its arrival gaps (`arrival`), the gate that hands
//! it its send time (`handover`), deadline arithmetic that cannot panic (`deadline`), what it
//! produced (`outcome`), its place in a sequence (`step`), its numbers (`measure`) and its identity (`trace`). The pipeline that
//! sends probes builds on these; the clients and sinks read them.

pub mod arrival;
pub mod deadline;
pub mod handover;
pub mod measure;
pub mod outcome;
pub mod step;
pub mod trace;
