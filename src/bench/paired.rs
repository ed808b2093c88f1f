//! The paired judgement of `llmprobe gate`: two deployments probed side by side, pair i the same
//! request sent to both at the same moment. Load they share shows up on both sides of a pair and
//! cancels in its difference, so each signal is judged on per-pair differences:
//!
//! - TTFT, TPOT, E2E: the log ratio candidate/baseline of each pair where both answered;
//! - goodput: baseline good − candidate good (each 0 or 1), over every pair;
//! - checks: candidate failed − baseline failed, over the pairs of scenarios with `checks:`
//!   where both answered.
//!
//! Pairs close in time are not independent (a busy spell hits several), so the interval is a
//! t-interval over the means of time blocks (`block_s`), not over pairs. Every difference is
//! "worse is positive"; a signal is `regressed` when its interval lies wholly above the null
//! (`latency_tolerance`, or no change for goodput and checks, which also need the exact test on
//! the discordant pairs), `passed` when it rules out the configured effect (`latency_effect`,
//! `goodput_effect`), else undecided. Sequential looks spend `alpha` evenly: each of the `looks`
//! looks tests each signal at `alpha / (signals × looks)` (Bonferroni), so the whole run raises a
//! false alarm with probability at most `alpha` however the looks depend on each other. A signal
//! decided at a look stays decided. docs/benchmark.md, "Two deployments side by side".

use std::collections::HashMap;

use serde::Serialize;

use super::records::{Phase, Record};
use crate::detect::math::{binomial_sf, proportion_upper, student_t_upper};

/// How a gate judges.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateSettings {
    /// Probability that a run regresses a candidate no worse than the baseline, over every signal
    /// and look together.
    pub alpha: f64,
    /// Looks planned for the run (1 without `--until-verdict`).
    pub looks: u32,
    /// Width of the time blocks, seconds.
    pub block_s: f64,
    /// A signal needs this many blocks with pairs before it is judged.
    pub min_blocks: usize,
    /// Candidate/baseline latency ratio a pass must rule out.
    pub latency_effect: f64,
    /// Latency ratio still counted as no worse (the null of `regressed`).
    pub latency_tolerance: f64,
    /// Goodput drop (and check-failure rise), absolute, a pass must rule out.
    pub goodput_effect: f64,
    /// The scenarios that run behaviour checks: the checks signal is judged on their pairs
    /// (not at all when there are none).
    pub checked_scenarios: Vec<String>,
}

impl GateSettings {
    /// The signals this gate judges.
    pub fn signals(&self) -> Vec<GateSignal> {
        GateSignal::ALL.into_iter().filter(|s| *s != GateSignal::Checks || !self.checked_scenarios.is_empty()).collect()
    }

    /// One-sided level of each test at each look.
    pub fn alpha_per_test(&self) -> f64 {
        self.alpha / (self.signals().len() as f64 * f64::from(self.looks.max(1)))
    }

    /// Every value in its range; messages name the flag.
    pub fn validate(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if !(self.alpha > 0.0 && self.alpha < 0.5) {
            problems.push(format!("--alpha must be in (0, 0.5), got {}", self.alpha));
        }
        if !(1..=1000).contains(&self.looks) {
            problems.push(format!("--looks must be in 1..=1000, got {}", self.looks));
        }
        if !(self.block_s.is_finite() && self.block_s > 0.0) {
            problems.push(format!("--block must be a positive duration, got {} s", self.block_s));
        }
        if !(self.latency_tolerance.is_finite() && self.latency_tolerance >= 1.0) {
            problems.push(format!("--latency-tolerance must be at least 1, got {}", self.latency_tolerance));
        }
        if !(self.latency_effect.is_finite() && self.latency_effect > self.latency_tolerance) {
            problems.push(format!("--latency-effect must be above --latency-tolerance ({}), got {}", self.latency_tolerance, self.latency_effect));
        }
        if !(self.goodput_effect > 0.0 && self.goodput_effect < 1.0) {
            problems.push(format!("--goodput-effect must be in (0, 1), got {}", self.goodput_effect));
        }
        if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
    }
}

/// What is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GateSignal {
    Ttft,
    Tpot,
    E2e,
    Goodput,
    Checks,
}

impl GateSignal {
    pub const ALL: [GateSignal; 5] = [GateSignal::Ttft, GateSignal::Tpot, GateSignal::E2e, GateSignal::Goodput, GateSignal::Checks];

    pub fn as_str(self) -> &'static str {
        match self {
            GateSignal::Ttft => "ttft",
            GateSignal::Tpot => "tpot",
            GateSignal::E2e => "e2e",
            GateSignal::Goodput => "goodput",
            GateSignal::Checks => "checks",
        }
    }

    fn latency(self, r: &Record) -> Option<f64> {
        match self {
            GateSignal::Ttft => r.ttft_ms,
            GateSignal::Tpot => r.tpot_ms,
            GateSignal::E2e => r.e2e_ms,
            GateSignal::Goodput | GateSignal::Checks => None,
        }
        .filter(|v| v.is_finite() && *v > 0.0)
    }
}

/// A signal's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Regressed,
    Passed,
    /// Not decided yet (while looking); at the end of the run, `inconclusive`.
    Undecided,
    Inconclusive,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Regressed => "regressed",
            Decision::Passed => "passed",
            Decision::Undecided => "undecided",
            Decision::Inconclusive => "inconclusive",
        }
    }
}

/// One signal at one look.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignalResult {
    pub signal: GateSignal,
    /// Pairs and time blocks used.
    pub pairs: usize,
    pub blocks: usize,
    /// Latency: median (ms) over the pairs used; goodput: good fraction; checks: failing fraction.
    pub baseline: Option<f64>,
    pub candidate: Option<f64>,
    /// Latency: candidate/baseline ratio (geometric mean over pairs); goodput and checks:
    /// candidate − baseline fraction.
    pub estimate: Option<f64>,
    /// The interval of `estimate` at this look's level (two-sided, each side at the per-test alpha).
    pub interval: Option<(f64, f64)>,
    /// Goodput and checks: one-sided exact p-value of the discordant pairs (candidate worse).
    pub p_value: Option<f64>,
    pub decision: Decision,
    /// The look (1-based) that decided it.
    pub decided_at_look: Option<u32>,
    pub note: String,
}

/// The gate's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GateVerdict {
    Regressed,
    Passed,
    Undecided,
    Inconclusive,
}

impl GateVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            GateVerdict::Regressed => "regressed",
            GateVerdict::Passed => "passed",
            GateVerdict::Undecided => "undecided",
            GateVerdict::Inconclusive => "inconclusive",
        }
    }

    /// Regressed if any signal regressed, passed if every signal passed.
    pub fn of(results: &[SignalResult]) -> GateVerdict {
        if results.iter().any(|r| r.decision == Decision::Regressed) {
            GateVerdict::Regressed
        } else if !results.is_empty() && results.iter().all(|r| r.decision == Decision::Passed) {
            GateVerdict::Passed
        } else if results.iter().any(|r| r.decision == Decision::Undecided) {
            GateVerdict::Undecided
        } else {
            GateVerdict::Inconclusive
        }
    }
}

/// One request sent to both sides.
#[derive(Debug, Clone, Copy)]
pub struct Pair<'a> {
    /// Intended send time, seconds since the run started.
    pub at_s: f64,
    pub baseline: &'a Record,
    pub candidate: &'a Record,
}

/// The measured requests of both sides matched by sequence number (a pair shares it); a
/// request whose partner is not recorded yet is left out.
pub fn pairs<'a>(baseline: &'a [Record], candidate: &'a [Record]) -> Vec<Pair<'a>> {
    let by_seq: HashMap<u64, &Record> = candidate.iter().filter(|r| r.phase == Phase::Measure).map(|r| (r.seq, r)).collect();
    let mut out: Vec<Pair> = baseline
        .iter()
        .filter(|r| r.phase == Phase::Measure)
        .filter_map(|b| by_seq.get(&b.seq).map(|c| Pair { at_s: b.intended_s, baseline: b, candidate: c }))
        .collect();
    out.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    out
}

/// An answer the checks looked at: a success, or a complete answer that failed a check.
fn checked(r: &Record) -> bool {
    r.is_success() || !r.checks_failed.is_empty()
}

/// Judges every signal on `pairs` at the level of one look (`settings.alpha_per_test()`).
pub fn judge(pairs: &[Pair], settings: &GateSettings) -> Vec<SignalResult> {
    settings.signals().into_iter().map(|s| judge_signal(s, pairs, settings)).collect()
}

fn judge_signal(signal: GateSignal, pairs: &[Pair], s: &GateSettings) -> SignalResult {
    let alpha = s.alpha_per_test();
    let mut r = SignalResult {
        signal,
        pairs: 0,
        blocks: 0,
        baseline: None,
        candidate: None,
        estimate: None,
        interval: None,
        p_value: None,
        decision: Decision::Undecided,
        decided_at_look: None,
        note: String::new(),
    };
    match signal {
        GateSignal::Ttft | GateSignal::Tpot | GateSignal::E2e => {
            let both: Vec<(f64, f64, f64)> = pairs.iter().filter_map(|p| Some((p.at_s, signal.latency(p.baseline)?, signal.latency(p.candidate)?))).collect();
            r.pairs = both.len();
            r.baseline = median(both.iter().map(|x| x.1).collect());
            r.candidate = median(both.iter().map(|x| x.2).collect());
            let diffs: Vec<(f64, f64)> = both.iter().map(|&(t, b, c)| (t, (c / b).ln())).collect();
            let Some(iv) = block_interval(&diffs, s.block_s, alpha) else {
                r.blocks = blocks_of(&diffs, s.block_s);
                r.note = format!("too few blocks with pairs ({} of {} needed)", r.blocks, s.min_blocks);
                return r;
            };
            r.blocks = iv.blocks;
            if iv.blocks < s.min_blocks {
                r.note = format!("too few blocks with pairs ({} of {} needed)", iv.blocks, s.min_blocks);
                return r;
            }
            r.estimate = Some(iv.mean.exp());
            r.interval = Some((iv.low.exp(), iv.high.exp()));
            if iv.low > s.latency_tolerance.ln() {
                r.decision = Decision::Regressed;
                r.note = format!("interval above {}x", s.latency_tolerance);
            } else if iv.high < s.latency_effect.ln() {
                r.decision = Decision::Passed;
                r.note = format!("rules out {}x", s.latency_effect);
            } else {
                r.note = format!("interval spans {}x or {}x", s.latency_tolerance, s.latency_effect);
            }
        }
        GateSignal::Goodput | GateSignal::Checks => {
            // (time, baseline bad, candidate bad)
            let flags: Vec<(f64, bool, bool)> = if signal == GateSignal::Goodput {
                pairs.iter().map(|p| (p.at_s, !p.baseline.is_goodput(), !p.candidate.is_goodput())).collect()
            } else {
                pairs
                    .iter()
                    .filter(|p| s.checked_scenarios.contains(&p.baseline.scenario) && checked(p.baseline) && checked(p.candidate))
                    .map(|p| (p.at_s, !p.baseline.checks_failed.is_empty(), !p.candidate.checks_failed.is_empty()))
                    .collect()
            };
            binary(&mut r, &flags, s, alpha);
        }
    }
    r
}

/// Goodput and checks: "bad" per side and pair. Regressed needs the exact test on the discordant
/// pairs (McNemar's, one-sided) and the block interval above no change; passed needs both the
/// block interval and the exact bound of candidate-only bad pairs below the effect (a run with no
/// discordant pair has a zero-width block interval; the exact bound is what a handful of pairs
/// can really rule out).
fn binary(r: &mut SignalResult, flags: &[(f64, bool, bool)], s: &GateSettings, alpha: f64) {
    let n = flags.len();
    r.pairs = n;
    if n == 0 {
        r.note = "no pairs".into();
        return;
    }
    let frac = |f: &dyn Fn(&(f64, bool, bool)) -> bool| flags.iter().filter(|x| f(x)).count() as f64 / n as f64;
    let (base_bad, cand_bad) = (frac(&|x| x.1), frac(&|x| x.2));
    let worse = flags.iter().filter(|x| x.2 && !x.1).count() as u64;
    let better = flags.iter().filter(|x| x.1 && !x.2).count() as u64;
    let p = if worse + better == 0 { 1.0 } else { binomial_sf(worse as f64, (worse + better) as f64, 0.5) };
    r.p_value = Some(p);
    // Shown as goodput (good fractions) or failing fractions; judged as "bad rose by".
    let goodput = r.signal == GateSignal::Goodput;
    let shown = |bad: f64| if goodput { 1.0 - bad } else { bad };
    r.baseline = Some(shown(base_bad));
    r.candidate = Some(shown(cand_bad));
    let diffs: Vec<(f64, f64)> = flags.iter().map(|&(t, b, c)| (t, f64::from(u8::from(c)) - f64::from(u8::from(b)))).collect();
    let iv = block_interval(&diffs, s.block_s, alpha);
    r.blocks = iv.as_ref().map_or_else(|| blocks_of(&diffs, s.block_s), |iv| iv.blocks);
    let Some(iv) = iv.filter(|iv| iv.blocks >= s.min_blocks) else {
        r.note = format!("too few blocks with pairs ({} of {} needed)", r.blocks, s.min_blocks);
        return;
    };
    // Goodput is shown as candidate − baseline good fraction: the bad rise with its sign turned.
    let sign = if goodput { -1.0 } else { 1.0 };
    // `+ 0.0` turns a negated zero into zero (no "-0.0" in the table).
    r.estimate = Some(sign * iv.mean + 0.0);
    r.interval = Some(if goodput { (-iv.high + 0.0, -iv.low + 0.0) } else { (iv.low, iv.high) });
    let exact_high = proportion_upper(worse, n as u64, alpha);
    if p <= alpha && iv.low > 0.0 {
        r.decision = Decision::Regressed;
        r.note = format!("{worse} pairs worse, {better} better (exact p {p:.2e})");
    } else if iv.high < s.goodput_effect && exact_high < s.goodput_effect {
        r.decision = Decision::Passed;
        r.note = format!("rules out {:.1} points", s.goodput_effect * 100.0);
    } else {
        r.note = format!("{worse} pairs worse, {better} better; cannot rule out {:.1} points yet", s.goodput_effect * 100.0);
    }
}

/// A t-interval over time-block means.
#[derive(Debug, Clone, Copy, PartialEq)]
struct BlockInterval {
    mean: f64,
    low: f64,
    high: f64,
    blocks: usize,
}

fn block_means(values: &[(f64, f64)], block_s: f64) -> Vec<f64> {
    let mut sums: std::collections::BTreeMap<i64, (f64, f64)> = std::collections::BTreeMap::new();
    for &(t, x) in values {
        if !(t.is_finite() && x.is_finite()) {
            continue;
        }
        let e = sums.entry((t / block_s).floor() as i64).or_insert((0.0, 0.0));
        e.0 += x;
        e.1 += 1.0;
    }
    sums.values().map(|(sum, n)| sum / n).collect()
}

fn blocks_of(values: &[(f64, f64)], block_s: f64) -> usize {
    block_means(values, block_s).len()
}

/// Mean of the block means with a two-sided interval whose each side is at `alpha` (Student t,
/// blocks − 1 degrees of freedom); `None` with fewer than two blocks.
fn block_interval(values: &[(f64, f64)], block_s: f64, alpha: f64) -> Option<BlockInterval> {
    let means = block_means(values, block_s);
    let k = means.len();
    if k < 2 {
        return None;
    }
    let kf = k as f64;
    let mean = means.iter().sum::<f64>() / kf;
    let var = means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (kf - 1.0);
    let half = student_t_upper(alpha, kf - 1.0) * (var / kf).sqrt();
    Some(BlockInterval { mean, low: mean - half, high: mean + half, blocks: k })
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    crate::util::stats::sort_f64(&mut v);
    crate::util::stats::percentile(&v, 0.5)
}

/// A run's looks: decisions latch, the verdict is over every signal.
#[derive(Debug, Clone)]
pub struct Looks {
    pub settings: GateSettings,
    pub done: u32,
    pub results: Vec<SignalResult>,
}

impl Looks {
    pub fn new(settings: GateSettings) -> Self {
        Looks { settings, done: 0, results: Vec::new() }
    }

    /// One look at everything recorded so far; a signal decided before keeps its decision (and
    /// the figures it was decided on). `last`: what is still undecided becomes inconclusive.
    pub fn look(&mut self, baseline: &[Record], candidate: &[Record], last: bool) -> GateVerdict {
        self.done += 1;
        let fresh = judge(&pairs(baseline, candidate), &self.settings);
        let before = std::mem::take(&mut self.results);
        self.results = fresh
            .into_iter()
            .map(|mut now| match before.iter().find(|b| b.signal == now.signal && b.decided_at_look.is_some()) {
                Some(decided) => decided.clone(),
                None => {
                    if now.decision != Decision::Undecided {
                        now.decided_at_look = Some(self.done);
                    } else if last {
                        now.decision = Decision::Inconclusive;
                    }
                    now
                }
            })
            .collect();
        self.verdict()
    }

    pub fn verdict(&self) -> GateVerdict {
        GateVerdict::of(&self.results)
    }

    /// The run stopped at a decided verdict: what was still undecided is inconclusive, `why`.
    pub fn close(&mut self, why: &str) {
        for r in &mut self.results {
            if r.decision == Decision::Undecided {
                r.decision = Decision::Inconclusive;
                r.note = why.to_owned();
            }
        }
    }

    /// Every look planned has been taken.
    pub fn exhausted(&self) -> bool {
        self.done >= self.settings.looks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    fn settings() -> GateSettings {
        GateSettings {
            alpha: 0.05,
            looks: 1,
            block_s: 5.0,
            min_blocks: 4,
            latency_effect: 1.25,
            latency_tolerance: 1.05,
            goodput_effect: 0.02,
            checked_scenarios: vec!["s".into()],
        }
    }

    fn record(seq: u64, at: f64, ttft: Option<f64>, good: bool, failed: bool) -> Record {
        let line = serde_json::json!({
            "run_id": "r", "point": 0, "load": 1.0, "repeat": 0, "phase": "measure", "request_id": "x", "seq": seq,
            "target": "t", "scenario": "s", "model": "m", "requested_input_tokens": 8, "requested_output_tokens": 8,
            "input_tokens": null, "output_tokens": null, "token_source": null,
            "intended_s": at, "sent_s": at, "first_token_s": null, "end_s": at, "intended_unix_s": at, "sent_unix_s": at,
            "first_token_unix_s": null, "end_unix_s": at, "schedule_lag_ms": 0.0,
            "ttft_ms": ttft, "tpot_ms": ttft.map(|t| t / 10.0), "itl": null, "e2e_ms": ttft.map(|t| t * 3.0),
            "outcome": if failed || ttft.is_none() { "error" } else { "success" }, "error_class": null, "error_detail": null,
            "http_status": 200, "finish_reason": "stop",
            "slo": ttft.filter(|_| !failed).map(|_| serde_json::json!({"ttft_ok": good, "tpot_ok": null, "e2e_ok": null, "goodput": good})),
            "checks_failed": if failed { vec!["structured_output"] } else { vec![] },
        });
        serde_json::from_value(line).unwrap()
    }

    /// `n` pairs over `n / rate` seconds; a shared load factor (a slow random walk) multiplies
    /// both sides of a pair, the candidate is `factor` slower, and each side has its own noise.
    fn sides(seed: u64, n: u64, factor: f64, cand_fail: f64) -> (Vec<Record>, Vec<Record>) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let (mut b, mut c) = (Vec::new(), Vec::new());
        let mut load: f64 = 0.0;
        for i in 0..n {
            let at = i as f64 * 0.2;
            load = (0.95 * load + 0.3 * (rng.random::<f64>() - 0.5)).clamp(-1.5, 1.5);
            let noise = |rng: &mut SmallRng| 0.15 * (rng.random::<f64>() - 0.5);
            let tb = 100.0 * (load + noise(&mut rng)).exp();
            let tc = 100.0 * factor * (load + noise(&mut rng)).exp();
            let fail = rng.random::<f64>() < cand_fail;
            b.push(record(i, at, Some(tb), true, false));
            c.push(record(i, at, Some(tc), !fail, fail));
        }
        (b, c)
    }

    fn decision(results: &[SignalResult], s: GateSignal) -> Decision {
        results.iter().find(|r| r.signal == s).unwrap().decision
    }

    #[test]
    fn shared_load_cancels_and_a_slower_candidate_regresses() {
        let s = settings();
        let (b, c) = sides(1, 400, 1.25, 0.0);
        let res = judge(&pairs(&b, &c), &s);
        assert_eq!(decision(&res, GateSignal::Ttft), Decision::Regressed, "{res:#?}");
        let ttft = res.iter().find(|r| r.signal == GateSignal::Ttft).unwrap();
        let (lo, hi) = ttft.interval.unwrap();
        assert!(lo < 1.25 && 1.25 < hi, "{lo} {hi}");
        assert_eq!(GateVerdict::of(&res), GateVerdict::Regressed);

        let (b, c) = sides(2, 400, 1.0, 0.0);
        let res = judge(&pairs(&b, &c), &s);
        assert_eq!(GateVerdict::of(&res), GateVerdict::Passed, "{res:#?}");
    }

    #[test]
    fn equal_sides_rarely_regress() {
        // 200 runs of equal sides at alpha 0.05: a handful of false alarms at most.
        let s = settings();
        let false_alarms = (0..200)
            .filter(|seed| {
                let (b, c) = sides(100 + seed, 200, 1.0, 0.0);
                GateVerdict::of(&judge(&pairs(&b, &c), &s)) == GateVerdict::Regressed
            })
            .count();
        assert!(false_alarms <= 10, "{false_alarms} of 200");
    }

    #[test]
    fn failing_checks_regress_checks_and_goodput() {
        let s = settings();
        let (b, c) = sides(3, 400, 1.0, 0.3);
        let res = judge(&pairs(&b, &c), &s);
        assert_eq!(decision(&res, GateSignal::Checks), Decision::Regressed, "{res:#?}");
        assert_eq!(decision(&res, GateSignal::Goodput), Decision::Regressed, "{res:#?}");
        let checks = res.iter().find(|r| r.signal == GateSignal::Checks).unwrap();
        assert!(checks.p_value.unwrap() < 1e-10 && checks.estimate.unwrap() > 0.2, "{checks:?}");
    }

    #[test]
    fn too_few_pairs_decide_nothing_and_a_handful_cannot_pass_goodput() {
        let s = settings();
        let (b, c) = sides(4, 10, 1.0, 0.0);
        let res = judge(&pairs(&b, &c), &s);
        assert!(res.iter().all(|r| r.decision == Decision::Undecided), "{res:#?}");
        // 40 pairs, none bad: the exact bound (about 11%) cannot rule out a 2-point drop.
        let (b, c) = sides(5, 40, 1.0, 0.0);
        let res = judge(&pairs(&b, &c), &s);
        assert_eq!(decision(&res, GateSignal::Goodput), Decision::Undecided, "{res:#?}");
    }

    #[test]
    fn decisions_latch_and_the_last_look_closes_the_rest() {
        let mut looks = Looks::new(GateSettings { looks: 3, ..settings() });
        let (b, c) = sides(6, 400, 1.25, 0.0);
        assert_eq!(looks.look(&b[..30], &c[..30], false), GateVerdict::Undecided);
        assert_eq!(looks.look(&b, &c, false), GateVerdict::Regressed);
        let at = looks.results.iter().find(|r| r.signal == GateSignal::Ttft).unwrap().decided_at_look;
        assert_eq!(at, Some(2));
        // A later look on equal data cannot undo it.
        let (b2, c2) = sides(7, 400, 1.0, 0.0);
        assert_eq!(looks.look(&b2, &c2, true), GateVerdict::Regressed);
        assert!(looks.exhausted());
    }

    #[test]
    fn pairs_match_by_sequence_and_skip_the_unmatched() {
        let (b, c) = sides(8, 10, 1.0, 0.0);
        assert_eq!(pairs(&b, &c[..7]).len(), 7);
        assert!(settings().validate().is_ok());
        let bad = GateSettings { alpha: 0.7, latency_effect: 1.01, ..settings() };
        let msg = bad.validate().unwrap_err();
        assert!(msg.contains("--alpha") && msg.contains("--latency-effect"), "{msg}");
    }
}
