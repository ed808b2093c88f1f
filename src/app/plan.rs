//! The pure half of launching a config: which schedules run, with what seed and probe ids. One
//! schedule per target × scenario; a shard draws streams of its own (the same seed on every
//! shard would send the same probes).

use crate::config::Config;
use crate::probe::arrival::stream_seed;

/// One target × scenario schedule, by index into the config's lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub target: usize,
    pub scenario: usize,
    /// Seeds the schedule's arrivals and draws.
    pub seed: u64,
    /// `{run}-{target}-{scenario}`: probe ids are this plus `-{seq}`.
    pub id_prefix: String,
}

/// Every schedule of `config` for one run.
pub fn schedules(config: &Config, run_seed: u64, run_id: &str) -> Vec<Schedule> {
    let shard = config.probe.shard;
    let mut out = Vec::new();
    for (ti, target) in config.targets.iter().enumerate() {
        for (si, scenario) in config.scenarios.iter().enumerate() {
            let key = if shard.count > 1 { format!("{}/{}#{}", target.name, scenario.name, shard.index) } else { format!("{}/{}", target.name, scenario.name) };
            out.push(Schedule {
                target: ti,
                scenario: si,
                seed: stream_seed(run_seed, &key),
                id_prefix: format!("{run_id}-{}-{}", target.name, scenario.name),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Shard;

    fn config() -> Config {
        let yaml = "targets:\n  - {name: a, base_url: http://127.0.0.1:1, api: openai-chat}\n  - {name: b, base_url: http://127.0.0.1:2, api: tgi}\n\
                    scenarios:\n  - {name: s, input_tokens: 8, output_tokens: 8}\n  - {name: t, input_tokens: 8, output_tokens: 8}\n";
        crate::app::loader::parse(yaml, "t.yaml").unwrap()
    }

    #[test]
    fn one_schedule_per_target_and_scenario_with_distinct_seeds() {
        let plan = schedules(&config(), 7, "r1");
        let pairs: Vec<(usize, usize)> = plan.iter().map(|s| (s.target, s.scenario)).collect();
        assert_eq!(pairs, [(0, 0), (0, 1), (1, 0), (1, 1)]);
        assert_eq!(plan[3].id_prefix, "r1-b-t");
        let mut seeds: Vec<u64> = plan.iter().map(|s| s.seed).collect();
        seeds.dedup();
        assert_eq!(seeds.len(), 4);
        assert_eq!(plan, schedules(&config(), 7, "r1"), "same run seed, same plan");
        assert_ne!(plan[0].seed, schedules(&config(), 8, "r1")[0].seed);
    }

    #[test]
    fn shards_draw_streams_of_their_own() {
        let mut one = config();
        let mut two = config();
        one.probe.shard = Shard { index: 0, count: 2 };
        two.probe.shard = Shard { index: 1, count: 2 };
        let (a, b) = (schedules(&one, 7, "r"), schedules(&two, 7, "r"));
        assert!(a.iter().zip(&b).all(|(x, y)| x.seed != y.seed && x.id_prefix == y.id_prefix));
        assert_eq!(schedules(&config(), 7, "r")[0].seed, stream_seed(7, "a/s"), "unsharded: the plain key");
    }
}
