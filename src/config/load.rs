//! Text -> `Config`: syntax first, then serde (`RawConfig`), then every check, with each issue
//! given its line.

use std::path::Path;

use serde::Deserialize;

use super::check::{Checker, ConfigErrors, ConfigIssue, Resolvers};
use super::model::Config;
use super::{locate, raw, validate};

/// Reads and validates a configuration file. A read failure is reported like any other
/// issue, with an empty path.
pub fn load(path: &Path, resolvers: Resolvers) -> Result<Config, ConfigErrors> {
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text, &file, resolvers),
        Err(e) => Err(ConfigErrors { file, issues: vec![ConfigIssue { path: String::new(), line: None, message: format!("cannot read config file: {e}") }] }),
    }
}

/// Parses and validates configuration text. `file` is only used in messages.
pub fn parse(text: &str, file: &str, resolvers: Resolvers) -> Result<Config, ConfigErrors> {
    let fail = |issues| ConfigErrors { file: file.to_owned(), issues };
    // The YAML library reports a syntax error only after handing out the events before it, so
    // a broken file could first show up as a confusing "missing field". Check syntax first.
    if let Err(e) = serde::de::IgnoredAny::deserialize(serde_norway::Deserializer::from_str(text)) {
        return Err(fail(vec![locate::syntax_issue(&e)]));
    }
    let de = serde_norway::Deserializer::from_str(text);
    let raw: raw::RawConfig = serde_path_to_error::deserialize(de).map_err(|e| fail(vec![locate::serde_issue(e)]))?;
    let mut checker = Checker::new(resolvers);
    let base_dir = Path::new(file).parent().unwrap_or(Path::new(""));
    let mut config = validate::validate(&raw, base_dir, &mut checker);
    let with_lines = |mut issues: Vec<ConfigIssue>| {
        for issue in &mut issues {
            issue.line = locate::line_of(text, &issue.path);
        }
        // File order reads best; issues without a line keep their relative order at the end.
        issues.sort_by_key(|i| i.line.unwrap_or(usize::MAX));
        issues
    };
    if !checker.errors.is_empty() {
        return Err(fail(with_lines(checker.errors)));
    }
    config.warnings = with_lines(checker.warnings);
    Ok(config)
}
