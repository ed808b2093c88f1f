//! The mock's deterministic tokenizer and text generator.
//!
//! One token per whitespace-separated word; a word's id is a 15-bit FNV-1a hash plus 1000
//! (ids below 1000 are "special"). Chat prompts add `CHAT_TOKENS_PER_MESSAGE` per message and
//! `CHAT_TOKENS_GENERATION_PROMPT` once, standing in for a chat template. Generated tokens are
//! words from a fixed vocabulary, each emitted with a leading space.

const VOCAB: &[&str] = &[
    "the", "model", "token", "cache", "batch", "stream", "latency", "server", "prompt", "queue", "block", "step", "prefill", "decode", "engine", "request",
    "answer", "simple", "quick", "data", "graph", "signal", "value", "metric", "window", "budget", "river", "stone", "light", "cloud", "north", "paper",
    "garden", "silver", "orange", "seven", "little", "bright", "quiet", "open",
];

/// FNV-1a, used for word ids and prefix-cache block hashes.
pub fn fnv1a(bytes: &[u8], seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Token ids of a text.
pub fn encode(text: &str) -> Vec<u32> {
    text.split_whitespace().map(word_id).collect()
}

fn word_id(word: &str) -> u32 {
    1000 + (fnv1a(word.as_bytes(), 0) % 32768) as u32
}

/// Token ids of a chat conversation: message contents plus fixed template tokens.
pub fn encode_chat<'a>(contents: impl Iterator<Item = &'a str>) -> Vec<u32> {
    let mut out = Vec::new();
    for content in contents {
        out.extend([1, 2, 3]); // role marker, start, newline
        out.extend(encode(content));
        out.push(4); // end of message
    }
    out.extend([1, 5, 3]); // assistant turn opener
    out
}

/// Text of a token id: vocabulary ids map back to their word, others to `<id>`.
pub fn decode_id(id: u32) -> String {
    match id.checked_sub(100).map(|i| i as usize) {
        Some(i) if i < VOCAB.len() => format!(" {}", VOCAB[i]),
        _ => format!(" <{id}>"),
    }
}

/// splitmix64: the mock's only randomness source (cheap and seedable).
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Uniform in [0, 1) from a hash.
pub fn unit(x: u64) -> f64 {
    (mix(x) >> 11) as f64 / (1u64 << 53) as f64
}

/// The `index`-th generated token of a request with seed `seed`: (id, text).
pub fn gen_token(seed: u64, index: u32) -> (u32, &'static str) {
    let i = (mix(seed ^ u64::from(index).wrapping_mul(0x51_7cc1)) % VOCAB.len() as u64) as usize;
    (100 + i as u32, VOCAB[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_tokens() {
        assert_eq!(encode("hello  big\nworld").len(), 3);
        assert_eq!(encode("a b"), encode("a   b"));
    }

    /// Template tokens around each chat message (role marker, start and end delimiters, newline).
    const CHAT_TOKENS_PER_MESSAGE: u32 = 4;
    /// Template tokens that open the assistant turn.
    const CHAT_TOKENS_GENERATION_PROMPT: u32 = 3;

    #[test]
    fn chat_adds_template_tokens() {
        let n = encode_chat(["one two"].into_iter()).len() as u32;
        assert_eq!(n, 2 + CHAT_TOKENS_PER_MESSAGE + CHAT_TOKENS_GENERATION_PROMPT);
    }

    #[test]
    fn generated_ids_decode_to_their_text() {
        let (id, word) = gen_token(7, 3);
        assert_eq!(decode_id(id), format!(" {word}"));
    }
}
