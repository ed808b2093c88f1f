//! Server text in logs and printed reports, made safe: a model id, an error message or a header
//! value comes from the server, and a newline in it would start a log line that the server
//! wrote (a forged `ERROR` line, a fake `probe ok`), an ESC would drive the reader's terminal.
//! Control characters are written escaped (`\n`, `\u{1b}`), everything else as it is.

use std::borrow::Cow;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;

/// Whether `c` must not reach a log line or terminal raw: C0/C1 controls and DEL (`\n`, `\r`,
/// ESC, ...), and the Unicode line and paragraph separators some viewers break lines at.
fn unsafe_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

/// `text` with its control characters escaped as Rust writes them (`\n`, `\r`, `\t`,
/// `\u{1b}`); borrowed when there are none.
pub fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The log lines' field formatter: as tracing's default one (`message` bare, then `name=value`
/// separated by spaces), with every value escaped by [`escape_control`]. Covers every log
/// macro at once: a `%` field and the message are otherwise written raw.
pub struct EscapedFields;

impl<'w> FormatFields<'w> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> std::fmt::Result {
        let mut visitor = Escaping { writer, first: true, result: Ok(()) };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct Escaping<'w> {
    writer: Writer<'w>,
    first: bool,
    result: std::fmt::Result,
}

impl Visit for Escaping<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        let text = format!("{value:?}");
        let gap = if self.first { "" } else { " " };
        self.first = false;
        self.result = match field.name() {
            "message" => write!(self.writer, "{gap}{}", escape_control(&text)),
            name => write!(self.writer, "{gap}{name}={}", escape_control(&text)),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(escape_control("plain: ünïcode \"q\" \\"), "plain: ünïcode \"q\" \\");
        assert_eq!(escape_control("a\nb\r\u{1b}[31m\u{0}\u{9b}\u{2028}"), "a\\nb\\r\\u{1b}[31m\\0\\u{9b}\\u{2028}");
    }
}
