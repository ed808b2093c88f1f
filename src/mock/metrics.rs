//! `/metrics` with vLLM's names, labels and buckets, and a fake dcgm-exporter page at
//! `/dcgm/metrics` whose values follow the engine's load.

use std::fmt::Write;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, Response, header};
use axum::routing::get;

use super::app::App;
use super::engine::Engine;

pub fn routes(app: Arc<App>) -> Router {
    Router::new().route("/metrics", get(vllm_page)).route("/dcgm/metrics", get(dcgm_page)).with_state(app)
}

fn text(body: String) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    r
}

async fn vllm_page(State(app): State<Arc<App>>) -> Response<Body> {
    let labels = format!("engine=\"0\",model_name=\"{}\"", app.opts.model);
    text(app.driver.with_engine(|e| render_vllm(e, &labels)))
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn gauge(out: &mut String, name: &str, help: &str, labels: &str, v: f64) {
    head(out, name, "gauge", help);
    let _ = writeln!(out, "{name}{{{labels}}} {v:?}");
}

fn counter(out: &mut String, name: &str, help: &str, labels: &str, v: u64) {
    head(out, &format!("{name}_total"), "counter", help);
    let _ = writeln!(out, "{name}_total{{{labels}}} {v}.0");
}

/// The engine's state as vLLM names it.
fn render_vllm(e: &Engine, l: &str) -> String {
    let s = &e.stats;
    let mut o = String::with_capacity(16 * 1024);
    gauge(&mut o, "vllm:num_requests_running", "Number of requests in model execution batches.", l, e.num_running() as f64);
    gauge(&mut o, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", l, e.num_waiting() as f64);
    head(
        &mut o,
        "vllm:num_requests_waiting_by_reason",
        "gauge",
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
    );
    // The simulator has no LoRA or KV transfer: every waiting request waits for capacity.
    for (reason, n) in [("capacity", e.num_waiting()), ("deferred", 0)] {
        let _ = writeln!(o, "vllm:num_requests_waiting_by_reason{{{l},reason=\"{reason}\"}} {:?}", n as f64);
    }
    gauge(&mut o, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", l, e.kv_usage());
    counter(&mut o, "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", l, s.prefix_queries);
    counter(&mut o, "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", l, s.prefix_hits);
    counter(&mut o, "vllm:num_preemptions", "Cumulative number of preemption from the engine.", l, s.preemptions);
    counter(&mut o, "vllm:prompt_tokens", "Number of prefill tokens processed.", l, s.prompt_tokens);
    counter(&mut o, "vllm:generation_tokens", "Number of generation tokens processed.", l, s.generation_tokens);
    head(&mut o, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
    for (i, reason) in ["stop", "length", "abort"].iter().enumerate() {
        let _ = writeln!(o, "vllm:request_success_total{{engine=\"0\",finished_reason=\"{reason}\",{}}} {}.0", model_label(l), s.finished[i]);
    }
    let hists = [
        ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", &s.request_prompt),
        ("vllm:request_generation_tokens", "Number of generation tokens processed.", &s.request_generation),
        ("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", &s.iteration_tokens),
        ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &s.ttft),
        ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &s.itl),
        ("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", &s.tpot),
        ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &s.e2e),
        ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", &s.queue),
        ("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", &s.inference),
        ("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", &s.prefill),
        ("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", &s.decode),
    ];
    for (name, help, h) in hists {
        head(&mut o, name, "histogram", help);
        h.write(&mut o, name, l);
    }
    cache_config_info(&mut o, e.profile());
    o
}

/// The cache configuration as labels (sorted, Python-printed values), a subset of vLLM's.
fn cache_config_info(o: &mut String, p: &super::Profile) {
    head(o, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig");
    let tokens = u64::from(p.kv_blocks) * u64::from(p.block_size);
    let concurrency = tokens as f64 / f64::from(p.max_model_len.max(1));
    let _ = writeln!(
        o,
        "vllm:cache_config_info{{block_size=\"{}\",cache_dtype=\"auto\",enable_prefix_caching=\"True\",engine=\"0\",gpu_memory_utilization=\"0.9\",kv_cache_max_concurrency=\"{concurrency:?}\",kv_cache_size_tokens=\"{tokens}\",num_cpu_blocks=\"None\",num_gpu_blocks=\"{}\",num_gpu_blocks_override=\"None\",prefix_caching_hash_algo=\"fnv1a\",sliding_window=\"None\"}} 1.0",
        p.block_size, p.kv_blocks
    );
}

fn model_label(l: &str) -> &str {
    l.split_once(',').map(|(_, m)| m).unwrap_or(l)
}

async fn dcgm_page(State(app): State<Arc<App>>) -> Response<Body> {
    let now = app.driver.now_ns();
    let load = app.driver.with_engine(|e| Load::of(e, now));
    text(render_dcgm(&app.opts.profile, &load))
}

/// Engine load sampled for the fake GPU.
pub struct Load {
    /// Fraction of time busy since the previous scrape (approximated by the run-state).
    pub util: f64,
    pub kv: f64,
    pub running: usize,
    pub energy_mj: f64,
}

impl Load {
    fn of(e: &Engine, now_ns: u64) -> Load {
        let busy = if e.num_running() + e.num_waiting() > 0 { 1.0 } else { 0.0 };
        let avg = e.stats.busy_ns as f64 / now_ns.max(1) as f64;
        let p = e.profile();
        let energy_mj = (p.idle_watts * now_ns as f64 + (p.max_watts - p.idle_watts) * e.stats.busy_ns as f64) / 1e6;
        Load { util: busy * (0.6 + 0.4 * e.kv_usage()).max(avg.min(1.0)), kv: e.kv_usage(), running: e.num_running(), energy_mj }
    }
}

/// dcgm-exporter's page shape: one line per field with its device labels.
fn render_dcgm(p: &super::Profile, l: &Load) -> String {
    let labels = format!(
        "gpu=\"0\",UUID=\"GPU-6d6f636b-0000-4000-8000-000000000000\",pci_bus_id=\"00000000:00:02.0\",device=\"nvidia0\",modelName=\"{}\",Hostname=\"mock-host\",hostname=\"mock-host\",DCGM_FI_DRIVER_VERSION=\"580.95.05\"",
        p.gpu_name
    );
    // Weights take ~60% of memory; the KV pool the rest, filled as the cache fills.
    let weights = p.fb_total_mib as f64 * 0.6;
    let used = weights + p.fb_total_mib as f64 * 0.35 * l.kv;
    let watts = p.idle_watts + (p.max_watts - p.idle_watts) * l.util;
    let fields: [(&str, &str, &str, String); 9] = [
        ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", format!("{}", if l.util > 0.0 { 1980 } else { 345 })),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", format!("{}", 35 + (45.0 * l.util) as u32)),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", format!("{watts:.6}")),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", format!("{}", l.energy_mj as u64)),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", format!("{}", (100.0 * l.util).round() as u32)),
        ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", format!("{}", (p.fb_total_mib as f64 - used) as u64)),
        ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", format!("{}", used as u64)),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.", format!("{:.6}", l.util)),
        (
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "gauge",
            "Ratio of cycles the tensor (HMMA) pipe is active.",
            format!("{:.6}", l.util * (0.3 + 0.002 * l.running.min(200) as f64)),
        ),
    ];
    let mut o = String::new();
    for (name, kind, help, v) in fields {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{labels}}} {v}");
    }
    o
}
