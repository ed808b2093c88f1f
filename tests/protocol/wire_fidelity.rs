//! Wire fidelity end to end: streams written the many ways the WHATWG event-stream rules (and
//! JSON Lines) allow are read the same on every API family; the stream-outcome precedence of
//! docs/outcomes.md holds row by row on every family, served by a raw loopback server that controls every
//! byte (and records the request headers); content codings are asked for and decoded as
//! documented, and a gzip stream from the mock is timed per frame like the plain one.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{config, start_mock};
use llmprobe::client::TargetRuntime;
use llmprobe::mock::MockOptions;
use llmprobe::pipeline::exec::{Probe, execute};
use llmprobe::probe::outcome::{ErrorClass, Outcome};
use llmprobe::workload::Draw;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// How the raw server delimits the body.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Delim {
    /// `Transfer-Encoding: chunked`, one HTTP chunk per piece, properly terminated.
    Chunked,
    /// Chunked, but the connection closes without the terminating chunk.
    ChunkedCut,
    /// `Content-Length` of the whole body.
    Length,
    /// `Content-Length` larger than what is sent, then close.
    LengthShort,
    /// No length: the body ends when the connection closes.
    Close,
}

#[derive(Clone)]
struct Answer {
    content_type: &'static str,
    extra_headers: String,
    pieces: Vec<Vec<u8>>,
    delim: Delim,
}

fn answer(content_type: &'static str, body: &[u8], piece: usize, delim: Delim) -> Answer {
    let pieces = if body.is_empty() { Vec::new() } else { body.chunks(piece.max(1)).map(<[u8]>::to_vec).collect() };
    Answer { content_type, extra_headers: String::new(), pieces, delim }
}

/// Serves `answer` to every request; returns the address and the request heads received.
async fn raw_server(answer: Answer) -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else { return };
            let a = answer.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                seen.lock().unwrap().push(String::from_utf8_lossy(&req).into_owned());
                let total: usize = a.pieces.iter().map(Vec::len).sum();
                let framing = match a.delim {
                    Delim::Chunked | Delim::ChunkedCut => "transfer-encoding: chunked\r\n".to_owned(),
                    Delim::Length => format!("content-length: {total}\r\n"),
                    Delim::LengthShort => format!("content-length: {}\r\n", total + 100),
                    Delim::Close => "connection: close\r\n".to_owned(),
                };
                let head = format!("HTTP/1.1 200 OK\r\ncontent-type: {}\r\n{framing}{}\r\n", a.content_type, a.extra_headers);
                let _ = conn.write_all(head.as_bytes()).await;
                for p in &a.pieces {
                    let bytes = match a.delim {
                        Delim::Chunked | Delim::ChunkedCut => [format!("{:x}\r\n", p.len()).as_bytes(), p, b"\r\n"].concat(),
                        _ => p.clone(),
                    };
                    if conn.write_all(&bytes).await.is_err() {
                        return;
                    }
                    let _ = conn.flush().await;
                    tokio::time::sleep(Duration::from_micros(300)).await;
                }
                if a.delim == Delim::Chunked {
                    let _ = conn.write_all(b"0\r\n\r\n").await;
                }
                let _ = conn.shutdown().await;
            });
        }
    });
    (addr, heads)
}

async fn probe_at(base: &str, api: &str, extra: &str, headers: &str) -> Outcome {
    let yaml =
        format!("    model: mock-llama\n    headers: {{x-test: \"1\"{headers}}}\n    timeouts: {{connect: 1s, ttft: 3s, idle: 3s, total: 10s}}\n{extra}");
    let cfg = config(base, api, "{rate: 1}", &yaml, 12);
    let target = Arc::new(TargetRuntime::new(cfg.targets[0].clone()).unwrap());
    let draw = Draw { input_tokens: 8, output_tokens: 12, prompt: "why is the sky blue".into(), ..Draw::default() };
    execute(Probe { target, scenario: Arc::from("s"), seq: 0, draw, intended: Instant::now(), trace_ratio: None }, &CancellationToken::new()).await
}

async fn probe_raw(api: &str, a: Answer) -> (Outcome, Vec<String>) {
    let (addr, heads) = raw_server(a).await;
    let o = probe_at(&format!("http://{addr}"), api, "", "").await;
    let h = heads.lock().unwrap().clone();
    (o, h)
}

/// One API family's frames, as its server writes them.
struct Family {
    api: &'static str,
    sse: bool,
    text: &'static str,
    /// The frame(s) that end a complete stream (finish reason and end marker).
    end: &'static [&'static str],
    /// Frames that end a stream without carrying text (TGI's last event usually has a token).
    bare_end: &'static [&'static str],
    /// Text frames among `end`.
    end_texts: usize,
    error: &'static str,
}

const FAMILIES: &[Family] = &[
    Family {
        api: "openai-chat",
        sse: true,
        text: r#"{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}"#,
        end: &[r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#, "[DONE]"],
        bare_end: &[r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#, "[DONE]"],
        end_texts: 0,
        error: r#"{"error":{"message":"boom","type":"server_error","code":500}}"#,
    },
    Family {
        api: "openai-completions",
        sse: true,
        text: r#"{"choices":[{"index":0,"text":"hi","finish_reason":null}]}"#,
        end: &[r#"{"choices":[{"index":0,"text":"","finish_reason":"length"}]}"#, "[DONE]"],
        bare_end: &[r#"{"choices":[{"index":0,"text":"","finish_reason":"length"}]}"#, "[DONE]"],
        end_texts: 0,
        error: r#"{"error":{"message":"boom","type":"server_error","code":500}}"#,
    },
    Family {
        api: "openai-responses",
        sse: true,
        text: r#"{"content_index":0,"delta":"hi","item_id":"m","logprobs":[],"output_index":0,"sequence_number":4,"type":"response.output_text.delta"}"#,
        end: &[
            r#"{"response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],"usage":{"input_tokens":3,"output_tokens":3}},"sequence_number":9,"type":"response.completed"}"#,
        ],
        bare_end: &[
            r#"{"response":{"status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":0}},"sequence_number":2,"type":"response.completed"}"#,
        ],
        end_texts: 0,
        error: r#"{"type":"error","code":"server_error","message":"boom","param":null,"sequence_number":3}"#,
    },
    Family {
        api: "llamacpp",
        sse: true,
        text: r#"{"content":"hi","stop":false}"#,
        end: &[r#"{"content":"","stop":true,"stop_type":"limit"}"#],
        bare_end: &[r#"{"content":"","stop":true,"stop_type":"limit"}"#],
        end_texts: 0,
        error: r#"{"error":{"code":500,"message":"boom","type":"server_error"}}"#,
    },
    Family {
        api: "tgi",
        sse: true,
        text: r#"{"index":0,"token":{"id":1,"text":"hi","special":false},"generated_text":null,"details":null}"#,
        end: &[r#"{"index":1,"token":{"id":2,"text":"!","special":false},"generated_text":"hi!","details":{"finish_reason":"length","generated_tokens":2}}"#],
        bare_end: &[r#"{"index":0,"token":{"id":2,"text":"","special":true},"generated_text":"","details":{"finish_reason":"length","generated_tokens":1}}"#],
        end_texts: 1,
        error: r#"{"error":"boom","error_type":"generation"}"#,
    },
    Family {
        api: "ollama-generate",
        sse: false,
        text: r#"{"model":"m","response":"hi","done":false}"#,
        end: &[r#"{"model":"m","response":"","done":true,"done_reason":"length","eval_count":3}"#],
        bare_end: &[r#"{"model":"m","response":"","done":true,"done_reason":"length","eval_count":3}"#],
        end_texts: 0,
        error: r#"{"error":"boom"}"#,
    },
    Family {
        api: "ollama-chat",
        sse: false,
        text: r#"{"model":"m","message":{"role":"assistant","content":"hi"},"done":false}"#,
        end: &[r#"{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"length","eval_count":3}"#],
        bare_end: &[r#"{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"length","eval_count":3}"#],
        end_texts: 0,
        error: r#"{"error":"boom"}"#,
    },
];

impl Family {
    fn content_type(&self) -> &'static str {
        if self.sse { "text/event-stream" } else { "application/x-ndjson" }
    }

    /// Plain framing: `data: X\n\n` or `X\n`.
    fn plain(&self, frames: &[&str]) -> Vec<u8> {
        frames.iter().map(|f| if self.sse { format!("data: {f}\n\n") } else { format!("{f}\n") }).collect::<String>().into_bytes()
    }

    fn stream(&self, texts: usize) -> Vec<&'static str> {
        std::iter::repeat_n(self.text, texts).chain(self.end.iter().copied()).collect()
    }
}

/// The same frames written with everything the WHATWG rules allow: a BOM, comments, CRLF, lone
/// CR and LF line ends, `retry`/`id`/`event`/unknown fields, a field without a colon, `data:`
/// with and without the space, and each JSON payload split over two `data` lines.
fn whatwg_style(frames: &[&str]) -> Vec<u8> {
    let ends = ["\r\n", "\n", "\r"];
    let mut out = b"\xEF\xBB\xBF: a comment\r\nretry: 3000\n".to_vec();
    for (i, f) in frames.iter().enumerate() {
        let nl = ends[i % 3];
        out.extend(format!(": keep-alive {i}{nl}id: {i}{nl}event{nl}x-unknown: field{nl}").bytes());
        match f.find(',') {
            Some(c) => out.extend(format!("data:{}{nl}data: {}{nl}", &f[..=c], &f[c + 1..]).bytes()),
            None => out.extend(format!("data: {f}{nl}").bytes()),
        }
        out.extend(nl.bytes());
    }
    out
}

/// NDJSON written every way JSON Lines allows: BOM, CRLF, blank lines, no final newline.
fn ndjson_style(frames: &[&str]) -> Vec<u8> {
    let mut out = b"\xEF\xBB\xBF".to_vec();
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(f.as_bytes());
        if i + 1 < frames.len() {
            out.extend_from_slice(if i % 2 == 0 { b"\r\n\r\n" } else { b"\n  \n" });
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_the_grammar_allows_reads_the_same_on_every_family() {
    let mut wrong = Vec::new();
    for f in FAMILIES {
        let frames = f.stream(5);
        let body = if f.sse { whatwg_style(&frames) } else { ndjson_style(&frames) };
        for piece in [1, 3, 7, 64, 100_000] {
            let (o, _) = probe_raw(f.api, answer(f.content_type(), &body, piece, Delim::Chunked)).await;
            if o.result.is_err() || o.timeline.text_frames.len() != 5 + f.end_texts {
                wrong.push(format!("{} piece {piece}: {:?}, {} text frames", f.api, o.result, o.timeline.text_frames.len()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The stream-outcome precedence (docs/outcomes.md), one row per case, on every family.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcome_precedence_rows_hold_on_every_family() {
    use Delim::*;
    use ErrorClass::*;
    let mut wrong = Vec::new();
    for f in FAMILIES {
        let ct = f.content_type();
        let ok = f.plain(&f.stream(2));
        let mut rows: Vec<(&str, Answer, Option<ErrorClass>)> = vec![
            ("complete stream", answer(ct, &ok, 1 << 20, Chunked), None),
            ("complete stream, length-delimited", answer(ct, &ok, 9, Length), None),
            ("complete stream, close-delimited", answer(ct, &ok, 9, Close), None),
            ("wrong content type", answer("text/html", &ok, 1 << 20, Chunked), Some(Parse)),
            ("error object first, body then broken", answer(ct, &[f.plain(&[f.error]), b"x".to_vec()].concat(), 1 << 20, ChunkedCut), Some(StreamError)),
            ("error object after text", answer(ct, &f.plain(&[f.text, f.error]), 1 << 20, Chunked), Some(StreamError)),
            ("malformed frame", answer(ct, &f.plain(&[f.text, "{\"choices\":[", f.end[0]]), 1 << 20, Chunked), Some(Parse)),
            ("headers, then the connection closes (chunked, no body)", answer(ct, b"", 1, ChunkedCut), Some(Truncated)),
            ("text, then the body breaks off", answer(ct, &f.plain(&[f.text, f.text]), 1 << 20, ChunkedCut), Some(Truncated)),
            ("text, then fewer bytes than content-length", answer(ct, &f.plain(&[f.text]), 1 << 20, LengthShort), Some(Truncated)),
            ("complete empty body (content-length 0)", answer(ct, b"", 1, Length), Some(EmptyStream)),
            ("complete empty body (close-delimited)", answer(ct, b"", 1, Close), Some(EmptyStream)),
            ("end marker without text", answer(ct, &f.plain(f.bare_end), 1 << 20, Chunked), Some(EmptyStream)),
            ("text without end marker", answer(ct, &f.plain(&[f.text, f.text]), 1 << 20, Chunked), Some(Truncated)),
            ("unsupported content coding", Answer { extra_headers: "content-encoding: br\r\n".into(), ..answer(ct, &ok, 1 << 20, Chunked) }, Some(Parse)),
            ("corrupt gzip body", Answer { extra_headers: "content-encoding: gzip\r\n".into(), ..answer(ct, &ok, 1 << 20, Chunked) }, Some(Parse)),
        ];
        if f.sse {
            let comments = b": ping\n\n: ping\r\n\r\n".to_vec();
            rows.push(("only comments", answer(ct, &comments, 1 << 20, Chunked), Some(EmptyStream)));
            // Everything but the blank line after the last event: never dispatched.
            let mut cut = ok.clone();
            cut.truncate(cut.len() - 1);
            rows.push(("end marker in an unterminated last event", answer(ct, &cut, 1 << 20, Chunked), Some(Truncated)));
            let mut tail = f.plain(&[f.text]);
            tail.extend(format!("data: {}\n", f.error).bytes());
            rows.push(("error object in an unterminated last event", answer(ct, &tail, 1 << 20, Chunked), Some(StreamError)));
            rows.push(("text in an unterminated only event", answer(ct, format!("data: {}", f.text).as_bytes(), 1 << 20, Chunked), Some(Truncated)));
            // An event named `error` fails the stream whatever its data looks like.
            let named = [f.plain(&[f.text]), format!("event: error\ndata: {}\n\n", r#"{"message":"boom","type":"x"}"#).into_bytes()].concat();
            rows.push(("event: error after text", answer(ct, &[named.clone(), f.plain(f.end)].concat(), 1 << 20, Chunked), Some(StreamError)));
            rows.push(("event: error after text, body then ends", answer(ct, &named, 1 << 20, Chunked), Some(StreamError)));
            let mut named_tail = f.plain(&[f.text]);
            named_tail.extend(b"event: error\ndata: plain text\n");
            rows.push(("event: error in an unterminated last event", answer(ct, &named_tail, 1 << 20, Chunked), Some(StreamError)));
        } else {
            let mut last = ok.clone();
            last.pop();
            rows.push(("last line without its newline", answer(ct, &last, 1 << 20, Chunked), None));
            rows.push(("only blank lines", answer(ct, b"\n\r\n  \n", 1 << 20, Chunked), Some(EmptyStream)));
        }
        if f.api == "openai-responses" {
            let failed = r#"{"response":{"status":"failed","error":{"code":"server_error","message":"boom"}},"sequence_number":5,"type":"response.failed"}"#;
            rows.push(("response.failed after text", answer(ct, &f.plain(&[f.text, failed]), 1 << 20, Chunked), Some(StreamError)));
            let status_failed = f.end[0].replace(r#""status":"incomplete""#, r#""status":"failed""#);
            rows.push((
                "response.completed whose status is failed",
                answer(ct, &f.plain(&[f.text, status_failed.as_str()]), 1 << 20, Chunked),
                Some(StreamError),
            ));
            let incomplete = f.end[0].replace("response.completed", "response.incomplete");
            rows.push(("response.incomplete at the length limit", answer(ct, &f.plain(&[f.text, incomplete.as_str()]), 1 << 20, Chunked), None));
            // A chat-style `[DONE]` (a proxy's) carries nothing: without the terminal event the
            // stream is cut.
            rows.push(("[DONE] is not its end marker", answer(ct, &f.plain(&[f.text, "[DONE]"]), 1 << 20, Chunked), Some(Truncated)));
        } else if f.api.starts_with("openai") {
            let bare = f.plain(&[f.text, "[DONE]"]);
            rows.push(("end marker without finish reason", answer(ct, &bare, 1 << 20, Chunked), Some(Truncated)));
            let failed = f.end[0].replace("\"length\"", "\"error\"");
            rows.push(("finish_reason error, then [DONE]", answer(ct, &f.plain(&[f.text, failed.as_str(), "[DONE]"]), 1 << 20, Chunked), Some(StreamError)));
            for flat in
                [r#"{"object":"error","message":"boom","type":"BadRequestError","param":null,"code":400}"#, r#"{"message":"boom","type":"server_error"}"#]
            {
                rows.push(("error object without an error key, after text", answer(ct, &f.plain(&[f.text, flat]), 1 << 20, Chunked), Some(StreamError)));
            }
        }
        for (row, a, want) in rows {
            let (o, _) = probe_raw(f.api, a).await;
            if o.error_class() != want {
                wrong.push(format!("{} / {row}: expected {want:?}, got {:?}", f.api, o.result));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Real TGI numbers its events from 1: a 16-token answer is 16 tokens in 16 one-token frames
/// (`llmprobe_multi_token_frames_total` stays put), not a two-token first frame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tgi_events_numbered_from_one_are_one_token_each() {
    let body = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/streams/hand-tgi_generate_stream_index_from_1.sse.txt")).unwrap();
    let (o, _) = probe_raw("tgi", answer("text/event-stream", &body, 64, Delim::Chunked)).await;
    assert_eq!(o.result, Ok(()));
    let slo = llmprobe::config::Slo { ttft: None, tpot: None, e2e: None, objective: 0.99 };
    let s = llmprobe::probe::measure::measure(&o, &slo).unwrap();
    assert_eq!((s.output_tokens, s.multi_token_frames), (16, 0));
    assert_eq!(s.tokens_per_frame.iter().sum::<f64>(), 16.0, "{:?}", s.tokens_per_frame);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_encoding_is_identity_by_default_and_gzip_when_configured() {
    let f = &FAMILIES[0];
    let (addr, heads) = raw_server(answer(f.content_type(), &f.plain(&f.stream(1)), 1 << 20, Delim::Chunked)).await;
    let base = format!("http://{addr}");
    assert_eq!(probe_at(&base, f.api, "", "").await.result, Ok(()));
    assert_eq!(probe_at(&base, f.api, "    accept_encoding: [gzip, deflate]\n", "").await.result, Ok(()));
    let heads = heads.lock().unwrap().clone();
    let value =
        |h: &str| h.lines().find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case("accept-encoding")).map(|(_, v)| v.trim().to_owned()));
    assert_eq!(value(&heads[0]).as_deref(), Some("identity"), "{}", heads[0]);
    assert_eq!(value(&heads[1]).as_deref(), Some("gzip, deflate"), "{}", heads[1]);
}

fn gzip_flushed(parts: &[Vec<u8>]) -> Vec<Vec<u8>> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut out = Vec::new();
    for p in parts {
        e.write_all(p).unwrap();
        e.flush().unwrap();
        out.push(std::mem::take(e.get_mut()));
    }
    out.push(e.finish().unwrap());
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unrequested_gzip_and_deflate_are_decoded_on_every_family() {
    let mut wrong = Vec::new();
    for f in FAMILIES {
        let frames: Vec<Vec<u8>> = f.stream(3).iter().map(|fr| f.plain(&[fr])).collect();
        let a =
            Answer { content_type: f.content_type(), extra_headers: "content-encoding: gzip\r\n".into(), pieces: gzip_flushed(&frames), delim: Delim::Chunked };
        let (o, _) = probe_raw(f.api, a).await;
        if o.result.is_err() || o.timeline.text_frames.len() != 3 + f.end_texts || o.content_encoding.map(|c| c.as_str()) != Some("gzip") {
            wrong.push(format!("{} gzip: {:?} {:?}", f.api, o.result, o.content_encoding));
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut z, &frames.concat()).unwrap();
        let a = Answer {
            content_type: f.content_type(),
            extra_headers: "content-encoding: deflate\r\n".into(),
            pieces: vec![z.finish().unwrap()],
            delim: Delim::Length,
        };
        let (o, _) = probe_raw(f.api, a).await;
        if o.result.is_err() || o.timeline.text_frames.len() != 3 + f.end_texts {
            wrong.push(format!("{} deflate: {:?}", f.api, o.result));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

const APIS: [&str; 7] = ["openai-completions", "openai-chat", "openai-responses", "ollama-generate", "ollama-chat", "llamacpp", "tgi"];

/// A gzip stream from the mock (`gzip_stream`: compressed and flushed per frame) is measured
/// like the plain one: the same tokens and text frames, and the first token is stamped when the
/// decoder yields it, long before the end (a decoder that buffered would put TTFT at E2E).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_stream_from_the_mock_streams_like_the_plain_one() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    let base = format!("http://{addr}");
    for api in APIS {
        let plain = probe_at(&base, api, "", "").await;
        let gz = probe_at(&base, api, "    accept_encoding: [gzip]\n", ", x-mock-fault: gzip_stream").await;
        assert_eq!((plain.result.clone(), gz.result.clone()), (Ok(()), Ok(())), "{api}");
        assert_eq!(gz.content_encoding.map(|c| c.as_str()), Some("gzip"), "{api}");
        assert_eq!(plain.content_encoding.map(|c| c.as_str()), Some("identity"), "{api}");
        assert_eq!(gz.timeline.text_frames.len(), 12, "{api}: one frame per token, decoded per chunk");
        assert_eq!((gz.usage, gz.api_counter), (plain.usage, plain.api_counter), "{api}: the server's own counts");
        let ttft = gz.timeline.first_token().unwrap() - gz.timeline.sent;
        let e2e = gz.timeline.end - gz.timeline.sent;
        // 12 tokens at the mock's ≥ 12 ms steps: the first token comes far before the end.
        assert!(ttft * 3 < e2e, "{api}: gzip TTFT {ttft:?} vs E2E {e2e:?}");
    }
}

/// The precise figure (run with `--ignored --nocapture`): paired plain/gzip probes of the mock,
/// median TTFT of each and the median of the paired differences.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn print_gzip_ttft_difference() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    let base = format!("http://{addr}");
    let (mut plain, mut gz, mut diff) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..40 {
        let p = probe_at(&base, "openai-chat", "", "").await;
        let g = probe_at(&base, "openai-chat", "    accept_encoding: [gzip]\n", ", x-mock-fault: gzip_stream").await;
        let t = |o: &Outcome| (o.timeline.first_token().unwrap() - o.timeline.sent).as_secs_f64() * 1e3;
        plain.push(t(&p));
        gz.push(t(&g));
        diff.push(t(&g) - t(&p));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("TTFT median plain {:.3} ms, gzip {:.3} ms, paired difference median {:.3} ms", median(&mut plain), median(&mut gz), median(&mut diff));
}
