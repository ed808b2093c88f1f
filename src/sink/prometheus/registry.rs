//! The family kinds the contract uses, their bucket layouts, and registering a family under its
//! contract name and help.

use super::contract::{E2E_BUCKETS, FamilySpec, PROMPT_TOKEN_ERROR_BUCKETS, SCHEDULE_LAG_BUCKETS, TOKENS_PER_FRAME_BUCKETS, TPOT_BUCKETS, TTFT_BUCKETS};
use super::labels::{TraceExemplar, TsLabels};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Metric, Registry, Unit};
use std::sync::atomic::AtomicU64;

// ---- Families ------------------------------------------------------------------------------------

/// The latency histogram type: observations of traced probes carry a `trace_id`/`span_id` exemplar.
pub(super) type LatencyHistogram = HistogramWithExemplars<TraceExemplar>;
pub(super) type HistogramFamily<L> = Family<L, LatencyHistogram, fn() -> LatencyHistogram>;
pub(super) type FloatGauge = Gauge<f64, AtomicU64>;
/// An `info` family: OpenMetrics `# TYPE x info` with samples `x_info{...} 1`; Prometheus text
/// 0.0.4 has no info type and gets a gauge named `x_info`, so the scraped series name is the same
/// in both. The labels are the family's; the info value itself carries none. Series come and go
/// with the family (a release replaces `target_info`, a reload `workload_info`).
pub(super) type InfoFamily<L> = Family<L, Info<Vec<(String, String)>>, fn() -> Info<Vec<(String, String)>>>;

pub(super) fn info() -> Info<Vec<(String, String)>> {
    Info::new(Vec::new())
}

pub(super) fn info_family<L: Clone + std::hash::Hash + Eq>() -> InfoFamily<L> {
    Family::new_with_constructor(info)
}

pub(super) fn ttft_histogram() -> LatencyHistogram {
    LatencyHistogram::new(TTFT_BUCKETS.into_iter())
}
pub(super) fn tpot_histogram() -> LatencyHistogram {
    LatencyHistogram::new(TPOT_BUCKETS.into_iter())
}
pub(super) fn e2e_histogram() -> LatencyHistogram {
    LatencyHistogram::new(E2E_BUCKETS.into_iter())
}
pub(super) fn tokens_per_frame_histogram() -> Histogram {
    Histogram::new(TOKENS_PER_FRAME_BUCKETS)
}
pub(super) fn schedule_lag_histogram() -> Histogram {
    Histogram::new(SCHEDULE_LAG_BUCKETS)
}
pub(super) fn prompt_error_histogram() -> Histogram {
    Histogram::new(PROMPT_TOKEN_ERROR_BUCKETS)
}

pub(super) fn histogram_family<L>(make: fn() -> LatencyHistogram) -> HistogramFamily<L>
where
    L: Clone + std::hash::Hash + Eq,
{
    Family::new_with_constructor(make)
}

/// Creates a series at its zero value without touching it otherwise.
pub(super) fn touch<L, M, C>(family: &Family<L, M, C>, labels: &L)
where
    L: Clone + std::hash::Hash + Eq,
    C: prometheus_client::metrics::family::MetricConstructor<M>,
{
    drop(family.get_or_create(labels));
}

/// Exemplars go without a timestamp (optional in OpenMetrics; Prometheus uses the scrape time),
/// which keeps the exposition deterministic.
pub(super) fn observe_latency(family: &HistogramFamily<TsLabels>, labels: &TsLabels, seconds: f64, exemplar: Option<&TraceExemplar>) {
    family.get_or_create(labels).observe(seconds, exemplar.cloned(), None);
}

/// Registers under the exported name: prometheus-client appends `_total` to counters and the unit
/// suffix itself, so both are stripped here to keep the constants above the single source of truth.
pub(super) fn register(registry: &mut Registry, spec: FamilySpec, metric: impl Metric) {
    let FamilySpec { name, help } = spec;
    if matches!(metric.metric_type(), MetricType::Info) {
        // The encoder appends `_info` to an info family's samples.
        registry.register(name.strip_suffix("_info").unwrap_or(name), help, metric);
    } else if let Some(base) = name.strip_suffix("_seconds") {
        registry.register_with_unit(base, help, Unit::Seconds, metric);
    } else {
        registry.register(name.strip_suffix("_total").unwrap_or(name), help, metric);
    }
}
