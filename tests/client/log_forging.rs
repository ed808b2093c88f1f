//! A server cannot write log lines or drive the terminal: a newline, CR or ESC in a model id,
//! an engine version or an error message it sends is escaped where the prober logs it (stderr)
//! and where `probe --once` prints it (stdout), so every log line is one the prober started.
//! A raw TCP server on 127.0.0.1 answers the discovery and probe requests with such text.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

const BIN: &str = env!("CARGO_BIN_EXE_llmprobe");

/// JSON bodies by request path, each carrying text that would forge a line if printed raw.
fn answer(path: &str) -> (u16, &'static str) {
    match path {
        "/v1/models" => (200, r#"{"object":"list","data":[{"id":"m\nFORGED-MODEL \u001b[31mred","object":"model"}]}"#),
        "/version" => (200, r#"{"version":"1.0\nFORGED-VERSION"}"#),
        "/v1/chat/completions" => (500, r#"{"error":{"message":"boom\r\nFORGED-ERROR \u001b[2J","type":"server_error"}}"#),
        _ => (404, r#"{"error":"not here\nFORGED-404"}"#),
    }
}

async fn server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                let path = loop {
                    if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
                        let length: usize = head.lines().find_map(|l| l.strip_prefix("content-length:")?.trim().parse().ok()).unwrap_or(0);
                        if seen.len() >= end + 4 + length {
                            break head.split(' ').nth(1).unwrap_or("").to_owned();
                        }
                    }
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                };
                let (status, body) = answer(&path);
                let reply =
                    format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                let _ = sock.write_all(reply.as_bytes()).await;
                let _ = sock.shutdown().await;
                while matches!(sock.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

fn config_file(addr: SocketAddr, name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("llmprobe-log-forging-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.yaml");
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: 5, shutdown_grace: 1s}}\ntargets:\n  - {{name: t, base_url: \"http://{addr}\", api: openai-chat}}\nscenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 4}}\n"
    );
    std::fs::write(&file, yaml).unwrap();
    file
}

/// No raw control character but the line ends, and no line that the server's text started.
fn check_lines(text: &str, line_start_ok: impl Fn(&str) -> bool, what: &str) {
    assert!(!text.contains(['\u{1b}', '\r', '\0']), "{what}: raw control characters in\n{text:?}");
    for line in text.lines() {
        assert!(line_start_ok(line), "{what}: a line the server wrote: {line:?}\nin\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_output_escapes_server_text() {
    let addr = server().await;
    let file = config_file(addr, "once");
    let run = tokio::process::Command::new(BIN).args(["probe", "--once", "--config"]).arg(&file).stdin(Stdio::null()).kill_on_drop(true).output();
    let out = tokio::time::timeout(Duration::from_secs(30), run).await.expect("probe --once ends by itself").unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    check_lines(&stdout, |l| !l.trim_start().starts_with("FORGED"), "stdout");
    // The server's text is there, escaped, on the line that quotes it.
    assert!(stdout.lines().any(|l| l.contains("model=m\\nFORGED-MODEL \\u{1b}[31mred")), "{stdout}");
    assert!(stdout.lines().any(|l| l.contains("verdict") && l.contains("boom\\r\\nFORGED-ERROR")), "{stdout}");
    check_lines(&String::from_utf8_lossy(&out.stderr), |l| !l.trim_start().starts_with("FORGED"), "stderr");
    std::fs::remove_dir_all(file.parent().unwrap()).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_escape_server_text() {
    let addr = server().await;
    let file = config_file(addr, "daemon");
    let mut child = tokio::process::Command::new(BIN)
        .args(["probe", "--config"])
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    // Read until both the discovery and the probe failure (which quotes the server's error
    // message) are logged: they can come in either order.
    let read = async {
        let (mut discovered, mut failed) = (false, false);
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push_str(&line);
            seen.push('\n');
            discovered |= line.contains("FORGED-MODEL");
            failed |= line.contains("FORGED-ERROR");
            if discovered && failed {
                break;
            }
        }
    };
    let done = tokio::time::timeout(Duration::from_secs(30), read).await;
    child.kill().await.ok();
    std::fs::remove_dir_all(file.parent().unwrap()).ok();
    assert!(done.is_ok(), "no probe failure logged within 30 s:\n{seen}");
    // Every line is one of the prober's: it starts with its timestamp.
    check_lines(&seen, |l| l.starts_with(|c: char| c.is_ascii_digit()), "log");
    assert!(seen.lines().any(|l| l.contains("discovered") && l.contains("m\\nFORGED-MODEL \\u{1b}[31mred")), "{seen}");
    assert!(seen.lines().any(|l| l.contains("probe failed") && l.contains("boom\\r\\nFORGED-ERROR")), "{seen}");
}
