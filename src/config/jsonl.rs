//! The `jsonl:` section: each probe as one JSON line in a file, bounded by size.

use std::path::PathBuf;

use serde::Deserialize;

use super::check::Checker;

/// Default size at which the file rotates: 64 MiB.
const DEFAULT_JSONL_MAX_BYTES: u64 = 64 << 20;

/// Smallest `max_bytes`: a few lines.
const MIN_JSONL_MAX_BYTES: u64 = 4096;

/// `jsonl:` section. An empty section is the same as none: no file is written.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with path, max_bytes")]
pub struct RawJsonl {
    /// File each finished probe (and each release marker) is appended to as one JSON line,
    /// created if missing; relative to the working directory. Required when the section sets
    /// anything.
    pub path: Option<String>,
    /// Size in bytes (>= 4096) at which the file is renamed to `FILE.1`, replacing the older
    /// one, and a new file is started. Default 67108864 (64 MiB).
    pub max_bytes: Option<u64>,
}

/// Validated `jsonl:`.
#[derive(Debug, Clone, PartialEq)]
pub struct Jsonl {
    pub path: PathBuf,
    pub max_bytes: u64,
}

pub(super) fn jsonl(raw: &RawJsonl, c: &mut Checker) -> Option<Jsonl> {
    let max_bytes = raw.max_bytes.unwrap_or(DEFAULT_JSONL_MAX_BYTES);
    if max_bytes < MIN_JSONL_MAX_BYTES {
        c.error("jsonl.max_bytes", format!("must be at least {MIN_JSONL_MAX_BYTES}, got {max_bytes}"));
    }
    match raw.path.as_deref() {
        Some("") => {
            c.error("jsonl.path", "must not be empty");
            None
        }
        Some(path) => Some(Jsonl { path: PathBuf::from(path), max_bytes }),
        None if raw.max_bytes.is_some() => {
            c.error("jsonl.path", "required: the file to write the lines to");
            None
        }
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str =
        "targets:\n  - {name: a, base_url: \"http://127.0.0.1:8000\", api: openai-chat}\nscenarios:\n  - {name: s, input_tokens: 16, output_tokens: 4}\n";

    fn parse(text: &str) -> Result<crate::config::Config, String> {
        crate::app::loader::parse(text, "test.yaml").map_err(|e| e.to_string())
    }

    #[test]
    fn absent_or_empty_writes_nothing() {
        for text in [MINIMAL.to_owned(), format!("{MINIMAL}jsonl:\n"), format!("{MINIMAL}jsonl: {{}}\n")] {
            assert_eq!(parse(&text).unwrap().jsonl, None, "{text}");
        }
    }

    #[test]
    fn full_and_path_only() {
        let full = parse(&format!("{MINIMAL}jsonl: {{path: /var/log/probes.jsonl, max_bytes: 8192}}\n")).unwrap().jsonl;
        assert_eq!(full, Some(Jsonl { path: "/var/log/probes.jsonl".into(), max_bytes: 8192 }));
        let path_only = parse(&format!("{MINIMAL}jsonl: {{path: probes.jsonl}}\n")).unwrap().jsonl;
        assert_eq!(path_only, Some(Jsonl { path: "probes.jsonl".into(), max_bytes: DEFAULT_JSONL_MAX_BYTES }));
    }

    #[test]
    fn bad_values_name_the_field_and_the_line() {
        let e = parse(&format!("{MINIMAL}jsonl:\n  path: p.jsonl\n  max_bytes: 100\n")).unwrap_err();
        assert!(e.contains("jsonl.max_bytes: must be at least 4096, got 100 (test.yaml:7)"), "{e}");
        let e = parse(&format!("{MINIMAL}jsonl:\n  max_bytes: 8192\n")).unwrap_err();
        assert!(e.contains("jsonl.path: required"), "{e}");
        let e = parse(&format!("{MINIMAL}jsonl: {{path: \"\"}}\n")).unwrap_err();
        assert!(e.contains("jsonl.path: must not be empty"), "{e}");
        let e = parse(&format!("{MINIMAL}jsonl: {{path: p, prompt: yes}}\n")).unwrap_err();
        assert!(e.contains("unknown field `prompt`"), "{e}");
    }
}
