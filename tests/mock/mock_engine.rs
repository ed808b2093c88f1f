//! The engine model in virtual time: admission, chunked prefill, preemption, prefix cache,
//! determinism and the shape of its latency curves.

use llmprobe::mock::engine::{Emit, Engine, Finish, SeqSpec};
use llmprobe::mock::profile::Profile;
use llmprobe::mock::sim::closed_loop;

fn spec(prompt: Vec<u32>, max: u32) -> SeqSpec {
    SeqSpec { prompt, max_tokens: max, min_tokens: 0, ignore_eos: true, cache_salt: 0 }
}

fn words(n: usize, base: u32) -> Vec<u32> {
    (0..n as u32).map(|i| base + i).collect()
}

/// Runs until idle; returns every emit.
fn drain(e: &mut Engine, mut now: u64) -> Vec<Emit> {
    let mut all = Vec::new();
    while let Some(p) = e.step(now) {
        now = p.end_ns;
        all.extend(p.emits);
    }
    all
}

#[test]
fn admission_respects_max_num_seqs() {
    let mut p = Profile::small_gpu();
    p.max_num_seqs = 4;
    let mut e = Engine::new(p, 1);
    for i in 0..10 {
        e.submit(&spec(words(8, i * 100), 4), 0);
    }
    e.step(0).unwrap();
    assert_eq!(e.num_running(), 4);
    assert_eq!(e.num_waiting(), 6);
    let emits = drain(&mut e, 0);
    assert_eq!(emits.iter().filter(|x| x.finish.is_some()).count(), 10);
}

#[test]
fn chunked_prefill_splits_a_long_prompt() {
    let mut p = Profile::small_gpu();
    p.max_batched_tokens = 256;
    let mut e = Engine::new(p, 1);
    e.submit(&spec(words(1000, 0), 2), 0);
    let mut steps = 0;
    let mut now = 0;
    loop {
        let plan = e.step(now).unwrap();
        now = plan.end_ns;
        steps += 1;
        assert!(plan.prefill_tokens <= 256);
        if !plan.emits.is_empty() {
            break;
        }
    }
    assert_eq!(steps, 4, "1000 tokens in 256-token chunks");
    assert_eq!(e.stats.prompt_tokens, 1000);
}

#[test]
fn kv_exhaustion_preempts_and_everything_still_finishes() {
    let mut p = Profile::small_gpu();
    p.kv_blocks = 40; // 640 tokens for 8 sequences that each grow to 16 + 100
    let mut e = Engine::new(p, 1);
    for i in 0..8 {
        e.submit(&spec(words(16, i * 1000), 100), 0);
    }
    let emits = drain(&mut e, 0);
    assert!(e.stats.preemptions > 0);
    assert_eq!(emits.iter().filter(|x| x.finish == Some(Finish::Length)).count(), 8);
    assert_eq!(e.kv_usage(), 0.0);
}

#[test]
fn shared_prefix_hits_the_cache() {
    let mut e = Engine::new(Profile::small_gpu(), 1);
    let mut a = words(64, 0);
    a.extend(words(10, 5000));
    let mut b = words(64, 0);
    b.extend(words(10, 9000));
    e.submit(&spec(a, 2), 0);
    drain(&mut e, 0);
    assert_eq!(e.stats.prefix_hits, 0);
    e.submit(&spec(b, 2), 0);
    drain(&mut e, 0);
    assert_eq!(e.stats.prefix_hits, 64, "four shared 16-token blocks");
    assert_eq!(e.stats.prefix_queries, 148);
    assert_eq!(e.stats.prompt_tokens, 74 + 10);
}

#[test]
fn deterministic_under_a_seed() {
    let run = |seed| {
        let mut e = Engine::new(Profile::small_gpu(), seed);
        for i in 0..20 {
            e.submit(&SeqSpec { prompt: words(30, i * 50), max_tokens: 300, min_tokens: 5, ignore_eos: false, cache_salt: 0 }, 0);
        }
        drain(&mut e, 0).iter().map(|x| (x.id, x.index, x.at_ns, x.finish)).collect::<Vec<_>>()
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
    let stops = run(3).iter().filter(|x| x.3 == Some(Finish::Stop)).count();
    assert!(stops > 0, "EOS ends some requests before max_tokens");
}

#[test]
fn curves_have_the_known_shapes() {
    let p = Profile::small_gpu();
    let pts: Vec<_> = [1, 8, 64, 256].iter().map(|c| closed_loop(&p, *c, c * 4, 512, 128)).collect();
    // TPOT grows with batch size; throughput rises then saturates; TTFT rises once queueing starts.
    assert!(pts[1].tpot_p50_s > pts[0].tpot_p50_s);
    assert!(pts[2].tpot_p50_s > pts[1].tpot_p50_s);
    assert!(pts[1].tokens_per_s > 4.0 * pts[0].tokens_per_s);
    assert!(pts[3].tokens_per_s < 1.5 * pts[2].tokens_per_s, "saturated");
    assert!(pts[3].ttft_p50_s > 5.0 * pts[0].ttft_p50_s, "queueing");
    assert!((pts[1].ttft_p50_s / pts[0].ttft_p50_s) < 5.0, "flat before saturation");
}

#[test]
fn timestamps_follow_the_cost_model() {
    let p = Profile::small_gpu();
    let mut e = Engine::new(p.clone(), 1);
    e.submit(&spec(words(100, 0), 3), 0);
    let emits = drain(&mut e, 0);
    assert_eq!(emits[0].at_ns, p.step_ns(100, 0));
    assert_eq!(emits[1].at_ns - emits[0].at_ns, p.step_ns(0, 1));
}

#[test]
#[ignore = "prints the README curve table; run with --ignored --nocapture"]
fn print_curve_table() {
    for p in [Profile::small_gpu(), Profile::large_gpu(), Profile::cpu_tiny()] {
        println!("{}", llmprobe::mock::sim::curve_table(&p, &[1, 2, 4, 8, 16, 32, 64, 128, 256]));
    }
}
