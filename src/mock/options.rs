//! How the mock is started: `MockOptions` (library and tests) and `llmprobe mock` flags.

use std::net::SocketAddr;

use super::faults::{self, Fault, FaultParams};
use super::profile::Profile;

/// Everything that shapes the mock's behaviour.
#[derive(Clone, Debug)]
pub struct MockOptions {
    /// The one model name served; other names get vLLM's 404.
    pub model: String,
    pub profile: Profile,
    pub seed: u64,
    /// Requests on `/v1/*` need `Authorization: Bearer <key>` when set.
    pub api_key: Option<String>,
    /// Fault kinds drawn per request with these probabilities (the header wins).
    pub fault_rates: Vec<(Fault, f64)>,
    pub fault_params: FaultParams,
    /// Stamp every frame with `mock_emitted_ns` (else only with `x-mock-timestamps: 1`).
    pub timestamps: bool,
    /// Multiplies every step's duration (1.0 = the profile as is; 2.0 = twice as slow), to
    /// stand in for a slower build or card in release-gate tests.
    pub slowdown: f64,
    /// Report the prefix cache's share of the prompt on chat and completions
    /// (`usage.prompt_tokens_details.cached_tokens`), as vLLM does with
    /// `--enable-prompt-tokens-details`; off, as vLLM's default. The Responses API always reports it.
    pub prompt_tokens_details: bool,
}

impl Default for MockOptions {
    fn default() -> Self {
        MockOptions {
            model: "mock-llama".into(),
            profile: Profile::small_gpu(),
            seed: 42,
            api_key: None,
            fault_rates: Vec::new(),
            fault_params: FaultParams::default(),
            timestamps: false,
            slowdown: 1.0,
            prompt_tokens_details: false,
        }
    }
}

/// `llmprobe mock` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct MockArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:18000")]
    pub listen: SocketAddr,
    /// Model name served.
    #[arg(long, default_value = "mock-llama")]
    pub model: String,
    /// Hardware profile: small-gpu, large-gpu, cpu-tiny, load-test.
    #[arg(long, default_value = "small-gpu", value_parser = parse_profile)]
    pub profile: String,
    /// Seed for EOS points and generated text.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Require `Authorization: Bearer <key>` on /v1/*.
    #[arg(long, env = "MOCK_API_KEY")]
    pub api_key: Option<String>,
    /// Inject a fault by rate, KIND=RATE (repeatable), e.g. `--fault stall_ttft=0.01`.
    #[arg(long = "fault", value_parser = faults::parse_rate)]
    pub faults: Vec<(Fault, f64)>,
    /// How long stall faults hold, milliseconds.
    #[arg(long, default_value_t = 60_000)]
    pub stall_ms: u64,
    /// Override the profile's KV-cache capacity, in 16-token blocks.
    #[arg(long)]
    pub kv_blocks: Option<u32>,
    /// Override the profile's max_num_seqs.
    #[arg(long)]
    pub max_num_seqs: Option<u32>,
    /// Stamp every frame with `mock_emitted_ns`.
    #[arg(long)]
    pub timestamps: bool,
    /// Multiply every engine step's duration by this factor (> 0; 2.0 = twice as slow).
    #[arg(long, default_value_t = 1.0, value_parser = parse_slowdown)]
    pub slowdown: f64,
    /// Report cached prompt tokens on chat and completions (`prompt_tokens_details`), as vLLM's
    /// flag of the same name.
    #[arg(long)]
    pub enable_prompt_tokens_details: bool,
}

fn parse_slowdown(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 => Ok(f),
        _ => Err(format!("{s:?} is not a factor greater than 0")),
    }
}

fn parse_profile(s: &str) -> Result<String, String> {
    match Profile::by_name(s) {
        Some(_) => Ok(s.to_string()),
        None => Err(format!("unknown profile {s:?}; one of {:?}", Profile::names())),
    }
}

impl MockArgs {
    pub fn options(&self) -> MockOptions {
        let mut profile = Profile::by_name(&self.profile).unwrap_or_default();
        if let Some(b) = self.kv_blocks {
            profile.kv_blocks = b;
        }
        if let Some(n) = self.max_num_seqs {
            profile.max_num_seqs = n;
        }
        MockOptions {
            model: self.model.clone(),
            profile,
            seed: self.seed,
            api_key: self.api_key.clone(),
            fault_rates: self.faults.clone(),
            fault_params: FaultParams { stall: std::time::Duration::from_millis(self.stall_ms), ..FaultParams::default() },
            timestamps: self.timestamps,
            slowdown: self.slowdown,
            prompt_tokens_details: self.enable_prompt_tokens_details,
        }
    }
}
