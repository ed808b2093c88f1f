//! Non-OpenAI front-ends over the same engine: Ollama (`/api/generate`, `/api/chat`, NDJSON),
//! llama.cpp native (`/completion`, SSE with `timings`), TGI (`/generate_stream`, `data:`
//! without a space) and SGLang native (`/generate`, cumulative `text` with `meta_info`, then
//! `data: [DONE]`; `/get_model_info`, `/get_server_info`).

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Response};
use axum::routing::{get, post};
use serde_json::Value;

use super::app::App;
use super::engine::SeqSpec;
use super::faults::Fault;
use super::listener::RequestArrival;
use super::openai::{cache_namespace, finish_whole, pre_engine_fault};
use super::tokenizer::{encode, encode_chat};
use super::wire::{End, Render, Tok, Wire, WireSetup, collect, drop_connection, js, json_response};

pub fn routes(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(|| async { "Ollama is running" }))
        .route(
            "/api/version",
            get(|State(app): State<Arc<App>>| async move { json_response(200, serde_json::json!({"version": app.engine_version("0.12.0")}).to_string()) }),
        )
        .route("/api/generate", post(ollama_generate))
        .route("/api/chat", post(ollama_chat))
        .route("/completion", post(llamacpp_completion))
        .route("/generate_stream", post(tgi_stream))
        .route("/generate", post(sglang_generate))
        .route(
            "/get_model_info",
            get(|State(app): State<Arc<App>>| async move {
                json_response(200, serde_json::json!({"model_path": app.opts.model, "is_generation": true}).to_string())
            }),
        )
        .route(
            "/get_server_info",
            get(|State(app): State<Arc<App>>| async move { json_response(200, serde_json::json!({"version": app.engine_version("0.5.4")}).to_string()) }),
        )
        .with_state(app)
}

#[derive(Clone, Copy, PartialEq)]
enum Family {
    Ollama { chat: bool },
    LlamaCpp,
    Tgi,
    Sglang,
}

fn error_for(family: Family) -> fn(u16) -> Response<Body> {
    match family {
        Family::Ollama { .. } => |s| json_response(s, format!(r#"{{"error":"mock fault: HTTP {s}"}}"#)),
        Family::LlamaCpp => |s| json_response(s, format!(r#"{{"error":{{"code":{s},"message":"mock fault: HTTP {s}","type":"server_error"}}}}"#)),
        Family::Tgi => |s| {
            let kind = if s == 429 {
                "overloaded"
            } else if s == 400 {
                "validation"
            } else {
                "generation"
            };
            json_response(s, format!(r#"{{"error":"mock fault: HTTP {s}","error_type":"{kind}"}}"#))
        },
        Family::Sglang => |s| json_response(s, format!(r#"{{"error":{{"message":"mock fault: HTTP {s}","code":{s}}}}}"#)),
    }
}

fn with_retry_after(mut r: Response<Body>) -> Response<Body> {
    if r.status() == 429 {
        r.headers_mut().insert("retry-after", HeaderValue::from_static("1"));
    }
    r
}

async fn ollama_generate(State(app): State<Arc<App>>, arrival: RequestArrival, h: HeaderMap, body: Bytes) -> Response<Body> {
    run(app, arrival, h, body, Family::Ollama { chat: false }).await
}

async fn ollama_chat(State(app): State<Arc<App>>, arrival: RequestArrival, h: HeaderMap, body: Bytes) -> Response<Body> {
    run(app, arrival, h, body, Family::Ollama { chat: true }).await
}

async fn llamacpp_completion(State(app): State<Arc<App>>, arrival: RequestArrival, h: HeaderMap, body: Bytes) -> Response<Body> {
    run(app, arrival, h, body, Family::LlamaCpp).await
}

async fn tgi_stream(State(app): State<Arc<App>>, arrival: RequestArrival, h: HeaderMap, body: Bytes) -> Response<Body> {
    run(app, arrival, h, body, Family::Tgi).await
}

async fn sglang_generate(State(app): State<Arc<App>>, arrival: RequestArrival, h: HeaderMap, body: Bytes) -> Response<Body> {
    run(app, arrival, h, body, Family::Sglang).await
}

/// The request as each family spells it.
struct Parsed {
    prompt: Vec<u32>,
    max_tokens: u32,
    stream: bool,
    ignore_eos: bool,
}

fn parse(family: Family, v: &Value, max_len: u32) -> Parsed {
    let u = |v: Option<&Value>| v.and_then(Value::as_u64);
    let (prompt, max, stream, ignore_eos) = match family {
        Family::Ollama { chat } => {
            let prompt = if chat {
                let msgs = v.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
                let texts: Vec<String> = msgs.iter().map(|m| m.get("content").and_then(Value::as_str).unwrap_or("").to_string()).collect();
                encode_chat(texts.iter().map(String::as_str))
            } else {
                encode(v.get("prompt").and_then(Value::as_str).unwrap_or(""))
            };
            let np = v.get("options").and_then(|o| o.get("num_predict")).and_then(Value::as_i64);
            let max = np.filter(|n| *n > 0).map(|n| n as u64);
            // num_predict is exact only with the mock's own `options.ignore_eos`; Ollama has none.
            let ig = v.get("options").and_then(|o| o.get("ignore_eos")).and_then(Value::as_bool).unwrap_or(false);
            (prompt, max, v.get("stream").and_then(Value::as_bool).unwrap_or(true), ig)
        }
        Family::LlamaCpp => {
            let n = v.get("n_predict").and_then(Value::as_i64).filter(|n| *n >= 0).map(|n| n as u64);
            let ig = v.get("ignore_eos").and_then(Value::as_bool).unwrap_or(false);
            (encode(v.get("prompt").and_then(Value::as_str).unwrap_or("")), n, v.get("stream").and_then(Value::as_bool).unwrap_or(false), ig)
        }
        Family::Tgi => {
            let p = v.get("parameters");
            let n = u(p.and_then(|p| p.get("max_new_tokens")));
            let ig = p.and_then(|p| p.get("ignore_eos")).and_then(Value::as_bool).unwrap_or(false);
            (encode(v.get("inputs").and_then(Value::as_str).unwrap_or("")), n.or(Some(100)), true, ig)
        }
        Family::Sglang => {
            let p = v.get("sampling_params");
            let n = u(p.and_then(|p| p.get("max_new_tokens"))).or(Some(128));
            let ig = p.and_then(|p| p.get("ignore_eos")).and_then(Value::as_bool).unwrap_or(false);
            (encode(v.get("text").and_then(Value::as_str).unwrap_or("")), n, v.get("stream").and_then(Value::as_bool).unwrap_or(false), ig)
        }
    };
    let room = max_len.saturating_sub(prompt.len() as u32).max(1);
    let max_tokens = max.map(|m| (m as u32).min(room)).unwrap_or(room.min(512));
    Parsed { prompt, max_tokens, stream, ignore_eos }
}

async fn run(app: Arc<App>, arrival: RequestArrival, h: HeaderMap, body: Bytes, family: Family) -> Response<Body> {
    let started = arrival.at();
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return json_response(400, format!(r#"{{"error":{}}}"#, js(&e.to_string()))),
    };
    let p = parse(family, &v, app.opts.profile.max_model_len);
    let fault = app.fault(&h);
    if let Some(r) = pre_engine_fault(fault, error_for(family)) {
        return with_retry_after(r);
    }
    let spec = SeqSpec { prompt: p.prompt.clone(), max_tokens: p.max_tokens, min_tokens: 0, ignore_eos: p.ignore_eos, cache_salt: cache_namespace(&v, fault) };
    let mut ticket = app.driver.submit(&spec);
    let seed = app.text_seed(ticket.id);
    if fault == Some(Fault::CloseBeforeResponse) {
        ticket.rx.recv().await;
        return drop_connection();
    }
    let prompt_tokens = p.prompt.len() as u32;
    let mut render = Native { family, model: app.opts.model.clone(), prompt_tokens, text: String::new(), seed: app.opts.seed };
    if !p.stream {
        let end = collect(ticket.rx, seed, prompt_tokens, None, 0).await;
        return finish_whole(render.whole(&end), fault, &app.params(&h)).await;
    }
    let setup = WireSetup {
        render: Box::new(render),
        rx: ticket.rx,
        fault,
        params: app.params(&h),
        seed,
        started,
        timestamps: app.timestamps(&h),
        prompt_tokens,
        plan: None,
    };
    let mut resp = Wire::new(setup).into_response();
    if family == Family::Tgi {
        tgi_headers(&mut resp, prompt_tokens, ticket.target);
    }
    resp
}

/// TGI sends these with the head; the timing ones need the end, so only counts are sent.
fn tgi_headers(resp: &mut Response<Body>, prompt: u32, generated: u32) {
    let h = resp.headers_mut();
    h.insert("x-prompt-tokens", HeaderValue::from(prompt));
    h.insert("x-generated-tokens", HeaderValue::from(generated));
    h.insert("x-compute-type", HeaderValue::from_static("mock"));
}

struct Native {
    family: Family,
    model: String,
    prompt_tokens: u32,
    /// Accumulated text (TGI's final `generated_text`).
    text: String,
    seed: u64,
}

impl Native {
    fn ollama_line(&self, chat: bool, text: &str) -> String {
        let body = if chat { format!(r#""message":{{"role":"assistant","content":{}}}"#, js(text)) } else { format!(r#""response":{}"#, js(text)) };
        format!(r#"{{"model":{},"created_at":"{}",{body},"done":false}}"#, js(&self.model), crate::util::rfc3339::now())
    }

    fn ollama_final(&self, chat: bool, e: &End, text: &str) -> String {
        let reason = e.finish.map(|f| f.as_str()).unwrap_or("stop");
        let line = self.ollama_line(chat, text);
        let line = line.trim_end_matches("\"done\":false}");
        format!(
            r#"{line}"done":true,"done_reason":"{reason}","total_duration":{},"load_duration":{},"prompt_eval_count":{},"prompt_eval_duration":{},"eval_count":{},"eval_duration":{}}}"#,
            e.total_ns, e.queue_ns, e.prompt_tokens, e.prompt_ns, e.completion_tokens, e.decode_ns
        )
    }

    fn llamacpp_final(&self, e: &End, content: &str) -> String {
        let pms = e.prompt_ns as f64 / 1e6;
        let dms = e.decode_ns as f64 / 1e6;
        let (pn, dn) = (e.prompt_tokens, e.completion_tokens);
        // As llama.cpp counts: `prompt_n` the prompt tokens evaluated, `cache_n` those the
        // cache supplied (`tokens_evaluated` the whole prompt, `tokens_cached` the slot at the end).
        let (cached, evaluated) = (e.cached_tokens.min(pn), pn - e.cached_tokens.min(pn));
        let stop_type = if e.finish == Some(super::engine::Finish::Stop) { "eos" } else { "limit" };
        format!(
            r#"{{"index":0,"content":{},"tokens":[],"id_slot":0,"stop":true,"model":{},"tokens_predicted":{dn},"tokens_evaluated":{pn},"generation_settings":{{"n_predict":-1,"seed":{}}},"prompt":"","has_new_line":false,"truncated":false,"stop_type":"{stop_type}","stopping_word":"","tokens_cached":{},"timings":{{"cache_n":{cached},"prompt_n":{evaluated},"prompt_ms":{pms},"prompt_per_token_ms":{},"prompt_per_second":{},"predicted_n":{dn},"predicted_ms":{dms},"predicted_per_token_ms":{},"predicted_per_second":{}}}}}"#,
            js(content),
            js(&self.model),
            self.seed,
            pn + dn,
            pms / f64::from(pn.max(1)),
            f64::from(pn) * 1000.0 / pms.max(1e-6),
            dms / f64::from(dn.max(1)),
            f64::from(dn) * 1000.0 / dms.max(1e-6)
        )
    }

    fn tgi_token(&self, t: &Tok<'_>, details: Option<String>) -> String {
        let generated = if details.is_some() { js(&self.text) } else { "null".into() };
        format!(
            r#"{{"index":{},"token":{{"id":{},"text":{},"logprob":-0.5,"special":false}},"generated_text":{generated},"details":{}}}"#,
            t.index,
            t.id,
            js(t.text),
            details.unwrap_or_else(|| "null".into())
        )
    }

    /// An SGLang event: the text so far, and `finish_reason` on the last one.
    fn sglang_event(&self, text: &str, completion_tokens: u32, cached_tokens: u32, finish: Option<super::engine::Finish>) -> String {
        let reason = match finish {
            None => "null".to_owned(),
            Some(super::engine::Finish::Stop) => r#"{"type":"stop","matched":2}"#.to_owned(),
            Some(_) => format!(r#"{{"type":"length","length":{completion_tokens}}}"#),
        };
        format!(
            r#"{{"text":{},"output_ids":[],"meta_info":{{"id":"mock","finish_reason":{reason},"prompt_tokens":{},"completion_tokens":{completion_tokens},"cached_tokens":{cached_tokens}}}}}"#,
            js(text),
            self.prompt_tokens
        )
    }

    fn whole(&mut self, e: &End) -> String {
        match self.family {
            Family::Sglang => self.sglang_event(&e.text, e.completion_tokens, e.cached_tokens, e.finish.or(Some(super::engine::Finish::Length))),
            Family::Ollama { chat } => self.ollama_final(chat, e, &e.text),
            Family::LlamaCpp => self.llamacpp_final(e, &e.text),
            Family::Tgi => format!(r#"[{{"generated_text":{}}}]"#, js(&e.text)),
        }
    }
}

impl Render for Native {
    fn content_type(&self) -> &'static str {
        match self.family {
            Family::Ollama { .. } => "application/x-ndjson",
            _ => "text/event-stream",
        }
    }

    fn token(&mut self, t: &Tok<'_>) -> String {
        self.text.push_str(t.text);
        match self.family {
            Family::Ollama { chat } => format!("{}\n", self.ollama_line(chat, t.text)),
            Family::LlamaCpp => format!(
                "data: {{\"index\":0,\"content\":{},\"tokens\":[{}],\"stop\":false,\"id_slot\":0,\"tokens_predicted\":{},\"tokens_evaluated\":{}}}\n\n",
                js(t.text),
                t.id,
                t.completion_tokens,
                self.prompt_tokens
            ),
            Family::Tgi => {
                let details = t.finish.map(|f| {
                    let reason = if f == super::engine::Finish::Stop { "eos_token" } else { "length" };
                    format!(r#"{{"finish_reason":"{reason}","generated_tokens":{},"seed":null,"input_length":{}}}"#, t.completion_tokens, self.prompt_tokens)
                });
                format!("data:{}\n\n", self.tgi_token(t, details))
            }
            Family::Sglang => format!("data: {}\n\n", self.sglang_event(&self.text, t.completion_tokens, t.cached_tokens, t.finish)),
        }
    }

    fn end(&mut self, e: &End) -> Vec<String> {
        match self.family {
            Family::Ollama { chat } => vec![format!("{}\n", self.ollama_final(chat, e, ""))],
            Family::LlamaCpp => vec![format!("data: {}\n\n", self.llamacpp_final(e, ""))],
            Family::Tgi | Family::Sglang => Vec::new(),
        }
    }

    fn done(&self) -> Option<String> {
        (self.family == Family::Sglang).then(|| "data: [DONE]\n\n".to_owned())
    }

    fn error(&mut self, msg: &str) -> String {
        match self.family {
            Family::Ollama { .. } => format!("{{\"error\":{}}}\n", js(msg)),
            Family::LlamaCpp => format!("error: {{\"code\":500,\"message\":{},\"type\":\"server_error\"}}\n\n", js(msg)),
            Family::Tgi => format!("data:{{\"error\":{},\"error_type\":\"generation\"}}\n\n", js(msg)),
            Family::Sglang => format!("data: {{\"error\":{{\"message\":{}}}}}\n\n", js(msg)),
        }
    }
}
