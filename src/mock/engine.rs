//! The simulated engine core: iteration-level scheduling like vLLM, in virtual time.
//!
//! Pure state machine: `submit` a request, call `step(now_ns)` to plan and apply one step; the
//! returned plan says when the step ends and which tokens it emits at that moment. The live
//! driver sleeps until `end_ns`; a simulation just advances a counter, so curves run fast.
//!
//! Each step: running sequences first (oldest first; a decoding sequence takes one token of the
//! budget, a prefilling one a chunk), then waiting requests are admitted while the token budget,
//! `max_num_seqs` and free KV blocks allow. If a running sequence cannot get a block, the newest
//! running sequence is preempted (its blocks freed, recomputed later). Full prompt blocks are
//! hashed by (parent hash, tokens) so shared prefixes skip prefill.

use std::collections::VecDeque;

use super::hist::{Histogram, ITL_BUCKETS, REQUEST_BUCKETS, TTFT_BUCKETS};
use super::kv::KvPool;
use super::profile::Profile;
use super::tokenizer::{fnv1a, unit};

pub type SeqId = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    Stop,
    Length,
    Abort,
}

impl Finish {
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
            Finish::Abort => "abort",
        }
    }
}

/// What a front-end asks the engine for.
#[derive(Clone, Debug)]
pub struct SeqSpec {
    pub prompt: Vec<u32>,
    pub max_tokens: u32,
    pub min_tokens: u32,
    pub ignore_eos: bool,
}

/// One generated token, delivered at the end of the step that produced it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Emit {
    pub id: SeqId,
    /// 0-based index of this token in the output.
    pub index: u32,
    pub finish: Option<Finish>,
    /// Engine clock: when the step producing this token ended.
    pub at_ns: u64,
    /// Engine clock: when the request arrived and when it was first scheduled.
    pub arrival_ns: u64,
    pub scheduled_ns: u64,
}

/// The outcome of one step.
#[derive(Debug, Default)]
pub struct StepPlan {
    pub start_ns: u64,
    pub end_ns: u64,
    pub prefill_tokens: u32,
    pub decode_seqs: u32,
    pub emits: Vec<Emit>,
}

/// Counters and histograms the `/metrics` page exposes.
#[derive(Clone, Debug)]
pub struct Stats {
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    pub preemptions: u64,
    pub prefix_queries: u64,
    pub prefix_hits: u64,
    pub finished: [u64; 3],
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
    pub queue: Histogram,
    /// Busy nanoseconds (sum of step durations), for the fake GPU utilisation.
    pub busy_ns: u64,
    pub steps: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            prompt_tokens: 0,
            generation_tokens: 0,
            preemptions: 0,
            prefix_queries: 0,
            prefix_hits: 0,
            finished: [0; 3],
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            e2e: Histogram::new(REQUEST_BUCKETS),
            queue: Histogram::new(REQUEST_BUCKETS),
            busy_ns: 0,
            steps: 0,
        }
    }
}

struct Seq {
    id: SeqId,
    prompt_len: u32,
    /// Hash chain of the prompt's full blocks.
    hashes: Vec<u64>,
    target: u32,
    target_finish: Finish,
    generated: u32,
    /// Tokens whose KV is computed.
    computed: u32,
    blocks: Vec<u32>,
    arrival_ns: u64,
    scheduled_ns: Option<u64>,
    last_ns: u64,
}

impl Seq {
    /// Tokens still to compute before the next token can be sampled.
    fn pending(&self) -> u32 {
        self.prompt_len + self.generated - self.computed
    }

    fn is_decode(&self) -> bool {
        self.generated > 0 && self.pending() == 1
    }
}

pub struct Engine {
    profile: Profile,
    seed: u64,
    next_id: SeqId,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    kv: KvPool,
    /// End of the last step: time never runs backwards even if a caller's clock does.
    clock_ns: u64,
    pub stats: Stats,
}

impl Engine {
    pub fn new(profile: Profile, seed: u64) -> Self {
        let kv = KvPool::new(profile.kv_blocks);
        Engine {
            profile,
            seed,
            next_id: 1,
            waiting: VecDeque::new(),
            running: Vec::new(),
            kv,
            clock_ns: 0,
            stats: Stats::default(),
        }
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    pub fn num_running(&self) -> usize {
        self.running.len()
    }

    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn kv_usage(&self) -> f64 {
        self.kv.used() as f64 / self.kv.total().max(1) as f64
    }

    /// Queues a request; returns its id and how many tokens it will generate.
    pub fn submit(&mut self, spec: &SeqSpec, now_ns: u64) -> (SeqId, u32) {
        let id = self.next_id;
        self.next_id += 1;
        let (target, target_finish) = self.output_length(spec, id);
        let seq = Seq {
            id,
            prompt_len: spec.prompt.len().max(1) as u32,
            hashes: self.block_hashes(&spec.prompt),
            target,
            target_finish,
            generated: 0,
            computed: 0,
            blocks: Vec::new(),
            arrival_ns: now_ns,
            scheduled_ns: None,
            last_ns: now_ns,
        };
        self.waiting.push_back(seq);
        (id, target)
    }

    /// Seeded EOS point: geometric-like length ≥ min_tokens, capped by max_tokens.
    fn output_length(&self, spec: &SeqSpec, id: SeqId) -> (u32, Finish) {
        let max = spec.max_tokens.max(1);
        if spec.ignore_eos {
            return (max, Finish::Length);
        }
        let u = unit(self.seed ^ id.wrapping_mul(0x2545_f491_4f6c_dd1d)).max(1e-12);
        let natural = spec.min_tokens.max(1) as f64 + (-u.ln() * self.profile.eos_mean_tokens);
        if natural >= f64::from(max) {
            (max, Finish::Length)
        } else {
            (natural as u32, Finish::Stop)
        }
    }

    fn block_hashes(&self, prompt: &[u32]) -> Vec<u64> {
        let bs = self.profile.block_size as usize;
        let mut parent = 0u64;
        prompt
            .chunks_exact(bs)
            .map(|chunk| {
                let bytes: Vec<u8> = chunk.iter().flat_map(|t| t.to_le_bytes()).collect();
                parent = fnv1a(&bytes, parent);
                parent
            })
            .collect()
    }

    /// Removes a request (client went away); counted as `abort`.
    pub fn abort(&mut self, id: SeqId) {
        let seq = if let Some(i) = self.running.iter().position(|s| s.id == id) {
            Some(self.running.remove(i))
        } else if let Some(i) = self.waiting.iter().position(|s| s.id == id) {
            self.waiting.remove(i)
        } else {
            None
        };
        if let Some(mut s) = seq {
            self.free_blocks(&mut s);
            self.stats.finished[2] += 1;
        }
    }

    /// Plans and applies one step starting at `now_ns`; `None` when idle.
    pub fn step(&mut self, now_ns: u64) -> Option<StepPlan> {
        if self.running.is_empty() && self.waiting.is_empty() {
            return None;
        }
        let now_ns = now_ns.max(self.clock_ns);
        let mut budget = self.profile.max_batched_tokens;
        // (index into `running`, tokens): indices stay valid, preemption only pops later ones.
        let mut work: Vec<(usize, u32)> = Vec::new();
        self.schedule_running(&mut budget, &mut work);
        self.admit_waiting(&mut budget, &mut work, now_ns);
        if work.is_empty() {
            return None; // nothing fits (e.g. one prompt larger than the whole cache)
        }
        let (prefill, decode) = self.step_cost(&work);
        let end_ns = now_ns + self.profile.step_ns(prefill, decode);
        let emits = self.apply(&work, end_ns);
        self.stats.busy_ns += end_ns - now_ns;
        self.clock_ns = end_ns;
        self.stats.steps += 1;
        Some(StepPlan { start_ns: now_ns, end_ns, prefill_tokens: prefill, decode_seqs: decode, emits })
    }

    fn schedule_running(&mut self, budget: &mut u32, work: &mut Vec<(usize, u32)>) {
        let mut i = 0;
        while i < self.running.len() && *budget > 0 {
            let n = self.running[i].pending().min(*budget);
            if !self.ensure_blocks(i, n) {
                break; // `i` itself was preempted; everything after it too
            }
            *budget -= n;
            work.push((i, n));
            i += 1;
        }
    }

    /// Gets blocks for `n` more tokens of running[i], preempting the newest sequences as needed.
    fn ensure_blocks(&mut self, i: usize, n: u32) -> bool {
        loop {
            let need = self.blocks_needed(&self.running[i], n);
            if need <= self.kv.free_count() {
                for _ in 0..need {
                    let b = self.kv.alloc().expect("counted free block");
                    self.running[i].blocks.push(b);
                }
                return true;
            }
            let victim = self.running.pop().expect("running is non-empty");
            let is_self = self.running.len() == i;
            self.preempt(victim);
            if is_self {
                return false;
            }
        }
    }

    fn blocks_needed(&self, seq: &Seq, n: u32) -> usize {
        let bs = self.profile.block_size;
        let want = (seq.computed + n).div_ceil(bs) as usize;
        want.saturating_sub(seq.blocks.len())
    }

    fn preempt(&mut self, mut seq: Seq) {
        self.free_blocks(&mut seq);
        seq.computed = 0;
        self.stats.preemptions += 1;
        self.waiting.push_front(seq);
    }

    fn free_blocks(&mut self, seq: &mut Seq) {
        for b in seq.blocks.drain(..) {
            self.kv.release(b);
        }
    }

    fn admit_waiting(&mut self, budget: &mut u32, work: &mut Vec<(usize, u32)>, now_ns: u64) {
        while *budget > 0 && (self.running.len() as u32) < self.profile.max_num_seqs {
            let Some(mut seq) = self.waiting.pop_front() else { break };
            let hits = self.take_prefix(&mut seq);
            let n = seq.pending().min(*budget);
            let need = self.blocks_needed(&seq, n);
            if need > self.kv.free_count() {
                self.free_blocks(&mut seq);
                seq.computed = 0;
                self.waiting.push_front(seq);
                break;
            }
            for _ in 0..need {
                let b = self.kv.alloc().expect("counted free block");
                seq.blocks.push(b);
            }
            self.stats.prefix_queries += u64::from(seq.prompt_len);
            self.stats.prefix_hits += u64::from(hits);
            seq.scheduled_ns.get_or_insert(now_ns);
            *budget -= n;
            work.push((self.running.len(), n));
            self.running.push(seq);
        }
    }

    /// Shares cached prompt blocks; returns the prompt tokens they cover.
    fn take_prefix(&mut self, seq: &mut Seq) -> u32 {
        let bs = self.profile.block_size;
        // At least one prompt token is always computed, so a full hit leaves the last block.
        let max_blocks = ((seq.prompt_len - 1) / bs) as usize;
        for h in seq.hashes.iter().take(max_blocks) {
            match self.kv.acquire_cached(*h) {
                Some(b) => seq.blocks.push(b),
                None => break,
            }
        }
        seq.computed = seq.blocks.len() as u32 * bs;
        seq.computed
    }

    fn step_cost(&self, work: &[(usize, u32)]) -> (u32, u32) {
        let (mut prefill, mut decode) = (0, 0);
        for (i, n) in work {
            if self.running[*i].is_decode() { decode += 1 } else { prefill += n }
        }
        (prefill, decode)
    }

    fn apply(&mut self, work: &[(usize, u32)], end_ns: u64) -> Vec<Emit> {
        let mut emits = Vec::with_capacity(work.len());
        let mut any_done = false;
        for &(i, n) in work {
            let n = &n;
            let was_prefill = self.running[i].computed < self.running[i].prompt_len;
            self.running[i].computed += n;
            if was_prefill {
                self.stats.prompt_tokens += u64::from((*n).min(self.running[i].prompt_len));
                self.register_prefix(i);
            }
            if self.running[i].pending() == 0 {
                let emit = self.emit_token(i, end_ns);
                any_done |= emit.finish.is_some();
                emits.push(emit);
            }
        }
        if any_done {
            self.retire_finished();
        }
        emits
    }

    fn retire_finished(&mut self) {
        for mut seq in std::mem::take(&mut self.running) {
            if seq.generated >= seq.target {
                self.free_blocks(&mut seq);
            } else {
                self.running.push(seq);
            }
        }
    }

    fn register_prefix(&mut self, i: usize) {
        let bs = self.profile.block_size;
        let seq = &self.running[i];
        let full = ((seq.computed.min(seq.prompt_len)) / bs) as usize;
        for (b, h) in seq.blocks.iter().zip(&seq.hashes).take(full) {
            self.kv.register(*b, *h);
        }
    }

    fn emit_token(&mut self, i: usize, end_ns: u64) -> Emit {
        let s = &mut self.running[i];
        let index = s.generated;
        s.generated += 1;
        let gap = end_ns.saturating_sub(s.last_ns) as f64 / 1e9;
        let scheduled = s.scheduled_ns.unwrap_or(s.arrival_ns);
        if index == 0 {
            self.stats.ttft.observe(gap);
            self.stats.queue.observe(scheduled.saturating_sub(s.arrival_ns) as f64 / 1e9);
        } else {
            self.stats.itl.observe(gap);
        }
        s.last_ns = end_ns;
        self.stats.generation_tokens += 1;
        let finish = (s.generated >= s.target).then_some(s.target_finish);
        if let Some(f) = finish {
            self.stats.e2e.observe(end_ns.saturating_sub(s.arrival_ns) as f64 / 1e9);
            self.stats.finished[if f == Finish::Stop { 0 } else { 1 }] += 1;
        }
        Emit { id: s.id, index, finish, at_ns: end_ns, arrival_ns: s.arrival_ns, scheduled_ns: scheduled }
    }
}
