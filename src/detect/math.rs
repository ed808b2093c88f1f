//! Small numeric helpers: log-sum-exp, order-statistic quantiles with standard errors, and the
//! two-proportion interval.

/// z for a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// ln(Σ exp(x)) without overflow; `-inf` for an empty slice.
pub fn log_sum_exp(xs: &[f64]) -> f64 {
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return max;
    }
    max + xs.iter().map(|x| (x - max).exp()).sum::<f64>().ln()
}

/// Nearest-rank quantile of an ascending slice and its standard error from the distribution-free
/// order-statistic interval (ranks n·q ± 1.96·√(n·q·(1−q))). `None` for an empty slice.
pub fn quantile_se(sorted: &[f32], q: f64) -> Option<(f64, f64)> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let nf = n as f64;
    let at = |rank: f64| sorted[(rank.max(1.0) as usize).min(n) - 1] as f64;
    let value = at((q * nf).ceil());
    let half = Z95 * (nf * q * (1.0 - q)).sqrt();
    let lo = at((q * nf - half).floor());
    let hi = at((q * nf + half).ceil() + 1.0);
    Some((value, ((hi - lo) / (2.0 * Z95)).max(1e-9)))
}

/// Difference of two bad fractions (post − pre) with an Agresti–Caffo 95% interval.
pub fn proportion_delta(pre_bad: u64, pre_n: u64, post_bad: u64, post_n: u64) -> Option<(f64, f64, f64)> {
    if pre_n == 0 || post_n == 0 {
        return None;
    }
    let (p1, p2) = (pre_bad as f64 / pre_n as f64, post_bad as f64 / post_n as f64);
    let (a1, a2) = ((pre_bad as f64 + 1.0) / (pre_n as f64 + 2.0), (post_bad as f64 + 1.0) / (post_n as f64 + 2.0));
    let var = a1 * (1.0 - a1) / (pre_n as f64 + 2.0) + a2 * (1.0 - a2) / (post_n as f64 + 2.0);
    Some((p2 - p1, a2 - a1, var))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_sum_exp_matches_direct_sum() {
        let xs = [0.1, -2.0, 1.5];
        let direct: f64 = xs.iter().map(|x: &f64| x.exp()).sum::<f64>().ln();
        assert!((log_sum_exp(&xs) - direct).abs() < 1e-12);
        assert!((log_sum_exp(&[1000.0, 1000.0]) - (1000.0 + 2f64.ln())).abs() < 1e-9);
        assert_eq!(log_sum_exp(&[]), f64::NEG_INFINITY);
    }

    #[test]
    fn quantile_interval_shrinks_with_n() {
        let small: Vec<f32> = (0..100).map(|i| i as f32).collect();
        let large: Vec<f32> = (0..10_000).map(|i| i as f32 / 100.0).collect();
        let (m1, se1) = quantile_se(&small, 0.5).unwrap();
        let (m2, se2) = quantile_se(&large, 0.5).unwrap();
        assert!((m1 - 49.0).abs() <= 1.0 && (m2 - 49.99).abs() <= 0.02);
        assert!(se2 < se1 / 5.0, "{se1} {se2}");
        assert!(quantile_se(&[], 0.5).is_none());
    }
}
