//! Inference-engine `/metrics` pages -> the engine fields of a `Reading`. The engine family is
//! detected from the names present (vLLM, SGLang, llama.cpp, TGI), and vLLM's old and new names
//! are both understood (`gpu_cache_usage_perc` -> `kv_cache_usage_perc`, `gpu_prefix_cache_*` ->
//! `prefix_cache_*`), so a scrape across an upgrade never silently reads zero.

pub use crate::config::EngineKind;

use super::promtext::Page;
use super::reading::Reading;

impl EngineKind {
    /// Detects the family from the first sample whose name carries a known prefix.
    pub fn detect(page: &Page) -> Option<EngineKind> {
        page.samples.iter().find_map(|s| match s.name.as_str() {
            n if n.starts_with("vllm:") => Some(EngineKind::Vllm),
            n if n.starts_with("sglang:") => Some(EngineKind::Sglang),
            n if n.starts_with("llamacpp:") => Some(EngineKind::LlamaCpp),
            n if n.starts_with("tgi_") => Some(EngineKind::Tgi),
            _ => None,
        })
    }
}

/// Cumulative prefix-cache counters of the previous scrape, to turn them into a hit rate.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PrefixCounters {
    pub queries: f64,
    pub hits: f64,
}

/// Reads the engine fields from a page. `previous` holds the last prefix-cache counters (vLLM
/// exports counters; the hit rate is their ratio of increases since the previous scrape).
pub fn read(kind: EngineKind, page: &Page, previous: &mut Option<PrefixCounters>) -> Reading {
    let first = |names: &[&str]| names.iter().find_map(|n| page.sum(n));
    match kind {
        EngineKind::Vllm => {
            let counters = match (
                first(&["vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"]),
                first(&["vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"]),
            ) {
                (Some(queries), Some(hits)) => Some(PrefixCounters { queries, hits }),
                _ => None,
            };
            Reading {
                requests_running: page.sum("vllm:num_requests_running"),
                requests_waiting: page.sum("vllm:num_requests_waiting"),
                kv_cache_usage: mean(page, &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]),
                prefix_cache_hit_rate: hit_rate(counters, previous),
                ..Reading::default()
            }
        }
        EngineKind::Sglang => Reading {
            requests_running: page.sum("sglang:num_running_reqs"),
            requests_waiting: page.sum("sglang:num_queue_reqs"),
            kv_cache_usage: mean(page, &["sglang:token_usage"]),
            prefix_cache_hit_rate: mean(page, &["sglang:cache_hit_rate"]),
            ..Reading::default()
        },
        EngineKind::LlamaCpp => {
            // No KV usage gauge any more (removed upstream); cached prompt tokens give a hit rate.
            let counters = match (page.sum("llamacpp:prompt_tokens_total"), page.sum("llamacpp:prompt_tokens_cached_total")) {
                (Some(fresh), Some(cached)) => Some(PrefixCounters { queries: fresh + cached, hits: cached }),
                _ => None,
            };
            Reading {
                requests_running: page.sum("llamacpp:requests_processing"),
                requests_waiting: page.sum("llamacpp:requests_deferred"),
                prefix_cache_hit_rate: hit_rate(counters, previous),
                ..Reading::default()
            }
        }
        EngineKind::Tgi => Reading { requests_running: page.sum("tgi_batch_current_size"), requests_waiting: page.sum("tgi_queue_size"), ..Reading::default() },
    }
}

/// Mean over the page's series (several engines or data-parallel ranks) of the first name found.
fn mean(page: &Page, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| {
        let values: Vec<f64> = page.all(n).map(|s| s.value).filter(|v| v.is_finite()).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    })
}

/// Hit ratio of the increase since the previous scrape; `None` on the first scrape, when nothing
/// was queried in between, or after a counter reset.
fn hit_rate(now: Option<PrefixCounters>, previous: &mut Option<PrefixCounters>) -> Option<f64> {
    let now = now?;
    let before = previous.replace(now)?;
    let (dq, dh) = (now.queries - before.queries, now.hits - before.hits);
    (dq > 0.0 && dh >= 0.0).then(|| (dh / dq).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::promtext::parse;

    #[test]
    fn old_vllm_names_map_to_the_same_fields() {
        let old = parse("vllm:gpu_cache_usage_perc{engine=\"0\"} 0.25\nvllm:num_requests_running 3\nvllm:num_requests_waiting 1\n");
        let new = parse("vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\nvllm:num_requests_running 3\nvllm:num_requests_waiting 1\n");
        let (a, b) = (read(EngineKind::Vllm, &old, &mut None), read(EngineKind::Vllm, &new, &mut None));
        assert_eq!(a, b);
        assert_eq!(a.kv_cache_usage, Some(0.25));
        assert_eq!(a.requests_running, Some(3.0));
    }

    #[test]
    fn prefix_hit_rate_comes_from_counter_increases() {
        let mut prev = None;
        let p1 = parse("vllm:prefix_cache_queries_total 100\nvllm:prefix_cache_hits_total 10\n");
        let p2 = parse("vllm:prefix_cache_queries_total 200\nvllm:prefix_cache_hits_total 85\n");
        assert_eq!(read(EngineKind::Vllm, &p1, &mut prev).prefix_cache_hit_rate, None);
        assert_eq!(read(EngineKind::Vllm, &p2, &mut prev).prefix_cache_hit_rate, Some(0.75));
        // A restart resets the counters: no rate rather than a negative one.
        let p3 = parse("vllm:prefix_cache_queries_total 5\nvllm:prefix_cache_hits_total 0\n");
        assert_eq!(read(EngineKind::Vllm, &p3, &mut prev).prefix_cache_hit_rate, None);
    }
}
