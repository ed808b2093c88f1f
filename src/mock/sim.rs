//! Drives the engine in virtual time (no wall clock) to measure its latency curves fast.

use super::engine::{Engine, SeqSpec};
use super::profile::Profile;

/// One row of the curve table.
#[derive(Clone, Debug)]
pub struct CurvePoint {
    pub concurrency: usize,
    pub ttft_p50_s: f64,
    pub tpot_p50_s: f64,
    pub tokens_per_s: f64,
    pub preemptions: u64,
}

/// Closed loop: `concurrency` clients each resubmit when their request finishes, until
/// `requests` have completed. Prompts are `prompt_len` distinct words; outputs exactly `output_len`.
pub fn closed_loop(profile: &Profile, concurrency: usize, requests: usize, prompt_len: usize, output_len: u32) -> CurvePoint {
    let mut e = Engine::new(profile.clone(), 7);
    let mut next = 0usize;
    let spec = |n: usize| SeqSpec {
        prompt: (0..prompt_len).map(|i| (n * 100_000 + i) as u32).collect(),
        max_tokens: output_len,
        min_tokens: 0,
        ignore_eos: true,
        cache_salt: 0,
    };
    let mut now = 0u64;
    let mut start: std::collections::HashMap<u64, (u64, Option<u64>)> = Default::default();
    for _ in 0..concurrency {
        let (id, _) = e.submit(&spec(next), now);
        start.insert(id, (now, None));
        next += 1;
    }
    let (mut ttft, mut tpot, mut tokens, mut done) = (Vec::new(), Vec::new(), 0u64, 0usize);
    while done < requests {
        let Some(plan) = e.step(now) else { break };
        now = plan.end_ns;
        for em in plan.emits {
            tokens += 1;
            let entry = start.get_mut(&em.id).expect("known request");
            if em.index == 0 {
                entry.1 = Some(now);
                ttft.push((now - entry.0) as f64 / 1e9);
            }
            if em.finish.is_some() {
                let first = entry.1.unwrap_or(now);
                if em.index > 0 {
                    tpot.push((now - first) as f64 / 1e9 / f64::from(em.index));
                }
                start.remove(&em.id);
                done += 1;
                let (id, _) = e.submit(&spec(next), now);
                start.insert(id, (now, None));
                next += 1;
            }
        }
    }
    CurvePoint {
        concurrency,
        ttft_p50_s: p50(&mut ttft),
        tpot_p50_s: p50(&mut tpot),
        tokens_per_s: tokens as f64 / (now as f64 / 1e9),
        preemptions: e.stats.preemptions,
    }
}

fn p50(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The README table for a profile.
pub fn curve_table(profile: &Profile, levels: &[usize]) -> String {
    let mut s = format!(
        "profile {} (prompt 512 words, output 128 tokens)\n\n| concurrency | TTFT p50 (s) | TPOT p50 (ms) | tokens/s | preemptions |\n|---:|---:|---:|---:|---:|\n",
        profile.name
    );
    for &c in levels {
        let p = closed_loop(profile, c, (c * 4).max(32), 512, 128);
        s.push_str(&format!("| {} | {:.3} | {:.1} | {:.0} | {} |\n", c, p.ttft_p50_s, p.tpot_p50_s * 1e3, p.tokens_per_s, p.preemptions));
    }
    s
}
