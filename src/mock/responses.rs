//! The Responses API's events (`POST /v1/responses`), as vLLM 0.32 writes them: `event: <type>`
//! and `data: {..., "sequence_number": n, "type": <type>}`; `response.created` and
//! `response.in_progress`, then per output item `response.output_item.added` (and
//! `response.content_part.added`), its deltas (`response.reasoning_text.delta`,
//! `response.output_text.delta`, `response.function_call_arguments.delta`) and its done events,
//! and last `response.completed` with the usage (`status: "incomplete"`,
//! `incomplete_details.reason: "max_output_tokens"` when the length limit ended it). No
//! `[DONE]`. `error_in_stream` is `response.failed`; `no_done` leaves `response.completed` out.

use serde_json::Value;

use super::app::App;
use super::engine::Finish;
use super::wire::{End, Render, Tok, js};

/// Which output item is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    None,
    Reasoning,
    Message,
    Call,
}

pub struct Responses {
    id: String,
    created: u64,
    model: String,
    max_output_tokens: u32,
    /// Tokens up to this count are reasoning (`reasoning_text`), the rest the answer.
    reasoning_tokens: u32,
    /// The function a planned tool call calls: the answer's tokens are its arguments.
    pub tool: Option<String>,
    /// A planned answer ends by EOS: `completed`, even when the engine stopped it at the limit.
    pub ends_by_eos: bool,
    /// `finish_error`: the final response says `status: "failed"`.
    pub finish_error: bool,
    seq: u64,
    open: Item,
    output_index: u32,
    reasoning: String,
    answer: String,
    /// Output items already closed, as they appear in the final response's `output`.
    items: Vec<String>,
    /// `response.completed`, written by `end` and sent as the terminator.
    completed: Option<String>,
}

impl Responses {
    pub fn new(app: &App, id: u64, max_output_tokens: u32, reasoning_tokens: u32) -> Responses {
        Responses {
            id: format!("resp_{:016x}", super::tokenizer::mix(app.opts.seed ^ id ^ 0x5e5)),
            created: crate::util::clock::unix_now() as u64,
            model: js(&app.opts.model),
            max_output_tokens,
            reasoning_tokens,
            tool: None,
            ends_by_eos: false,
            finish_error: false,
            seq: 0,
            open: Item::None,
            output_index: 0,
            reasoning: String::new(),
            answer: String::new(),
            items: Vec::new(),
            completed: None,
        }
    }

    /// One SSE event: `fields` are the data's members before `sequence_number` (the SDK's types
    /// are written in field-name order), `text` a `text` member after it.
    fn event(&mut self, out: &mut String, kind: &str, fields: &str) {
        self.event_with_text(out, kind, fields, None);
    }

    fn event_with_text(&mut self, out: &mut String, kind: &str, fields: &str, text: Option<&str>) {
        out.push_str("event: ");
        out.push_str(kind);
        out.push_str("\ndata: {");
        out.push_str(fields);
        if !fields.is_empty() {
            out.push(',');
        }
        out.push_str(&format!("\"sequence_number\":{},", self.seq));
        if let Some(t) = text {
            out.push_str("\"text\":");
            out.push_str(t);
            out.push(',');
        }
        out.push_str(&format!("\"type\":\"{kind}\"}}\n\n"));
        self.seq += 1;
    }

    fn item_id(&self) -> String {
        format!("{}_{}", self.id.replace("resp_", "item_"), self.output_index)
    }

    /// The whole response object.
    fn response(&self, status: &str, incomplete: Option<&str>, output: &str, usage: &str) -> String {
        let incomplete = incomplete.map_or_else(|| "null".to_owned(), |r| format!(r#"{{"reason":"{r}"}}"#));
        format!(
            r#"{{"id":"{}","created_at":{},"incomplete_details":{incomplete},"instructions":null,"metadata":null,"model":{},"object":"response","output":[{output}],"parallel_tool_calls":true,"temperature":1.0,"tool_choice":"none","tools":[],"top_p":1.0,"background":false,"max_output_tokens":{},"max_tool_calls":null,"previous_response_id":null,"prompt":null,"reasoning":null,"service_tier":"auto","status":"{status}","text":null,"top_logprobs":null,"truncation":"disabled","usage":{usage},"user":null,"presence_penalty":0.0,"frequency_penalty":0.0,"kv_transfer_params":null,"ec_transfer_params":null,"input_messages":null,"output_messages":null}}"#,
            self.id, self.created, self.model, self.max_output_tokens
        )
    }

    fn reasoning_item(&self, status: &str) -> String {
        format!(
            r#"{{"id":"{}","summary":[],"type":"reasoning","content":[{{"text":{},"type":"reasoning_text"}}],"encrypted_content":null,"status":"{status}"}}"#,
            self.item_id(),
            js(&self.reasoning)
        )
    }

    fn message_item(&self, status: &str) -> String {
        format!(
            r#"{{"id":"{}","content":[{{"annotations":[],"text":{},"type":"output_text","logprobs":null}}],"role":"assistant","status":"{status}","type":"message","phase":null}}"#,
            self.item_id(),
            js(&self.answer)
        )
    }

    fn call_item(&self, name: &str, arguments: &str, status: &str) -> String {
        format!(
            r#"{{"arguments":{},"call_id":"{}","name":{},"type":"function_call","id":"{}","status":"{status}"}}"#,
            js(arguments),
            // Unique per response, as the real ones are, so an agent loop's calls tell apart.
            self.item_id().replacen("item_", "call_", 1),
            js(name),
            self.item_id()
        )
    }

    /// Opens an output item (closing the open one).
    fn open_item(&mut self, out: &mut String, item: Item) {
        if self.open == item {
            return;
        }
        self.close_item(out);
        self.open = item;
        let index = self.output_index;
        let id = self.item_id();
        match item {
            Item::Reasoning => {
                let added = format!(
                    r#""item":{{"id":"{id}","summary":[],"type":"reasoning","content":null,"encrypted_content":null,"status":"in_progress"}},"output_index":{index}"#
                );
                self.event(out, "response.output_item.added", &added);
                let part = format!(r#""content_index":0,"item_id":"{id}","output_index":{index},"part":{{"text":"","type":"reasoning_text"}}"#);
                self.event(out, "response.content_part.added", &part);
            }
            Item::Message => {
                let added = format!(
                    r#""item":{{"id":"{id}","content":[],"role":"assistant","status":"in_progress","type":"message","phase":null}},"output_index":{index}"#
                );
                self.event(out, "response.output_item.added", &added);
                let part = format!(
                    r#""content_index":0,"item_id":"{id}","output_index":{index},"part":{{"annotations":[],"text":"","type":"output_text","logprobs":[]}}"#
                );
                self.event(out, "response.content_part.added", &part);
            }
            Item::Call => {
                let name = self.tool.clone().unwrap_or_default();
                let added = format!(r#""item":{},"output_index":{index}"#, self.call_item(&name, "", "in_progress"));
                self.event(out, "response.output_item.added", &added);
            }
            Item::None => {}
        }
    }

    /// The done events of the open item; it joins the final output.
    fn close_item(&mut self, out: &mut String) {
        let index = self.output_index;
        let id = self.item_id();
        let done = match self.open {
            Item::None => return,
            Item::Reasoning => {
                let text = js(&self.reasoning);
                self.event_with_text(
                    out,
                    "response.reasoning_text.done",
                    &format!(r#""content_index":0,"item_id":"{id}","output_index":{index}"#),
                    Some(&text),
                );
                self.event(
                    out,
                    "response.content_part.done",
                    &format!(r#""content_index":0,"item_id":"{id}","output_index":{index},"part":{{"text":{text},"type":"reasoning_text"}}"#),
                );
                self.reasoning_item("completed")
            }
            Item::Message => {
                let text = js(&self.answer);
                self.event_with_text(
                    out,
                    "response.output_text.done",
                    &format!(r#""content_index":0,"item_id":"{id}","logprobs":[],"output_index":{index}"#),
                    Some(&text),
                );
                let part = format!(
                    r#""content_index":0,"item_id":"{id}","output_index":{index},"part":{{"annotations":[],"text":{text},"type":"output_text","logprobs":null}}"#
                );
                self.event(out, "response.content_part.done", &part);
                self.message_item("completed")
            }
            Item::Call => {
                let name = self.tool.clone().unwrap_or_default();
                let args = format!(r#""arguments":{},"item_id":"{id}","name":{},"output_index":{index}"#, js(&self.answer), js(&name));
                self.event(out, "response.function_call_arguments.done", &args);
                self.call_item(&name, &self.answer, "completed")
            }
        };
        self.event(out, "response.output_item.done", &format!(r#""item":{done},"output_index":{index}"#));
        self.items.push(done);
        self.open = Item::None;
        self.output_index += 1;
    }

    /// Status and incomplete reason of the end.
    fn status(&self, finish: Option<Finish>) -> (&'static str, Option<&'static str>) {
        match finish {
            _ if self.finish_error => ("failed", None),
            Some(Finish::Length) if !self.ends_by_eos => ("incomplete", Some("max_output_tokens")),
            _ => ("completed", None),
        }
    }

    /// Usage as vLLM reports it on the Responses API (cached tokens always).
    fn usage(&self, e: &End) -> String {
        let reasoning = self.reasoning_tokens.min(e.completion_tokens);
        format!(
            r#"{{"input_tokens":{},"input_tokens_details":{{"cached_tokens":{},"cache_write_tokens":0,"input_tokens_per_turn":[],"cached_tokens_per_turn":[]}},"output_tokens":{},"output_tokens_details":{{"reasoning_tokens":{reasoning},"tool_output_tokens":0,"output_tokens_per_turn":[],"tool_output_tokens_per_turn":[]}},"total_tokens":{}}}"#,
            e.prompt_tokens,
            e.cached_tokens,
            e.completion_tokens,
            e.prompt_tokens + e.completion_tokens
        )
    }

    /// A whole (non-streamed) response.
    pub fn whole(mut self, e: &End) -> String {
        let mut scratch = String::new();
        self.reasoning.clone_from(&e.reasoning);
        if !self.reasoning.is_empty() {
            self.open_item(&mut scratch, Item::Reasoning);
        }
        self.answer.clone_from(&e.text);
        if !self.answer.is_empty() {
            self.open_item(&mut scratch, if self.tool.is_some() { Item::Call } else { Item::Message });
        }
        self.close_item(&mut scratch);
        let (status, incomplete) = self.status(e.finish);
        self.response(status, incomplete, &self.items.join(","), &self.usage(e))
    }
}

impl Render for Responses {
    fn content_type(&self) -> &'static str {
        "text/event-stream; charset=utf-8"
    }

    fn start(&mut self) -> Option<String> {
        let mut out = String::new();
        let head = format!(r#""response":{}"#, self.response("in_progress", None, "", "null"));
        self.event(&mut out, "response.created", &head);
        self.event(&mut out, "response.in_progress", &head);
        Some(out)
    }

    fn token(&mut self, t: &Tok<'_>) -> String {
        let mut out = String::new();
        let (item, kind) = if t.completion_tokens <= self.reasoning_tokens {
            self.reasoning.push_str(t.text);
            (Item::Reasoning, "response.reasoning_text.delta")
        } else if self.tool.is_some() {
            self.answer.push_str(t.text);
            (Item::Call, "response.function_call_arguments.delta")
        } else {
            self.answer.push_str(t.text);
            (Item::Message, "response.output_text.delta")
        };
        self.open_item(&mut out, item);
        let (id, index, delta) = (self.item_id(), self.output_index, js(t.text));
        let fields = match item {
            Item::Call => format!(r#""delta":{delta},"item_id":"{id}","output_index":{index}"#),
            Item::Message => format!(r#""content_index":0,"delta":{delta},"item_id":"{id}","logprobs":[],"output_index":{index}"#),
            _ => format!(r#""content_index":0,"delta":{delta},"item_id":"{id}","output_index":{index}"#),
        };
        self.event(&mut out, kind, &fields);
        out
    }

    fn end(&mut self, e: &End) -> Vec<String> {
        let mut out = String::new();
        self.close_item(&mut out);
        let (status, incomplete) = self.status(e.finish);
        let response = self.response(status, incomplete, &self.items.join(","), &self.usage(e));
        let mut completed = String::new();
        self.event(&mut completed, "response.completed", &format!(r#""response":{response}"#));
        self.completed = Some(completed);
        if out.is_empty() { Vec::new() } else { vec![out] }
    }

    /// The terminal `response.completed`; nothing when the stream ended before its end (a cut).
    fn done(&self) -> Option<String> {
        self.completed.clone()
    }

    fn error(&mut self, msg: &str) -> String {
        let mut out = String::new();
        let failed = self.response("failed", None, "", "null").replacen(
            r#""status":"failed""#,
            &format!(r#""status":"failed","error":{{"code":"server_error","message":{}}}"#, js(msg)),
            1,
        );
        self.event(&mut out, "response.failed", &format!(r#""response":{failed}"#));
        out
    }
}

/// A Responses request in the chat shape the behaviour plans read: `input` as `messages`,
/// `reasoning.effort` as `reasoning_effort`, `text.format` as `response_format`, flat function
/// tools nested under `function`.
pub fn as_chat(body: &Value) -> Value {
    let mut chat = body.clone();
    let messages = match body.get("input") {
        Some(Value::String(s)) => serde_json::json!([{"role": "user", "content": s}]),
        Some(Value::Array(items)) => Value::Array(items.clone()),
        _ => serde_json::json!([]),
    };
    chat["messages"] = messages;
    if let Some(effort) = body.pointer("/reasoning/effort") {
        chat["reasoning_effort"] = effort.clone();
    }
    if let Some(format) = body.pointer("/text/format").filter(|f| f.get("type").and_then(Value::as_str) == Some("json_schema")) {
        let schema = serde_json::json!({"name": format.get("name"), "schema": format.get("schema"), "strict": format.get("strict")});
        chat["response_format"] = serde_json::json!({"type": "json_schema", "json_schema": schema});
    }
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        let nested: Vec<Value> = tools.iter().map(|t| serde_json::json!({"type": "function", "function": t})).collect();
        chat["tools"] = Value::Array(nested);
    }
    if let Some(name) = body.pointer("/tool_choice/name") {
        chat["tool_choice"] = serde_json::json!({"type": "function", "function": {"name": name}});
    }
    chat
}
