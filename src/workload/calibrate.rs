//! Prompt-length calibration per target: how many words of `prompt.rs` text make N tokens on the
//! server's own tokenizer (chat template included), with no local model files.
//!
//! The server's count is modelled as `tokens = overhead + per_word × words`. Two sources fit it:
//! - `/tokenize` (vLLM, SGLang, llama.cpp, the mock): a few prompts of known word counts are
//!   tokenized before probing starts, with `messages` on chat APIs so the template is counted;
//! - `usage.prompt_tokens` of earlier probes: a least-squares line, shrunk towards the current
//!   per-word figure while the observed word counts are too alike to tell slope from overhead.
//!
//! After a `/tokenize` fit, usage only corrects the overhead (e.g. a server whose `/tokenize`
//! leaves out BOS). Probes before any fit use the prior (1 token per word plus BOS and, on chat,
//! a small template). Calibration runs off the probes' clock: in a background task, or before
//! `--once` sends. The `/tokenize` calls themselves are made by `crate::client::tokenize`.

use std::sync::Mutex;

use crate::protocol::ProtocolKind;

/// Shrinkage of the usage fit's slope towards its prior, in words² (small: data wins fast once
/// word counts differ by more than a few dozen).
const SLOPE_PRIOR_WEIGHT: f64 = 400.0;
/// Per observation, older usage counts weigh this much less (adapts to a changed model).
const FORGET: f64 = 0.995;
/// Weight of a new usage residual on the overhead correction after a `/tokenize` fit.
const RESIDUAL_GAIN: f64 = 0.3;

/// Where the current line comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FitSource {
    Prior,
    Tokenize,
    Usage,
}

impl FitSource {
    pub fn as_str(self) -> &'static str {
        match self {
            FitSource::Prior => "prior",
            FitSource::Tokenize => "tokenize",
            FitSource::Usage => "usage",
        }
    }
}

/// The fitted line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub overhead: f64,
    pub per_word: f64,
    pub source: FitSource,
}

impl Fit {
    /// Words for a prompt of `tokens` tokens (at least 1).
    pub fn words_for(&self, tokens: u32) -> u32 {
        bounded_words((tokens as f64 - self.overhead) / self.per_word, tokens)
    }

    /// Words for `tokens` tokens of text inside a prompt (no overhead), e.g. a shared prefix.
    pub fn words_for_text(&self, tokens: u32) -> u32 {
        bounded_words(tokens as f64 / self.per_word, tokens)
    }

    pub fn tokens_for(&self, words: u32) -> f64 {
        self.overhead + self.per_word * words as f64
    }
}

/// Most words a prompt of N requested tokens may get, whatever the server reports: a server
/// that always says `prompt_tokens: 1` must not grow prompts without bound. The synthetic
/// words are one or two tokens on every tokenizer seen, so 4 leaves room for any real fit.
const MAX_WORDS_PER_TOKEN: f64 = 4.0;

fn bounded_words(words: f64, tokens: u32) -> u32 {
    let cap = (f64::from(tokens) * MAX_WORDS_PER_TOKEN).max(1.0);
    if words.is_finite() { words.round().clamp(1.0, cap) as u32 } else { tokens.max(1) }
}

/// Weighted sums for a least-squares line through (words, tokens).
#[derive(Debug, Default, Clone, Copy)]
struct Sums {
    n: f64,
    w: f64,
    y: f64,
    ww: f64,
    wy: f64,
}

#[derive(Debug)]
struct State {
    fit: Fit,
    sums: Sums,
    observed: u64,
}

/// One target's calibration, shared by its scenarios.
#[derive(Debug)]
pub struct Calibration {
    state: Mutex<State>,
}

impl Calibration {
    /// Starts from the prior for the API (BOS, plus a template on a chat API).
    pub fn new(api: ProtocolKind) -> Self {
        let overhead = if api.family().chat { 8.0 } else { 1.0 };
        let fit = Fit { overhead, per_word: 1.0, source: FitSource::Prior };
        Calibration { state: Mutex::new(State { fit, sums: Sums::default(), observed: 0 }) }
    }

    pub fn fit(&self) -> Fit {
        self.lock().fit
    }

    /// Prompt-token counts learnt from so far.
    pub fn observed(&self) -> u64 {
        self.lock().observed
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the line from tokenized (words, tokens) points.
    pub fn set_tokenized(&self, points: &[(u32, u32)]) {
        let mut sums = Sums::default();
        for &(w, y) in points {
            sums.add(w as f64, y as f64, 1.0);
        }
        let (overhead, per_word) = sums.line(1.0, 0.0);
        self.lock().fit = Fit { overhead, per_word, source: FitSource::Tokenize };
    }

    /// Learns from a probe of `words` words that the server counted as `prompt_tokens`.
    pub fn observe(&self, words: u32, prompt_tokens: u64) {
        if words == 0 || prompt_tokens == 0 {
            return;
        }
        let mut s = self.lock();
        s.observed += 1;
        let (w, y) = (words as f64, prompt_tokens as f64);
        if s.fit.source == FitSource::Tokenize {
            let residual = y - s.fit.tokens_for(words);
            s.fit.overhead += RESIDUAL_GAIN * residual;
            return;
        }
        s.sums.scale(FORGET);
        s.sums.add(w, y, 1.0);
        let (overhead, per_word) = s.sums.line(s.fit.per_word, SLOPE_PRIOR_WEIGHT);
        s.fit = Fit { overhead, per_word, source: FitSource::Usage };
    }
}

impl Sums {
    fn add(&mut self, w: f64, y: f64, weight: f64) {
        self.n += weight;
        self.w += weight * w;
        self.y += weight * y;
        self.ww += weight * w * w;
        self.wy += weight * w * y;
    }

    fn scale(&mut self, k: f64) {
        for v in [&mut self.n, &mut self.w, &mut self.y, &mut self.ww, &mut self.wy] {
            *v *= k;
        }
    }

    /// (intercept, slope), the slope shrunk towards `prior` with weight `lambda`.
    fn line(&self, prior: f64, lambda: f64) -> (f64, f64) {
        let (mw, my) = (self.w / self.n, self.y / self.n);
        let sxx = (self.ww - self.n * mw * mw).max(0.0);
        let sxy = self.wy - self.n * mw * my;
        let slope = if sxx + lambda > 0.0 { (sxy + lambda * prior) / (sxx + lambda) } else { prior };
        let slope = if slope.is_finite() && slope > 0.05 { slope } else { prior };
        (my - slope * mw, slope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_fit_recovers_a_line() {
        let cal = Calibration::new(ProtocolKind::OpenaiCompletions);
        for w in [50u32, 400, 120, 900, 60, 300] {
            cal.observe(w, (3.0 + 1.25 * w as f64).round() as u64);
        }
        let f = cal.fit();
        assert!((f.per_word - 1.25).abs() < 0.01, "{f:?}");
        assert!((f.tokens_for(f.words_for(512)) - 512.0).abs() <= 1.5);
    }

    #[test]
    fn one_length_is_exact_at_that_length() {
        let cal = Calibration::new(ProtocolKind::OpenaiChat);
        cal.observe(100, 140);
        let f = cal.fit();
        assert!((f.tokens_for(100) - 140.0).abs() < 1e-9, "{f:?}");
    }

    #[test]
    fn tokenize_fit_then_usage_corrects_overhead() {
        let cal = Calibration::new(ProtocolKind::OpenaiCompletions);
        cal.set_tokenized(&[(32, 33), (256, 257), (1024, 1025)]);
        assert_eq!(cal.fit().words_for(128), 127);
        for _ in 0..20 {
            cal.observe(127, 129); // the server adds one more token than /tokenize said
        }
        assert!((cal.fit().overhead - 2.0).abs() < 0.01);
    }
}
