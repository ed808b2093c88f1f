//! Baselines that survive restarts: the detector's snapshot in `state_dir`, written atomically
//! (temporary file + rename) and read back unless stale or corrupt.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::state::Detector;

/// The file inside `state_dir`.
pub const STATE_FILE: &str = "detect-state.json";

fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// Writes the detector's snapshot to `dir/detect-state.json` (see `write`).
pub fn save(dir: &Path, det: &Detector) -> std::io::Result<()> {
    write(dir, &det.snapshot())
}

/// Writes a snapshot taken earlier (`Detector::snapshot`, under the detector's lock) to
/// `dir/detect-state.json`, creating `dir`: a temporary file in the same directory, flushed,
/// then renamed over the old one, so a reader sees the old or the new file, never half of one.
/// It blocks on the disk: callers run it on a blocking thread, without the detector's lock.
pub fn write(dir: &Path, snapshot: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{STATE_FILE}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(snapshot)?;
        f.sync_all()?;
        std::fs::rename(&tmp, state_path(dir))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[derive(Deserialize)]
struct Header {
    saved_at: f64,
}

/// Restores `det`'s baselines from `dir` if the file is there, readable, and saved at most
/// `max_age_s` before `now` (same clock as the detector's). Returns a warning when a file was
/// there but ignored (stale, corrupt, unreadable); `None` when restored or when there was none.
pub fn load(dir: &Path, det: &mut Detector, now: f64, max_age_s: f64) -> Option<String> {
    use std::io::Read;
    let path = state_path(dir);
    let max = det.snapshot_max_bytes();
    let mut bytes = Vec::new();
    match std::fs::File::open(&path).and_then(|f| f.take(max.saturating_add(1)).read_to_end(&mut bytes)) {
        Ok(_) if bytes.len() as u64 > max => {
            return Some(format!("{}: ignored, larger than a snapshot of these settings can be ({max} bytes)", path.display()));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(format!("{}: ignored, unreadable: {e}", path.display())),
    }
    let saved_at = match serde_json::from_slice::<Header>(&bytes) {
        Ok(h) => h.saved_at,
        Err(e) => return Some(format!("{}: ignored, corrupt: {e}", path.display())),
    };
    let age = now - saved_at;
    if age.is_nan() || age > max_age_s {
        return Some(format!("{}: ignored, stale: saved {:.0} s ago (max age {max_age_s:.0} s)", path.display(), now - saved_at));
    }
    match det.restore(&bytes, now) {
        Ok(r) => {
            tracing::info!(keys = r.keys, latency_values = r.latency_samples, release_windows = r.releases, "detector state restored from {}", path.display());
            None
        }
        Err(e) => Some(format!("{}: ignored, corrupt: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use crate::config::DetectSettings;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    /// A detector filled to its caps writes a snapshot within the bound, which loads; a file
    /// past the bound is not read.
    #[test]
    fn a_state_file_is_read_up_to_what_a_snapshot_can_be() {
        let s = DetectSettings { continuous: false, max_keys: 3, baseline_max_samples: 600, history_s: 7200.0, ..DetectSettings::default() };
        let mut d = Detector::new(s.clone());
        let mut rng = SmallRng::seed_from_u64(5);
        let t = feed(&mut d, &mut rng, 0.0, 9000, |r, _, _| probe(r, 1.0));
        let dir = std::env::temp_dir().join(format!("llmprobe-persist-{}", std::process::id()));
        save(&dir, &d).expect("save");
        let len = std::fs::metadata(state_path(&dir)).expect("written").len();
        assert!(len <= d.snapshot_max_bytes(), "{len} bytes, bound {}", d.snapshot_max_bytes());
        let mut e = Detector::new(s.clone());
        assert_eq!(load(&dir, &mut e, t, 3600.0), None);
        let mut big = std::fs::read(state_path(&dir)).expect("read");
        big.resize(d.snapshot_max_bytes() as usize + 1, b' ');
        write(&dir, &big).expect("write");
        let warning = load(&dir, &mut Detector::new(s), t, 3600.0).expect("refused");
        assert!(warning.contains("larger than a snapshot"), "{warning}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
