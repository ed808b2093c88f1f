//! `detect:` — the release-regression detector: on or off, where its baselines survive
//! restarts, and who may post release markers. The statistical settings (`tuning`) are the
//! detector's own `DetectSettings`, with its documented defaults field by field.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::raw::RawDuration;
use super::validate::Checker;
use crate::detect::DetectSettings;

/// The section as written. Absent, empty (`detect:`) and `{}` all mean the defaults below.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with enabled, state_dir, state_max_age, release_token_file, tuning")]
pub struct RawDetect {
    /// Run the detector. Default true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Directory for the detector's state (baselines), written atomically every minute and at
    /// shutdown, read at start: a prober restarted with its pod keeps its baselines. Default none.
    pub state_dir: Option<String>,
    /// A state file older than this is ignored (with a warning). Default `6h`.
    #[serde(default = "default_state_max_age")]
    pub state_max_age: RawDuration,
    /// File holding the bearer token for `POST /api/v1/releases`; the endpoint is off without it.
    pub release_token_file: Option<String>,
    /// The detector's statistical settings (see the README, "Release regression detection").
    #[serde(default)]
    pub tuning: DetectSettings,
}

impl Default for RawDetect {
    fn default() -> Self {
        RawDetect { enabled: true, state_dir: None, state_max_age: default_state_max_age(), release_token_file: None, tuning: DetectSettings::default() }
    }
}

fn default_true() -> bool {
    true
}

fn default_state_max_age() -> RawDuration {
    RawDuration("6h".to_owned())
}

/// The validated section.
#[derive(Debug, Clone, PartialEq)]
pub struct Detect {
    pub enabled: bool,
    pub state_dir: Option<PathBuf>,
    pub state_max_age: Duration,
    pub release_token_file: Option<PathBuf>,
    pub tuning: DetectSettings,
}

/// The documented defaults: what an absent section gives.
impl Default for Detect {
    fn default() -> Self {
        let mut c = Checker::default();
        detect(&RawDetect::default(), &mut c)
    }
}

pub(super) fn detect(raw: &RawDetect, c: &mut Checker) -> Detect {
    if let Err(problems) = raw.tuning.validate() {
        for p in problems {
            let (field, message) = p.split_once(": ").unwrap_or(("", p.as_str()));
            c.error(format!("detect.tuning.{field}"), message);
        }
    }
    let path = |what: &str, v: &Option<String>, c: &mut Checker| match v.as_deref() {
        Some("") => {
            c.error(format!("detect.{what}"), "must not be empty");
            None
        }
        other => other.map(PathBuf::from),
    };
    Detect {
        enabled: raw.enabled,
        state_dir: path("state_dir", &raw.state_dir, c),
        state_max_age: c.positive_duration("detect.state_max_age", &raw.state_max_age),
        release_token_file: path("release_token_file", &raw.release_token_file, c),
        tuning: raw.tuning.clone(),
    }
}
