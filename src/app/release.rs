//! Release markers from every source, in one place. A marker is a discovery change (a target's
//! model or engine version differs from the last one seen — also across a restart, when
//! `detect.state_dir` keeps the last identity), a `POST /api/v1/releases` (CI/CD pipelines,
//! `llmprobe release mark`), or a behaviour change (a temperature-0 answer's fingerprint
//! changed, `checks.fingerprint`). Each marker is a log line and an `Event::Release` to the
//! running generation's sinks: `llmprobe_release_info` and `llmprobe_release_timestamp_seconds`
//! series, an `llmprobe.release` span when tracing is on, and the regression detector armed for
//! that target.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::client::ServerIdentity;
use crate::client::secret::Secret;
use crate::detect::MarkerTime;
use crate::sink::{Event, Sinks};
use crate::util::clock::unix_now;

/// The file in `detect.state_dir` that keeps each target's last discovered identity.
pub const IDENTITY_FILE: &str = "release-identities.json";
/// Longest note taken from a marker request (its version: the detector's `MAX_VERSION_CHARS`).
const MAX_NOTE: usize = 128;

/// What a target was last seen as.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Identity {
    model: String,
    engine_version: String,
}

pub struct Releases {
    /// Per config generation: its sinks, the configured targets, the API token.
    generation: Mutex<MarkerSettings>,
    identities: Mutex<HashMap<String, Identity>>,
    /// When each target's last behaviour marker was set (one per `BEHAVIOUR_MARKER_GAP`).
    behaviour_marked: Mutex<HashMap<String, f64>>,
    /// Each target's last `MARKERS_KEPT` markers, oldest first (`GET /api/v1/releases`).
    recent: Mutex<HashMap<String, std::collections::VecDeque<Marker>>>,
}

/// Markers listed per target by `GET /api/v1/releases`.
pub const MARKERS_KEPT: usize = 16;

/// One release marker as `GET /api/v1/releases` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Marker {
    pub target: String,
    pub version: String,
    /// `discovery`, `api` or `behaviour`.
    pub source: String,
    /// When the release happened (Unix seconds, and RFC 3339).
    pub at: f64,
    pub time: String,
}

/// Seconds between two behaviour markers of one target: a release changes many prompts'
/// answers over a few minutes, and each would re-arm the detector; every change is still logged
/// and counted (`llmprobe_behaviour_changes_total`).
const BEHAVIOUR_MARKER_GAP: f64 = 300.0;

#[derive(Default)]
struct MarkerSettings {
    sinks: Sinks,
    targets: Vec<String>,
    tokens: ApiTokens,
    state_dir: Option<PathBuf>,
}

/// The bearer tokens of the release API.
#[derive(Debug, Default, Clone)]
pub struct ApiTokens {
    /// `detect.release_token_file`: posts markers and reads.
    pub marker: Option<Secret>,
    /// `detect.release_read_token_file`: reads only (`GET /api/v1/verdict`, `GET /api/v1/releases`).
    pub read: Option<Secret>,
}

/// Why a release API request was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No token configured for this endpoint: it is off. The text names the setting that turns it on.
    Disabled(&'static str),
    /// A missing or wrong token.
    Unauthorized,
    /// The read-only token on an endpoint that changes something.
    Forbidden,
    Bad(String),
}

/// The body of `POST /api/v1/releases`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkRequest {
    pub target: String,
    pub version: String,
    #[serde(default)]
    pub note: Option<String>,
    /// When the release happened (RFC 3339), for a marker sent after the fact, or `now`: the
    /// release happens as the marker is sent (a pipeline's step that cannot format a time).
    /// Absent: the marker's time is its arrival, not stated by the sender.
    #[serde(default)]
    pub at: Option<String>,
}

/// How far in the future a marker's `at` may be (clock skew between CI and the prober).
const MAX_FUTURE_S: f64 = 60.0;

impl Releases {
    /// `state_dir` is where the last identities were kept (read now, if there).
    pub fn new(state_dir: Option<PathBuf>) -> Releases {
        let identities = state_dir
            .as_deref()
            .map(|d| d.join(IDENTITY_FILE))
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Releases {
            generation: Mutex::new(MarkerSettings { state_dir, ..MarkerSettings::default() }),
            identities: Mutex::new(identities),
            behaviour_marked: Mutex::new(HashMap::new()),
            recent: Mutex::new(HashMap::new()),
        }
    }

    /// The running config generation's parts.
    pub fn set_generation(&self, sinks: Sinks, targets: Vec<String>, tokens: ApiTokens, state_dir: Option<PathBuf>) {
        *self.lock_generation() = MarkerSettings { sinks, targets, tokens, state_dir };
    }

    /// A discovery of `target`: a release when its model or engine version differs from the
    /// last one seen (by this process, or before a restart when the state directory kept it).
    pub fn discovered(&self, target: &str, found: &ServerIdentity) {
        let now = Identity { model: found.model.clone(), engine_version: found.engine_version.clone() };
        let before = {
            let mut ids = self.identities.lock().unwrap_or_else(|e| e.into_inner());
            let before = ids.insert(target.to_owned(), now.clone());
            if before.as_ref() != Some(&now) {
                self.save_identities(&ids);
            }
            before
        };
        let Some(before) = before.filter(|b| *b != now) else { return };
        tracing::info!(
            target_name = %target,
            previous_model = %before.model, model = %now.model,
            previous_version = %before.engine_version, version = %now.engine_version,
            "release: the target's model or engine version changed"
        );
        let at = unix_now();
        let version = if now.engine_version.is_empty() { now.model.clone() } else { now.engine_version.clone() };
        self.apply(target, &version, "discovery", (at, MarkerTime::Seen), [&before.model, &before.engine_version], [&now.model, &now.engine_version]);
    }

    /// A temperature-0 answer to the same prompt changed (`checks.fingerprint`): logged every
    /// time, a marker of source `behaviour` at most once per `BEHAVIOUR_MARKER_GAP` per target.
    pub fn behaviour_changed(&self, target: &str, scenario: &str, prompt_sha256: &str, before: &str, after: &str) {
        tracing::info!(
            target_name = %target, scenario = %scenario, prompt_sha256 = %prompt_sha256.get(..16).unwrap_or(prompt_sha256),
            previous_fingerprint = %before, fingerprint = %after,
            "behaviour change: a temperature-0 answer to the same prompt changed"
        );
        let at = unix_now();
        {
            let mut marked = self.behaviour_marked.lock().unwrap_or_else(|e| e.into_inner());
            if marked.get(target).is_some_and(|last| at - last < BEHAVIOUR_MARKER_GAP) {
                return;
            }
            marked.insert(target.to_owned(), at);
        }
        self.apply(target, &format!("fingerprint {after}"), "behaviour", (at, MarkerTime::Seen), ["", before], ["", after]);
    }

    /// Checks a request's `Authorization` header value for posting a marker: the marker token
    /// only (the read-only token is `Forbidden`). From the request head alone, so the server
    /// reads no body of a client without it.
    pub fn authorize_mark(&self, authorization: Option<&str>) -> Result<(), Refused> {
        let g = self.lock_generation();
        if g.tokens.marker.is_none() {
            return Err(Refused::Disabled("release markers are not enabled: set detect.release_token_file"));
        }
        match presented(&g.tokens, authorization) {
            Presented::Marker => Ok(()),
            Presented::Read => Err(Refused::Forbidden),
            Presented::Other => Err(Refused::Unauthorized),
        }
    }

    /// Checks a request's `Authorization` header value for reading verdicts and markers: the
    /// marker token or the read-only token.
    pub fn authorize_read(&self, authorization: Option<&str>) -> Result<(), Refused> {
        let g = self.lock_generation();
        if g.tokens.marker.is_none() && g.tokens.read.is_none() {
            return Err(Refused::Disabled("the release API is not enabled: set detect.release_token_file or detect.release_read_token_file"));
        }
        match presented(&g.tokens, authorization) {
            Presented::Marker | Presented::Read => Ok(()),
            Presented::Other => Err(Refused::Unauthorized),
        }
    }

    /// A marker from the API. `authorization` is the request's header value.
    pub fn mark_from_api(&self, authorization: Option<&str>, body: &[u8]) -> Result<(), Refused> {
        self.authorize_mark(authorization)?;
        let targets = self.lock_generation().targets.clone();
        let req: MarkRequest =
            serde_json::from_slice(body).map_err(|e| Refused::Bad(format!("expected {{\"target\", \"version\", \"note\"?, \"at\"?}}: {e}")))?;
        if !targets.contains(&req.target) {
            return Err(Refused::Bad(format!("unknown target {:?}", crate::protocol::truncate_chars(&req.target, 64))));
        }
        let version: String = req.version.chars().take(crate::detect::MAX_VERSION_CHARS).collect();
        if version.is_empty() {
            return Err(Refused::Bad("version must not be empty".into()));
        }
        let note: String = req.note.unwrap_or_default().chars().take(MAX_NOTE).collect();
        let now = unix_now();
        let (at, time) = match req.at.as_deref() {
            None => (now, MarkerTime::Seen),
            Some("now") => (now, MarkerTime::Stated),
            Some(text) => (
                crate::util::rfc3339::parse_unix(&crate::protocol::truncate_chars(text, 64)).map_err(|e| Refused::Bad(format!("at: {e}")))?,
                MarkerTime::Stated,
            ),
        };
        if at > now + MAX_FUTURE_S {
            return Err(Refused::Bad(format!("at: {} is in the future", crate::util::rfc3339::format_unix(at, 0))));
        }
        let at = at.min(now);
        tracing::info!(target_name = %req.target, version = %version, note = %note, at = %crate::util::rfc3339::format_unix(at, 0), "release: marker posted to /api/v1/releases");
        self.apply(&req.target, &version, "api", (at, time), ["", ""], ["", &version]);
        Ok(())
    }

    /// The markers of the configured targets, per target oldest first.
    pub fn markers(&self) -> Vec<Marker> {
        let targets = self.lock_generation().targets.clone();
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        targets.iter().filter_map(|t| recent.get(t)).flatten().cloned().collect()
    }

    /// `at`: the marker's time, and whether it is the release's own (stated) or when it was seen.
    fn apply(&self, target: &str, version: &str, source: &str, (at, time): (f64, MarkerTime), before: [&str; 2], after: [&str; 2]) {
        {
            let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            let list = recent.entry(target.to_owned()).or_default();
            if list.len() == MARKERS_KEPT {
                list.pop_front();
            }
            let time = crate::util::rfc3339::format_unix(at, 0);
            list.push_back(Marker { target: target.to_owned(), version: version.to_owned(), source: source.to_owned(), at, time });
        }
        let sinks = self.lock_generation().sinks.clone();
        sinks.event(&Event::Release { target, version, source, at, time, before, after });
    }

    fn save_identities(&self, ids: &HashMap<String, Identity>) {
        let Some(dir) = self.lock_generation().state_dir.clone() else { return };
        let tmp = dir.join(format!("{IDENTITY_FILE}.tmp"));
        let written = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&tmp, serde_json::to_vec(ids).unwrap_or_default()))
            .and_then(|()| std::fs::rename(&tmp, dir.join(IDENTITY_FILE)));
        if let Err(e) = written {
            tracing::warn!(dir = %dir.display(), "release identities not saved: {e}");
        }
    }

    fn lock_generation(&self) -> std::sync::MutexGuard<'_, MarkerSettings> {
        self.generation.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Behaviour changes reach the releases as probes are recorded.
impl crate::sink::Sink for Releases {
    fn record(&self, outcome: &crate::probe::outcome::Outcome, _sample: Option<&crate::probe::measure::Sample>) {
        let Some(report) = &outcome.checks else { return };
        if let (Some(before), Some(after)) = (&report.changed_from, &report.fingerprint) {
            self.behaviour_changed(&outcome.target, &outcome.scenario, &outcome.prompt_sha256, before, after);
        }
    }
}

/// Which token a request presents. Both are compared, whatever the first gives, each without an
/// early exit, so the time taken does not tell which one (nearly) matched.
fn presented(tokens: &ApiTokens, authorization: Option<&str>) -> Presented {
    let given = authorization.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("");
    let matches = |t: &Option<Secret>| t.as_ref().is_some_and(|t| constant_time_eq(given.as_bytes(), t.expose().as_bytes()));
    let (marker, read) = (matches(&tokens.marker), matches(&tokens.read));
    if marker {
        Presented::Marker
    } else if read {
        Presented::Read
    } else {
        Presented::Other
    }
}

/// The token a request carries.
enum Presented {
    Marker,
    Read,
    Other,
}

/// Compares without an early exit on the first differing byte (the token is a secret).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Releases with these tokens, each read from a file as the prober reads it.
    fn with_tokens(marker: Option<&str>, read: Option<&str>) -> Releases {
        let dir = std::env::temp_dir().join(format!("llmprobe-release-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = |t: Option<&str>| {
            t.map(|t| {
                let file = dir.join(t);
                std::fs::write(&file, format!("{t}\n")).unwrap();
                crate::client::secret::resolve(&crate::config::SecretRef::File(file)).unwrap()
            })
        };
        let tokens = ApiTokens { marker: secret(marker), read: secret(read) };
        let releases = Releases::new(None);
        releases.set_generation(Sinks::default(), vec!["t".into()], tokens, None);
        releases
    }

    #[test]
    fn the_read_token_reads_and_cannot_mark() {
        let both = with_tokens(Some("marker-secret"), Some("read-secret"));
        assert_eq!(both.authorize_mark(Some("Bearer marker-secret")), Ok(()));
        assert_eq!(both.authorize_mark(Some("Bearer read-secret")), Err(Refused::Forbidden));
        assert_eq!(both.authorize_mark(Some("Bearer wrong")), Err(Refused::Unauthorized));
        assert_eq!(both.authorize_mark(None), Err(Refused::Unauthorized));
        assert_eq!(both.authorize_read(Some("Bearer marker-secret")), Ok(()));
        assert_eq!(both.authorize_read(Some("Bearer read-secret")), Ok(()));
        assert_eq!(both.authorize_read(Some("read-secret")), Err(Refused::Unauthorized), "only as a bearer token");
        assert_eq!(both.mark_from_api(Some("Bearer read-secret"), br#"{"target":"t","version":"1"}"#), Err(Refused::Forbidden));
        // Only a read token: reads work, markers are off.
        let read_only = with_tokens(None, Some("read-secret"));
        assert_eq!(read_only.authorize_read(Some("Bearer read-secret")), Ok(()));
        assert!(matches!(read_only.authorize_mark(Some("Bearer read-secret")), Err(Refused::Disabled(_))));
        let none = with_tokens(None, None);
        assert!(matches!(none.authorize_read(Some("Bearer read-secret")), Err(Refused::Disabled(_))));
    }

    /// The release times the markers carry, by source.
    #[derive(Default)]
    struct Times(Mutex<Vec<(String, MarkerTime)>>);
    impl crate::sink::Sink for Times {
        fn record(&self, _: &crate::probe::outcome::Outcome, _: Option<&crate::probe::measure::Sample>) {}
        fn event(&self, event: &Event) {
            if let Event::Release { source, time, .. } = *event {
                self.0.lock().unwrap().push((source.to_owned(), time));
            }
        }
    }

    /// Only a marker that states the release's own time (the API's `"at"`, a time or `now`) is
    /// `Stated`: the API without it and discovery are taken as seen when they came.
    #[test]
    fn a_marker_states_the_release_time_only_with_at() {
        let releases = with_tokens(Some("marker-secret"), None);
        let tokens = releases.lock_generation().tokens.clone();
        let times = std::sync::Arc::new(Times::default());
        releases.set_generation(Sinks::new(vec![times.clone()]), vec!["t".into()], tokens, None);
        let auth = Some("Bearer marker-secret");
        releases.mark_from_api(auth, br#"{"target":"t","version":"v2","at":"2026-01-01T00:00:00Z"}"#).unwrap();
        releases.mark_from_api(auth, br#"{"target":"t","version":"v3"}"#).unwrap();
        releases.mark_from_api(auth, br#"{"target":"t","version":"v4","at":"now"}"#).unwrap();
        assert!(matches!(releases.mark_from_api(auth, br#"{"target":"t","version":"v5","at":"later"}"#), Err(Refused::Bad(e)) if e.starts_with("at: ")));
        let id = |v: &str| ServerIdentity { model: "m".into(), engine: "vllm".into(), engine_version: v.into() };
        releases.discovered("t", &id("0.1"));
        releases.discovered("t", &id("0.2"));
        let got = times.0.lock().unwrap().clone();
        let want = [("api", MarkerTime::Stated), ("api", MarkerTime::Seen), ("api", MarkerTime::Stated), ("discovery", MarkerTime::Seen)];
        assert_eq!(got.iter().map(|(s, t)| (s.as_str(), *t)).collect::<Vec<_>>(), want);
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
