//! What happens to a target besides its probes, as every sink hears of it.

use crate::config::Config;
use crate::detect::MarkerTime;

/// What happens to a target besides its probes. No `Debug`: a replica event carries the whole
/// config, whose header values may be secrets; [`Event::describe`] is what a log line may say.
#[derive(Clone, Copy)]
pub enum Event<'a> {
    /// Discovery read the target's model, engine and engine version (sent when they change).
    Identity { target: &'a str, model: &'a str, engine: &'a str, engine_version: &'a str },
    /// A release marker at `at` (Unix seconds) from `source` (`discovery`: the identity changed;
    /// `api`: posted). `time`: whether `at` is the release's own (stated with the marker) or when
    /// it was seen. `before` and `after` are [model, engine version], empty where unknown.
    Release { target: &'a str, version: &'a str, source: &'a str, at: f64, time: MarkerTime, before: [&'a str; 2], after: [&'a str; 2] },
    /// How many replicas discovery found and how many are probed.
    ReplicaCounts { target: &'a str, discovered: usize, probed: usize },
    /// A replica is probed from now on; `config` names the scenarios its series are made for.
    ReplicaAdded { config: &'a Config, target: &'a str, replica: &'a str },
    /// A replica's own discovery read its version (and where it runs).
    ReplicaVersion { target: &'a str, replica: &'a str, version: &'a str, node: &'a str, zone: &'a str },
    /// A replica stopped being probed a grace period ago: its series go.
    ReplicaGone { config: &'a Config, target: &'a str, replica: &'a str },
    /// A conversation or cache pair was cut short: `probes` of it will not be sent (`reason`:
    /// `error`, a probe of it failed; `stopped`, the run is stopping).
    SequenceCut { target: &'a str, scenario: &'a str, reason: &'static str, probes: u64 },
    /// A conversation's next turn went to another replica (its own left the probed set).
    ReplicaMoved { target: &'a str, scenario: &'a str },
    /// An agent loop ended: `answered`, `step_limit` (still calling tools at its last step),
    /// `failed` (a step failed or a check on it did) or `stopped` (the run stopped), after
    /// `steps` probes and `seconds` from its first send to its last probe's end.
    AgentLoop { target: &'a str, scenario: &'a str, result: &'static str, steps: u32, seconds: f64 },
}

impl Event<'_> {
    /// The event's kind and target, for a log line.
    pub fn describe(&self) -> String {
        let (kind, target) = match *self {
            Event::Identity { target, .. } => ("identity", target),
            Event::Release { target, .. } => ("release", target),
            Event::ReplicaCounts { target, .. } => ("replica counts", target),
            Event::ReplicaAdded { target, .. } => ("replica added", target),
            Event::ReplicaVersion { target, .. } => ("replica version", target),
            Event::ReplicaGone { target, .. } => ("replica gone", target),
            Event::SequenceCut { target, .. } => ("sequence cut", target),
            Event::ReplicaMoved { target, .. } => ("replica moved", target),
            Event::AgentLoop { target, .. } => ("agent loop", target),
        };
        format!("{kind} of target {target:?}")
    }
}
