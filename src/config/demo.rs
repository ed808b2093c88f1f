//! The demo's config, built in.

/// The built-in configuration used by `llmprobe demo` (probes the bundled mock engine).
pub const DEMO_YAML: &str = include_str!("../../config/demo.yaml");
