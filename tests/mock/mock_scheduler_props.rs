//! Property tests of the simulated scheduler, driven in virtual time by a seeded random workload
//! (small KV caches, shared prompt prefixes, bursts, idle gaps, aborts). After every step:
//! - KV blocks never exceed capacity and match what running requests hold (`Engine::audit`);
//! - a step's batch stays within `max_batched_tokens` and `max_num_seqs`;
//! - only waiting requests are admitted, only running ones are preempted (and go back to
//!   waiting), tokens come in order from running requests;
//! - prefix-cache hits are whole blocks, below the prompt length, and only for blocks some
//!   request had already computed in an earlier step; the hit and query counters equal the sums
//!   over admissions (so hits ≤ queries).
//!
//! At the end every request either finished with exactly the length the engine promised or was
//! aborted. A failure prints its seed; `SCHED_PROP_ITERS` raises the iteration count.
//! (A self-written driver instead of `proptest`: no extra compile cost on a small build box.)

use crate::props;

use std::collections::{HashMap, HashSet};

use llmprobe::mock::{Engine, Profile, SeqSpec};

use props::Rng;

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Waiting,
    Running,
    Done,
    Aborted,
}

struct Req {
    prompt: Vec<u32>,
    /// Hash of each full-block prefix of the prompt (the test's own chain, not the engine's).
    chain: Vec<u64>,
    target: u32,
    state: State,
    computed: u32,
    next_index: u32,
}

fn profile(r: &mut Rng) -> Profile {
    let mut p = Profile::small_gpu();
    p.kv_blocks = 8 + r.below(56) as u32;
    p.max_batched_tokens = 16 + r.below(240) as u32;
    p.max_num_seqs = 1 + r.below(16) as u32;
    p
}

/// A prompt of one of a few shared prefixes plus a random tail; it fits the cache with its output.
fn prompt(r: &mut Rng, max_len: u32) -> Vec<u32> {
    let prefix = r.below(4) as u32;
    let shared = (r.below(4) * 16) as u32;
    let len = (1 + r.below(u64::from(max_len))) as u32;
    (0..len).map(|i| if i < shared { prefix * 1000 + i } else { 100_000 + r.below(50) as u32 }).collect()
}

fn chain(prompt: &[u32]) -> Vec<u64> {
    let mut h = std::hash::DefaultHasher::new();
    prompt
        .chunks_exact(16)
        .map(|c| {
            std::hash::Hash::hash(c, &mut h);
            std::hash::Hasher::finish(&h)
        })
        .collect()
}

/// Keys of the full blocks of the prompt's first `tokens` tokens.
fn blocks(q: &Req, tokens: u32) -> &[u64] {
    &q.chain[..(tokens.min(q.prompt.len() as u32) / 16) as usize]
}

/// Runs one random workload; returns how many preemptions it caused.
fn run_one(seed: u64) -> Result<u64, String> {
    let mut r = Rng(seed);
    let p = profile(&mut r);
    let cap_tokens = p.kv_blocks * p.block_size;
    let mut e = Engine::new(p.clone(), seed);
    let mut reqs: HashMap<u64, Req> = HashMap::new();
    let mut computed_blocks: HashSet<u64> = HashSet::new();
    let (mut hits_sum, mut queries_sum) = (0u64, 0u64);
    let mut now = 0u64;
    let arrivals = 20 + r.below(60);
    let mut submitted = 0;
    for _round in 0..100_000 {
        // Arrivals: sometimes a burst.
        if submitted < arrivals && r.chance(0.4) {
            let burst = if r.chance(0.1) { 12 } else { 2 };
            for _ in 0..1 + r.below(burst) {
                let max_tokens = 1 + r.below(40) as u32;
                let prompt = prompt(&mut r, cap_tokens - max_tokens - p.block_size);
                let spec = SeqSpec { prompt: prompt.clone(), max_tokens, min_tokens: 0, ignore_eos: r.chance(0.5), cache_salt: 0 };
                let (id, target) = e.submit(&spec, now);
                if target == 0 || target > max_tokens {
                    return Err(format!("target {target} for max_tokens {max_tokens}"));
                }
                reqs.insert(id, Req { chain: chain(&prompt), prompt, target, state: State::Waiting, computed: 0, next_index: 0 });
                submitted += 1;
            }
        }
        // Aborts: a client going away while waiting or running.
        if r.chance(0.03) {
            let live: Vec<u64> = reqs.iter().filter(|(_, q)| matches!(q.state, State::Waiting | State::Running)).map(|(id, _)| *id).collect();
            if !live.is_empty() {
                let id = live[r.below(live.len() as u64) as usize];
                e.abort(id);
                reqs.get_mut(&id).unwrap().state = State::Aborted;
            }
        }
        let Some(plan) = e.step(now) else {
            if reqs.values().any(|q| matches!(q.state, State::Waiting | State::Running)) {
                return Err(format!("engine idle with live requests at {now}"));
            }
            if submitted >= arrivals {
                break;
            }
            now += r.below(50_000_000);
            continue;
        };
        check_step(&plan, &p, &mut reqs, &computed_blocks, &mut hits_sum, &mut queries_sum)?;
        // Blocks computed by this step become hittable from the next step on.
        for (id, _) in &plan.scheduled {
            let q = &reqs[id];
            computed_blocks.extend(blocks(q, q.computed));
        }
        e.audit()?;
        if e.stats.prefix_hits != hits_sum || e.stats.prefix_queries != queries_sum {
            return Err(format!("counters hits {} queries {} vs admissions {hits_sum} {queries_sum}", e.stats.prefix_hits, e.stats.prefix_queries));
        }
        now = plan.end_ns + if r.chance(0.1) { r.below(30_000_000) } else { 0 };
    }
    if let Some((id, q)) = reqs.iter().find(|(_, q)| !matches!(q.state, State::Done | State::Aborted)) {
        return Err(format!("request {id} ended {:?}", q.state));
    }
    if e.kv_usage() != 0.0 || e.num_running() + e.num_waiting() != 0 {
        return Err("engine not empty after the drain".into());
    }
    Ok(e.stats.preemptions)
}

fn check_step(
    plan: &llmprobe::mock::engine::StepPlan,
    p: &Profile,
    reqs: &mut HashMap<u64, Req>,
    computed_blocks: &HashSet<u64>,
    hits_sum: &mut u64,
    queries_sum: &mut u64,
) -> Result<(), String> {
    for id in &plan.preempted {
        let q = reqs.get_mut(id).ok_or("unknown preempted id")?;
        if q.state != State::Running {
            return Err(format!("preempted {id} in state {:?}", q.state));
        }
        q.state = State::Waiting;
        q.computed = 0;
    }
    for (id, hits) in &plan.admitted {
        let q = reqs.get_mut(id).ok_or("unknown admitted id")?;
        if q.state != State::Waiting {
            return Err(format!("admitted {id} in state {:?}", q.state));
        }
        let len = q.prompt.len() as u32;
        if hits % p.block_size != 0 || *hits >= len {
            return Err(format!("request {id}: {hits} cached tokens of a {len}-token prompt"));
        }
        if let Some(k) = blocks(q, *hits).iter().position(|b| !computed_blocks.contains(b)) {
            return Err(format!("request {id}: hit on block {k}, never computed before"));
        }
        *hits_sum += u64::from(*hits);
        *queries_sum += u64::from(len);
        q.state = State::Running;
        q.computed = *hits;
    }
    let tokens: u32 = plan.scheduled.iter().map(|s| s.1).sum();
    if tokens > p.max_batched_tokens || plan.scheduled.len() > p.max_num_seqs as usize {
        return Err(format!("step of {tokens} tokens over {} sequences", plan.scheduled.len()));
    }
    for (id, n) in &plan.scheduled {
        let q = reqs.get_mut(id).ok_or("unknown scheduled id")?;
        if q.state != State::Running {
            return Err(format!("scheduled {id} in state {:?}", q.state));
        }
        q.computed += n;
    }
    for em in &plan.emits {
        let q = reqs.get_mut(&em.id).ok_or("unknown emitting id")?;
        if q.state != State::Running || em.index != q.next_index {
            return Err(format!("token {} of {} in state {:?}, expected index {}", em.index, em.id, q.state, q.next_index));
        }
        q.next_index += 1;
        if em.finish.is_some() {
            if q.next_index != q.target {
                return Err(format!("request {} finished after {} of {} tokens", em.id, q.next_index, q.target));
            }
            q.state = State::Done;
        } else if q.next_index >= q.target {
            return Err(format!("request {} past its target without finishing", em.id));
        }
    }
    Ok(())
}

#[test]
fn scheduler_invariants_hold_under_random_workloads() {
    let iters: u64 = std::env::var("SCHED_PROP_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(120);
    let mut preempting = 0;
    for i in 0..iters {
        let seed = 0x5eed_0000 + i;
        match run_one(seed) {
            Ok(n) => preempting += u64::from(n > 0),
            Err(e) => panic!("seed {seed:#x}: {e}"),
        }
    }
    // The workloads are meant to stress the cache: most runs must exercise preemption.
    assert!(preempting > iters / 4, "only {preempting} of {iters} runs preempted");
}

#[test]
fn shared_prefixes_are_hit() {
    let mut e = Engine::new(Profile::small_gpu(), 1);
    let prompt: Vec<u32> = (0..70).collect();
    let spec = SeqSpec { prompt, max_tokens: 2, min_tokens: 0, ignore_eos: true, cache_salt: 0 };
    e.submit(&spec, 0);
    let mut now = 0;
    while let Some(p) = e.step(now) {
        now = p.end_ns;
    }
    e.submit(&spec, now);
    let plan = e.step(now).unwrap();
    assert_eq!(plan.admitted[0].1, 64, "four full blocks of the 70-token prompt are cached");
    assert_eq!(e.stats.prefix_hits, 64);
    assert_eq!(e.stats.prefix_queries, 140);
}
