//! Per-probe identity: the run id in every probe id, and the W3C trace and span ids a probe
//! carries from before it is sent (so its `traceparent` header and its exported span agree) and
//! the sampling decision.
//!
//! Ids are made only for a run that traces (`RunContext::trace_ratio`, set per config
//! generation from whether an OTLP endpoint is configured). Sampling is decided here, from the
//! trace id, so the `sampled` flag sent to the server and the decision to export the span are
//! the same.

/// The trace context of one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceIds {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub sampled: bool,
}

impl TraceIds {
    /// Random non-zero ids, sampled with probability `ratio` (decided from the trace id's low
    /// 8 bytes, like OTel's TraceIdRatioBased sampler).
    pub fn random(ratio: f64) -> TraceIds {
        let mut trace_id: [u8; 16] = rand::random();
        let mut span_id: [u8; 8] = rand::random();
        // All-zero ids are invalid in W3C trace context.
        trace_id[15] |= 1;
        span_id[7] |= 1;
        TraceIds { trace_id, span_id, sampled: sampled(&trace_id, ratio) }
    }

    /// Another span of the same trace, with the same sampling decision (the next probe of a
    /// conversation or cache pair).
    pub fn next_span(self) -> TraceIds {
        let mut span_id: [u8; 8] = rand::random();
        span_id[7] |= 1;
        TraceIds { span_id, ..self }
    }

    pub fn trace_hex(&self) -> String {
        hex(&self.trace_id)
    }

    pub fn span_hex(&self) -> String {
        hex(&self.span_id)
    }

    /// The W3C `traceparent` header value: `00-{trace}-{span}-{flags}`.
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-{}", self.trace_hex(), self.span_hex(), if self.sampled { "01" } else { "00" })
    }
}

fn sampled(trace_id: &[u8; 16], ratio: f64) -> bool {
    if ratio >= 1.0 {
        return true;
    }
    if ratio <= 0.0 {
        return false;
    }
    let low = u64::from_be_bytes(trace_id[8..].try_into().expect("8 bytes")) >> 1;
    (low as f64) < ratio * (1u64 << 63) as f64
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A short run id for readable probe ids: 8 hex digits, new on every start.
pub fn new_run_id() -> String {
    format!("{:08x}", rand::random::<u32>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_shape() {
        let ids = TraceIds { trace_id: [0xab; 16], span_id: [0x01; 8], sampled: true };
        assert_eq!(ids.traceparent(), format!("00-{}-{}-01", "ab".repeat(16), "01".repeat(8)));
        assert_eq!(TraceIds { sampled: false, ..ids }.traceparent().rsplit('-').next(), Some("00"));
    }

    #[test]
    fn a_next_span_keeps_the_trace_and_its_sampling() {
        let first = TraceIds::random(1.0);
        let next = first.next_span();
        assert_eq!((next.trace_id, next.sampled), (first.trace_id, true));
        assert_ne!(next.span_id, first.span_id);
    }

    #[test]
    fn sampling_ratio_is_respected() {
        assert!((0..100).all(|_| TraceIds::random(1.0).sampled));
        assert!((0..100).all(|_| !TraceIds::random(0.0).sampled));
        let n = (0..10_000).filter(|_| TraceIds::random(0.25).sampled).count();
        assert!((2000..3000).contains(&n), "{n} of 10000 sampled at 0.25");
    }
}
