//! Line numbers for issues: from serde errors (stage 1) and from paths (stage 2).
//!
//! The YAML parser does not expose positions of parsed values, only of errors. So the text is
//! walked once more, whatever the number of issues, with a visitor that fails on purpose at
//! every key (and every scalar sequence item) and catches its own failure: the parser stamps
//! it with the node's position, and as the scalar is already consumed the walk goes on. That
//! gives one path -> line `Index` per load. A path that does not exist in the file (a defaulted
//! field) falls back to its nearest ancestor that does. The same walk finds keys written twice
//! in one mapping, which serde would report without a path.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::check::ConfigIssue;

/// Converts a stage-1 (serde) error into an issue with the path and line it happened at.
pub fn serde_issue(err: serde_path_to_error::Error<serde_norway::Error>) -> ConfigIssue {
    let path = match err.path().to_string() {
        p if p == "." => String::new(),
        p => p,
    };
    let inner = err.into_inner();
    let line = inner.location().map(|l| l.line());
    let message = strip_positions(&inner.to_string());
    // The YAML library prefixes its own view of the path; ours is in `path` already.
    let message = match message.split_once(": ") {
        Some((prefix, rest)) if !path.is_empty() && path.starts_with(prefix) => rest.to_owned(),
        _ => message,
    };
    ConfigIssue { path, line, message }
}

/// Converts a YAML syntax error (found before any value is read) into an issue for the file.
pub fn syntax_issue(err: &serde_norway::Error) -> ConfigIssue {
    ConfigIssue { path: String::new(), line: err.location().map(|l| l.line()), message: format!("invalid YAML: {}", strip_positions(&err.to_string())) }
}

/// Removes every " at line N column M" (and "at position N") from a parser message: the line
/// is reported separately, in the `(file:line)` suffix.
fn strip_positions(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(" at line ").or_else(|| rest.find(" at position ")) {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 4..]; // after " at "
        let skip = position_len(tail);
        if skip == 0 {
            out.push_str(" at ");
            rest = tail;
        } else {
            rest = &tail[skip..];
        }
    }
    out.push_str(rest);
    out
}

/// Length of a leading "line N column M" or "position N", 0 when `s` starts with neither.
fn position_len(s: &str) -> usize {
    fn number(s: &str) -> usize {
        s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len())
    }
    if let Some(r) = s.strip_prefix("line ") {
        let n = number(r);
        if let Some(r2) = r[n..].strip_prefix(" column ") {
            let m = number(r2);
            if n > 0 && m > 0 {
                return "line ".len() + n + " column ".len() + m;
            }
        }
    } else if let Some(r) = s.strip_prefix("position ") {
        let n = number(r);
        if n > 0 {
            return "position ".len() + n;
        }
    }
    0
}

/// Every YAML parse of a config's text made by this thread (syntax check, index, serde). Tests
/// read it to check that the work per load does not grow with the number of issues.
#[cfg(test)]
pub fn parses_on_this_thread() -> usize {
    PARSES.with(Cell::get)
}

thread_local! {
    static PARSES: Cell<usize> = const { Cell::new(0) };
}

/// A YAML deserializer over `text`, counted in `parses_on_this_thread`.
pub fn yaml(text: &str) -> serde_norway::Deserializer<'_> {
    PARSES.with(|n| n.set(n.get() + 1));
    serde_norway::Deserializer::from_str(text)
}

/// The line of every key and sequence item of one document, found in a single walk, and the
/// keys written twice in one mapping.
#[derive(Debug, Default)]
pub struct Index {
    lines: HashMap<String, usize>,
    /// `(path, line of the repeat, line of the first)` for each key repeated in its mapping.
    pub duplicates: Vec<(String, usize, usize)>,
}

impl Index {
    /// Walks `text` once. A text that does not parse gives an empty index (every issue then
    /// goes without a line); syntax is checked before this is called.
    pub fn build(text: &str) -> Index {
        let mut index = Index::default();
        let _ = (Walk { index: &mut index, path: String::new() }).deserialize(yaml(text));
        index
    }

    /// The 1-based line of the node at `path`, or of its nearest ancestor written in the file.
    /// For a map key the line is the key's (where `timeouts:` is written, not its first child).
    pub fn line_of(&self, path: &str) -> Option<usize> {
        let mut p = path;
        loop {
            if let Some(&line) = self.lines.get(p) {
                return Some(line);
            }
            p = parent(p)?;
        }
    }

    /// Records `path` at `line`, and every ancestor not yet placed (sequence items take the
    /// line of their first key or item).
    fn record(&mut self, path: &str, line: usize) {
        let mut p = path;
        while !p.is_empty() && !self.lines.contains_key(p) {
            self.lines.insert(p.to_owned(), line);
            match parent(p) {
                Some(up) => p = up,
                None => break,
            }
        }
    }
}

/// `targets[1].timeouts` -> `targets[1]` -> `targets` -> `None`.
fn parent(path: &str) -> Option<&str> {
    let cut = if path.ends_with(']') { path.rfind('[') } else { path.rfind('.') };
    cut.map(|i| &path[..i]).filter(|p| !p.is_empty())
}

/// The marker error raised at a scalar whose line is wanted; the parser stamps it with the
/// scalar's position, and since the scalar is already consumed the walk goes on after it.
const FOUND: &str = "\u{0}llmprobe-locate";

/// The line of a `FOUND` error, `None` for any other error. The parser leaves the position out
/// of its message at line 1 column 1.
fn found_line(err: &impl fmt::Display) -> Option<usize> {
    let text = err.to_string();
    if !text.contains(FOUND) {
        return None;
    }
    let line = text.rfind(" at line ").and_then(|at| {
        let rest = &text[at + " at line ".len()..];
        rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len())].parse().ok()
    });
    Some(line.unwrap_or(1))
}

fn child_key(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

/// Walks the node at `path`, recording the lines under it.
struct Walk<'a> {
    index: &'a mut Index,
    path: String,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen: HashMap<String, usize> = HashMap::new();
        loop {
            let mut key = None;
            match map.next_key_seed(Key { key: &mut key }) {
                Ok(None) => return Ok(()),
                // A key that is not a string: no path names it.
                Ok(Some(())) => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                Err(e) => match (found_line(&e), key) {
                    (Some(line), Some(key)) => {
                        let path = child_key(&self.path, &key);
                        if let Some(&first) = seen.get(&key) {
                            self.index.duplicates.push((path.clone(), line, first));
                        } else {
                            seen.insert(key, line);
                            self.index.record(&path, line);
                        }
                        map.next_value_seed(Walk { index: &mut *self.index, path })?;
                    }
                    _ => return Err(e),
                },
            }
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        for i in 0.. {
            let path = format!("{}[{i}]", self.path);
            match seq.next_element_seed(Item { index: &mut *self.index, path: path.clone() }) {
                Ok(None) => break,
                Ok(Some(())) => {}
                Err(e) => match found_line(&e) {
                    Some(line) => self.index.record(&path, line),
                    None => return Err(e),
                },
            }
        }
        Ok(())
    }

    // Scalars hold no keys.
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A sequence item: a scalar item fails with `FOUND` to give its line; a mapping or sequence
/// is walked, and takes the line of its first key or item.
struct Item<'a> {
    index: &'a mut Index,
    path: String,
}

impl<'de> DeserializeSeed<'de> for Item<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Item<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML node")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        Walk { index: self.index, path: self.path }.visit_map(map)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        Walk { index: self.index, path: self.path }.visit_seq(seq)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(E::custom(FOUND))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(E::custom(FOUND))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(E::custom(FOUND))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(E::custom(FOUND))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(E::custom(FOUND))
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(E::custom(FOUND))
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Err(E::custom(FOUND))
    }
}

/// Reads a map key. A string key is stored and fails with `FOUND` (the error must be raised
/// inside the parser's call so that it gets the key's position); other keys pass.
struct Key<'a> {
    key: &'a mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<(), E> {
        *self.key = Some(key.to_owned());
        Err(E::custom(FOUND))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
listen: 127.0.0.1:9464
targets:
  - name: a
    base_url: http://x
  - name: b
    timeouts:
      ttft: 40s
scenarios: [{name: s, input_tokens: 1}]
";

    fn line_of(text: &str, path: &str) -> Option<usize> {
        Index::build(text).line_of(path)
    }

    #[test]
    fn finds_keys_values_and_items() {
        assert_eq!(line_of(DOC, "listen"), Some(1));
        assert_eq!(line_of(DOC, "targets"), Some(2));
        assert_eq!(line_of(DOC, "targets[0]"), Some(3));
        assert_eq!(line_of(DOC, "targets[1].name"), Some(5));
        assert_eq!(line_of(DOC, "targets[1].timeouts"), Some(6));
        assert_eq!(line_of(DOC, "targets[1].timeouts.ttft"), Some(7));
        assert_eq!(line_of(DOC, "scenarios[0].input_tokens"), Some(8));
    }

    #[test]
    fn missing_paths_fall_back_to_the_nearest_ancestor() {
        assert_eq!(line_of(DOC, "targets[1].timeouts.total"), Some(6));
        assert_eq!(line_of(DOC, "targets[0].timeouts.total"), Some(3));
        assert_eq!(line_of(DOC, "targets[7].name"), Some(2));
        assert_eq!(line_of(DOC, "slo.objective"), None);
        assert_eq!(line_of(DOC, ""), None);
    }

    #[test]
    fn scalar_items_nested_sequences_and_flow_maps() {
        let doc = "a:\n  - x\n  -\n    - 1\n    - 2\n  - {k: v,\n     j: w}\nb: [1, 2]\n";
        let index = Index::build(doc);
        assert_eq!(index.line_of("a[0]"), Some(2));
        assert_eq!(index.line_of("a[1]"), Some(4));
        assert_eq!(index.line_of("a[1][1]"), Some(5));
        assert_eq!(index.line_of("a[2].j"), Some(7));
        assert_eq!(index.line_of("b[1]"), Some(8));
        assert!(index.duplicates.is_empty());
    }

    #[test]
    fn repeated_keys_are_found_with_both_lines() {
        let doc = "# c\nlisten: x\ntargets: []\nprobe:\n  rate: 1\n  rate: 2\ntargets: []\n";
        let index = Index::build(doc);
        assert_eq!(index.duplicates, vec![("probe.rate".to_owned(), 6, 5), ("targets".to_owned(), 7, 3)]);
        assert_eq!(index.line_of("targets"), Some(3));
    }

    #[test]
    fn one_parse_per_index() {
        let before = parses_on_this_thread();
        let index = Index::build(DOC);
        assert_eq!(parses_on_this_thread(), before + 1);
        assert_eq!(index.line_of("targets[1].timeouts.ttft"), Some(7));
    }

    #[test]
    fn strips_parser_positions() {
        assert_eq!(strip_positions("did not find key at line 3 column 5, while parsing at line 1 column 1"), "did not find key, while parsing",);
        assert_eq!(strip_positions("look at this"), "look at this");
    }
}
