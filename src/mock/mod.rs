//! Built-in mock LLM server: a simulated continuous-batching engine behind the real wire
//! protocols (OpenAI-compatible as vLLM writes it, Ollama, llama.cpp native, TGI), with
//! vLLM-named `/metrics`, a fake DCGM page and fault injection. See `README.md` here.
//!
//! Writes every wire format itself; shares no code with the prober's parsers on purpose.

mod control;
mod driver;
pub mod engine;
mod faults;
mod hist;
mod kv;
mod metrics;
mod native;
mod openai;
pub mod profile;
pub mod sim;
pub mod tokenizer;
mod wire;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::http::HeaderMap;
use tokio_util::sync::CancellationToken;

pub use engine::{Engine, SeqSpec};
pub use faults::{Fault, FaultParams};
pub use profile::Profile;

use driver::Driver;

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
        }
    }
}

/// Shared state of the HTTP front-ends.
pub(crate) struct App {
    pub opts: MockOptions,
    pub driver: Arc<Driver>,
    /// What a simulated release changes at run time (`POST /mock/control`).
    pub control: std::sync::Mutex<Control>,
    draws: AtomicU64,
    pub created_unix: u64,
    /// Cancelled at shutdown.
    stop: CancellationToken,
}

impl App {
    /// The fault for this request, if any.
    pub fn fault(&self, h: &HeaderMap) -> Option<Fault> {
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        let draw = tokenizer::unit(self.opts.seed ^ n.wrapping_mul(0x9e37_79b9));
        faults::choose(h, &self.opts.fault_rates, draw)
    }

    pub fn params(&self, h: &HeaderMap) -> FaultParams {
        let mut p = FaultParams::from_headers(&self.opts.fault_params, h);
        p.stop = self.stop.clone();
        p
    }

    pub fn timestamps(&self, h: &HeaderMap) -> bool {
        self.opts.timestamps || h.get("x-mock-timestamps").is_some_and(|v| v.as_bytes() == b"1")
    }

    /// Seed of a request's generated text.
    pub fn text_seed(&self, id: u64) -> u64 {
        tokenizer::mix(self.opts.seed ^ id)
    }
}

/// The run-time state a simulated release changes.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Control {
    /// Reported by `/version` and `/api/version` instead of the built-in one when set.
    pub engine_version: Option<String>,
    /// Multiplies every step's duration from the next step on.
    pub slowdown: f64,
}

impl App {
    /// The engine version `/version` reports: the control's, else `default`.
    pub fn engine_version(&self, default: &str) -> String {
        self.control.lock().unwrap_or_else(|e| e.into_inner()).engine_version.clone().unwrap_or_else(|| default.to_owned())
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The mock's routes; spawns the engine loop on the current tokio runtime.
pub fn router(opts: MockOptions) -> Router {
    router_with_stop(opts, CancellationToken::new())
}

fn router_with_stop(opts: MockOptions, stop: CancellationToken) -> Router {
    let driver = Driver::new(Engine::new(opts.profile.slowed(opts.slowdown), opts.seed));
    tokio::spawn(driver.clone().run(stop.clone()));
    let control = std::sync::Mutex::new(Control { engine_version: None, slowdown: opts.slowdown });
    let app = Arc::new(App { opts, driver, control, draws: AtomicU64::new(0), created_unix: unix_now(), stop });
    openai::routes(app.clone()).merge(native::routes(app.clone())).merge(metrics::routes(app.clone())).merge(control::routes(app))
}

/// Serves the mock on `listener` until `shutdown` is cancelled.
pub async fn serve(listener: tokio::net::TcpListener, opts: MockOptions, shutdown: CancellationToken) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    let app = router_with_stop(opts, shutdown.child_token());
    // Every frame is its own small write: with Nagle's algorithm a frame waits for the ACK of
    // the one before (the client's delayed ACK), which skews TTFT and ITL by milliseconds.
    // Inference servers (uvicorn, the engines' own) set TCP_NODELAY too.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await
}
