//! Synthetic prompts built from words.
//!
//! The vocabulary is common English words that byte-pair and SentencePiece tokenizers encode as
//! one token each (with their leading space), so a prompt's token count is close to linear in its
//! word count; `calibrate.rs` learns that line per target. A prompt is
//! `[shared prefix] nonce body`: the nonce is a 64-bit number spelled as `NONCE_WORDS` words of
//! the same vocabulary, so it is unique per request yet tokenizes to a fixed count (hex digits
//! would not: many tokenizers split digits one by one).

const WORDS: [&str; 32] = [
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not", "he", "this", "are", "or", "his", "from", "at",
    "which", "but", "have", "an", "had", "they", "you", "were", "their",
];

/// Words that spell a 64-bit nonce, 5 bits each.
pub const NONCE_WORDS: u32 = 13;

/// Appends `n` words walking the vocabulary with a `seed`-dependent start and stride, so texts
/// with different seeds differ everywhere.
fn push_words(out: &mut String, n: u32, seed: u64) {
    let stride = (seed % 8) as usize * 2 + 1; // odd, so coprime with 32: visits every word
    let start = (seed >> 3) as usize % WORDS.len();
    for i in 0..n as usize {
        push_word(out, WORDS[(start + i * stride) % WORDS.len()]);
    }
}

/// Appends the nonce as `NONCE_WORDS` words.
fn push_nonce(out: &mut String, nonce: u64) {
    for i in 0..NONCE_WORDS {
        push_word(out, WORDS[((nonce >> (5 * i)) & 31) as usize]);
    }
}

fn push_word(out: &mut String, word: &str) {
    if !out.is_empty() {
        out.push(' ');
    }
    out.push_str(word);
}

/// A prompt of `words` words: `prefix_words` from the shared prefix `prefix_seed` (if any), the
/// nonce, then the body. Never fewer words than the nonce takes.
pub fn synthesize(words: u32, nonce: u64, prefix: Option<(u32, u64)>) -> String {
    let mut out = String::with_capacity(words as usize * 5);
    let mut left = words.max(NONCE_WORDS);
    if let Some((prefix_words, seed)) = prefix {
        let n = prefix_words.min(left - NONCE_WORDS);
        push_words(&mut out, n, seed);
        left -= n;
    }
    push_nonce(&mut out, nonce);
    push_words(&mut out, left - NONCE_WORDS, nonce.rotate_left(29));
    out
}

/// A prompt of about `tokens` tokens beginning with `nonce`, assuming one token per word (use
/// a `Calibration` to convert tokens to words on a real tokenizer).
pub fn synthesize_prompt(tokens: u32, nonce: u64) -> String {
    synthesize(tokens.max(1), nonce, None)
}

/// A dataset prompt behind a nonce line.
pub fn with_nonce(prompt: &str, nonce: u64) -> String {
    let mut out = String::with_capacity(prompt.len() + 80);
    push_nonce(&mut out, nonce);
    out.push('\n');
    out.push_str(prompt);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_counts_and_unique_starts() {
        let a = synthesize(128, 1, None);
        let b = synthesize(128, 2, None);
        assert_eq!(a.split(' ').count(), 128);
        assert_ne!(a.split(' ').take(13).collect::<Vec<_>>(), b.split(' ').take(13).collect::<Vec<_>>());
        assert_eq!(synthesize(1, 5, None).split(' ').count(), NONCE_WORDS as usize);
    }

    #[test]
    fn shared_prefix_is_identical_and_nonce_follows() {
        let a = synthesize(100, 1, Some((40, 9)));
        let b = synthesize(100, 2, Some((40, 9)));
        assert_eq!(a.split(' ').take(40).collect::<Vec<_>>(), b.split(' ').take(40).collect::<Vec<_>>());
        assert_ne!(a, b);
        assert_eq!(a.split(' ').count(), 100);
    }
}
