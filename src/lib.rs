//! llmprobe: a continuous open-arrival SLO prober and benchmark for LLM inference services.

pub mod config;
pub mod protocol;
pub mod measure;
pub mod outcome;
pub mod server;
pub mod sink;
pub mod stats;
