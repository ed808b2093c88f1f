//! API keys: read from an env var or a file, held in a wrapper that never prints itself, and
//! scrubbed from any text (error bodies, error chains) before that text is logged or exported.
//! A key file is re-read when its modification time changes (checked at most every
//! `RECHECK`), so a rotated secret (e.g. a Kubernetes Secret volume) is picked up without a restart.

use std::fmt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

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

/// Why a secret (an API key, a `headers_from` value, the release token) could not be read. The
/// text names the reference, never the value, and not what the secret is for: the caller says
/// that (`target vllm: api_key_file`, `detect.release_token_file`, `--token-file`).
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("environment variable {0} is not set")]
    EnvMissing(String),
    /// The OS error is in the text once; it is not also the error's source, so a chain of
    /// causes does not print it twice.
    #[error("cannot read {path}: {cause}")]
    File { path: String, cause: std::io::Error },
    #[error("{0} is empty")]
    Empty(String),
}

/// Resolves a reference to its value. Errors name the reference, never the value.
pub fn resolve(reference: &SecretRef) -> Result<Secret, SecretError> {
    let (value, origin) = match reference {
        SecretRef::Env(var) => (std::env::var(var).map_err(|_| SecretError::EnvMissing(var.clone()))?, format!("${var}")),
        SecretRef::File(path) => {
            let text = std::fs::read_to_string(path).map_err(|cause| SecretError::File { path: path.display().to_string(), cause })?;
            (text, path.display().to_string())
        }
    };
    let value = value.trim().to_string();
    if value.is_empty() {
        return Err(SecretError::Empty(origin));
    }
    Ok(Secret(value))
}

/// How often a key file's modification time is looked at.
const RECHECK: Duration = Duration::from_secs(5);

/// A resolved API key that follows its file when the file changes.
pub struct KeySource {
    file: Option<PathBuf>,
    state: Mutex<KeyState>,
    recheck: Duration,
}

struct KeyState {
    current: Secret,
    /// The value before the last rotation, still scrubbed from text.
    previous: Option<Secret>,
    mtime: Option<SystemTime>,
    checked: Instant,
}

impl KeySource {
    /// Resolves the reference now; errors name the reference, never the value.
    pub fn new(reference: &SecretRef) -> Result<Self, SecretError> {
        Self::with_recheck(reference, RECHECK)
    }

    pub fn with_recheck(reference: &SecretRef, recheck: Duration) -> Result<Self, SecretError> {
        let current = resolve(reference)?;
        let file = match reference {
            SecretRef::File(path) => Some(path.clone()),
            SecretRef::Env(_) => None,
        };
        let mtime = file.as_ref().and_then(|p| modified(p));
        let state = KeyState { current, previous: None, mtime, checked: Instant::now() };
        Ok(KeySource { file, state: Mutex::new(state), recheck })
    }

    /// The key to send now. A file whose mtime changed is re-read; a failed or empty re-read
    /// keeps the previous value (logged without the value).
    pub fn current(&self) -> Secret {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(path) = &self.file {
            if st.checked.elapsed() >= self.recheck {
                st.checked = Instant::now();
                let mtime = modified(path);
                if mtime != st.mtime {
                    st.mtime = mtime;
                    match resolve(&SecretRef::File(path.clone())) {
                        Ok(fresh) if fresh != st.current => {
                            tracing::info!(file = %path.display(), "secret file changed: using the new value");
                            st.previous = Some(std::mem::replace(&mut st.current, fresh));
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!("secret file re-read failed, keeping the previous value: {e}"),
                    }
                }
            }
        }
        st.current.clone()
    }

    /// Scrubs the current and the previous key from `text`.
    pub fn redact(&self, text: &str) -> String {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let text = st.current.redact(text);
        match &st.previous {
            Some(p) => p.redact(&text),
            None => text,
        }
    }
}

fn modified(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotated_file_is_reread_and_both_values_are_redacted() {
        let path = std::env::temp_dir().join(format!("llmprobe-rotate-{}", std::process::id()));
        std::fs::write(&path, "sk-old\n").unwrap();
        let source = KeySource::with_recheck(&SecretRef::File(path.clone()), Duration::ZERO).unwrap();
        assert_eq!(source.current().expose(), "sk-old");
        std::fs::write(&path, "sk-new\n").unwrap();
        // Force a different mtime even on coarse-grained file systems.
        let later = SystemTime::now() + Duration::from_secs(2);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(later).unwrap();
        assert_eq!(source.current().expose(), "sk-new");
        assert_eq!(source.redact("a sk-old b sk-new"), "a *** b ***");
        // An emptied file keeps the last good key.
        std::fs::write(&path, "").unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(later + Duration::from_secs(2)).unwrap();
        assert_eq!(source.current().expose(), "sk-new");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_missing_file_is_named_with_its_os_error_once_and_no_purpose_of_its_own() {
        let missing = PathBuf::from("/nonexistent/llmprobe-token");
        let err = anyhow::Error::from(resolve(&SecretRef::File(missing.clone())).unwrap_err()).context("detect.release_token_file");
        let text = format!("{err:#}");
        assert_eq!(text.matches("os error 2").count(), 1, "{text}");
        assert!(text.starts_with("detect.release_token_file: cannot read /nonexistent/llmprobe-token: "), "{text}");
        assert!(!text.contains("api key"), "{text}");

        let mut target = crate::config::Target::new("t", "http://127.0.0.1:1", crate::config::ProtocolKind::OpenaiChat).unwrap();
        target.headers_from = vec![("X-Token".into(), SecretRef::File(missing.clone()))];
        let text = format!("{:#}", crate::client::TargetRuntime::new(target.clone()).err().unwrap());
        assert!(text.starts_with("target t: headers_from.X-Token: cannot read ") && text.matches("os error 2").count() == 1, "{text}");
        target.headers_from.clear();
        target.api_key = Some(SecretRef::File(missing));
        let text = format!("{:#}", crate::client::TargetRuntime::new(target).err().unwrap());
        assert!(text.starts_with("target t: api_key_file: cannot read ") && text.matches("os error 2").count() == 1, "{text}");
    }

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
