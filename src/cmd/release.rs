//! `llmprobe release mark`: tells a running prober that a target was released (for CI/CD).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum ReleaseCommand {
    /// POST a release marker to a running prober's /api/v1/releases (it arms the detector).
    Mark(ReleaseMarkArgs),
}

#[derive(Debug, Args)]
#[command(disable_version_flag = true)]
pub struct ReleaseMarkArgs {
    /// The prober's base URL, e.g. http://llmprobe:9464.
    #[arg(long)]
    pub url: String,
    /// The target name as in the prober's config.
    #[arg(long)]
    pub target: String,
    /// The version released (image tag, git revision, ...).
    #[arg(long)]
    pub version: String,
    /// A short note (change ticket, pipeline id).
    #[arg(long)]
    pub note: Option<String>,
    /// When the release happened (RFC 3339, e.g. 2026-12-05T10:00:00Z), for a marker sent late;
    /// the probes since then are judged as if it had come on time [default: now].
    #[arg(long, value_parser = parse_at)]
    pub at: Option<String>,
    /// File holding the bearer token (the prober's detect.release_token_file).
    #[arg(long, env = "LLMPROBE_RELEASE_TOKEN_FILE")]
    pub token_file: PathBuf,
}

/// `--at` is checked here, so a typo fails before anything is sent.
fn parse_at(text: &str) -> Result<String, String> {
    crate::util::rfc3339::parse_unix(text).map(|_| text.to_owned())
}

/// `llmprobe release mark`: posts a marker to a running prober. Errors name the URL without
/// credentials and never show the token.
pub async fn mark(args: &ReleaseMarkArgs) -> anyhow::Result<()> {
    let token = crate::client::secret::resolve(&crate::config::SecretRef::File(args.token_file.clone())).context("--token-file")?;
    let url = format!("{}/api/v1/releases", args.url.trim_end_matches('/'));
    let body = serde_json::json!({"target": args.target, "version": args.version, "note": args.note, "at": args.at});
    let client = crate::client::target::plain_client()?;
    let resp = client
        .post(&url)
        .bearer_auth(token.expose())
        .header("content-type", "application/json")
        .body(body.to_string())
        .timeout(std::time::Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("POST {url}: {}", token.redact(&crate::client::target::error_chain(&e))))?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    anyhow::ensure!(status.is_success(), "POST {url}: HTTP {status}: {}", crate::protocol::truncate_chars(text.trim(), 200));
    println!("release marked: target {} version {}", args.target, args.version);
    Ok(())
}
