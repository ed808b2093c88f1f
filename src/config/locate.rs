//! Line numbers for issues: from serde errors (stage 1) and from paths (stage 2).
//!
//! The YAML parser does not expose positions of parsed values, only of errors. So to find the
//! line of `targets[1].timeouts.ttft` the text is walked once more with a seed that skips
//! everything off the path and fails on purpose at the wanted node; the parser stamps that
//! failure with the node's position. A path that does not exist in the file (a defaulted
//! field) falls back to its nearest ancestor that does. Files are small and issues few, so a
//! re-parse per issue costs nothing that matters, and needs no second YAML library.

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

/// One step of a path: a map key or a sequence index.
#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// Splits `targets[1].timeouts.ttft` into segments. Keys containing `.` or `[` cannot be
/// expressed; such a path simply resolves to an ancestor's line.
fn segments(path: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut indexes) = match part.find('[') {
            Some(i) => part.split_at(i),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Seg::Key(key.to_owned()));
        }
        while let Some(rest) = indexes.strip_prefix('[') {
            let Some(end) = rest.find(']') else { break };
            if let Ok(i) = rest[..end].parse() {
                out.push(Seg::Index(i));
            }
            indexes = &rest[end + 1..];
        }
    }
    out
}

/// The 1-based line of the node at `path` in `text`, or of its nearest existing ancestor.
/// For a map key the line is the key's (where `timeouts:` is written, not its first child).
pub fn line_of(text: &str, path: &str) -> Option<usize> {
    let segs = segments(path);
    (1..=segs.len()).rev().find_map(|n| probe(text, &segs[..n]))
}

/// The marker error raised at the wanted node; any other error means the walk itself failed.
const FOUND: &str = "\u{0}llmprobe-locate";

fn probe(text: &str, segs: &[Seg]) -> Option<usize> {
    let de = serde_norway::Deserializer::from_str(text);
    match (Walk { segs }).deserialize(de) {
        Err(e) if e.to_string().contains(FOUND) => e.location().map(|l| l.line()),
        _ => None,
    }
}

/// Follows `segs` through the document; fails with `FOUND` at the last segment.
struct Walk<'a> {
    segs: &'a [Seg],
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
        let Some((Seg::Key(want), rest)) = self.segs.split_first() else {
            return drain_map(map);
        };
        // Fail while reading the key itself when it is the last segment: its position is
        // where the user wrote `name:`.
        while let Some(hit) = map.next_key_seed(Key { want, last: rest.is_empty() })? {
            if hit {
                map.next_value_seed(Walk { segs: rest })?;
                return drain_map(map);
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Seg::Index(want), rest)) = self.segs.split_first() else {
            return drain_seq(seq);
        };
        for _ in 0..*want {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        if rest.is_empty() {
            seq.next_element_seed(Here)?;
        } else {
            seq.next_element_seed(Walk { segs: rest })?;
        }
        drain_seq(seq)
    }

    // Scalars: the path goes deeper than the document; not found.
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

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Reads a map key; `true` when it is the wanted one. Fails with `FOUND` on the wanted key
/// when it ends the path.
struct Key<'a> {
    want: &'a str,
    last: bool,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = bool;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map key")
    }

    // The error must be raised inside the parser's call so that it gets the key's position.
    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        let hit = key == self.want;
        if hit && self.last { Err(E::custom(FOUND)) } else { Ok(hit) }
    }

    // Non-string keys never match a path segment.
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        drain_map(map).map(|()| false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        drain_seq(seq).map(|()| false)
    }
}

/// Fails with `FOUND` on whatever node comes next (a sequence element).
struct Here;

impl<'de> DeserializeSeed<'de> for Here {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(HereVisitor)
    }
}

struct HereVisitor;

impl<'de> Visitor<'de> for HereVisitor {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML node")
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(FOUND))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(FOUND))
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
    fn splits_paths() {
        assert_eq!(
            segments("targets[1].timeouts.ttft"),
            vec![Seg::Key("targets".into()), Seg::Index(1), Seg::Key("timeouts".into()), Seg::Key("ttft".into()),],
        );
    }

    #[test]
    fn strips_parser_positions() {
        assert_eq!(strip_positions("did not find key at line 3 column 5, while parsing at line 1 column 1"), "did not find key, while parsing",);
        assert_eq!(strip_positions("look at this"), "look at this");
    }
}
