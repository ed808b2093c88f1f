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

/// The engine's cumulative counters at one scrape, to turn into rates and ratios of increases.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    /// Seconds on the scraper's monotonic clock.
    pub at_s: f64,
    /// Prefix-cache queries and hits (tokens).
    pub prefix: Option<(f64, f64)>,
    /// Requests offered (arrived or finished, by what the engine counts) and prompt tokens.
    pub requests: Option<f64>,
    pub prompt_tokens: Option<f64>,
}

/// Reads the engine fields from a page scraped at `at_s` (a monotonic clock in seconds).
/// `previous` holds the last scrape's counters: the prefix-cache hit rate is their ratio of
/// increases, the offered rates their increase over the time between the scrapes.
pub fn read(kind: EngineKind, page: &Page, at_s: f64, previous: &mut Option<Counters>) -> Reading {
    let first = |names: &[&str]| names.iter().find_map(|n| page.sum(n));
    let both = |a: Option<f64>, b: Option<f64>| a.zip(b);
    let (reading, counters) = match kind {
        EngineKind::Vllm => (
            Reading {
                requests_running: page.sum("vllm:num_requests_running"),
                requests_waiting: page.sum("vllm:num_requests_waiting"),
                kv_cache_usage: mean(page, &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]),
                ..Reading::default()
            },
            Counters {
                prefix: both(
                    first(&["vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"]),
                    first(&["vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"]),
                ),
                requests: page.sum("vllm:request_success_total"),
                prompt_tokens: page.sum("vllm:prompt_tokens_total"),
                at_s,
            },
        ),
        EngineKind::Sglang => (
            Reading {
                requests_running: page.sum("sglang:num_running_reqs"),
                requests_waiting: page.sum("sglang:num_queue_reqs"),
                kv_cache_usage: mean(page, &["sglang:token_usage"]),
                prefix_cache_hit_rate: mean(page, &["sglang:cache_hit_rate"]),
                ..Reading::default()
            },
            Counters { prefix: None, requests: page.sum("sglang:num_requests_total"), prompt_tokens: page.sum("sglang:prompt_tokens_total"), at_s },
        ),
        EngineKind::LlamaCpp => {
            // No KV usage gauge any more (removed upstream); cached prompt tokens give a hit rate.
            let (fresh, cached) = (page.sum("llamacpp:prompt_tokens_total"), page.sum("llamacpp:prompt_tokens_cached_total"));
            (
                Reading {
                    requests_running: page.sum("llamacpp:requests_processing"),
                    requests_waiting: page.sum("llamacpp:requests_deferred"),
                    ..Reading::default()
                },
                Counters {
                    prefix: both(fresh, cached).map(|(f, c)| (f + c, c)),
                    requests: None,
                    prompt_tokens: fresh.map(|f| f + cached.unwrap_or(0.0)),
                    at_s,
                },
            )
        }
        EngineKind::Tgi => (
            Reading { requests_running: page.sum("tgi_batch_current_size"), requests_waiting: page.sum("tgi_queue_size"), ..Reading::default() },
            Counters { prefix: None, requests: page.sum("tgi_request_count"), prompt_tokens: page.sum("tgi_request_input_length_sum"), at_s },
        ),
    };
    let before = previous.replace(counters);
    let mut reading = reading;
    if let Some(before) = before {
        if reading.prefix_cache_hit_rate.is_none() {
            reading.prefix_cache_hit_rate = hit_rate(counters.prefix, before.prefix);
        }
        let dt = counters.at_s - before.at_s;
        reading.offered_requests_per_s = rate(counters.requests, before.requests, dt);
        reading.offered_prompt_tokens_per_s = rate(counters.prompt_tokens, before.prompt_tokens, dt);
    }
    reading
}

/// Mean over the page's series (several engines or data-parallel ranks) of the first name found.
fn mean(page: &Page, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| {
        let values: Vec<f64> = page.all(n).map(|s| s.value).filter(|v| v.is_finite()).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    })
}

/// Hit ratio of the increase since the previous scrape; `None` when nothing was queried in
/// between, or after a counter reset.
fn hit_rate(now: Option<(f64, f64)>, before: Option<(f64, f64)>) -> Option<f64> {
    let ((q1, h1), (q0, h0)) = (now?, before?);
    let (dq, dh) = (q1 - q0, h1 - h0);
    (dq > 0.0 && dh >= 0.0).then(|| (dh / dq).clamp(0.0, 1.0))
}

/// Increase per second between two scrapes; `None` after a counter reset or without time between.
fn rate(now: Option<f64>, before: Option<f64>, dt: f64) -> Option<f64> {
    let d = now? - before?;
    (dt > 0.0 && d >= 0.0 && d.is_finite()).then(|| d / dt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::promtext::parse;

    #[test]
    fn old_vllm_names_map_to_the_same_fields() {
        let old = parse("vllm:gpu_cache_usage_perc{engine=\"0\"} 0.25\nvllm:num_requests_running 3\nvllm:num_requests_waiting 1\n");
        let new = parse("vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\nvllm:num_requests_running 3\nvllm:num_requests_waiting 1\n");
        let (a, b) = (read(EngineKind::Vllm, &old, 0.0, &mut None), read(EngineKind::Vllm, &new, 0.0, &mut None));
        assert_eq!(a, b);
        assert_eq!(a.kv_cache_usage, Some(0.25));
        assert_eq!(a.requests_running, Some(3.0));
    }

    #[test]
    fn prefix_hit_rate_comes_from_counter_increases() {
        let mut prev = None;
        let p1 = parse("vllm:prefix_cache_queries_total 100\nvllm:prefix_cache_hits_total 10\n");
        let p2 = parse("vllm:prefix_cache_queries_total 200\nvllm:prefix_cache_hits_total 85\n");
        assert_eq!(read(EngineKind::Vllm, &p1, 0.0, &mut prev).prefix_cache_hit_rate, None);
        assert_eq!(read(EngineKind::Vllm, &p2, 5.0, &mut prev).prefix_cache_hit_rate, Some(0.75));
        // A restart resets the counters: no rate rather than a negative one.
        let p3 = parse("vllm:prefix_cache_queries_total 5\nvllm:prefix_cache_hits_total 0\n");
        assert_eq!(read(EngineKind::Vllm, &p3, 10.0, &mut prev).prefix_cache_hit_rate, None);
    }

    #[test]
    fn offered_load_is_the_rate_of_each_engines_counters() {
        let cases = [
            (
                EngineKind::Vllm,
                "vllm:request_success_total{finished_reason=\"stop\"} 10\nvllm:request_success_total{finished_reason=\"length\"} 10\nvllm:prompt_tokens_total 1000\n",
                "vllm:request_success_total{finished_reason=\"stop\"} 30\nvllm:request_success_total{finished_reason=\"length\"} 20\nvllm:prompt_tokens_total 3000\n",
            ),
            (
                EngineKind::Sglang,
                "sglang:num_requests_total 20\nsglang:prompt_tokens_total 1000\n",
                "sglang:num_requests_total 50\nsglang:prompt_tokens_total 3000\n",
            ),
            (EngineKind::Tgi, "tgi_request_count 20\ntgi_request_input_length_sum 1000\n", "tgi_request_count 50\ntgi_request_input_length_sum 3000\n"),
            (
                EngineKind::LlamaCpp,
                "llamacpp:prompt_tokens_total 600\nllamacpp:prompt_tokens_cached_total 400\n",
                "llamacpp:prompt_tokens_total 1800\nllamacpp:prompt_tokens_cached_total 1200\n",
            ),
        ];
        for (kind, before, after) in cases {
            let mut prev = None;
            let first = read(kind, &parse(before), 100.0, &mut prev);
            assert_eq!((first.offered_requests_per_s, first.offered_prompt_tokens_per_s), (None, None), "{kind:?}: no rate from one scrape");
            let r = read(kind, &parse(after), 110.0, &mut prev);
            assert_eq!(r.offered_prompt_tokens_per_s, Some(200.0), "{kind:?}");
            let requests = if kind == EngineKind::LlamaCpp { None } else { Some(3.0) };
            assert_eq!(r.offered_requests_per_s, requests, "{kind:?}");
            // A restart resets the counters: no rate rather than a negative one.
            let reset = read(kind, &parse(before), 120.0, &mut prev);
            assert_eq!((reset.offered_requests_per_s, reset.offered_prompt_tokens_per_s), (None, None), "{kind:?}");
        }
    }
}
