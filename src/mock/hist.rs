//! Fixed-bucket histograms with vLLM's bucket layouts.

pub const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
pub const ITL_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
pub const REQUEST_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// A cumulative-on-export histogram.
#[derive(Clone, Debug)]
pub struct Histogram {
    pub bounds: &'static [f64],
    /// Non-cumulative counts per bucket; the last slot is +Inf.
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram { bounds, counts: vec![0; bounds.len() + 1], sum: 0.0, count: 0 }
    }

    pub fn observe(&mut self, v: f64) {
        let i = self.bounds.iter().position(|b| v <= *b).unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    /// Writes `_bucket`, `_sum`, `_count` lines in Prometheus text format.
    pub fn write(&self, out: &mut String, name: &str, labels: &str) {
        use std::fmt::Write;
        let mut acc = 0;
        for (i, b) in self.bounds.iter().enumerate() {
            acc += self.counts[i];
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{}\"}} {acc}.0", fmt_le(*b));
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}.0", self.count);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}.0", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
    }
}

/// Bucket bounds as Python prints floats (`1.0`, `0.25`), like vLLM's page.
fn fmt_le(b: f64) -> String {
    if b.fract() == 0.0 { format!("{b:.1}") } else { format!("{b}") }
}
