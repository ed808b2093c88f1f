//! Replayed prompts: JSONL (`{"prompt": ..., "output_tokens"|"max_tokens": N}` per line, the
//! format `vllm bench serve` custom datasets read, with an optional known answer `expect` or
//! `expect_regex`) or ShareGPT conversation JSON (the first human
//! turn is the prompt). Loaded once at config time; each entry keeps its SHA-256.

use std::path::Path;

use serde::Deserialize;

use super::sha256_hex;
use crate::config::{Dataset, DatasetEntry, DatasetFormat, DatasetOrder, Expect};

/// Files larger than this are refused (prompts are held in memory).
const MAX_BYTES: u64 = 512 << 20;

#[derive(Deserialize)]
struct JsonlLine {
    prompt: String,
    output_tokens: Option<i64>,
    max_tokens: Option<i64>,
    /// Known answer: a substring (case-insensitive) or a regex (`checks.dataset_answers`).
    expect: Option<String>,
    expect_regex: Option<String>,
}

#[derive(Deserialize)]
struct ShareGptItem {
    #[serde(default)]
    conversations: Vec<ShareGptTurn>,
}

#[derive(Deserialize)]
struct ShareGptTurn {
    from: String,
    value: String,
}

impl Dataset {
    /// Reads and parses a file; the error names the file and, for JSONL, the line.
    pub fn load(path: &Path, format: DatasetFormat, order: DatasetOrder, nonce: bool) -> Result<Dataset, String> {
        let shown = path.display();
        let size = std::fs::metadata(path).map_err(|e| format!("cannot read dataset {shown}: {e}"))?.len();
        if size > MAX_BYTES {
            return Err(format!("dataset {shown} is {size} bytes; the limit is {MAX_BYTES}"));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read dataset {shown}: {e}"))?;
        let entries = match format {
            DatasetFormat::Jsonl => parse_jsonl(&text),
            DatasetFormat::ShareGpt => parse_sharegpt(&text),
        }
        .map_err(|e| format!("dataset {shown}: {e}"))?;
        if entries.is_empty() {
            return Err(format!("dataset {shown} has no prompts"));
        }
        Ok(Dataset { path: path.to_owned(), format, order, nonce, entries, sha256: sha256_hex(text.as_bytes()) })
    }

    /// How many entries need the scenario's `output_tokens`.
    pub fn entries_without_output(&self) -> usize {
        self.entries.iter().filter(|e| e.output_tokens.is_none()).count()
    }
}

/// One JSON object per non-blank line.
pub fn parse_jsonl(text: &str) -> Result<Vec<DatasetEntry>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = i + 1;
        let parsed: JsonlLine = serde_json::from_str(line).map_err(|e| {
            let msg = e.to_string();
            let msg = msg.split(" at line ").next().unwrap_or(&msg).to_owned();
            format!("line {at}, column {}: {msg}", e.column())
        })?;
        let output = match parsed.output_tokens.or(parsed.max_tokens) {
            Some(n) if (1..=1_000_000).contains(&n) => Some(n as u32),
            Some(n) => return Err(format!("line {at}: output_tokens {n} is out of range: expected 1 to 1000000")),
            None => None,
        };
        if parsed.prompt.is_empty() {
            return Err(format!("line {at}: empty prompt"));
        }
        let expect = Expect::new(parsed.expect.as_deref(), parsed.expect_regex.as_deref()).map_err(|e| format!("line {at}: expect: {e}"))?;
        out.push(DatasetEntry { expect, ..entry(parsed.prompt, output) });
    }
    Ok(out)
}

/// A JSON array of `{"conversations": [{"from": "human", "value": ...}, ...]}`; items without a
/// human turn are skipped.
pub fn parse_sharegpt(text: &str) -> Result<Vec<DatasetEntry>, String> {
    let items: Vec<ShareGptItem> = serde_json::from_str(text).map_err(|e| format!("not ShareGPT JSON: {e}"))?;
    Ok(items
        .into_iter()
        .filter_map(|item| {
            let first = item.conversations.into_iter().find(|t| t.from == "human" || t.from == "user")?;
            (!first.value.is_empty()).then(|| entry(first.value, None))
        })
        .collect())
}

fn entry(prompt: String, output_tokens: Option<u32>) -> DatasetEntry {
    let sha256 = sha256_hex(prompt.as_bytes());
    DatasetEntry { prompt, output_tokens, sha256, expect: None }
}
