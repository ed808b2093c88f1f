//! The `jsonl:` exporter: each finished probe, and each release marker, as one JSON line in a
//! size-bounded file (`rotating.rs`). A line holds the probe's identity, outcome and
//! measurements; never the prompt, the answer, a failure's detail (it may quote a server body)
//! or anything of the request's headers.

use std::time::Instant;

use anyhow::Context;
use serde::Serialize;

use super::exporter::{Exporter, StartContext, Started};
use super::rotating::RotatingFile;
use super::{Event, Sink};
use crate::probe::measure::Sample;
use crate::probe::outcome::Outcome;
use crate::util::clock::unix_now;

/// Opens the file when the config has a `jsonl:` section with a path.
pub fn start(context: &StartContext) -> anyhow::Result<Option<Started>> {
    let Some(settings) = &context.config.jsonl else { return Ok(None) };
    let file =
        RotatingFile::open(&settings.path, settings.max_bytes, "jsonl export").with_context(|| format!("jsonl.path: opening {}", settings.path.display()))?;
    tracing::info!(path = %settings.path.display(), "writing each probe as a JSON line");
    Ok(Some(Started::new(Jsonl(file))))
}

struct Jsonl(RotatingFile);

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Line<'a> {
    Probe {
        /// When the request went out (Unix seconds).
        sent_unix_s: f64,
        target: &'a str,
        scenario: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        replica: Option<&'a str>,
        seq: u64,
        request_id: &'a str,
        model: &'a str,
        /// `success`, or the outcome label of the error class.
        outcome: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
        #[serde(skip_serializing_if = "Option::is_none")]
        ttft_ms: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        tpot_ms: Option<f64>,
        e2e_ms: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        input_tokens: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        output_tokens: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        goodput: Option<bool>,
    },
    Release {
        at_unix_s: f64,
        target: &'a str,
        version: &'a str,
        source: &'a str,
        /// [model, engine version] before and after; empty where unknown.
        before: [&'a str; 2],
        after: [&'a str; 2],
    },
}

impl Jsonl {
    fn write(&self, line: &Line) {
        let Ok(mut text) = serde_json::to_vec(line) else { return };
        text.push(b'\n');
        // A failed write is logged once by the file; the other exporters go on.
        let _ = self.0.write(&text);
    }
}

impl Sink for Jsonl {
    fn record(&self, o: &Outcome, sample: Option<&Sample>) {
        let tl = &o.timeline;
        let ago = Instant::now().saturating_duration_since(tl.sent).as_secs_f64();
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        self.write(&Line::Probe {
            sent_unix_s: unix_now() - ago,
            target: &o.target,
            scenario: &o.scenario,
            replica: o.replica.as_deref(),
            seq: o.seq,
            request_id: &o.request_id,
            model: &o.model,
            outcome: o.error_class().map_or("success", |c| c.outcome_label()),
            error: o.error_class().map(|c| c.as_str()),
            http_status: o.http_status,
            ttft_ms: sample.filter(|s| s.streamed).map(|s| ms(s.ttft)),
            tpot_ms: sample.and_then(|s| s.tpot.map(ms)),
            e2e_ms: ms(tl.end.saturating_duration_since(tl.sent)),
            input_tokens: sample.and_then(|s| s.input_tokens),
            output_tokens: sample.map(|s| s.output_tokens),
            goodput: sample.map(|s| s.goodput),
        });
    }

    fn event(&self, event: &Event) {
        if let Event::Release { target, version, source, at, before, after, .. } = *event {
            self.write(&Line::Release { at_unix_s: at, target, version, source, before, after });
        }
    }
}

impl Exporter for Jsonl {
    fn name(&self) -> &'static str {
        "jsonl"
    }
}
