//! The commands, one file each, on top of the modules they use: nothing below imports them.

pub mod accuracy;
pub mod bench;
pub mod config;
pub mod demo;
pub mod detect;
pub mod gate;
pub mod probe;
pub mod release;
pub mod workload;
