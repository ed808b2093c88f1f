//! `follow_redirects: true`: a redirect to another origin (scheme, host, port) carries no secret
//! header — not the API key, not a `headers_from` value — while plain `headers` still go, and a
//! redirect within the origin keeps them all. Two loopback servers on different ports.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::response::IntoResponse;
use llmprobe::client::TargetRuntime;

type Seen = Arc<Mutex<Vec<(String, HashMap<String, String>)>>>;

/// A server that records each request's path and headers; paths under `/to-other/` answer
/// 307 to `other` (same path after the prefix), `/to-self/` answer 307 to its own `/final/`,
/// anything else 200.
async fn server(other: Option<String>) -> (std::net::SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri, headers: axum::http::HeaderMap| {
        let (s, other) = (s.clone(), other.clone());
        async move {
            let map = headers.iter().map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned())).collect();
            let path = uri.path().to_owned();
            s.lock().unwrap().push((path.clone(), map));
            let location = if let (Some(rest), Some(other)) = (path.strip_prefix("/to-other"), &other) {
                Some(format!("{other}{rest}"))
            } else {
                path.strip_prefix("/to-self").map(|rest| format!("/final{rest}"))
            };
            match location {
                Some(l) => (axum::http::StatusCode::TEMPORARY_REDIRECT, [(axum::http::header::LOCATION, l)]).into_response(),
                None => (axum::http::StatusCode::OK, "{}").into_response(),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, seen)
}

fn secret_file(name: &str, value: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("llmprobe-redirect-secrets-{}-{name}", std::process::id()));
    std::fs::write(&path, value).unwrap();
    path
}

fn target(base: &str) -> TargetRuntime {
    let key = secret_file("key", "sk-the-api-key");
    let token = secret_file("token", "the-secret-token");
    let yaml = format!(
        "targets:\n  - name: t\n    base_url: \"{base}\"\n    api: openai-chat\n    model: m\n    follow_redirects: true\n    api_key_file: \"{}\"\n    headers: {{X-Team: llm}}\n    headers_from: {{X-Secret-Token: {{file: \"{}\"}}}}\nscenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 4}}\n",
        key.display(),
        token.display()
    );
    let cfg = llmprobe::app::loader::parse(&yaml, "t.yaml").unwrap();
    TargetRuntime::new(cfg.targets[0].clone()).unwrap()
}

fn headers_at(seen: &Seen, path: &str) -> HashMap<String, String> {
    let seen = seen.lock().unwrap();
    seen.iter().find(|(p, _)| p == path).unwrap_or_else(|| panic!("no request to {path}: {:?}", seen.iter().map(|(p, _)| p).collect::<Vec<_>>())).1.clone()
}

#[tokio::test]
async fn secrets_are_dropped_on_a_redirect_to_another_origin_and_kept_within_one() {
    let (b, seen_b) = server(None).await;
    let (a, seen_a) = server(Some(format!("http://{b}"))).await;
    let t = target(&format!("http://{a}"));

    // A probe (POST through the general client, as `follow_redirects` makes it) and a GET.
    let prepared = t.prepare("/to-other/probe", Default::default(), b"{}".to_vec()).unwrap();
    let answer = t.send(prepared, None).await.unwrap_or_else(|f| panic!("{f:?}"));
    assert_eq!(answer.status(), 200);
    let resp = t.send_general(t.request(reqwest::Method::GET, "/to-other/get").unwrap()).await.unwrap();
    assert_eq!(resp.status(), 200);

    for path in ["/to-other/probe", "/to-other/get"] {
        let first = headers_at(&seen_a, path);
        assert_eq!(first.get("authorization").map(String::as_str), Some("Bearer sk-the-api-key"));
        assert_eq!(first.get("x-secret-token").map(String::as_str), Some("the-secret-token"));
    }
    for path in ["/probe", "/get"] {
        let other = headers_at(&seen_b, path);
        assert_eq!(other.get("authorization"), None, "{path}: the API key went to another origin");
        assert_eq!(other.get("x-secret-token"), None, "{path}: a headers_from secret went to another origin");
        assert_eq!(other.get("x-team").map(String::as_str), Some("llm"), "{path}: plain headers still go");
        assert!(!other.values().any(|v| v.contains("the-secret-token") || v.contains("sk-the-api-key")), "{path}: {other:?}");
    }

    // Within the origin every header stays.
    let prepared = t.prepare("/to-self/probe", Default::default(), b"{}".to_vec()).unwrap();
    assert_eq!(t.send(prepared, None).await.unwrap_or_else(|f| panic!("{f:?}")).status(), 200);
    let same = headers_at(&seen_a, "/final/probe");
    assert_eq!(same.get("authorization").map(String::as_str), Some("Bearer sk-the-api-key"));
    assert_eq!(same.get("x-secret-token").map(String::as_str), Some("the-secret-token"));
    assert_eq!(same.get("x-team").map(String::as_str), Some("llm"));
}

/// More redirects than are followed: the last 3xx is the answer (class `http_3xx`), not a loop.
#[tokio::test]
async fn a_redirect_loop_ends_with_the_last_redirect() {
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h = hits.clone();
    let looping = axum::Router::new().fallback(move || {
        h.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async { (axum::http::StatusCode::FOUND, [(axum::http::header::LOCATION, "/again")]) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, looping).await.unwrap() });
    let t = target(&format!("http://{addr}"));
    let resp = t.send_general(t.request(reqwest::Method::GET, "/start").unwrap()).await.unwrap();
    assert_eq!(resp.status(), 302);
    assert_eq!(hits.load(std::sync::atomic::Ordering::Relaxed), 6, "the first request and 5 redirects");
}
