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

use super::hist::{Histogram, ITERATION_BUCKETS, ITL_BUCKETS, REQUEST_BUCKETS, TTFT_BUCKETS, one_two_five};
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
    /// The prefix-cache namespace: requests share cached blocks only within one (0 for
    /// requests without a `cache_salt`; vLLM puts the salt into the first block's hash). The
    /// `cache_disabled` fault gives each request a namespace of its own.
    pub cache_salt: u64,
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
    /// Prompt tokens the prefix cache supplied when the request was first scheduled (what vLLM
    /// reports as `cached_tokens`).
    pub cached_tokens: u32,
}

/// The outcome of one step.
#[derive(Debug, Default)]
pub struct StepPlan {
    pub start_ns: u64,
    pub end_ns: u64,
    pub prefill_tokens: u32,
    pub decode_seqs: u32,
    pub emits: Vec<Emit>,
    /// Requests admitted from the waiting queue this step, with the prompt tokens the prefix
    /// cache supplied.
    pub admitted: Vec<(SeqId, u32)>,
    /// Every request computed in this step with its token count (prefill chunk or 1).
    pub scheduled: Vec<(SeqId, u32)>,
    /// Running requests preempted this step (back at the head of the waiting queue).
    pub preempted: Vec<SeqId>,
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
    pub prefill: Histogram,
    pub decode: Histogram,
    pub inference: Histogram,
    pub tpot: Histogram,
    pub request_prompt: Histogram,
    pub request_generation: Histogram,
    pub iteration_tokens: Histogram,
    /// Busy nanoseconds (sum of step durations), for the fake GPU utilisation.
    pub busy_ns: u64,
    pub steps: u64,
}

impl Stats {
    fn new(max_model_len: u32) -> Self {
        let lengths = one_two_five(max_model_len);
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
            prefill: Histogram::new(REQUEST_BUCKETS),
            decode: Histogram::new(REQUEST_BUCKETS),
            inference: Histogram::new(REQUEST_BUCKETS),
            tpot: Histogram::new(ITL_BUCKETS),
            request_prompt: Histogram::new(&lengths),
            request_generation: Histogram::new(&lengths),
            iteration_tokens: Histogram::new(ITERATION_BUCKETS),
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
    /// Prompt tokens the prefix cache supplied at the first admission.
    cached: Option<u32>,
    first_ns: Option<u64>,
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
        let stats = Stats::new(profile.max_model_len);
        Engine { profile, seed, next_id: 1, waiting: VecDeque::new(), running: Vec::new(), kv, clock_ns: 0, stats }
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Changes the step costs from the next step on (the control endpoint's simulated release).
    pub fn set_profile(&mut self, profile: Profile) {
        self.profile = profile;
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
            hashes: self.block_hashes(&spec.prompt, spec.cache_salt),
            target,
            target_finish,
            generated: 0,
            computed: 0,
            blocks: Vec::new(),
            arrival_ns: now_ns,
            scheduled_ns: None,
            cached: None,
            first_ns: None,
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
        if natural >= f64::from(max) { (max, Finish::Length) } else { (natural as u32, Finish::Stop) }
    }

    fn block_hashes(&self, prompt: &[u32], salt: u64) -> Vec<u64> {
        let bs = self.profile.block_size as usize;
        let mut parent = salt;
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
        let mut plan = StepPlan { start_ns: now_ns, ..StepPlan::default() };
        self.schedule_running(&mut budget, &mut work, &mut plan.preempted);
        self.admit_waiting(&mut budget, &mut work, now_ns, &mut plan.admitted);
        if work.is_empty() {
            return None; // nothing fits (e.g. one prompt larger than the whole cache)
        }
        let (prefill, decode) = self.step_cost(&work);
        let end_ns = now_ns + self.profile.step_ns(prefill, decode);
        let scheduled: u32 = work.iter().map(|w| w.1).sum();
        self.stats.iteration_tokens.observe(f64::from(scheduled));
        plan.scheduled = work.iter().map(|&(i, n)| (self.running[i].id, n)).collect();
        plan.emits = self.apply(&work, end_ns);
        self.stats.busy_ns += end_ns - now_ns;
        self.clock_ns = end_ns;
        self.stats.steps += 1;
        plan.end_ns = end_ns;
        plan.prefill_tokens = prefill;
        plan.decode_seqs = decode;
        Some(plan)
    }

    fn schedule_running(&mut self, budget: &mut u32, work: &mut Vec<(usize, u32)>, preempted: &mut Vec<SeqId>) {
        let mut i = 0;
        while i < self.running.len() && *budget > 0 {
            let n = self.running[i].pending().min(*budget);
            if !self.ensure_blocks(i, n, preempted) {
                break; // `i` itself was preempted; everything after it too
            }
            *budget -= n;
            work.push((i, n));
            i += 1;
        }
    }

    /// Gets blocks for `n` more tokens of running[i], preempting the newest sequences as needed.
    fn ensure_blocks(&mut self, i: usize, n: u32, preempted: &mut Vec<SeqId>) -> bool {
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
            preempted.push(victim.id);
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

    fn admit_waiting(&mut self, budget: &mut u32, work: &mut Vec<(usize, u32)>, now_ns: u64, admitted: &mut Vec<(SeqId, u32)>) {
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
            admitted.push((seq.id, hits));
            seq.scheduled_ns.get_or_insert(now_ns);
            seq.cached.get_or_insert(hits);
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
            s.first_ns = Some(end_ns);
            self.stats.ttft.observe(gap);
            self.stats.queue.observe(scheduled.saturating_sub(s.arrival_ns) as f64 / 1e9);
        } else {
            self.stats.itl.observe(gap);
        }
        s.last_ns = end_ns;
        self.stats.generation_tokens += 1;
        let finish = (s.generated >= s.target).then_some(s.target_finish);
        if let Some(f) = finish {
            let st = &mut self.stats;
            let secs = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1e9;
            let first = s.first_ns.unwrap_or(end_ns);
            st.e2e.observe(secs(s.arrival_ns, end_ns));
            st.prefill.observe(secs(scheduled, first));
            st.decode.observe(secs(first, end_ns));
            st.inference.observe(secs(scheduled, end_ns));
            if s.generated > 1 {
                st.tpot.observe(secs(first, end_ns) / f64::from(s.generated - 1));
            }
            st.request_prompt.observe(f64::from(s.prompt_len));
            st.request_generation.observe(f64::from(s.generated));
            st.finished[if f == Finish::Stop { 0 } else { 1 }] += 1;
        }
        Emit { id: s.id, index, finish, at_ns: end_ns, arrival_ns: s.arrival_ns, scheduled_ns: scheduled, cached_tokens: s.cached.unwrap_or(0) }
    }

    /// Checks the scheduler's bookkeeping: KV use within capacity and equal to the blocks the
    /// running requests hold, every computed token backed by a block, waiting requests holding
    /// nothing, the batch within `max_num_seqs`, prefix hits within queries. For tests.
    pub fn audit(&self) -> Result<(), String> {
        let mut holders: std::collections::HashMap<u32, u32> = Default::default();
        for s in &self.running {
            if s.blocks.len() < s.computed.div_ceil(self.profile.block_size) as usize {
                return Err(format!("request {} computed {} tokens with {} blocks", s.id, s.computed, s.blocks.len()));
            }
            for b in &s.blocks {
                *holders.entry(*b).or_default() += 1;
            }
        }
        if let Some(s) = self.waiting.iter().find(|s| !s.blocks.is_empty() || s.computed > 0) {
            return Err(format!("waiting request {} holds {} blocks", s.id, s.blocks.len()));
        }
        if self.kv.used() > self.kv.total() || holders.len() != self.kv.used() {
            return Err(format!("kv used {} of {}, held {}", self.kv.used(), self.kv.total(), holders.len()));
        }
        if let Some((b, n)) = holders.iter().find(|(b, n)| self.kv.refs(**b) != **n) {
            return Err(format!("block {b} has {} refs but {n} holders", self.kv.refs(*b)));
        }
        if self.running.len() > self.profile.max_num_seqs as usize {
            return Err(format!("{} running > max_num_seqs", self.running.len()));
        }
        if self.stats.prefix_hits > self.stats.prefix_queries {
            return Err("prefix hits exceed queries".into());
        }
        Ok(())
    }
}
