//! What every check shares: the issues found (`ConfigIssue`, `ConfigErrors`), the `Checker`
//! that collects them, the `Resolvers` for what config names but does not own, and the common
//! checks (names, URLs, rates).

use std::fmt;
use std::time::Duration;

use super::dataset::ReadDataset;
use super::duration::{RawDuration, parse_duration};

/// The most tokens any count in the config may ask for.
pub const MAX_TOKENS: i64 = 1_000_000;

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Where in the document, e.g. `targets[1].timeouts.ttft`; empty for the whole file.
    pub path: String,
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    /// What is wrong, and when useful what is expected. Never contains a secret.
    pub message: String,
}

impl ConfigIssue {
    /// Formats as `path: message (file:line)`, on one line: control characters a value brought
    /// into the message (a newline in a quoted string) are escaped.
    pub fn display_in<'a>(&'a self, file: &'a str) -> impl fmt::Display + 'a {
        struct In<'a>(&'a ConfigIssue, &'a str);
        impl fmt::Display for In<'_> {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                let (issue, file) = (self.0, OneLine(self.1));
                if !issue.path.is_empty() {
                    write!(f, "{}: ", OneLine(&issue.path))?;
                }
                match issue.line {
                    Some(line) => write!(f, "{} ({file}:{line})", OneLine(&issue.message)),
                    None => write!(f, "{} ({file})", OneLine(&issue.message)),
                }
            }
        }
        In(self, file)
    }
}

/// Formats as `path: message (line N)`, on one line; use `display_in` to name the file.
impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if !self.path.is_empty() {
            write!(f, "{}: ", OneLine(&self.path))?;
        }
        write!(f, "{}", OneLine(&self.message))?;
        match self.line {
            Some(line) => write!(f, " (line {line})"),
            None => Ok(()),
        }
    }
}

/// Text with its control characters escaped (`\n`, `\r`, `\t`, `\u{1b}`), so that one issue
/// stays one line.
struct OneLine<'a>(&'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                c if c.is_control() => write!(f, "{}", c.escape_unicode())?,
                c => fmt::Write::write_char(f, c)?,
            }
        }
        Ok(())
    }
}

/// Issues printed for one file; the rest are counted in a last line.
pub const MAX_SHOWN_ISSUES: usize = 50;

/// Every problem found in one file; the file is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    /// The file as named by the caller.
    pub file: String,
    /// At least one issue, in file order.
    pub issues: Vec<ConfigIssue>,
}

/// One line per issue: `path: message (file:line)`; past `MAX_SHOWN_ISSUES`, one line counts
/// the rest.
impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, issue) in self.issues.iter().take(MAX_SHOWN_ISSUES).enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{}", issue.display_in(&self.file))?;
        }
        if let Some(rest) = self.issues.len().checked_sub(MAX_SHOWN_ISSUES).filter(|&n| n > 0) {
            write!(f, "\n... and {rest} more problems ({})", OneLine(&self.file))?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// What config names but does not own, resolved by the modules that own it: config reads no
/// dataset file and knows no mock profile itself.
#[derive(Clone, Copy)]
pub struct Resolvers {
    /// Reads a dataset file (`workload`).
    pub dataset: ReadDataset,
    /// The mock engine's profile names (`mock`).
    pub mock_profiles: fn() -> Vec<&'static str>,
    /// What an API family can carry (`protocol`'s family table).
    pub carries: fn(super::kinds::ProtocolKind) -> super::kinds::Carries,
}

/// Issues found so far. Paths only; lines are added by the caller.
pub struct Checker {
    pub errors: Vec<ConfigIssue>,
    pub warnings: Vec<ConfigIssue>,
    pub resolvers: Resolvers,
}

impl Checker {
    pub fn new(resolvers: Resolvers) -> Self {
        Checker { errors: Vec::new(), warnings: Vec::new(), resolvers }
    }

    /// For checks that name no dataset or mock profile (a section's documented defaults).
    pub fn detached() -> Self {
        Checker::new(Resolvers {
            dataset: |path, _, _, _| Err(format!("dataset {} cannot be read here", path.display())),
            mock_profiles: Vec::new,
            carries: |_| super::kinds::Carries::default(),
        })
    }

    pub(super) fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigIssue { path: path.into(), line: None, message: message.into() });
    }

    pub(super) fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(ConfigIssue { path: path.into(), line: None, message: message.into() });
    }

    /// Parses a duration, recording an error (and returning zero) when it is malformed.
    pub(super) fn duration(&mut self, path: &str, raw: &RawDuration) -> Duration {
        parse_duration(&raw.0).unwrap_or_else(|e| {
            self.error(path, e);
            Duration::ZERO
        })
    }

    /// A duration that must be > 0. A malformed one is reported once, as malformed.
    pub(super) fn positive_duration(&mut self, path: &str, raw: &RawDuration) -> Duration {
        match parse_duration(&raw.0) {
            Ok(Duration::ZERO) => {
                self.error(path, "must be greater than 0");
                Duration::ZERO
            }
            Ok(d) => d,
            Err(e) => {
                self.error(path, e);
                Duration::ZERO
            }
        }
    }

    /// A finite number > 0.
    pub(super) fn positive(&mut self, path: &str, value: f64) -> f64 {
        if value.is_finite() && value > 0.0 {
            value
        } else {
            self.error(path, format!("must be a number greater than 0, got {value}"));
            1.0
        }
    }
}

/// The slowest probe rate accepted: one probe every ~2.8 hours. Slower schedules say nothing
/// useful, and the arrival arithmetic stays well inside its range.
pub const MIN_RATE: f64 = 1e-4;

/// Most probes in flight per target: each holds a connection and its frames.
pub const MAX_IN_FLIGHT: u64 = 100_000;

/// The fastest: far beyond what one prober process can send.
pub const MAX_RATE: f64 = 100_000.0;

impl Checker {
    /// An http(s) URL with a host and no `user:password@` (a URL holding credentials is never
    /// echoed back). `None` after recording the problem.
    pub(super) fn http_url(&mut self, path: &str, text: &str) -> Option<reqwest::Url> {
        let shown = if text.contains('@') { "(hidden)".to_owned() } else { format!("\"{text}\"") };
        let url = match reqwest::Url::parse(text) {
            Ok(url) => url,
            Err(e) => {
                self.error(path, format!("invalid URL {shown}: {e}; expected e.g. http://127.0.0.1:8000"));
                return None;
            }
        };
        if !matches!(url.scheme(), "http" | "https") {
            self.error(path, format!("invalid URL {shown}: scheme must be http or https"));
        } else if url.host_str().is_none_or(str::is_empty) {
            self.error(path, format!("invalid URL {shown}: a host is required"));
        } else if !url.username().is_empty() || url.password().is_some() {
            self.error(path, "URL must not contain credentials (user:password@): they would end up in logs; use a key file or headers_from");
        } else {
            return Some(url);
        }
        None
    }

    /// A probe rate in `[MIN_RATE, MAX_RATE]`.
    pub(super) fn rate(&mut self, path: &str, value: f64) -> f64 {
        if value.is_finite() && (MIN_RATE..=MAX_RATE).contains(&value) {
            value
        } else {
            self.error(path, format!("must be a rate between {MIN_RATE} and {MAX_RATE} probes per second, got {value}"));
            1.0
        }
    }
}

/// Names become metric label values: keep them short-alphabet and unique.
pub(super) fn check_name(path: &str, name: &str, c: &mut Checker) {
    let ok = |ch: char| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-');
    if name.is_empty() || !name.chars().all(ok) {
        c.error(path, format!("invalid name \"{name}\": use only letters, digits, '_', '.' and '-'"));
    }
}

/// Reports every name that was already used by an earlier entry of `section`.
pub(super) fn check_unique<'a>(section: &str, what: &str, names: impl Iterator<Item = &'a str>, c: &mut Checker) {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, name) in names.enumerate() {
        match seen.get(name) {
            Some(first) => c.error(format!("{section}[{i}].name"), format!("duplicate {what} name \"{name}\" (already used by {section}[{first}])")),
            None => {
                seen.insert(name, i);
            }
        }
    }
}
