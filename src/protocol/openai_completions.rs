//! OpenAI `/v1/completions` streaming: `choices[].text` carries the generated text.

use serde::Deserialize;
use serde_json::json;

use super::openai::{WireUsage, finish_body, parse_body, parse_frame, parse_json};
use super::{Framing, Protocol, ProtocolError, ProtocolKind, RequestSpec, StreamEvent, StreamState};
use crate::config::Target;

pub struct OpenAiCompletions;

#[derive(Deserialize)]
struct Chunk {
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    text: Option<String>,
    finish_reason: Option<String>,
}

impl Protocol for OpenAiCompletions {
    fn kind(&self) -> ProtocolKind {
        ProtocolKind::OpenaiCompletions
    }
    fn framing(&self) -> Framing {
        Framing::Sse
    }
    fn path(&self, _stream: bool) -> &'static str {
        "/v1/completions"
    }
    fn end_needs_finish_reason(&self) -> bool {
        true
    }

    fn body(&self, target: &Target, req: &RequestSpec) -> serde_json::Value {
        let mut body = json!({
            "prompt": req.prompt,
        });
        finish_body(&mut body, target, req);
        body
    }

    fn parse(&self, frame: &[u8], state: &mut StreamState) -> Result<StreamEvent, ProtocolError> {
        parse_frame(frame, state, read_chunk)
    }

    fn parse_whole(&self, body: &[u8]) -> Result<StreamEvent, ProtocolError> {
        parse_body(body, read_chunk)
    }
}

fn read_chunk(frame: &[u8]) -> Result<StreamEvent, ProtocolError> {
    let chunk: Chunk = parse_json(frame)?;
    let mut ev = StreamEvent { model: chunk.model, usage: chunk.usage.map(Into::into), ..Default::default() };
    for choice in chunk.choices {
        ev.content_bytes += choice.text.as_deref().map_or(0, str::len);
        if choice.finish_reason.is_some() {
            ev.finish_reason = choice.finish_reason;
        }
    }
    Ok(ev)
}
