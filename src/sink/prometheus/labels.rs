//! The label sets of the exported families, and the exemplar a traced probe leaves.

use crate::config::Slo;
use crate::probe::outcome::ErrorClass;
use prometheus_client::encoding::EncodeLabelSet;

// ---- Label sets ----------------------------------------------------------------------------------

/// target × scenario, and for a target whose replicas are discovered the `replica` (pod name or
/// `ip:port`). Without discovery there is no `replica` label at all, so those series keep the
/// shape they always had; with it, every per-probe series is per replica and the target's
/// aggregate is their sum.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct TsLabels {
    pub(super) target: String,
    pub(super) scenario: String,
    pub(super) replica: Option<String>,
}

/// Encodes `target`, `scenario`, `replica` (only when set), then `extra`.
pub(super) fn encode_ts(ts: &TsLabels, extra: &[(&str, &str)], encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> std::fmt::Result {
    use prometheus_client::encoding::EncodeLabel;
    ("target", ts.target.as_str()).encode(encoder.encode_label())?;
    ("scenario", ts.scenario.as_str()).encode(encoder.encode_label())?;
    if let Some(r) = &ts.replica {
        ("replica", r.as_str()).encode(encoder.encode_label())?;
    }
    for label in extra {
        label.encode(encoder.encode_label())?;
    }
    Ok(())
}

impl EncodeLabelSet for TsLabels {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> std::fmt::Result {
        encode_ts(self, &[], encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct RequestLabels {
    pub(super) ts: TsLabels,
    pub(super) outcome: &'static str,
    pub(super) error: &'static str,
}

impl EncodeLabelSet for RequestLabels {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> std::fmt::Result {
        encode_ts(&self.ts, &[("outcome", self.outcome), ("error", self.error)], encoder)
    }
}

/// A behaviour check of a target×scenario pair (`llmprobe_check_failures_total`).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct CheckLabels {
    pub(super) ts: TsLabels,
    pub(super) check: &'static str,
}

impl EncodeLabelSet for CheckLabels {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> std::fmt::Result {
        encode_ts(&self.ts, &[("check", self.check)], encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct SloLabels {
    pub(super) ts: TsLabels,
    pub(super) slo: &'static str,
}

impl EncodeLabelSet for SloLabels {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> std::fmt::Result {
        encode_ts(&self.ts, &[("slo", self.slo)], encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct PhaseLabels {
    pub(super) ts: TsLabels,
    pub(super) phase: &'static str,
}

impl EncodeLabelSet for PhaseLabels {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> std::fmt::Result {
        encode_ts(&self.ts, &[("phase", self.phase)], encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TargetLabels {
    pub(super) target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EncodingLabels {
    pub(super) target: String,
    pub(super) encoding: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TargetInfoLabels {
    pub(super) target: String,
    pub(super) model: String,
    pub(super) engine: String,
    pub(super) engine_version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct WorkloadLabels {
    pub(super) scenario: String,
    pub(super) sha256: String,
    pub(super) scenario_sha256: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ComponentLabels {
    pub(super) component: String,
}

/// Longest label value taken from a server (model id, engine, version); longer ones are cut,
/// so a hostile or buggy server cannot blow up series size.
pub const MAX_SERVER_LABEL_CHARS: usize = 128;

pub(super) fn server_label(value: &str) -> String {
    value.chars().take(MAX_SERVER_LABEL_CHARS).collect()
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct SourceLabels {
    pub(super) source: String,
}

/// Exemplar labels linking a latency observation to its trace.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TraceExemplar {
    pub(super) trace_id: String,
    pub(super) span_id: String,
}

/// OpenMetrics caps an exemplar's label names and values at 128 UTF-8 characters in all.
pub const EXEMPLAR_MAX_CHARS: usize = 128;

impl TraceExemplar {
    /// Builds the exemplar, cutting values so names plus values stay within the limit (W3C ids
    /// use 63 characters, so this only bites for foreign id formats).
    pub fn new(trace_id: &str, span_id: &str) -> TraceExemplar {
        let names = "trace_id".len() + "span_id".len();
        let budget = EXEMPLAR_MAX_CHARS - names;
        let trace_id: String = trace_id.chars().take(budget).collect();
        let span_id: String = span_id.chars().take(budget - trace_id.chars().count()).collect();
        TraceExemplar { trace_id, span_id }
    }

    pub fn chars(&self) -> usize {
        "trace_id".len() + "span_id".len() + self.trace_id.chars().count() + self.span_id.chars().count()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BuildLabels {
    pub(super) version: &'static str,
    pub(super) revision: &'static str,
}

impl TsLabels {
    pub(super) fn new(target: &str, scenario: &str) -> Self {
        TsLabels { target: target.to_owned(), scenario: scenario.to_owned(), replica: None }
    }

    pub(super) fn with_replica(self, replica: Option<&str>) -> Self {
        TsLabels { replica: replica.map(str::to_owned), ..self }
    }

    pub(super) fn request(&self, outcome: &'static str, error: &'static str) -> RequestLabels {
        RequestLabels { ts: self.clone(), outcome, error }
    }

    pub(super) fn phase(&self, phase: &'static str) -> PhaseLabels {
        PhaseLabels { ts: self.clone(), phase }
    }

    pub(super) fn check(&self, check: &'static str) -> CheckLabels {
        CheckLabels { ts: self.clone(), check }
    }

    pub(super) fn slo(&self, slo: &'static str) -> SloLabels {
        SloLabels { ts: self.clone(), slo }
    }
}

/// `(outcome, error)` label values of a finished probe.
pub(super) fn outcome_labels(class: Option<ErrorClass>) -> (&'static str, &'static str) {
    match class {
        None => ("success", "none"),
        Some(c) => (c.outcome_label(), c.as_str()),
    }
}

/// The `slo` label values with their configured thresholds, only those that are set.
pub(super) fn configured_slos(slo: &Slo) -> impl Iterator<Item = (&'static str, f64)> + '_ {
    [("ttft", slo.ttft), ("tpot", slo.tpot), ("e2e", slo.e2e)].into_iter().filter_map(|(name, limit)| limit.map(|l| (name, l.as_secs_f64())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exemplar_labels_fit_the_openmetrics_limit() {
        let w3c = TraceExemplar::new(&"a".repeat(32), &"b".repeat(16));
        assert_eq!(w3c.chars(), 63);
        assert_eq!(w3c.trace_id.len(), 32);
        let long = TraceExemplar::new(&"x".repeat(200), &"y".repeat(50));
        assert_eq!(long.chars(), EXEMPLAR_MAX_CHARS);
        let mixed = TraceExemplar::new(&"é".repeat(100), "s");
        assert!(mixed.chars() <= EXEMPLAR_MAX_CHARS);
    }
}
