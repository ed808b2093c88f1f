//! Load check of the mock: hold N concurrent streams over loopback and report the mock's CPU
//! time per 1,000 streams and the tokens/s achieved.
//!
//! The mock runs in a child process (this binary re-executed with `MOCK_LOAD_SERVE` set) so its
//! CPU time can be read from `/proc/<pid>/stat` apart from the client's.
//! Env: `STREAMS` (2000), `TOKENS` (256), `MOCK_PROFILE` (load-test); `MOCK_LOAD_ADDR=HOST:PORT`
//! drives a mock already running there instead (`benches/perf.py` pins one to a core) and
//! `MOCK_LOAD_PID` names its process for the CPU figure.
//!
//! Two rounds of all the streams: the first on new connections to a mock that has not yet held
//! that many (its accepts, and its heap growing to hold them, are in that round's figure); the
//! second on the same kept-alive connections and memory, as a load generator finds the mock
//! once it runs. The second is the steady figure (the last lines); the first is printed above.

use std::time::Instant;

use futures_util::StreamExt;
use llmprobe::mock::{MockOptions, Profile, serve};
use tokio_util::sync::CancellationToken;

fn env_num(k: &str, d: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

fn main() {
    if let Ok(addr) = std::env::var("MOCK_LOAD_SERVE") {
        return child(&addr);
    }
    // `cargo test --all-targets` runs bench targets too (without `--bench`): stay quick there.
    if !std::env::args().any(|a| a == "--bench") {
        println!("mock_load: run with `cargo bench --bench mock_load` for figures");
        return;
    }
    let streams = env_num("STREAMS", 2000);
    let tokens = env_num("TOKENS", 256);
    let external = std::env::var("MOCK_LOAD_ADDR").ok();
    let (addr, mut srv) = match external {
        Some(addr) => (addr, None),
        None => {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let addr = format!("127.0.0.1:{port}");
            let child = std::process::Command::new(std::env::current_exe().unwrap()).env("MOCK_LOAD_SERVE", &addr).spawn().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(500));
            (addr, Some(child))
        }
    };
    let pid = srv.as_ref().map(|c| c.id()).or_else(|| std::env::var("MOCK_LOAD_PID").ok().and_then(|p| p.parse().ok())).unwrap_or(0);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let client = reqwest::Client::builder().pool_max_idle_per_host(streams).build().unwrap();
    let round = || {
        let (cpu0, t0) = (cpu_seconds(pid), Instant::now());
        let (got, failed) = rt.block_on(drive(&client, &addr, streams, tokens));
        (got, failed, t0.elapsed().as_secs_f64(), cpu_seconds(pid) - cpu0)
    };
    let (got, failed, wall, cpu) = round();
    println!(
        "first round (new connections and mock memory): {failed} failed, {:.0} tokens/s, mock CPU {cpu:.2} s, {:.2} us per token",
        got as f64 / wall,
        cpu * 1e6 / got.max(1) as f64
    );
    let (got, failed, wall, cpu) = round();
    if let Some(srv) = srv.as_mut() {
        let _ = srv.kill();
        let _ = srv.wait();
    }
    println!("streams={streams} tokens/stream={tokens} failed={failed} wall={wall:.2}s");
    println!("tokens received={got} => {:.0} tokens/s", got as f64 / wall);
    println!("mock CPU {cpu:.2}s => {:.3} CPU-s per 1000 streams, {:.2} us per token", cpu * 1000.0 / streams as f64, cpu * 1e6 / got.max(1) as f64);
}

fn child(addr: &str) {
    let profile = std::env::var("MOCK_PROFILE").unwrap_or_else(|_| "load-test".into());
    let opts = MockOptions { profile: Profile::by_name(&profile).expect("profile"), ..MockOptions::default() };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind(addr).await.unwrap();
        serve(l, opts, CancellationToken::new()).await.unwrap();
    });
}

/// Starts every stream at once, counts content frames; returns (tokens, failed streams).
async fn drive(client: &reqwest::Client, addr: &str, streams: usize, tokens: usize) -> (usize, usize) {
    let url = format!("http://{addr}/v1/completions");
    let body = format!(r#"{{"prompt":"hello mock","max_tokens":{tokens},"ignore_eos":true,"stream":true}}"#);
    let tasks: Vec<_> = (0..streams)
        .map(|_| {
            let (c, u, b) = (client.clone(), url.clone(), body.clone());
            tokio::spawn(async move { one(c, u, b).await })
        })
        .collect();
    let (mut got, mut failed) = (0, 0);
    for t in tasks {
        match t.await.ok().flatten() {
            Some(n) => got += n,
            None => failed += 1,
        }
    }
    (got, failed)
}

async fn one(c: reqwest::Client, url: String, body: String) -> Option<usize> {
    let r = c.post(url).header("content-type", "application/json").body(body).send().await.ok()?;
    let mut s = r.bytes_stream();
    let mut n = 0;
    while let Some(chunk) = s.next().await {
        let chunk = chunk.ok()?;
        n += chunk.windows(7).filter(|w| w == b"\"text\":").count();
    }
    Some(n)
}

/// utime + stime of a process, seconds (Linux).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0 // fields 14 and 15; CLK_TCK is 100 on Linux
}
