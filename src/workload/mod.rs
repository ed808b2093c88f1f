//! What each probe sends: token lengths drawn from the scenario's distributions, and a prompt
//! synthesized to hit the input length on the target's tokenizer (or replayed from a dataset).
//!
//! Files: `dist.rs` (length sampling), `prompt.rs` (prompt text), `calibrate.rs` (words per
//! token per target), `dataset.rs` (reading JSONL / ShareGPT replay files), `fingerprint.rs`
//! (workload SHA-256), `preview.rs` (`llmprobe workload preview`), `draw.rs` (one probe's draw). No network I/O: the
//! `/tokenize` calls are `crate::client::tokenize`, `llmprobe workload accuracy` is `crate::cmd::accuracy`.

pub mod calibrate;
mod dataset;
mod dist;
mod draw;
mod fingerprint;
mod mix;
pub mod preview;
pub mod prompt;

pub use crate::config::{Dataset, DatasetEntry, DatasetFormat, DatasetOrder};
pub use calibrate::{Calibration, Fit, FitSource};
pub use dataset::{parse_jsonl, parse_sharegpt};
pub use dist::{pick, quantile};
pub use draw::{Draw, Follow, Sampler, sha256_hex};
pub use fingerprint::{WorkloadHash, fingerprint};
pub use mix::Mix;
pub use prompt::{NONCE_WORDS, synthesize, synthesize_prompt};
