//! The OTLP exporter: traces and metrics from one resolution of the settings, sharing what they
//! say about each target.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;

use super::metrics::MetricExport;
use super::settings::OtlpSettings;
use super::targets::Targets;
use super::traces::TraceExport;
use crate::probe::measure::Sample;
use crate::probe::outcome::Outcome;
use crate::sink::exporter::{Exporter, StartContext, Started};
use crate::sink::{Event, Sink};

/// Starts trace and metric export as `tracing:` and the `OTEL_*` variables ask; off when both are.
pub fn start(context: &StartContext) -> anyhow::Result<Option<Started>> {
    let config = context.config;
    let settings = OtlpSettings::resolve(&config.tracing, |k| std::env::var(k).ok());
    for note in &settings.notes {
        tracing::warn!("tracing: {note}");
    }
    if settings.traces.is_none() && settings.metrics.is_none() {
        return Ok(None);
    }
    let targets = Arc::new(Targets::new(config));
    let traces = match &settings.traces {
        None => None,
        Some(t) => {
            let export = TraceExport::start(config, &settings, t, targets.clone(), context.snapshots.clone()).context("starting trace export")?;
            tracing::info!(protocol = ?t.transport.protocol, ratio = t.sample_ratio, "exporting OTLP traces");
            Some((export, t.sample_ratio))
        }
    };
    let metrics = match &settings.metrics {
        None => None,
        Some(m) => {
            let export = MetricExport::start(config, &settings, m, targets.clone()).context("starting metric export")?;
            tracing::info!(protocol = ?m.transport.protocol, interval = ?m.interval, "exporting OTLP metrics");
            Some(export)
        }
    };
    Ok(Some(Started::new(Otlp { traces, metrics, targets })))
}

struct Otlp {
    /// The trace export and its sampling ratio.
    traces: Option<(TraceExport, f64)>,
    metrics: Option<MetricExport>,
    targets: Arc<Targets>,
}

impl Sink for Otlp {
    fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        if let Some((t, _)) = &self.traces {
            t.record(outcome, sample);
        }
        if let Some(m) = &self.metrics {
            m.record(outcome, sample);
        }
    }

    fn event(&self, event: &Event) {
        match *event {
            Event::Identity { target, engine, .. } => self.targets.set_engine(target, engine),
            Event::Release { target, before, after, .. } => {
                if let Some((t, _)) = &self.traces {
                    t.release(target, before, after);
                }
            }
            Event::AgentLoop { target, scenario, result, seconds, .. } => {
                if let Some(m) = &self.metrics {
                    m.agent_loop(target, scenario, result, seconds);
                }
            }
            _ => {}
        }
    }
}

impl Exporter for Otlp {
    fn name(&self) -> &'static str {
        "OTLP"
    }

    fn trace_ratio(&self) -> Option<f64> {
        self.traces.as_ref().map(|(_, ratio)| *ratio)
    }

    fn flush(&self) {
        if let Some((t, _)) = &self.traces {
            t.flush();
        }
        if let Some(m) = &self.metrics {
            m.flush();
        }
    }

    fn shutdown(&self, deadline: Instant) {
        if let Some((t, _)) = &self.traces {
            t.shutdown(deadline.saturating_duration_since(Instant::now()));
        }
        if let Some(m) = &self.metrics {
            m.shutdown(deadline.saturating_duration_since(Instant::now()));
        }
    }
}
