//! The names config gives to the kinds of things it configures (API families, content codings,
//! engine and source kinds). Their behaviour lives with the modules that implement them; config
//! only names and parses them, so it imports nothing else of the crate.

use serde::Deserialize;

/// The API family a target speaks. Chosen in config (`api:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProtocolKind {
    /// `POST /v1/completions` with a `prompt`.
    OpenaiCompletions,
    /// `POST /v1/chat/completions` with `messages`.
    OpenaiChat,
    /// Ollama `POST /api/generate` (NDJSON).
    OllamaGenerate,
    /// Ollama `POST /api/chat` (NDJSON).
    OllamaChat,
    /// llama.cpp server's native `POST /completion` (SSE with `timings`).
    Llamacpp,
    /// Hugging Face TGI `POST /generate_stream` (SSE, `data:` without a space).
    Tgi,
    /// SGLang's native `POST /generate` (SSE, cumulative `text`, `meta_info`, `[DONE]`).
    Sglang,
    /// The OpenAI Responses API, `POST /v1/responses` (SSE events named by `type`, ended by
    /// `response.completed`).
    OpenaiResponses,
}

/// What a family's requests and answers can carry beyond a prompt and its text's length: which
/// checks and settings a scenario may use with it. Data in each family's row
/// (`protocol::Family::carries`), read by config validation through `Resolvers::carries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Carries {
    /// `stop` sequences in the request.
    pub stop: bool,
    /// The answer's text is decoded for the checks (known answers, fingerprints, stop).
    pub answer_text: bool,
    /// `response_format`-style structured output.
    pub structured_output: bool,
    /// Function tools and their calls.
    pub tool_call: bool,
    /// A reasoning effort in the request and reasoning apart from the answer in the stream.
    pub reasoning: bool,
}

impl ProtocolKind {
    pub const ALL: [ProtocolKind; 8] = [
        ProtocolKind::OpenaiCompletions,
        ProtocolKind::OpenaiChat,
        ProtocolKind::OllamaGenerate,
        ProtocolKind::OllamaChat,
        ProtocolKind::Llamacpp,
        ProtocolKind::Tgi,
        ProtocolKind::Sglang,
        ProtocolKind::OpenaiResponses,
    ];

    /// The kind a config name (`api:`) names.
    pub fn parse(name: &str) -> Option<ProtocolKind> {
        ProtocolKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The config name (`api:`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolKind::OpenaiCompletions => "openai-completions",
            ProtocolKind::OpenaiChat => "openai-chat",
            ProtocolKind::OllamaGenerate => "ollama-generate",
            ProtocolKind::OllamaChat => "ollama-chat",
            ProtocolKind::Llamacpp => "llamacpp",
            ProtocolKind::Tgi => "tgi",
            ProtocolKind::Sglang => "sglang",
            ProtocolKind::OpenaiResponses => "openai-responses",
        }
    }
}

/// A content coding the prober can decode; its name is the `encoding` label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContentCoding {
    Identity,
    Gzip,
    Deflate,
}

impl ContentCoding {
    /// Every coding, in label order.
    pub const ALL: [ContentCoding; 3] = [ContentCoding::Identity, ContentCoding::Gzip, ContentCoding::Deflate];

    pub fn as_str(self) -> &'static str {
        match self {
            ContentCoding::Identity => "identity",
            ContentCoding::Gzip => "gzip",
            ContentCoding::Deflate => "deflate",
        }
    }

    /// A coding name as HTTP writes it (case-insensitive; `x-gzip` is `gzip`).
    pub fn parse(name: &str) -> Option<ContentCoding> {
        match name.trim().to_ascii_lowercase().as_str() {
            "identity" => Some(ContentCoding::Identity),
            "gzip" | "x-gzip" => Some(ContentCoding::Gzip),
            "deflate" => Some(ContentCoding::Deflate),
            _ => None,
        }
    }
}

/// An engine family, by the metric names it exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Vllm,
    Sglang,
    LlamaCpp,
    Tgi,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Vllm => "vllm",
            EngineKind::Sglang => "sglang",
            EngineKind::LlamaCpp => "llamacpp",
            EngineKind::Tgi => "tgi",
        }
    }
}

/// What a source reads (validated `sources:` entry kind).
#[derive(Debug, Clone, PartialEq)]
pub enum SourceKind {
    /// An inference engine's `/metrics`; `None` detects the engine from the names present.
    Engine(Option<EngineKind>),
    /// A dcgm-exporter `/metrics` page.
    Dcgm,
    /// The local NVIDIA driver through NVML.
    Nvml,
}

impl SourceKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            SourceKind::Engine(_) => "engine",
            SourceKind::Dcgm => "dcgm",
            SourceKind::Nvml => "nvml",
        }
    }
}
