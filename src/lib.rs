//! llmprobe: a continuous open-arrival SLO prober and benchmark for LLM inference services.

pub mod config;
pub mod protocol;
pub mod measure;
pub mod mock;
pub mod outcome;
