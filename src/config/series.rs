//! The limit on what one prober exports: every target × scenario pair adds a few hundred
//! series (histograms by outcome, the detector's rows), every target some more, every probed
//! replica as much again. Beyond `MAX_SERIES` the `/metrics` page, the memory and the scrape
//! cost grow past what one process should carry (10,000 targets measured 2.85 M series, a
//! 219 MB page and 2.1 GiB), so such a config is refused with the numbers, and the remedy:
//! several probers, each with part of the targets.

use super::check::Checker;
use super::target::Target;
use super::workload::Scenario;

/// Most series one prober may export (estimated as below from the config).
pub const MAX_SERIES: u64 = 250_000;
/// Upper estimate of the series of one target × scenario pair (measured: 227 with every
/// outcome class seen, detector on).
const SERIES_PER_PAIR: u64 = 256;
/// Upper estimate of the series of one target beyond its pairs (measured: 64).
const SERIES_PER_TARGET: u64 = 72;
/// Series of the prober itself and of each telemetry source.
const SERIES_BASE: u64 = 64;
const SERIES_PER_SOURCE: u64 = 8;

/// The estimate: each target counts once for itself and once per replica it may probe.
pub fn estimate(targets: &[Target], scenarios: usize, sources: usize) -> u64 {
    let per_target = SERIES_PER_TARGET + SERIES_PER_PAIR * scenarios as u64;
    let copies: u64 = targets.iter().map(|t| 1 + t.replicas.as_ref().map_or(0, |r| r.max as u64)).sum();
    SERIES_BASE + SERIES_PER_SOURCE * sources as u64 + copies.saturating_mul(per_target)
}

/// Refuses a config whose estimated series exceed `MAX_SERIES`, at the `targets` key.
pub(super) fn check(targets: &[Target], scenarios: &[Scenario], sources: usize, c: &mut Checker) {
    let series = estimate(targets, scenarios.len(), sources);
    if series > MAX_SERIES {
        let replicas = targets.iter().filter(|t| t.replicas.is_some()).count();
        let with = if replicas > 0 { format!(" ({replicas} with replicas, each probed replica counting as a target)") } else { String::new() };
        c.error(
            "targets",
            format!(
                "{} targets{with} × {} scenarios would export about {series} series (each target × scenario about {SERIES_PER_PAIR}, \
                 each target {SERIES_PER_TARGET} more), over the limit of {MAX_SERIES}: split the targets over several probers",
                targets.len(),
                scenarios.len(),
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(targets: usize, scenarios: usize, replicas: &str) -> String {
        let mut y = String::from("targets:\n");
        for i in 0..targets {
            y += &format!("  - {{name: t{i}, base_url: \"http://127.0.0.1:{}\", api: openai-chat{replicas}}}\n", 1000 + i);
        }
        y += "scenarios:\n";
        for i in 0..scenarios {
            y += &format!("  - {{name: s{i}, input_tokens: 8, output_tokens: 8}}\n");
        }
        y
    }

    #[test]
    fn a_config_under_the_limit_loads() {
        // 840 pairs: about 235,000 series.
        let cfg = crate::app::loader::parse(&yaml(280, 3, ""), "t.yaml").unwrap();
        assert!(estimate(&cfg.targets, cfg.scenarios.len(), 0) <= MAX_SERIES);
    }

    #[test]
    fn beyond_the_limit_the_error_names_targets_its_line_and_the_numbers() {
        let text = yaml(1000, 1, "");
        let errors = crate::app::loader::parse(&text, "t.yaml").unwrap_err().to_string();
        assert!(errors.contains("targets") && errors.contains("t.yaml:1"), "{errors}");
        assert!(errors.contains("1000 targets × 1 scenarios") && errors.contains("over the limit of 250000"), "{errors}");
    }

    #[test]
    fn probed_replicas_count_as_targets() {
        let text = yaml(60, 2, ", discover: {kind: dns, name: engine.local, port: 8000}, replicas: {max: 16}");
        let errors = crate::app::loader::parse(&text, "t.yaml").unwrap_err().to_string();
        assert!(errors.contains("60 targets (60 with replicas"), "{errors}");
        let text = yaml(60, 2, "");
        assert!(crate::app::loader::parse(&text, "t.yaml").is_ok());
    }
}
