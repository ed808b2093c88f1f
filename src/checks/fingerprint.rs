//! Output fingerprints: a hash of a temperature-0 answer, normalised, per target × scenario ×
//! prompt. The same prompt answered differently at temperature 0 means the model, its template
//! or its sampling defaults changed: a behaviour change (logged, counted, a release marker of
//! source `behaviour`), not an error.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::Collected;

/// Prompts remembered per target (a dataset of more distinct prompts is fingerprinted for its
/// first `MAX_PROMPTS` only, so memory stays bounded).
const MAX_PROMPTS: usize = 4096;

/// Whitespace runs become one space and the ends are trimmed (a server that adds a trailing
/// newline has not changed behaviour); tool calls count with their name and arguments.
pub fn normalise(c: &Collected) -> String {
    let mut s: String = c.text.split_whitespace().collect::<Vec<_>>().join(" ");
    for call in &c.tool_calls {
        s.push_str("\u{0}call:");
        s.push_str(&call.name);
        s.push('\u{0}');
        s.push_str(&call.arguments.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    s
}

/// The first 16 hex digits of the SHA-256 of the normalised answer.
pub fn fingerprint(c: &Collected) -> String {
    let digest = Sha256::digest(normalise(c).as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The last fingerprint seen per (scenario, prompt SHA-256), for one target.
#[derive(Debug, Default)]
pub struct Fingerprints {
    seen: Mutex<HashMap<(String, String), String>>,
}

impl Fingerprints {
    /// Records `now` for the prompt; returns the previous fingerprint when it differs.
    pub fn observe(&self, scenario: &str, prompt_sha256: &str, now: &str) -> Option<String> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let key = (scenario.to_owned(), prompt_sha256.to_owned());
        match seen.get_mut(&key) {
            Some(before) if before != now => Some(std::mem::replace(before, now.to_owned())),
            Some(_) => None,
            None => {
                if seen.len() < MAX_PROMPTS {
                    seen.insert(key, now.to_owned());
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(text: &str) -> Collected {
        let mut c = Collected::new();
        c.push_text(text);
        c
    }

    #[test]
    fn whitespace_does_not_change_a_fingerprint_words_do() {
        assert_eq!(fingerprint(&answer(" Paris.\n")), fingerprint(&answer("Paris.")));
        assert_eq!(fingerprint(&answer("The  capital\nis Paris")), fingerprint(&answer("The capital is Paris")));
        assert_ne!(fingerprint(&answer("Paris.")), fingerprint(&answer("Lyon.")));
        assert_eq!(fingerprint(&answer("x")).len(), 16);
    }

    #[test]
    fn a_change_is_reported_once_per_change() {
        let f = Fingerprints::default();
        assert_eq!(f.observe("s", "p", "aa"), None);
        assert_eq!(f.observe("s", "p", "aa"), None);
        assert_eq!(f.observe("s", "p", "bb"), Some("aa".into()));
        assert_eq!(f.observe("s", "p", "bb"), None);
        assert_eq!(f.observe("other", "p", "cc"), None, "per scenario");
    }

    #[test]
    fn memory_is_bounded() {
        let f = Fingerprints::default();
        for i in 0..(MAX_PROMPTS + 100) {
            f.observe("s", &i.to_string(), "a");
        }
        assert_eq!(f.seen.lock().unwrap().len(), MAX_PROMPTS);
        assert_eq!(f.observe("s", &(MAX_PROMPTS + 50).to_string(), "b"), None, "an untracked prompt never reports");
    }
}
