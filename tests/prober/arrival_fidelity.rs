//! Fidelity of the arrival processes, drawn from the iterators directly (no wall clock): mean
//! rate, inter-arrival KS statistics against the exact CDFs at fixed seeds, diurnal modulation,
//! determinism.

use std::time::Duration;

use llmprobe::config::{ArrivalKind, ArrivalSpec, Diurnal};
use llmprobe::probe::arrival::{self, Arrival, Gamma, Poisson};

const N: usize = 50_000;

fn gaps(a: &mut dyn Arrival, n: usize) -> Vec<f64> {
    (0..n).map(|_| a.next_gap().as_secs_f64()).collect()
}

/// KS statistic of `xs` against `cdf`.
fn ks(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    xs.iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
        })
        .fold(0.0, f64::max)
}

/// 1% critical value of the one-sample KS test.
fn ks_critical(n: usize) -> f64 {
    1.63 / (n as f64).sqrt()
}

use llmprobe::detect::math::ln_gamma;

/// Regularized lower incomplete gamma P(a, x): series below a + 1, continued fraction above.
fn gamma_p(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let front = (-x + a * x.ln() - ln_gamma(a)).exp();
    if x < a + 1.0 {
        let (mut sum, mut term, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..1000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-15 {
                break;
            }
        }
        sum * front
    } else {
        // Lentz's method for the continued fraction of Q(a, x).
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..1000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            d = if d.abs() < tiny { tiny } else { d };
            c = b + an / c;
            c = if c.abs() < tiny { tiny } else { c };
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-15 {
                break;
            }
        }
        1.0 - front * h
    }
}

#[test]
fn incomplete_gamma_matches_the_exponential() {
    for x in [0.1, 0.5, 1.0, 2.0, 5.0] {
        assert!((gamma_p(1.0, x) - (1.0 - (-x).exp())).abs() < 1e-12);
    }
}

#[test]
fn poisson_rate_and_ks_at_fixed_seeds() {
    for (rate, seed) in [(0.5, 1u64), (4.0, 2), (50.0, 3)] {
        let g = gaps(&mut Poisson::new(rate, seed), N);
        let mean_rate = N as f64 / g.iter().sum::<f64>();
        assert!((mean_rate / rate - 1.0).abs() < 0.02, "rate {rate}: achieved {mean_rate}");
        let d = ks(g, |x| 1.0 - (-rate * x).exp());
        assert!(d < ks_critical(N), "rate {rate} seed {seed}: KS D = {d}");
    }
}

#[test]
fn gamma_rate_cv_and_ks_at_fixed_seeds() {
    for (rate, shape, seed) in [(2.0, 0.25, 11u64), (2.0, 0.5, 12), (1.0, 1.0, 13), (5.0, 2.0, 14), (5.0, 8.0, 15)] {
        let g = gaps(&mut Gamma::new(rate, shape, seed), N);
        let mean = g.iter().sum::<f64>() / N as f64;
        let var = g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / N as f64;
        assert!((1.0 / mean / rate - 1.0).abs() < 0.03, "shape {shape}: rate {}", 1.0 / mean);
        let cv2 = var / (mean * mean);
        assert!((cv2 * shape - 1.0).abs() < 0.1, "shape {shape}: CV² {cv2}, expected {}", 1.0 / shape);
        let scale = 1.0 / (shape * rate);
        let d = ks(g, |x| gamma_p(shape, x / scale));
        assert!(d < ks_critical(N), "shape {shape} seed {seed}: KS D = {d}");
    }
}

#[test]
fn gamma_with_burstiness_one_is_exponential() {
    let g = gaps(&mut Gamma::new(3.0, 1.0, 5), N);
    let d = ks(g, |x| 1.0 - (-3.0 * x).exp());
    assert!(d < ks_critical(N), "KS D = {d}");
}

#[test]
fn constant_is_evenly_spaced_and_exact() {
    let spec = ArrivalSpec { kind: ArrivalKind::Constant, diurnal: None };
    let mut a = arrival::build(&spec, 8.0, 0);
    for _ in 0..100 {
        assert_eq!(a.next_gap(), Duration::from_millis(125));
    }
}

/// Arrival times (s) of a process over `horizon` seconds.
fn times(a: &mut dyn Arrival, horizon: f64) -> Vec<f64> {
    let mut t = 0.0;
    let mut out = Vec::new();
    loop {
        t += a.next_gap().as_secs_f64();
        if t > horizon {
            return out;
        }
        out.push(t);
    }
}

#[test]
fn diurnal_modulation_follows_the_rate_curve() {
    let period = 100.0;
    let d = Diurnal { period: Duration::from_secs(100), amplitude: 0.6, peak_at: Duration::from_secs(25) };
    for kind in [ArrivalKind::Poisson, ArrivalKind::Gamma { burstiness: 2.0 }, ArrivalKind::Constant] {
        let spec = ArrivalSpec { kind, diurnal: Some(d) };
        let rate = 20.0;
        let horizon = 200.0 * period;
        let t = times(&mut *arrival::build(&spec, rate, 9), horizon);
        // Mean rate over whole periods is the configured rate.
        let achieved = t.len() as f64 / horizon;
        assert!((achieved / rate - 1.0).abs() < 0.01, "{kind:?}: mean rate {achieved}");
        // Counts per tenth of the period follow ∫ rate × (1 + a cos(2π(t − 25)/100)).
        let mut bins = [0usize; 10];
        for x in &t {
            bins[((x % period) / 10.0) as usize] += 1;
        }
        for (i, &n) in bins.iter().enumerate() {
            let (a, b) = (i as f64 * 10.0, i as f64 * 10.0 + 10.0);
            let w = std::f64::consts::TAU / period;
            let integral = rate * ((b - a) + 0.6 / w * ((w * (b - 25.0)).sin() - (w * (a - 25.0)).sin()));
            let expected = integral * 200.0;
            assert!((n as f64 / expected - 1.0).abs() < 0.05, "{kind:?} bin {i}: {n} vs {expected:.0}");
        }
    }
}

#[test]
fn online_draws_are_deterministic_per_seed_and_unbounded() {
    let spec = ArrivalSpec { kind: ArrivalKind::Gamma { burstiness: 0.5 }, diurnal: None };
    let a = gaps(&mut *arrival::build(&spec, 2.0, 77), 1000);
    let b = gaps(&mut *arrival::build(&spec, 2.0, 77), 1000);
    let c = gaps(&mut *arrival::build(&spec, 2.0, 78), 1000);
    assert_eq!(a, b);
    assert_ne!(a, c);
    // The first gaps do not depend on how long the run will be: no schedule rescaled to a total.
    let long = gaps(&mut *arrival::build(&spec, 2.0, 77), 100_000);
    assert_eq!(a[..], long[..1000]);
}
