//! Built-in mock LLM server: a simulated continuous-batching engine behind the real wire
//! protocols (OpenAI-compatible as vLLM writes it, Ollama, llama.cpp native, TGI), with
//! vLLM-named `/metrics`, a fake DCGM page and fault injection. See `README.md` here.
//!
//! Writes every wire format itself; shares no code with the prober's parsers on purpose.

mod app;
mod behaviour;
mod control;
mod driver;
pub mod engine;
mod faults;
mod hist;
mod kv;
mod listener;
mod metrics;
mod native;
mod openai;
mod options;
pub mod profile;
mod responses;
mod serve;
pub mod sim;
pub mod tokenizer;
mod wire;

pub use engine::{Engine, SeqSpec};
pub use faults::{Fault, FaultParams};
pub use options::{MockArgs, MockOptions};
pub use profile::Profile;
pub use serve::{router, serve};
