//! The figures a summary gives per point: one name each, the key it has in `summary.json`.

/// A figure of a repeat (and, across repeats, of a point's spread).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Figure {
    RequestThroughput,
    OutputTokenThroughput,
    TotalTokenThroughput,
    RequestGoodput,
    GoodputRatio,
    TtftP50,
    TtftP95,
    TtftP99,
    TpotP50,
    TpotP95,
    TpotP99,
    ItlP50,
    ItlP95,
    ItlP99,
    E2eP50,
    E2eP95,
    E2eP99,
}

impl Figure {
    /// Every figure, each with a spread across repeats.
    pub const ALL: [Figure; 17] = [
        Figure::RequestThroughput,
        Figure::OutputTokenThroughput,
        Figure::TotalTokenThroughput,
        Figure::RequestGoodput,
        Figure::GoodputRatio,
        Figure::TtftP50,
        Figure::TtftP95,
        Figure::TtftP99,
        Figure::TpotP50,
        Figure::TpotP95,
        Figure::TpotP99,
        Figure::ItlP50,
        Figure::ItlP95,
        Figure::ItlP99,
        Figure::E2eP50,
        Figure::E2eP95,
        Figure::E2eP99,
    ];

    /// The key in `summary.json` (a `RepeatSummary` field and a `spread` entry).
    pub fn name(self) -> &'static str {
        match self {
            Figure::RequestThroughput => "request_throughput_rps",
            Figure::OutputTokenThroughput => "output_token_throughput_per_s",
            Figure::TotalTokenThroughput => "total_token_throughput_per_s",
            Figure::RequestGoodput => "request_goodput_rps",
            Figure::GoodputRatio => "goodput_ratio",
            Figure::TtftP50 => "ttft_p50_ms",
            Figure::TtftP95 => "ttft_p95_ms",
            Figure::TtftP99 => "ttft_p99_ms",
            Figure::TpotP50 => "tpot_p50_ms",
            Figure::TpotP95 => "tpot_p95_ms",
            Figure::TpotP99 => "tpot_p99_ms",
            Figure::ItlP50 => "itl_p50_ms",
            Figure::ItlP95 => "itl_p95_ms",
            Figure::ItlP99 => "itl_p99_ms",
            Figure::E2eP50 => "e2e_p50_ms",
            Figure::E2eP95 => "e2e_p95_ms",
            Figure::E2eP99 => "e2e_p99_ms",
        }
    }

    pub fn parse(name: &str) -> Option<Figure> {
        Figure::ALL.into_iter().find(|f| f.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Figure::ALL {
            assert_eq!(Figure::parse(f.name()), Some(f));
        }
    }
}
