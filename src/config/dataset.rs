//! A replayable prompt dataset as data: what the `dataset:` spec names and what reading the file
//! produced. The files are read by `workload` (through `Resolvers::dataset`).

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetFormat {
    Jsonl,
    ShareGpt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetOrder {
    /// Sampled uniformly with replacement.
    Random,
    /// In file order, wrapping around.
    Sequential,
}

/// One replayable prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetEntry {
    pub prompt: String,
    /// Requested output length, when the file gives one.
    pub output_tokens: Option<u32>,
    /// SHA-256 of `prompt` (hex).
    pub sha256: String,
    /// The known answer (JSONL `expect` or `expect_regex`), for `checks.dataset_answers`.
    pub expect: Option<super::expect::Expect>,
}

/// A loaded dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub path: PathBuf,
    pub format: DatasetFormat,
    pub order: DatasetOrder,
    /// Prepend a unique nonce to every prompt.
    pub nonce: bool,
    pub entries: Vec<DatasetEntry>,
    /// SHA-256 of the file's bytes (hex).
    pub sha256: String,
}

/// Reads a dataset file: path, format, order, nonce.
pub type ReadDataset = fn(&Path, DatasetFormat, DatasetOrder, bool) -> Result<Dataset, String>;
