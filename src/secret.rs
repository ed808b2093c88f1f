//! API keys: read from an env var or a file, held in a wrapper that never prints itself, and
//! scrubbed from any text (error bodies, error chains) before that text is logged or exported.

use std::fmt;

use crate::config::SecretRef;

/// A secret value. `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Replaces every occurrence of the secret in `text` with `***`.
    pub fn redact(&self, text: &str) -> String {
        if self.0.is_empty() { text.to_string() } else { text.replace(&self.0, "***") }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("environment variable {0} is not set")]
    EnvMissing(String),
    #[error("cannot read api key file {path}: {source}")]
    File { path: String, source: std::io::Error },
    #[error("api key from {0} is empty")]
    Empty(String),
}

/// Resolves a reference to its value. Errors name the reference, never the value.
pub fn resolve(reference: &SecretRef) -> Result<Secret, SecretError> {
    let (value, origin) = match reference {
        SecretRef::Env(var) => {
            (std::env::var(var).map_err(|_| SecretError::EnvMissing(var.clone()))?, format!("${var}"))
        }
        SecretRef::File(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|source| SecretError::File { path: path.display().to_string(), source })?;
            (text, path.display().to_string())
        }
    };
    let value = value.trim().to_string();
    if value.is_empty() {
        return Err(SecretError::Empty(origin));
    }
    Ok(Secret(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_printed_and_redacted() {
        let s = Secret("sk-abc".into());
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(s.redact("bad key sk-abc!"), "bad key ***!");
    }

    #[test]
    fn file_is_trimmed_and_missing_env_names_the_var() {
        let dir = std::env::temp_dir().join(format!("llmprobe-secret-{}", std::process::id()));
        std::fs::write(&dir, "sk-file\n").unwrap();
        assert_eq!(resolve(&SecretRef::File(dir.clone())).unwrap().expose(), "sk-file");
        std::fs::remove_file(&dir).unwrap();
        let err = resolve(&SecretRef::Env("LLMPROBE_TEST_UNSET_VAR".into())).unwrap_err();
        assert!(err.to_string().contains("LLMPROBE_TEST_UNSET_VAR"));
    }
}
