//! Every example under `config/` must load, without warnings, and the demo must match the
//! built-in copy.

use std::path::Path;

use llmprobe::app::loader;
use llmprobe::config::{self, LengthSpec, SecretRef};
use llmprobe::protocol::ProtocolKind;

fn examples() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("config dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_loads_without_warnings() {
    let files = examples();
    assert!(files.len() >= 4, "expected the example configs, found {files:?}");
    for file in files {
        let config = loader::load(&file).unwrap_or_else(|e| panic!("{e}"));
        assert!(config.warnings.is_empty(), "{}: {:?}", file.display(), config.warnings);
        assert!(!config.targets.is_empty() && !config.scenarios.is_empty());
    }
}

#[test]
fn demo_is_the_shipped_file() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo.yaml");
    assert_eq!(std::fs::read_to_string(path).unwrap(), config::DEMO_YAML);
    let demo = loader::demo();
    assert_eq!(demo.targets[0].name, "mock");
    assert_eq!(demo.targets[0].base_url, "http://127.0.0.1:18000");
    assert_eq!(demo.targets[0].model.as_deref(), Some("mock-llama"));
    assert_eq!(demo.probe.seed, Some(42));
    let total: f64 = demo.scenarios.iter().map(|s| s.rate).sum();
    assert!((total - 4.0).abs() < 1e-9, "demo rate {total}");
}

#[test]
fn vllm_and_llamacpp_discover_the_model() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let vllm = loader::load(&dir.join("vllm.yaml")).unwrap();
    assert_eq!(vllm.targets[0].base_url, "http://127.0.0.1:8000");
    assert_eq!(vllm.targets[0].api, ProtocolKind::OpenaiChat);
    assert_eq!(vllm.targets[0].model, None);
    assert_eq!(vllm.targets[0].api_key, None);
    let llama = loader::load(&dir.join("llamacpp.yaml")).unwrap();
    assert_eq!(llama.targets[0].base_url, "http://127.0.0.1:8080");
    assert_eq!(llama.targets[0].api, ProtocolKind::OpenaiCompletions);
    assert_eq!(llama.targets[0].model, None);
}

#[test]
fn multi_target_resolves_rates_and_keeps_secret_references() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let c = loader::load(&dir.join("multi-target.yaml")).unwrap();
    let proxy = &c.targets[1];
    assert_eq!(proxy.base_url, "https://127.0.0.1:8443/llm");
    assert_eq!(proxy.api_key, Some(SecretRef::File("/run/secrets/llm-proxy-key".into())));
    assert_eq!(proxy.headers, vec![("X-Team".to_owned(), "search".to_owned())]);
    let rates: Vec<f64> = c.scenarios.iter().map(|s| s.rate).collect();
    assert_eq!(rates, vec![1.6, 0.4, 0.1]);
    assert_eq!(c.scenarios[2].input_tokens, LengthSpec::Fixed(16000));
}

#[test]
fn readme_example_is_valid() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("config/README.md")).expect("config/README.md");
    let start = readme.find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let len = readme[start..].find("```").expect("end of the yaml block");
    let config = loader::parse(&readme[start..start + len], "config/README.md").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.targets[0].api_key, Some(SecretRef::Env("VLLM_API_KEY".into())));
    assert_eq!(config.scenarios.len(), 2);
}

#[test]
fn behaviour_uses_every_check_against_the_mock() {
    let b = loader::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("config/behaviour.yaml")).unwrap();
    assert_eq!(b.targets[0].base_url, "http://127.0.0.1:18000");
    let all: Vec<_> = b.scenarios.iter().map(|s| s.checks.clone().expect("every scenario is checked")).collect();
    let used = |f: fn(&config::Checks) -> bool| all.iter().any(|c| f(c));
    assert!(used(|c| c.finish_reasons.is_some()) && used(|c| c.output_cap) && used(|c| c.natural_stop.is_some()));
    assert!(used(|c| !c.stop.is_empty()) && used(|c| c.structured_output.is_some()) && used(|c| c.tool_call.is_some()));
    assert!(used(|c| !c.known_answers.is_empty()) && used(|c| c.fingerprint));
}

#[test]
fn sessions_probe_the_responses_api_with_reasoning() {
    let c = loader::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("config/sessions.yaml")).unwrap();
    assert_eq!(c.targets[0].base_url, "http://127.0.0.1:18000");
    assert!(c.targets.iter().any(|t| t.api == ProtocolKind::OpenaiResponses));
    let reasoning = c.scenarios.iter().find(|s| s.reasoning.is_some()).expect("a reasoning scenario");
    assert_eq!(reasoning.reasoning.unwrap().effort, Some(config::ReasoningEffort::Low));
    assert!(reasoning.checks.as_deref().is_some_and(|k| k.reasoning_exhausted));
    assert!(c.scenarios.iter().any(|s| s.checks.as_deref().is_some_and(|k| k.tool_call.is_some())));
    let turns = c.scenarios.iter().find_map(|s| match &s.sequence {
        Some(config::Sequence::Conversation { turns, .. }) => Some(turns.len()),
        _ => None,
    });
    assert_eq!(turns, Some(4), "a four-turn conversation");
    assert!(c.scenarios.iter().any(|s| matches!(s.sequence, Some(config::Sequence::CachePair { .. }))), "a cache pair");
    let tools = c.scenarios.iter().find_map(|s| match &s.sequence {
        Some(config::Sequence::Agent(a)) => Some(a.tools.len()),
        _ => None,
    });
    assert_eq!(tools, Some(2), "an agent loop with two tools");
}
