//! Where a probe stands in a sequence of probes that belong together: a turn of a conversation,
//! the cold or warm half of a prefix-cache pair, or a step of an agent's tool loop. Single
//! probes have no step.

use std::sync::Arc;

/// A probe's place in its sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// Turn `k` of a conversation, from 1.
    Turn(u32),
    /// The first probe of a cache pair: a prefix the server has not seen.
    Cold,
    /// The second probe of a cache pair: the cold probe's prefix again.
    Warm,
    /// Step `k` of an agent's tool loop, from 1.
    Agent(u32),
}

/// How an agent loop ended (the `result` label of its loops).
pub const LOOP_ANSWERED: &str = "answered";
pub const LOOP_STEP_LIMIT: &str = "step_limit";
pub const LOOP_FAILED: &str = "failed";
pub const LOOP_STOPPED: &str = "stopped";
pub const LOOP_RESULTS: [&str; 4] = [LOOP_ANSWERED, LOOP_STEP_LIMIT, LOOP_FAILED, LOOP_STOPPED];

/// The `turn` label values: turns 1 to 7 each, every later one in `8+`, so a long conversation
/// cannot grow the label set.
pub const TURN_LABELS: [&str; 8] = ["1", "2", "3", "4", "5", "6", "7", "8+"];

impl Step {
    /// The `turn` label of a conversation turn (and the `step` label of an agent's step).
    pub fn turn_label(k: u32) -> &'static str {
        TURN_LABELS[(k.max(1) as usize - 1).min(TURN_LABELS.len() - 1)]
    }

    /// The `cache` label of a pair's probe.
    pub fn cache_label(self) -> Option<&'static str> {
        match self {
            Step::Turn(_) | Step::Agent(_) => None,
            Step::Cold => Some("cold"),
            Step::Warm => Some("warm"),
        }
    }
}

/// A probe's step and the sequence it belongs to: the id of the sequence's first probe (the
/// conversation id in traces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepOf {
    pub step: Step,
    pub sequence: Arc<str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_labels_stay_bounded() {
        assert_eq!(Step::turn_label(1), "1");
        assert_eq!(Step::turn_label(7), "7");
        assert_eq!(Step::turn_label(8), "8+");
        assert_eq!(Step::turn_label(32), "8+");
        assert_eq!(Step::turn_label(0), "1");
        assert_eq!(Step::Warm.cache_label(), Some("warm"));
        assert_eq!(Step::Turn(2).cache_label(), None);
    }
}
