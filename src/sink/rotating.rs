//! An append-only file of lines bounded by size: at `max_bytes` it is renamed to `FILE.1`
//! (replacing the older one) and a new one started, so at most twice `max_bytes` is on disk. A
//! write error is logged once and never reaches the caller's other work.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The smallest size a file may grow to before it rotates.
const MIN_MAX_BYTES: u64 = 4096;

pub struct RotatingFile {
    path: PathBuf,
    max_bytes: u64,
    /// What the file is, for the log line of a write error.
    what: &'static str,
    state: Mutex<State>,
}

impl std::fmt::Debug for RotatingFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RotatingFile").field("path", &self.path).field("max_bytes", &self.max_bytes).finish()
    }
}

struct State {
    file: Option<std::fs::File>,
    written: u64,
    warned: bool,
}

impl RotatingFile {
    /// Appends to `path` (created if missing); `max_bytes` at least [`MIN_MAX_BYTES`].
    pub fn open(path: &Path, max_bytes: u64, what: &'static str) -> std::io::Result<RotatingFile> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(RotatingFile {
            path: path.to_path_buf(),
            max_bytes: max_bytes.max(MIN_MAX_BYTES),
            what,
            state: Mutex::new(State { file: Some(file), written, warned: false }),
        })
    }

    /// Appends one whole line (rotating first when it would pass the size).
    pub fn write(&self, line: &[u8]) -> std::io::Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let result = Self::append(&self.path, self.max_bytes, &mut s, line);
        if let Err(e) = &result
            && !s.warned
        {
            s.warned = true;
            tracing::warn!(path = %self.path.display(), "{}: {e} (further errors are not logged)", self.what);
        }
        result
    }

    fn append(path: &Path, max_bytes: u64, s: &mut State, line: &[u8]) -> std::io::Result<()> {
        if s.written + line.len() as u64 > max_bytes {
            s.file = None;
            let mut old = path.to_path_buf().into_os_string();
            old.push(".1");
            std::fs::rename(path, &old)?;
            s.file = Some(std::fs::OpenOptions::new().create(true).append(true).open(path)?);
            s.written = 0;
        }
        match s.file.as_mut() {
            Some(f) => f.write_all(line)?,
            None => return Err(std::io::Error::other("not open")),
        }
        s.written += line.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_rotates_at_its_size_and_keeps_one_older_file() {
        let dir = std::env::temp_dir().join(format!("llmprobe-rotating-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("probes.jsonl");
        let file = RotatingFile::open(&path, 4096, "test file").unwrap();
        let line = vec![b'x'; 1000];
        for _ in 0..10 {
            file.write(&line).unwrap();
        }
        let len = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let older = dir.join("probes.jsonl.1");
        assert!(len(&path) <= 4096 && len(&older) <= 4096 && len(&older) > 0, "{} {}", len(&path), len(&older));
        assert_eq!((len(&path) + len(&older)) % 1000, 0, "whole lines only");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
