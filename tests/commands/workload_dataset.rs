//! Dataset replay: JSONL and ShareGPT files load relative to the config, replay in order or
//! sampled, carry their index, output length and SHA-256, and change the workload hash.

use llmprobe::app::loader;
use llmprobe::config;
use llmprobe::protocol::ProtocolKind;
use llmprobe::workload::{Sampler, fingerprint, sha256_hex};

fn load(scenario: &str) -> config::Config {
    let text = format!("targets: [{{name: t, base_url: 'http://127.0.0.1:1', api: openai-chat}}]\nscenarios:\n{scenario}");
    loader::parse(&text, "tests/fixtures/workload/probe.yaml").unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn jsonl_in_order_with_indexes_outputs_and_hashes() {
    let c = load("  - {name: replay, dataset: {path: prompts.jsonl, order: sequential, nonce: false}, output_tokens: 5}\n");
    let mut s = Sampler::uncalibrated(c.scenarios[0].clone(), 1, ProtocolKind::OpenaiChat);
    let draws: Vec<_> = (0..4).map(|_| s.draw()).collect();
    let idx: Vec<_> = draws.iter().map(|d| d.dataset_index).collect();
    assert_eq!(idx, vec![Some(0), Some(1), Some(2), Some(0)]);
    let out: Vec<_> = draws.iter().map(|d| d.output_tokens).collect();
    assert_eq!(out, vec![64, 17, 5, 64], "max_tokens, output_tokens, then the scenario's");
    assert_eq!(draws[0].prompt, "Summarize the plot of Hamlet.");
    assert_eq!(draws[0].prompt_sha256, sha256_hex(b"Summarize the plot of Hamlet."));
    assert_eq!(draws[0].input_tokens, 0);
}

#[test]
fn sharegpt_takes_first_human_turns_and_nonce_is_prepended() {
    let c = load("  - {name: chat, dataset: {path: sharegpt.json}, output_tokens: 32}\n");
    let d = c.scenarios[0].dataset.as_ref().unwrap();
    assert_eq!(d.entries.len(), 2);
    let mut s = Sampler::uncalibrated(c.scenarios[0].clone(), 2, ProtocolKind::OpenaiChat);
    let a = s.draw();
    let b = s.draw();
    let (head, prompt) = a.prompt.split_once('\n').unwrap();
    assert_eq!(head.split(' ').count(), 13, "nonce words");
    assert!(d.entries.iter().any(|e| e.prompt == prompt));
    assert_ne!(a.prompt_sha256, b.prompt_sha256, "nonces make every prompt unique");
}

#[test]
fn workload_hash_follows_the_spec_not_the_seed() {
    let a = load("  - {name: s, input_tokens: 128, output_tokens: 8}\n");
    let b = load("  - {name: s, input_tokens: 129, output_tokens: 8}\n");
    let c = load("  - {name: s, input_tokens: 128, output_tokens: 8, arrival: {kind: gamma, burstiness: 0.5}}\n");
    let (ha, hb, hc) = (fingerprint(&a), fingerprint(&b), fingerprint(&c));
    assert_eq!(ha, fingerprint(&load("  - {name: s, input_tokens: 128, output_tokens: 8}\n")));
    assert_ne!(ha.total, hb.total);
    assert_ne!(ha.total, hc.total);
    assert_eq!(ha.total.len(), 64);
}
