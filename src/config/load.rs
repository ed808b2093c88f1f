//! Text -> `Config`: syntax first, then serde (`RawConfig`), then every check, with each issue
//! given its line.
//!
//! Every problem of every stage is reported in one run. Serde stops at its first problem (an
//! unknown key, a value of the wrong type, a missing field), so after one the offending key is
//! taken out of the document and serde runs again, up to `MAX_SERDE_ISSUES` times; once the
//! rest reads, it is validated too. Only a problem that cannot be cut out without shifting
//! what follows (a whole sequence item, the whole file) stops there, as does invalid YAML.
//! Lines come from one `locate::Index` per load, so the work grows with the file, not with
//! the number of issues.

use std::path::Path;

use serde::Deserialize;
use serde_norway::Value;

use super::bounds;
use super::check::{Checker, ConfigErrors, ConfigIssue, Resolvers};
use super::locate::{self, Index};
use super::model::Config;
use super::{raw, validate};

/// How many serde-stage problems are collected before giving up on the rest: each costs one
/// more parse of the file.
const MAX_SERDE_ISSUES: usize = 50;

/// Reads and validates a configuration file. A read failure is reported like any other
/// issue, with an empty path.
pub fn load(path: &Path, resolvers: Resolvers) -> Result<Config, ConfigErrors> {
    let file = path.display().to_string();
    let fail = |issue| ConfigErrors { file: file.clone(), issues: vec![issue] };
    // Never more than the limit and a byte is read: a huge file is refused by its size.
    let mut text = String::new();
    let read =
        std::fs::File::open(path).and_then(|f| std::io::Read::read_to_string(&mut std::io::Read::take(f, bounds::MAX_CONFIG_BYTES as u64 + 1), &mut text));
    match read {
        Ok(len) if len > bounds::MAX_CONFIG_BYTES => Err(fail(bounds::too_large(len))),
        Ok(_) => parse(&text, &file, resolvers),
        Err(e) => Err(fail(ConfigIssue { path: String::new(), line: None, message: format!("cannot read config file: {e}") })),
    }
}

/// Parses and validates configuration text. `file` is only used in messages.
pub fn parse(text: &str, file: &str, resolvers: Resolvers) -> Result<Config, ConfigErrors> {
    let fail = |issues| ConfigErrors { file: file.to_owned(), issues };
    // Size, nesting and aliases first: every parse below expands aliases again.
    if let Err(issue) = bounds::check(text) {
        return Err(fail(vec![issue]));
    }
    // The YAML library reports a syntax error only after handing out the events before it, so
    // a broken file could first show up as a confusing "missing field". Check syntax first.
    if let Err(e) = serde::de::IgnoredAny::deserialize(locate::yaml(text)) {
        return Err(fail(vec![locate::syntax_issue(&e)]));
    }
    let index = Index::build(text);
    // A key written twice: serde would name neither the key's path nor the repeat's line.
    if !index.duplicates.is_empty() {
        let issues = index
            .duplicates
            .iter()
            .map(|(path, line, first)| ConfigIssue { path: path.clone(), line: Some(*line), message: format!("duplicate key (first set at line {first})") })
            .collect();
        return Err(fail(issues));
    }
    let (raw, mut stage1, cut) = read_raw(text, &index);
    let Some(raw) = raw else {
        return Err(fail(in_file_order(stage1)));
    };
    let mut checker = Checker::new(resolvers);
    let base_dir = Path::new(file).parent().unwrap_or(Path::new(""));
    let mut config = validate::validate(&raw, base_dir, &mut checker);
    let with_lines = |issues: Vec<ConfigIssue>| {
        issues
            .into_iter()
            .filter(|i| !follows_from_cut(i, &cut))
            .map(|mut issue| {
                issue.line = index.line_of(&issue.path);
                issue
            })
            .collect::<Vec<_>>()
    };
    stage1.extend(with_lines(checker.errors));
    if !stage1.is_empty() {
        return Err(fail(in_file_order(stage1)));
    }
    config.warnings = in_file_order(with_lines(checker.warnings));
    Ok(config)
}

/// File order reads best; issues without a line keep their relative order at the end.
fn in_file_order(mut issues: Vec<ConfigIssue>) -> Vec<ConfigIssue> {
    issues.sort_by_key(|i| i.line.unwrap_or(usize::MAX));
    issues
}

/// Serde's view of the file: the `RawConfig` when what is left after cutting out each problem
/// reads, the problems, and the paths cut out.
fn read_raw(text: &str, index: &Index) -> (Option<raw::RawConfig>, Vec<ConfigIssue>, Vec<String>) {
    let mut issues = Vec::new();
    let mut cut: Vec<String> = Vec::new();
    let mut doc: Option<Value> = None;
    loop {
        let emitted;
        let source = match &doc {
            None => text,
            Some(value) => match serde_norway::to_string(value) {
                Ok(s) => {
                    emitted = s;
                    &emitted
                }
                Err(_) => return (None, issues, cut),
            },
        };
        let err = match serde_path_to_error::deserialize::<_, raw::RawConfig>(locate::yaml(source)) {
            Ok(raw) => return (Some(raw), issues, cut),
            Err(e) => locate::serde_issue(e),
        };
        let mut issue = err;
        if doc.is_some() {
            // Positions in the emitted text mean nothing in the file: take the path's line.
            issue.line = index.line_of(&issue.path);
        }
        let path = issue.path.clone();
        if !follows_from_cut(&issue, &cut) {
            issues.push(issue);
        }
        if issues.len() >= MAX_SERDE_ISSUES {
            return (None, issues, cut);
        }
        if doc.is_none() {
            match serde_norway::Value::deserialize(locate::yaml(text)) {
                Ok(v) => doc = Some(v),
                Err(_) => return (None, issues, cut),
            }
        }
        if !doc.as_mut().is_some_and(|d| remove(d, &path)) {
            return (None, issues, cut);
        }
        cut.push(path);
    }
}

/// Whether `issue` is only the echo of a key cut out earlier: an issue under that key, or a
/// "missing field" for it.
fn follows_from_cut(issue: &ConfigIssue, cut: &[String]) -> bool {
    cut.iter().any(|c| {
        let under = issue.path == *c || issue.path.strip_prefix(c.as_str()).is_some_and(|r| r.starts_with('.') || r.starts_with('['));
        let missing = issue.message.strip_prefix("missing field `").and_then(|r| r.split_once('`')).is_some_and(|(field, _)| {
            let full = if issue.path.is_empty() { field.to_owned() } else { format!("{}.{field}", issue.path) };
            full == *c
        });
        under || missing
    })
}

/// Removes the map entry at `path` (`targets[1].colour`). `false` when the path does not end
/// in a map key or does not lead anywhere: a sequence item cannot go without renumbering the
/// items after it.
fn remove(doc: &mut Value, path: &str) -> bool {
    let mut node = doc;
    let mut parts = path_parts(path);
    let Some(last) = parts.pop() else { return false };
    let Part::Key(last) = last else { return false };
    for part in parts {
        while let Value::Tagged(t) = node {
            node = &mut t.value;
        }
        let next = match (part, node) {
            (Part::Key(k), Value::Mapping(m)) => m.get_mut(k),
            (Part::Index(i), Value::Sequence(s)) => s.get_mut(i),
            _ => None,
        };
        match next {
            Some(n) => node = n,
            None => return false,
        }
    }
    while let Value::Tagged(t) = node {
        node = &mut t.value;
    }
    match node {
        Value::Mapping(m) => m.remove(last).is_some(),
        _ => false,
    }
}

enum Part<'a> {
    Key(&'a str),
    Index(usize),
}

/// `targets[1].timeouts.ttft` -> `targets`, 1, `timeouts`, `ttft`.
fn path_parts(path: &str) -> Vec<Part<'_>> {
    let mut out = Vec::new();
    for piece in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut rest) = piece.split_at(piece.find('[').unwrap_or(piece.len()));
        if !key.is_empty() {
            out.push(Part::Key(key));
        }
        while let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else { break };
            match r[..end].parse() {
                Ok(i) => out.push(Part::Index(i)),
                Err(_) => break,
            }
            rest = &r[end + 1..];
        }
    }
    out
}
