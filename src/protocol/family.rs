//! The API families, one row each: everything about a family that is data. Adding a family is
//! its `Protocol` file, one row here, its mock front-end and its fixtures (docs/architecture.md,
//! "Adding an API family").

use super::api::{Framing, Protocol};
use super::{llamacpp, ollama, openai_chat, openai_completions, openai_responses, sglang, tgi};
use crate::config::{Carries, ProtocolKind};

/// One API family.
pub struct Family {
    /// Request path, body and the frame parsers.
    pub protocol: &'static dyn Protocol,
    /// Sends `messages` (the server applies a chat template, which counts as prompt tokens).
    pub chat: bool,
    pub framing: Framing,
    /// The `llmprobe_server_time_seconds` phases this API reports (TGI's only where its server
    /// sends the timing headers).
    pub server_phases: &'static [&'static str],
    /// The engine family this API implies, when only one engine speaks it.
    pub implied_engine: Option<&'static str>,
    /// Where the model, engine and version are read (`TargetRuntime::discover`).
    pub discovery: Discovery,
    /// Sends vLLM's `cache_salt` when a scenario sets one (an OpenAI-compatible extension).
    pub cache_salt: bool,
    /// Which checks and scenario settings its requests and answers carry (config refuses the
    /// others for a target of this family).
    pub carries: Carries,
}

/// The native APIs: a prompt and the length of its answer, nothing else.
const NATIVE: Carries = Carries { stop: false, answer_text: false, structured_output: false, tool_call: false, reasoning: false };

/// Where a family names its model and version. Every parser is pure: a JSON document in, the
/// value (if any) out.
pub struct Discovery {
    pub model: ModelSource,
    pub model_path: &'static str,
    pub model_of: fn(&serde_json::Value) -> Option<String>,
    /// The engine, when the model document names it (OpenAI `owned_by`); else `implied_engine`.
    pub engine_of: fn(&serde_json::Value) -> Option<String>,
    /// The version's document: the model document again when the paths are equal.
    pub version_path: &'static str,
    pub version_of: fn(&serde_json::Value) -> Option<String>,
}

/// How much discovery needs the model document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelSource {
    /// Always read, and it must list a model (requests name it; OpenAI `/v1/models`).
    Listed,
    /// Read only when the config names no model (Ollama `/api/tags`).
    ListedUnlessConfigured,
    /// An info page: a configured model, or a server without the page (4xx), leaves the
    /// details unknown instead of failing.
    Info,
}

impl Family {
    /// The `Accept` header of a request: the stream's media type, or JSON for a whole answer.
    pub fn accept(&self, stream: bool) -> &'static str {
        match (stream, self.framing) {
            (false, _) => "application/json",
            (true, Framing::Sse) => "text/event-stream",
            (true, Framing::Ndjson) => "application/x-ndjson",
        }
    }

    /// The `/tokenize` bodies that count `text` as this family's request would, in the order
    /// tried: vLLM's and SGLang's (`prompt`, or chat `messages` so the template is counted), then
    /// llama.cpp's (`content`), since llama.cpp's server also serves the OpenAI APIs.
    pub fn tokenize_bodies(&self, model: &str, text: &str) -> [serde_json::Value; 2] {
        let own = if self.chat {
            serde_json::json!({"model": model, "messages": [{"role": "user", "content": text}], "add_generation_prompt": true})
        } else {
            serde_json::json!({"model": model, "prompt": text})
        };
        [own, serde_json::json!({"content": text, "add_special": true})]
    }
}

fn text_at(v: &serde_json::Value, pointer: &str) -> Option<String> {
    v.pointer(pointer).and_then(|x| x.as_str()).map(str::to_owned)
}

/// A model file path as a model name (`/models/llama-3-8b.gguf` -> `llama-3-8b.gguf`).
fn model_name(path: &str) -> String {
    path.rsplit(['/', '\\']).next().unwrap_or(path).to_owned()
}

fn none(_: &serde_json::Value) -> Option<String> {
    None
}

const OPENAI_DISCOVERY: Discovery = Discovery {
    model: ModelSource::Listed,
    model_path: "/v1/models",
    model_of: |v| text_at(v, "/data/0/id"),
    engine_of: |v| Some(engine_from_owner(v.pointer("/data/0/owned_by").and_then(|x| x.as_str()))),
    version_path: "/version",
    version_of: |v| text_at(v, "/version"),
};

const OLLAMA_DISCOVERY: Discovery = Discovery {
    model: ModelSource::ListedUnlessConfigured,
    model_path: "/api/tags",
    model_of: |v| text_at(v, "/models/0/name"),
    engine_of: none,
    version_path: "/api/version",
    version_of: |v| text_at(v, "/version"),
};

static OPENAI_COMPLETIONS: Family = Family {
    protocol: &openai_completions::OpenAiCompletions,
    chat: false,
    framing: Framing::Sse,
    server_phases: &[],
    implied_engine: None,
    discovery: OPENAI_DISCOVERY,
    cache_salt: true,
    carries: Carries { stop: true, answer_text: true, structured_output: false, tool_call: false, reasoning: false },
};

static OPENAI_CHAT: Family = Family {
    protocol: &openai_chat::OpenAiChat,
    chat: true,
    framing: Framing::Sse,
    server_phases: &[],
    implied_engine: None,
    discovery: OPENAI_DISCOVERY,
    cache_salt: true,
    carries: Carries { stop: true, answer_text: true, structured_output: true, tool_call: true, reasoning: true },
};

static OLLAMA_GENERATE: Family = Family {
    protocol: &ollama::Ollama { chat: false },
    chat: false,
    framing: Framing::Ndjson,
    server_phases: &["prefill", "decode", "total", "load"],
    implied_engine: Some("ollama"),
    discovery: OLLAMA_DISCOVERY,
    cache_salt: false,
    carries: NATIVE,
};

static OLLAMA_CHAT: Family = Family {
    protocol: &ollama::Ollama { chat: true },
    chat: true,
    framing: Framing::Ndjson,
    server_phases: &["prefill", "decode", "total", "load"],
    implied_engine: Some("ollama"),
    discovery: OLLAMA_DISCOVERY,
    cache_salt: false,
    carries: NATIVE,
};

static LLAMACPP: Family = Family {
    protocol: &llamacpp::LlamaCpp,
    chat: false,
    framing: Framing::Sse,
    server_phases: &["prefill", "decode", "total"],
    implied_engine: Some("llamacpp"),
    discovery: Discovery {
        model: ModelSource::Info,
        model_path: "/props",
        model_of: |v| text_at(v, "/model_alias").or_else(|| text_at(v, "/model_path")).map(|p| model_name(&p)),
        engine_of: none,
        version_path: "/props",
        version_of: |v| text_at(v, "/build_info"),
    },
    cache_salt: false,
    carries: NATIVE,
};

static TGI: Family = Family {
    protocol: &tgi::Tgi,
    chat: false,
    framing: Framing::Sse,
    server_phases: &["queue", "total"],
    implied_engine: Some("tgi"),
    discovery: Discovery {
        model: ModelSource::Info,
        model_path: "/info",
        model_of: |v| text_at(v, "/model_id"),
        engine_of: none,
        version_path: "/info",
        version_of: |v| text_at(v, "/version"),
    },
    cache_salt: false,
    carries: NATIVE,
};

static SGLANG: Family = Family {
    protocol: &sglang::Sglang,
    chat: false,
    framing: Framing::Sse,
    server_phases: &[],
    implied_engine: Some("sglang"),
    discovery: Discovery {
        model: ModelSource::Info,
        model_path: "/get_model_info",
        model_of: |v| text_at(v, "/model_path").map(|p| model_name(&p)),
        engine_of: none,
        version_path: "/get_server_info",
        version_of: |v| text_at(v, "/version"),
    },
    cache_salt: false,
    carries: NATIVE,
};

static OPENAI_RESPONSES: Family = Family {
    protocol: &openai_responses::OpenAiResponses,
    // `input` is applied to the chat template as a user message.
    chat: true,
    framing: Framing::Sse,
    server_phases: &[],
    implied_engine: None,
    discovery: OPENAI_DISCOVERY,
    cache_salt: true,
    // No `stop` field in the Responses API.
    carries: Carries { stop: false, answer_text: true, structured_output: true, tool_call: true, reasoning: true },
};

impl ProtocolKind {
    /// This family's row. The match is the table's index: a kind without a row does not
    /// compile, and there is no order to keep.
    pub fn family(self) -> &'static Family {
        match self {
            ProtocolKind::OpenaiCompletions => &OPENAI_COMPLETIONS,
            ProtocolKind::OpenaiChat => &OPENAI_CHAT,
            ProtocolKind::OllamaGenerate => &OLLAMA_GENERATE,
            ProtocolKind::OllamaChat => &OLLAMA_CHAT,
            ProtocolKind::Llamacpp => &LLAMACPP,
            ProtocolKind::Tgi => &TGI,
            ProtocolKind::Sglang => &SGLANG,
            ProtocolKind::OpenaiResponses => &OPENAI_RESPONSES,
        }
    }

    /// The protocol implementation for this kind.
    pub fn protocol(self) -> &'static dyn Protocol {
        self.family().protocol
    }

    /// The `llmprobe_server_time_seconds` phases this API reports.
    pub fn server_phases(self) -> &'static [&'static str] {
        self.family().server_phases
    }

    /// The engine family this API implies, when only one engine speaks it.
    pub fn implied_engine(self) -> Option<&'static str> {
        self.family().implied_engine
    }
}

/// The engine an OpenAI-compatible `/v1/models` entry's `owned_by` names (`unknown` when none).
fn engine_from_owner(owner: Option<&str>) -> String {
    let owner = owner.unwrap_or("").to_ascii_lowercase();
    let known = [
        ("vllm", "vllm"),
        ("sglang", "sglang"),
        ("llamacpp", "llamacpp"),
        ("llama.cpp", "llamacpp"),
        ("ollama", "ollama"),
        ("tgi", "tgi"),
        ("text-generation", "tgi"),
    ];
    known.iter().find(|(k, _)| owner.contains(k)).map(|(_, e)| (*e).to_string()).unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ProtocolKind::ALL` (what config parses and lists) names every kind once, as serde
    /// does: the kinds serde knows are read from the enum's JSON schema.
    #[test]
    fn all_lists_every_kind_once() {
        fn names(v: &serde_json::Value, out: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(m) => {
                    out.extend(m.get("const").and_then(|c| c.as_str()).map(str::to_owned));
                    out.extend(m.get("enum").and_then(|e| e.as_array()).into_iter().flatten().filter_map(|e| e.as_str().map(str::to_owned)));
                    m.values().for_each(|x| names(x, out));
                }
                serde_json::Value::Array(a) => a.iter().for_each(|x| names(x, out)),
                _ => {}
            }
        }
        let mut serde_names = Vec::new();
        names(&serde_json::to_value(schemars::schema_for!(ProtocolKind)).unwrap(), &mut serde_names);
        let listed: Vec<&str> = ProtocolKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(serde_names, listed);
        for k in ProtocolKind::ALL {
            assert_eq!(ProtocolKind::parse(k.as_str()), Some(k));
        }
    }

    #[test]
    fn discovery_parsers_read_real_shapes() {
        let v: serde_json::Value = serde_json::json!({"data": [{"id": "m", "owned_by": "vllm"}]});
        let d = &ProtocolKind::OpenaiChat.family().discovery;
        assert_eq!(((d.model_of)(&v), (d.engine_of)(&v)), (Some("m".into()), Some("vllm".into())));
        let props = serde_json::json!({"model_path": "/models/tiny.gguf", "build_info": "b1"});
        let d = &ProtocolKind::Llamacpp.family().discovery;
        assert_eq!(((d.model_of)(&props), (d.version_of)(&props)), (Some("tiny.gguf".into()), Some("b1".into())));
        assert_eq!((d.model_of)(&serde_json::Value::Null), None);
    }
}
