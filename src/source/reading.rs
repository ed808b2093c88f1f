//! What one scrape yields (`Reading`) and the seam every source kind implements (`Source`).

use futures_util::future::BoxFuture;

/// What one scrape of one source found. Every field is optional: a source fills what it knows.
/// The span attribute names are in `Reading::ATTRIBUTES` (docs/telemetry.md).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    pub requests_waiting: Option<f64>,
    pub requests_running: Option<f64>,
    /// KV-cache usage, 0..1.
    pub kv_cache_usage: Option<f64>,
    /// Prefix-cache hits / queries since the previous scrape, 0..1.
    pub prefix_cache_hit_rate: Option<f64>,
    /// GPU busy ratio, 0..1 (mean over the selected GPUs).
    pub gpu_utilization: Option<f64>,
    /// Framebuffer memory in use, bytes (sum over the selected GPUs).
    pub gpu_memory_used_bytes: Option<f64>,
    /// Power draw, watts (sum over the selected GPUs).
    pub gpu_power_watts: Option<f64>,
    /// Requests and prompt tokens the engine was offered per second since the previous scrape
    /// (from its counters). A slower engine does not move them: the detector adjusts for them.
    pub offered_requests_per_s: Option<f64>,
    pub offered_prompt_tokens_per_s: Option<f64>,
}

impl Reading {
    /// Span attribute names, in the order `values` returns them.
    pub const ATTRIBUTES: [&'static str; 9] = [
        "engine.requests_waiting",
        "engine.requests_running",
        "engine.kv_cache_usage",
        "engine.prefix_cache_hit_rate",
        "gpu.utilization",
        "gpu.memory_used_bytes",
        "gpu.power_watts",
        "engine.offered_requests_per_second",
        "engine.offered_input_tokens_per_second",
    ];

    fn fields(&self) -> [Option<f64>; 9] {
        [
            self.requests_waiting,
            self.requests_running,
            self.kv_cache_usage,
            self.prefix_cache_hit_rate,
            self.gpu_utilization,
            self.gpu_memory_used_bytes,
            self.gpu_power_watts,
            self.offered_requests_per_s,
            self.offered_prompt_tokens_per_s,
        ]
    }

    /// The offered-load reading the detector takes: ln(1 + prompt tokens per second) where the
    /// engine counts them (prefill work is what queues), else ln(1 + requests per second).
    pub fn offered_load(&self) -> Option<f64> {
        self.offered_prompt_tokens_per_s.or(self.offered_requests_per_s).filter(|v| v.is_finite() && *v >= 0.0).map(f64::ln_1p)
    }

    /// The values that are present, with their attribute names.
    pub fn values(&self) -> impl Iterator<Item = (&'static str, f64)> {
        Self::ATTRIBUTES.into_iter().zip(self.fields()).filter_map(|(n, v)| v.map(|v| (n, v)))
    }

    pub fn is_empty(&self) -> bool {
        self.fields().iter().all(Option::is_none)
    }

    /// Fills the fields this reading lacks from `other`.
    pub fn fill_from(&mut self, other: &Reading) {
        let pairs = [
            (&mut self.requests_waiting, other.requests_waiting),
            (&mut self.requests_running, other.requests_running),
            (&mut self.kv_cache_usage, other.kv_cache_usage),
            (&mut self.prefix_cache_hit_rate, other.prefix_cache_hit_rate),
            (&mut self.gpu_utilization, other.gpu_utilization),
            (&mut self.gpu_memory_used_bytes, other.gpu_memory_used_bytes),
            (&mut self.gpu_power_watts, other.gpu_power_watts),
            (&mut self.offered_requests_per_s, other.offered_requests_per_s),
            (&mut self.offered_prompt_tokens_per_s, other.offered_prompt_tokens_per_s),
        ];
        for (mine, theirs) in pairs {
            if mine.is_none() {
                *mine = theirs;
            }
        }
    }
}

/// Something that can be scraped.
pub trait Source: Send {
    /// Reads the source once. The error text is for logs (never holds a secret).
    fn scrape(&mut self) -> BoxFuture<'_, Result<Reading, String>>;
}
