//! Synthetic prompts of roughly a requested token count.
//!
//! Each prompt starts with a unique nonce so no probe hits the server's prefix cache by
//! accident; the body repeats common English words that byte-pair tokenizers encode as one
//! token each (with their leading space), so word count tracks token count.

const WORDS: [&str; 32] = [
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their",
];

/// Tokens the nonce header takes on typical tokenizers (a hex id splits into a few pieces).
const NONCE_TOKENS: u32 = 8;

/// A prompt of about `tokens` tokens beginning with `nonce`.
pub fn synthesize_prompt(tokens: u32, nonce: u64) -> String {
    let words = tokens.saturating_sub(NONCE_TOKENS).max(1) as usize;
    let mut prompt = format!("{nonce:016x}:");
    // Walk the vocabulary with a nonce-dependent stride so prompts differ beyond the header.
    let stride = (nonce % 7 + 1) as usize * 3 + 1;
    for i in 0..words {
        prompt.push(' ');
        prompt.push_str(WORDS[(i * stride + (nonce as usize % WORDS.len())) % WORDS.len()]);
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_prefix_and_word_count() {
        let a = synthesize_prompt(128, 1);
        let b = synthesize_prompt(128, 2);
        assert_ne!(a[..17], b[..17]);
        assert_eq!(a.split(' ').count() - 1, 120);
        assert_eq!(synthesize_prompt(1, 5).split(' ').count() - 1, 1);
    }
}
