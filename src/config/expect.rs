//! A known answer: what a probe's answer must contain (`checks.known_answers`, a dataset
//! entry's `expect` or `expect_regex`).

/// What an answer must contain.
#[derive(Debug, Clone)]
pub enum Expect {
    /// Case-insensitive substring (stored lower-case).
    Contains(String),
    Regex(regex::Regex),
}

impl PartialEq for Expect {
    fn eq(&self, other: &Expect) -> bool {
        match (self, other) {
            (Expect::Contains(a), Expect::Contains(b)) => a == b,
            (Expect::Regex(a), Expect::Regex(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

impl Expect {
    /// Parses an `expect` (substring) or `expect_regex` value; the error says what is wrong.
    pub fn new(substring: Option<&str>, pattern: Option<&str>) -> Result<Option<Expect>, String> {
        match (substring, pattern) {
            (Some(_), Some(_)) => Err("set either a substring or a regex, not both".into()),
            (Some(""), None) => Err("the expected substring must not be empty".into()),
            (Some(s), None) => Ok(Some(Expect::Contains(s.to_lowercase()))),
            (None, Some(p)) => regex::RegexBuilder::new(p)
                .size_limit(1 << 20)
                .build()
                .map(|r| Some(Expect::Regex(r)))
                .map_err(|e| format!("not a valid regex: {}", one_line(&e.to_string()))),
            (None, None) => Ok(None),
        }
    }

    /// Whether `text` satisfies it.
    pub fn matches(&self, text: &str) -> bool {
        match self {
            Expect::Contains(s) => text.to_lowercase().contains(s.as_str()),
            Expect::Regex(r) => r.is_match(text),
        }
    }

    /// As written in a failure message.
    pub fn describe(&self) -> String {
        match self {
            Expect::Contains(s) => format!("{s:?}"),
            Expect::Regex(r) => format!("/{}/", r.as_str()),
        }
    }
}

/// A multi-line library message as one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
