//! The answer's text and tool calls, kept while the stream is read, for the behaviour checks
//! that read them. The family's own parser fills it as it decodes each frame (each frame is
//! parsed once); it exists only for probes whose checks read text, so other probes pay nothing.
//! Bounded: at most `MAX_TEXT` bytes of text and of each call's arguments, at most `MAX_CALLS`
//! calls; what is cut is counted and said in a failure.

use std::borrow::Cow;

use serde::Deserialize;

/// Bytes of answer text (and of one tool call's arguments) kept: far more than any short or
/// structured answer a check reads, and a bounded cost for an endless one.
pub const MAX_TEXT: usize = 64 * 1024;
/// Tool calls kept.
pub const MAX_CALLS: usize = 16;
/// Bytes of a tool call's name kept.
const MAX_NAME: usize = 256;

/// One tool call as assembled from its deltas.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCall {
    /// The server's id for the call (sent back with the tool's result), where it gave one.
    pub id: String,
    pub name: String,
    pub arguments: String,
    /// Bytes of arguments beyond `MAX_TEXT`, not kept.
    pub cut: usize,
}

/// What the answer said, so far (its content: reasoning is not part of the answer).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collected {
    pub text: String,
    /// Bytes of text beyond `MAX_TEXT`, not kept.
    pub cut: usize,
    pub tool_calls: Vec<ToolCall>,
}

impl Collected {
    pub fn new() -> Self {
        Collected::default()
    }

    /// Appends answer text.
    pub fn push_text(&mut self, t: &str) {
        let (kept, cut) = bounded(&self.text, t);
        self.text.push_str(kept);
        self.cut = self.cut.saturating_add(cut);
    }

    /// Adds to the call at `index` (a streamed delta names it), or to a new call after the
    /// others (`None`: a whole call, as a response `message` carries it).
    pub fn push_call(&mut self, index: Option<u64>, id: Option<&str>, name: Option<&str>, arguments: Option<&str>) {
        let i = match index {
            Some(i) => usize::try_from(i).unwrap_or(usize::MAX),
            None => self.tool_calls.len(),
        };
        if i >= MAX_CALLS {
            return;
        }
        if self.tool_calls.len() <= i {
            self.tool_calls.resize(i + 1, ToolCall::default());
        }
        let slot = &mut self.tool_calls[i];
        if let Some(id) = id.filter(|id| slot.id.is_empty() && id.len() <= MAX_NAME) {
            slot.id.push_str(id);
        }
        if let Some(n) = name {
            if slot.name.len() + n.len() <= MAX_NAME {
                slot.name.push_str(n);
            }
        }
        if let Some(a) = arguments {
            let (kept, cut) = bounded(&slot.arguments, a);
            slot.arguments.push_str(kept);
            slot.cut = slot.cut.saturating_add(cut);
        }
    }
}

/// The part of `add` that fits after `have` within `MAX_TEXT` (cut on a char boundary), and the
/// bytes left out.
fn bounded<'a>(have: &str, add: &'a str) -> (&'a str, usize) {
    let room = MAX_TEXT.saturating_sub(have.len());
    if add.len() <= room {
        return (add, 0);
    }
    let mut end = room;
    while !add.is_char_boundary(end) {
        end -= 1;
    }
    (&add[..end], add.len() - end)
}

/// A text field of a frame as the parsers read it: only its length (`StrLen`) on the usual
/// path, or its text (`Text`) when the answer is kept. The frame shapes are generic over it, so
/// a probe that keeps no answer decodes exactly as before, without a copy of any string.
pub(super) trait Piece {
    fn len(&self) -> usize;
    /// The text, where this reading keeps it.
    fn text(&self) -> Option<&str>;
}

/// The byte length of a JSON string, read without copying it (an escaped string is unescaped
/// into serde_json's scratch buffer, never into a new `String`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct StrLen(pub usize);

impl<'de> Deserialize<'de> for StrLen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = StrLen;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<StrLen, E> {
                Ok(StrLen(s.len()))
            }
        }
        d.deserialize_str(V)
    }
}

impl Piece for StrLen {
    fn len(&self) -> usize {
        self.0
    }
    fn text(&self) -> Option<&str> {
        None
    }
}

/// A JSON string's text: borrowed from the frame when it has no escapes, else unescaped into
/// its own `String` (only probes that keep their answer read frames this way).
#[derive(Debug, Clone, Default)]
pub(super) struct Text<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl Piece for Text<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn text(&self) -> Option<&str> {
        Some(&self.0)
    }
}

/// The length of an optional text field.
pub(super) fn len<P: Piece>(s: &Option<P>) -> usize {
    s.as_ref().map_or(0, Piece::len)
}

/// The text of an optional field, where the reading keeps it.
pub(super) fn text<P: Piece>(s: &Option<P>) -> Option<&str> {
    s.as_ref().and_then(Piece::text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_capped_on_a_char_boundary() {
        let mut c = Collected::new();
        let piece = "é".repeat(20_000);
        for _ in 0..3 {
            c.push_text(&piece);
        }
        assert!(c.text.len() <= MAX_TEXT && c.text.len() > MAX_TEXT - 2);
        assert_eq!(c.text.len() + c.cut, 120_000);
        // Far indices are not kept: bounded.
        c.push_call(Some(4_000_000_000), None, Some("x"), None);
        c.push_call(Some(u64::MAX), None, Some("x"), None);
        assert!(c.tool_calls.is_empty());
        c.push_call(None, Some("call_1"), Some("f"), Some("{}"));
        assert_eq!(c.tool_calls, vec![ToolCall { id: "call_1".into(), name: "f".into(), arguments: "{}".into(), cut: 0 }]);
    }

    #[test]
    fn text_borrows_unless_escaped() {
        let t: Text = serde_json::from_str(r#""plain""#).unwrap();
        assert!(matches!(t.0, Cow::Borrowed("plain")));
        let t: Text = serde_json::from_str(r#""a\nb""#).unwrap();
        assert_eq!(t.0, "a\nb");
        let l: StrLen = serde_json::from_str(r#""a\nb""#).unwrap();
        assert_eq!(l.0, 3);
    }
}
