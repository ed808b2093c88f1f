//! Commands that stand on top of the modules they use (one file each): nothing below imports them.

pub mod accuracy;
pub mod detect;
