//! Fixed-bucket histograms with vLLM's bucket layouts.

pub const TTFT_BUCKETS: &[f64] =
    &[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0];
pub const ITL_BUCKETS: &[f64] = &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
/// `vllm:iteration_tokens_total`: tokens scheduled per engine step.
pub const ITERATION_BUCKETS: &[f64] = &[1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0];
pub const REQUEST_BUCKETS: &[f64] =
    &[0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0];

/// vLLM's `build_1_2_5_buckets(max_model_len)`: 1, 2, 5, 10, 20, 50, ... up to `max`.
pub fn one_two_five(max: u32) -> Vec<f64> {
    let mut out = Vec::new();
    let mut exp = 1.0;
    loop {
        for m in [1.0, 2.0, 5.0] {
            let b = m * exp;
            if b > f64::from(max) {
                return out;
            }
            out.push(b);
        }
        exp *= 10.0;
    }
}

/// A cumulative-on-export histogram.
#[derive(Clone, Debug)]
pub struct Histogram {
    pub bounds: Vec<f64>,
    /// Non-cumulative counts per bucket; the last slot is +Inf.
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &[f64]) -> Self {
        Histogram { bounds: bounds.to_vec(), counts: vec![0; bounds.len() + 1], sum: 0.0, count: 0 }
    }

    pub fn observe(&mut self, v: f64) {
        let i = self.bounds.iter().position(|b| v <= *b).unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    /// Writes `_bucket`, `_sum`, `_count` lines in Prometheus text format.
    /// `labels` is `engine="0",model_name="..."`; `le` goes between them, sorted as vLLM's page.
    pub fn write(&self, out: &mut String, name: &str, labels: &str) {
        use std::fmt::Write;
        let (first, rest) = labels.split_once(',').unwrap_or((labels, ""));
        let sep = if rest.is_empty() { "" } else { "," };
        let mut acc = 0;
        for (i, b) in self.bounds.iter().enumerate() {
            acc += self.counts[i];
            let _ = writeln!(out, "{name}_bucket{{{first},le=\"{}\"{sep}{rest}}} {acc}.0", fmt_le(*b));
        }
        let _ = writeln!(out, "{name}_bucket{{{first},le=\"+Inf\"{sep}{rest}}} {}.0", self.count);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}.0", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
    }
}

/// Bucket bounds as Python prints floats (`1.0`, `0.25`), like vLLM's page.
fn fmt_le(b: f64) -> String {
    if b.fract() == 0.0 { format!("{b:.1}") } else { format!("{b}") }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_two_five_stops_at_the_context_length() {
        assert_eq!(super::one_two_five(2048), [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0]);
        assert_eq!(super::one_two_five(5000).last(), Some(&5000.0));
    }
}
