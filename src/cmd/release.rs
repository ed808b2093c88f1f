//! `llmprobe release mark`: tells a running prober that a target was released; `llmprobe release
//! wait`: waits for the prober's verdict on it and exits by it (for CI/CD).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum ReleaseCommand {
    /// POST a release marker to a running prober's /api/v1/releases (it arms the detector).
    Mark(ReleaseMarkArgs),
    /// Wait for a running prober's verdict on a release (/api/v1/verdict); exit 0 passed,
    /// 1 regressed, 3 inconclusive or timed out.
    Wait(ReleaseWaitArgs),
}

#[derive(Debug, Args)]
#[command(disable_version_flag = true)]
pub struct ReleaseWaitArgs {
    /// The prober's base URL, e.g. http://llmprobe:9464.
    #[arg(long)]
    pub url: String,
    /// The target name as in the prober's config.
    #[arg(long)]
    pub target: String,
    /// The version released; a verdict on another release is not taken [default: the last one].
    #[arg(long)]
    pub version: Option<String>,
    /// Give up (exit 3) after this long, e.g. 60m.
    #[arg(long, default_value = "60m", value_parser = crate::config::parse_duration)]
    pub timeout: std::time::Duration,
    /// How often to ask.
    #[arg(long, default_value = "10s", value_parser = crate::config::parse_duration)]
    pub interval: std::time::Duration,
    /// File holding the bearer token: the prober's detect.release_read_token_file (read only)
    /// or detect.release_token_file.
    #[arg(long, env = "LLMPROBE_RELEASE_TOKEN_FILE")]
    pub token_file: PathBuf,
}

/// Exit code of `release wait` for a regressed release.
const EXIT_REGRESSED: u8 = 1;
/// Exit code of `release wait` for an inconclusive verdict or a timeout.
pub const EXIT_INCONCLUSIVE: u8 = 3;

/// `llmprobe release wait`: polls the verdict, prints a line whenever the state or the probes
/// change, and exits by the verdict. A prober that is unreachable, restarting or has not seen the
/// release yet is asked again until the timeout; a wrong token, an unreadable token file or a bad
/// URL fails at once with `EXIT_CONFIG` (2), never with the exit of a verdict: a pipeline must not
/// roll back (1) or pause (3) a release because of its own mistake.
pub async fn wait(args: &ReleaseWaitArgs) -> anyhow::Result<std::process::ExitCode> {
    match poll_verdict(args).await {
        Ok(code) => Ok(code),
        Err(err) => {
            eprintln!("error: {}", crate::util::logsafe::escape_control(&format!("{err:#}")));
            Ok(std::process::ExitCode::from(crate::EXIT_CONFIG))
        }
    }
}

async fn poll_verdict(args: &ReleaseWaitArgs) -> anyhow::Result<std::process::ExitCode> {
    use std::process::ExitCode;
    let token = crate::client::secret::resolve(&crate::config::SecretRef::File(args.token_file.clone())).context("--token-file")?;
    let url = format!("{}/api/v1/verdict", args.url.trim_end_matches('/'));
    let client = crate::client::plain_client()?;
    let deadline = tokio::time::Instant::now() + args.timeout;
    let mut query = vec![("target", args.target.clone())];
    if let Some(v) = &args.version {
        query.push(("version", v.clone()));
    }
    let with_query = reqwest::Url::parse_with_params(&url, &query).map_err(|e| anyhow::anyhow!("--url: {e}"))?;
    let mut last = String::new();
    loop {
        let resp = client.get(with_query.clone()).bearer_auth(token.expose()).timeout(std::time::Duration::from_secs(10)).send().await;
        let line = match resp {
            Err(e) => format!("waiting: GET {url}: {}", token.redact(&crate::client::error_chain(&e))),
            Ok(r) if r.status() == reqwest::StatusCode::UNAUTHORIZED || r.status() == reqwest::StatusCode::FORBIDDEN => {
                anyhow::bail!("GET {url}: HTTP {}: wrong or missing token", r.status().as_u16())
            }
            Ok(r) if !r.status().is_success() => {
                let status = r.status();
                let text = bounded_text(r).await;
                format!("waiting: HTTP {status}: {}", crate::protocol::truncate_chars(text.trim(), 200))
            }
            Ok(r) => {
                let v: serde_json::Value = serde_json::from_str(&bounded_text(r).await).unwrap_or_default();
                let state = v["state"].as_str().unwrap_or("?").to_owned();
                let line = progress(&v);
                if line != last {
                    println!("{line}");
                    last = line;
                }
                match state.as_str() {
                    "passed" => return Ok(ExitCode::SUCCESS),
                    "regressed" => return Ok(ExitCode::from(EXIT_REGRESSED)),
                    "inconclusive" => return Ok(ExitCode::from(EXIT_INCONCLUSIVE)),
                    _ => String::new(),
                }
            }
        };
        if !line.is_empty() && line != last {
            println!("{line}");
            last = line;
        }
        if tokio::time::Instant::now() + args.interval > deadline {
            println!("timed out after {:?} without a verdict", args.timeout);
            return Ok(ExitCode::from(EXIT_INCONCLUSIVE));
        }
        tokio::time::sleep(args.interval).await;
    }
}

/// The body as text, at most `MAX_VERDICT_BYTES` of it (a verdict is a few KiB).
async fn bounded_text(mut r: reqwest::Response) -> String {
    const MAX_VERDICT_BYTES: usize = 1 << 20;
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = r.chunk().await {
        body.extend_from_slice(&chunk[..chunk.len().min(MAX_VERDICT_BYTES - body.len())]);
        if body.len() >= MAX_VERDICT_BYTES {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// One progress line: state, probes so far and each signal's effect, and for a finished window
/// what it could have found.
fn progress(v: &serde_json::Value) -> String {
    let mut parts = vec![format!("{} {}: {}", v["target"].as_str().unwrap_or("?"), v["version"].as_str().unwrap_or("?"), v["state"].as_str().unwrap_or("?"))];
    for s in v["signals"].as_array().into_iter().flatten() {
        let name = s["signal"].as_str().unwrap_or("?");
        let probes = s["probes"].as_u64().unwrap_or(0);
        let effect = match (s["median_ratio"]["value"].as_f64(), s["bad_fraction_delta"]["value"].as_f64()) {
            (Some(r), _) => format!("x{r:.2}"),
            (None, Some(d)) => format!("{:+.2} pts", d * 100.0),
            _ => "-".to_owned(),
        };
        let seen = match s["detectable"].as_f64() {
            Some(d) if name == "goodput" => format!(", could see +{:.1} pts", d * 100.0),
            Some(d) => format!(", could see x{d:.2}"),
            None => String::new(),
        };
        parts.push(format!("{name} {} {effect} ({probes} probes{seen})", s["state"].as_str().unwrap_or("?")));
    }
    // While old and new replicas serve side by side: the new version's against the old ones'.
    let canary = &v["canary"];
    for s in canary["signals"].as_array().into_iter().flatten().filter(|s| s["judged"].as_bool() == Some(true)) {
        let name = s["signal"].as_str().unwrap_or("?");
        let effect = match s["effect"]["value"].as_f64() {
            Some(d) if name == "goodput" => format!("{:+.2} pts", d * 100.0),
            Some(r) => format!("x{r:.2}"),
            None => "-".to_owned(),
        };
        let state = if s["regressed"].as_bool() == Some(true) { "regressed" } else { "ok" };
        parts.push(format!(
            "canary {name} {state} {effect} ({} new / {} old probes)",
            s["probes"].as_u64().unwrap_or(0),
            s["reference_probes"].as_u64().unwrap_or(0)
        ));
    }
    parts.join("; ")
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
    /// When the release happened (RFC 3339, e.g. 2026-12-05T10:00:00Z), for a marker sent late:
    /// the probes since then are judged as if it had come on time; or `now`, stating that the
    /// release happens as the marker is sent [default: the marker's arrival, not stated].
    #[arg(long, value_parser = parse_at)]
    pub at: Option<String>,
    /// File holding the bearer token (the prober's detect.release_token_file).
    #[arg(long, env = "LLMPROBE_RELEASE_TOKEN_FILE")]
    pub token_file: PathBuf,
}

/// `--at` is checked here, so a typo fails before anything is sent.
fn parse_at(text: &str) -> Result<String, String> {
    if text == "now" {
        return Ok(text.to_owned());
    }
    crate::util::rfc3339::parse_unix(text).map(|_| text.to_owned())
}

/// `llmprobe release mark`: posts a marker to a running prober. Errors name the URL without
/// credentials and never show the token.
pub async fn mark(args: &ReleaseMarkArgs) -> anyhow::Result<()> {
    let token = crate::client::secret::resolve(&crate::config::SecretRef::File(args.token_file.clone())).context("--token-file")?;
    let url = format!("{}/api/v1/releases", args.url.trim_end_matches('/'));
    let body = serde_json::json!({"target": args.target, "version": args.version, "note": args.note, "at": args.at});
    let client = crate::client::plain_client()?;
    let resp = client
        .post(&url)
        .bearer_auth(token.expose())
        .header("content-type", "application/json")
        .body(body.to_string())
        .timeout(std::time::Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("POST {url}: {}", token.redact(&crate::client::error_chain(&e))))?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    anyhow::ensure!(status.is_success(), "POST {url}: HTTP {status}: {}", crate::protocol::truncate_chars(text.trim(), 200));
    println!("release marked: target {} version {}", args.target, args.version);
    Ok(())
}
