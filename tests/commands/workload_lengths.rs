//! Length samples match their distributions (quantiles, proportions, clamps), loaded from YAML
//! the way users write them; scenario mixes hit their shares.

use rand::SeedableRng;
use rand::rngs::StdRng;

use llmprobe::app::loader;
use llmprobe::config::LengthSpec;
use llmprobe::workload::quantile;

const N: usize = 40_000;

fn scenario_lengths(yaml_length: &str) -> LengthSpec {
    let text = format!(
        "targets: [{{name: t, base_url: 'http://127.0.0.1:1', api: openai-completions}}]\nscenarios:\n  - name: s\n    input_tokens: {yaml_length}\n    output_tokens: 8\n"
    );
    loader::parse(&text, "test.yaml").unwrap_or_else(|e| panic!("{e}")).scenarios[0].input_tokens.clone()
}

fn samples(spec: &LengthSpec, seed: u64) -> Vec<u32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut v: Vec<u32> = (0..N).map(|_| spec.sample(&mut rng)).collect();
    v.sort_unstable();
    v
}

fn close(actual: f64, expected: f64, rel: f64) -> bool {
    (actual / expected - 1.0).abs() < rel
}

#[test]
fn short_forms_still_work() {
    assert_eq!(scenario_lengths("128"), LengthSpec::Fixed(128));
    assert_eq!(scenario_lengths("{min: 64, max: 256}"), LengthSpec::Uniform { min: 64, max: 256 });
    let v = samples(&LengthSpec::Uniform { min: 64, max: 256 }, 1);
    assert_eq!((v[0], v[N - 1]), (64, 256));
    assert!(close(quantile(&v, 0.5) as f64, 160.0, 0.02));
}

#[test]
fn normal_is_truncated_not_piled_on_bounds() {
    let spec = scenario_lengths("{kind: normal, mean: 500, stddev: 100, min: 300, max: 900}");
    let v = samples(&spec, 2);
    assert!(v[0] >= 300 && v[N - 1] <= 900);
    assert!(close(quantile(&v, 0.5) as f64, 500.0, 0.01));
    // Truncated at -2σ: P(X ≤ 372 | X ≥ 300) = (Φ(-1.28) − Φ(-2)) / (1 − Φ(-2)) ≈ 0.0799.
    let below = v.iter().filter(|&&x| x <= 372).count() as f64 / N as f64;
    assert!((below - 0.0799).abs() < 0.006, "{below}");
    let at_min = v.iter().filter(|&&x| x == 300).count();
    assert!(at_min < N / 500, "no pile-up at the bound: {at_min}");
}

#[test]
fn lognormal_from_median_and_p90_or_p99_or_mu_sigma() {
    for (yaml, median, p90) in [
        ("{kind: lognormal, median: 256, p90: 1024}", 256.0, 1024.0),
        ("{kind: lognormal, median: 300, p99: 3000, max: 100000}", 300.0, 300.0 * (10f64.ln() * 1.2816 / 2.3263).exp()),
        ("{kind: lognormal, mu: 5.0, sigma: 0.5}", 5f64.exp(), (5.0 + 0.5 * 1.2816f64).exp()),
    ] {
        let v = samples(&scenario_lengths(yaml), 3);
        assert!(close(quantile(&v, 0.5) as f64, median, 0.03), "{yaml}: p50 {}", quantile(&v, 0.5));
        assert!(close(quantile(&v, 0.9) as f64, p90, 0.04), "{yaml}: p90 {}", quantile(&v, 0.9));
    }
}

#[test]
fn empirical_lists_and_histograms_keep_their_proportions() {
    let v = samples(&scenario_lengths("{kind: empirical, values: [10, 20, 20, 40]}"), 4);
    let share = |x: u32| v.iter().filter(|&&y| y == x).count() as f64 / N as f64;
    assert!((share(20) - 0.5).abs() < 0.01 && (share(10) - 0.25).abs() < 0.01);
    let v = samples(&scenario_lengths("{kind: empirical, histogram: [{value: 100, weight: 9}, {value: 1000, weight: 1}]}"), 5);
    let big = v.iter().filter(|&&y| y == 1000).count() as f64 / N as f64;
    assert!((big - 0.1).abs() < 0.006, "{big}");
}

#[test]
fn mixture_proportions_and_outer_clamp() {
    let spec = scenario_lengths(
        "{kind: mixture, max: 5000, components: [{weight: 70, kind: fixed, value: 128}, {weight: 25, kind: uniform, min: 1000, max: 3000}, {weight: 5, kind: fixed, value: 8000}]}",
    );
    let v = samples(&spec, 6);
    let share = |f: &dyn Fn(u32) -> bool| v.iter().filter(|&&y| f(y)).count() as f64 / N as f64;
    assert!((share(&|y| y == 128) - 0.70).abs() < 0.01);
    assert!((share(&|y| (1000..=3000).contains(&y)) - 0.25).abs() < 0.01);
    assert!((share(&|y| y == 5000) - 0.05).abs() < 0.005, "8000 clamped to max 5000");
}

#[test]
fn scenario_weights_give_the_mix_of_rates() {
    let text = "probe: {rate: 10}\ntargets: [{name: t, base_url: 'http://127.0.0.1:1', api: openai-chat}]\nscenarios:\n  - {name: chat-short, weight: 70, input_tokens: 128, output_tokens: 64}\n  - {name: rag-long, weight: 25, input_tokens: 1500, output_tokens: 128}\n  - {name: long-ctx, weight: 5, input_tokens: 8000, output_tokens: 64}\n";
    let c = loader::parse(text, "t.yaml").unwrap();
    let rates: Vec<f64> = c.scenarios.iter().map(|s| s.rate).collect();
    assert_eq!(rates, vec![7.0, 2.5, 0.5]);
}
