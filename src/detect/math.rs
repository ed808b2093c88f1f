//! Small numeric helpers: log-sum-exp, order-statistic quantiles with standard errors, the
//! two-proportion interval, normal tails and quantiles, the tail of a sum of small counts, and
//! a monotone (isotonic) fit.

/// z for a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// The median of `x` and its robust standard deviation (1.4826 × MAD, at least 1e-3); (0, 1e-3)
/// for an empty `x`.
pub fn median_and_robust_sd(mut x: Vec<f64>) -> (f64, f64) {
    if x.is_empty() {
        return (0.0, 1e-3);
    }
    x.sort_by(f64::total_cmp);
    let median = x[x.len() / 2];
    let mut dev: Vec<f64> = x.iter().map(|v| (v - median).abs()).collect();
    dev.sort_by(f64::total_cmp);
    (median, (1.4826 * dev[dev.len() / 2]).max(1e-3))
}

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

/// ln P(Z > z) for a standard normal Z, accurate in the far tail (no underflow to -inf).
fn ln_normal_sf(z: f64) -> f64 {
    if !z.is_finite() {
        return if z > 0.0 { f64::NEG_INFINITY } else { 0.0 };
    }
    if z < 0.0 {
        return (1.0 - normal_sf(-z)).max(f64::MIN_POSITIVE).ln();
    }
    // erfc(x) = t·exp(-x² + poly(t)), t = 1/(1 + x/2) (Numerical Recipes' erfcc, relative
    // error < 1.2e-7 everywhere), with x = z/√2 and P(Z > z) = erfc(x)/2.
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x);
    let poly = -1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06 + t * (0.278_868_07 + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    t.ln() - x * x + poly - std::f64::consts::LN_2
}

/// P(Z > z) for a standard normal Z.
pub fn normal_sf(z: f64) -> f64 {
    ln_normal_sf(z).exp()
}

/// The standard normal quantile: z with P(Z ≤ z) = p (Acklam's rational approximation, relative
/// error < 1.2e-9). `p` outside (0, 1) gives ±infinity.
pub fn normal_quantile(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] =
        [-3.969_683_028_665_376e1, 2.209_460_984_245_205e2, -2.759_285_104_469_687e2, 1.383_577_518_672_69e2, -3.066_479_806_614_716e1, 2.506_628_277_459_239];
    const B: [f64; 5] = [-5.447_609_879_822_406e1, 1.615_858_368_580_409e2, -1.556_989_798_598_866e2, 6.680_131_188_771_972e1, -1.328_068_155_288_572e1];
    const C: [f64; 6] =
        [-7.784_894_002_430_293e-3, -3.223_964_580_411_365e-1, -2.400_758_277_161_838, -2.549_732_539_343_734, 4.374_664_141_464_968, 2.938_163_982_698_783];
    const D: [f64; 4] = [7.784_695_709_041_462e-3, 3.224_671_290_700_398e-1, 2.445_134_137_142_996, 3.754_408_661_907_416];
    let tail = |q: f64| (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5]) / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0);
    if p < 0.024_25 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.024_25 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// P(X₁ + … + Xₙ ≥ s) for `n` independent draws from `pmf` (P(X = k) = pmf[k]), by convolution.
/// `n` and the support are small here (bins of a window, counts capped at a few), so this is exact
/// and cheap. 1 for s ≤ 0.
pub fn sum_tail(pmf: &[f64], n: usize, s: usize) -> f64 {
    if s == 0 {
        return 1.0;
    }
    let c = pmf.len().saturating_sub(1);
    if c == 0 || n == 0 {
        return 0.0;
    }
    // dist[j] = P(partial sum = j), truncated at s (every sum ≥ s is lumped into dist[s]).
    let mut dist = vec![0.0; s + 1];
    dist[0] = 1.0;
    let mut next = vec![0.0; s + 1];
    for _ in 0..n {
        next.iter_mut().for_each(|x| *x = 0.0);
        for (j, &pj) in dist.iter().enumerate() {
            if pj == 0.0 {
                continue;
            }
            for (k, &pk) in pmf.iter().enumerate() {
                next[(j + k).min(s)] += pj * pk;
            }
        }
        std::mem::swap(&mut dist, &mut next);
    }
    dist[s].clamp(0.0, 1.0)
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, nine terms: relative error below 1e-13).
pub fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1 − x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin().abs()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b) (a, b > 0, x in [0, 1]), by its continued
/// fraction (modified Lentz), on the side where it converges fast.
fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if !(a > 0.0 && b > 0.0) || x.is_nan() {
        return f64::NAN;
    }
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - incomplete_beta(1.0 - x, b, a);
    }
    let tiny = 1e-300;
    let (mut c, mut d) = (1.0, 1.0 - (a + b) * x / (a + 1.0));
    d = 1.0 / if d.abs() < tiny { tiny } else { d };
    let mut f = d;
    for m in 1..500 {
        let m = m as f64;
        for num in [m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)), -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0))] {
            d = 1.0 + num * d;
            d = 1.0 / if d.abs() < tiny { tiny } else { d };
            c = 1.0 + num / c;
            c = if c.abs() < tiny { tiny } else { c };
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-14 {
            break;
        }
    }
    (ln_front.exp() * f / a).clamp(0.0, 1.0)
}

/// How a correlation between probes carries over to their exceedances: for standard normals X, Y
/// with correlation ρ, Cov(1[X > z], 1[Y > z]) / ρ (Gaussian copula; the covariance is the
/// integral of the bivariate density at (z, z) over the correlation, Simpson's rule). At ρ → 0 it
/// is φ(z)²: far in the tail a shared load shift moves the exceedances much less than the mean.
/// It grows with ρ (the covariance is convex in ρ ≥ 0), so evaluated at the largest correlation
/// of any two probes it bounds every smaller one's ratio.
pub fn exceedance_cov_ratio(z: f64, rho: f64) -> f64 {
    let density = |r: f64| (-z * z / (1.0 + r)).exp() / (std::f64::consts::TAU * (1.0 - r * r).sqrt());
    let rho = if rho.is_finite() { rho.clamp(0.0, 0.95) } else { 0.0 };
    if !z.is_finite() {
        return 0.0;
    }
    if rho < 1e-9 {
        return density(0.0);
    }
    const STEPS: usize = 64;
    let h = rho / STEPS as f64;
    let sum: f64 = (0..=STEPS)
        .map(|i| {
            density(i as f64 * h)
                * if i == 0 || i == STEPS {
                    1.0
                } else if i % 2 == 1 {
                    4.0
                } else {
                    2.0
                }
        })
        .sum();
    sum * h / 3.0 / rho
}

/// P(X ≥ k) for X ~ Binomial(n, p), continued to real k and n (k ≤ 0: 1; k > n: 0), so counts
/// divided by a design effect keep an exact small-count tail.
pub fn binomial_sf(k: f64, n: f64, p: f64) -> f64 {
    if k.is_nan() || n.is_nan() || k <= 0.0 {
        return 1.0;
    }
    if k > n || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    incomplete_beta(p, k, n - k + 1.0)
}

/// P(T > t) for Student's t with `df` degrees of freedom (df > 0), from the incomplete beta.
fn student_t_sf(t: f64, df: f64) -> f64 {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    let tail = 0.5 * incomplete_beta(df / (df + t * t), 0.5 * df, 0.5);
    if t >= 0.0 { tail } else { 1.0 - tail }
}

/// The t with P(T > t) = `p` for Student's t with `df` degrees of freedom (`p` in (0, 0.5]), by
/// bisection on `student_t_sf`: the one-sided critical value of a t-interval.
pub fn student_t_upper(p: f64, df: f64) -> f64 {
    if !(p > 0.0 && df > 0.0) {
        return f64::INFINITY;
    }
    if p >= 0.5 {
        return 0.0;
    }
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while student_t_sf(hi, df) > p {
        hi *= 2.0;
        if hi > 1e12 {
            return f64::INFINITY;
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if student_t_sf(mid, df) > p {
            lo = mid
        } else {
            hi = mid
        }
        if hi - lo <= 1e-10 * hi {
            break;
        }
    }
    hi
}

/// Exact (Clopper–Pearson) one-sided upper bound of a proportion seen `k` times in `n`: the p
/// with P(X ≤ k) = `alpha` for X ~ Binomial(n, p); 1 when n = 0.
pub fn proportion_upper(k: u64, n: u64, alpha: f64) -> f64 {
    if n == 0 || k >= n {
        return 1.0;
    }
    // P(X ≤ k) = 1 − P(X ≥ k + 1) falls as p grows: bisect for the p where it is alpha.
    let at_most_k = |p: f64| 1.0 - binomial_sf(k as f64 + 1.0, n as f64, p);
    let (mut lo, mut hi) = (k as f64 / n as f64, 1.0_f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if at_most_k(mid) > alpha { lo = mid } else { hi = mid }
    }
    hi
}

/// Weighted least-squares non-decreasing fit of `y` (pool-adjacent-violators).
pub fn isotonic_increasing(y: &[f64], w: &[f64]) -> Vec<f64> {
    // Blocks of (mean, weight, length).
    let mut blocks: Vec<(f64, f64, usize)> = Vec::with_capacity(y.len());
    for (&v, &wt) in y.iter().zip(w) {
        let mut b = (v, wt.max(1e-12), 1usize);
        while let Some(&(m, bw, len)) = blocks.last() {
            if m <= b.0 {
                break;
            }
            blocks.pop();
            let total = bw + b.1;
            b = ((m * bw + b.0 * b.1) / total, total, len + b.2);
        }
        blocks.push(b);
    }
    blocks.into_iter().flat_map(|(m, _, len)| std::iter::repeat_n(m, len)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exceedance_covariance_matches_the_orthant_probability() {
        // At z = 0, P(X > 0, Y > 0) = 1/4 + asin(ρ)/2π: the covariance is asin(ρ)/2π.
        for rho in [0.1_f64, 0.5, 0.9] {
            let want = rho.asin() / std::f64::consts::TAU / rho;
            assert!((exceedance_cov_ratio(0.0, rho) - want).abs() < 1e-6, "rho {rho}");
        }
        // Small correlations: φ(z)², and growing with ρ; far in the tail much below the mean's 1.
        let phi = (-1.2816_f64 * 1.2816 / 2.0).exp() / (std::f64::consts::TAU).sqrt();
        assert!((exceedance_cov_ratio(1.2816, 0.0) - phi * phi).abs() < 1e-9);
        assert!(exceedance_cov_ratio(2.326, 0.3) > exceedance_cov_ratio(2.326, 0.1));
        assert!(exceedance_cov_ratio(2.326, 0.1) < 0.01);
        assert_eq!(exceedance_cov_ratio(f64::INFINITY, 0.2), 0.0);
        assert!(exceedance_cov_ratio(1.0, f64::NAN).is_finite());
    }

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

    #[test]
    fn normal_tail_and_quantile_agree_with_known_values() {
        assert!((normal_sf(1.959_963_984_540_054) - 0.025).abs() < 1e-8);
        assert!((normal_sf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_sf(-1.0) - 0.841_344_746).abs() < 1e-7);
        // Far tail: ln P(Z > 10) = -53.231...
        assert!((ln_normal_sf(10.0) + 53.231_285).abs() < 1e-3);
        for p in [1e-9, 1e-4, 0.01, 0.3, 0.5, 0.9, 0.999] {
            let z = normal_quantile(p);
            assert!(((1.0 - normal_sf(z)) - p).abs() < p * 1e-5 + 1e-12, "p {p} z {z}");
        }
    }

    #[test]
    fn sum_tail_matches_the_binomial() {
        // Bernoulli(0.2), n = 10: P(S >= 4) = 0.120873...
        let p = sum_tail(&[0.8, 0.2], 10, 4);
        assert!((p - 0.120_873_881_6).abs() < 1e-9, "{p}");
        assert_eq!(sum_tail(&[0.8, 0.2], 10, 0), 1.0);
        assert_eq!(sum_tail(&[0.8, 0.2], 10, 11), 0.0);
    }

    #[test]
    fn isotonic_fit_pools_violators() {
        let fit = isotonic_increasing(&[1.0, 3.0, 2.0, 4.0], &[1.0, 1.0, 1.0, 1.0]);
        assert_eq!(fit, vec![1.0, 2.5, 2.5, 4.0]);
        let fit = isotonic_increasing(&[5.0, 1.0], &[1.0, 3.0]);
        assert_eq!(fit, vec![2.0, 2.0]);
    }

    #[test]
    fn student_t_matches_tables() {
        // Two-sided 95% critical values: df 1 -> 12.706, df 4 -> 2.776, df 30 -> 2.042.
        for (df, want) in [(1.0, 12.706_2), (4.0, 2.776_4), (30.0, 2.042_3)] {
            let t = student_t_upper(0.025, df);
            assert!((t - want).abs() < 1e-3, "df {df}: {t}");
            assert!((student_t_sf(t, df) - 0.025).abs() < 1e-9);
        }
        // One-sided 0.1% at df 9: 4.297; large df approaches the normal (3.090).
        assert!((student_t_upper(0.001, 9.0) - 4.296_8).abs() < 1e-3);
        assert!((student_t_upper(0.001, 1e6) - 3.090_2).abs() < 1e-3);
        assert!((student_t_sf(-1.0, 5.0) - (1.0 - student_t_sf(1.0, 5.0))).abs() < 1e-12);
    }

    #[test]
    fn exact_proportion_bound_matches_known_values() {
        // 0 of n: 1 - alpha^(1/n) (the "rule of three" at alpha 0.05 for large n).
        let b = proportion_upper(0, 100, 0.05);
        assert!((b - (1.0 - 0.05f64.powf(0.01))).abs() < 1e-9, "{b}");
        // 5 of 50, one-sided 97.5%: 0.2181 (two-sided 95% Clopper–Pearson upper).
        assert!((proportion_upper(5, 50, 0.025) - 0.218_1).abs() < 1e-3);
        assert_eq!(proportion_upper(3, 0, 0.05), 1.0);
    }

    #[test]
    fn binomial_tail_matches_the_sum_of_the_pmf() {
        for (n, p) in [(10u32, 0.3f64), (40, 0.05), (200, 0.01), (7, 0.9)] {
            let pmf = |k: u32| {
                let ln_choose = ln_gamma(n as f64 + 1.0) - ln_gamma(k as f64 + 1.0) - ln_gamma((n - k) as f64 + 1.0);
                (ln_choose + k as f64 * p.ln() + (n - k) as f64 * (1.0 - p).ln()).exp()
            };
            for k in 0..=n {
                let exact: f64 = (k..=n).map(pmf).sum();
                let got = binomial_sf(k as f64, n as f64, p);
                assert!((got - exact).abs() < 1e-9 * exact.max(1e-3), "n {n} p {p} k {k}: {got} vs {exact}");
            }
        }
        assert_eq!(binomial_sf(0.0, 5.0, 0.5), 1.0);
        assert_eq!(binomial_sf(6.0, 5.0, 0.5), 0.0);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12 && (ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
    }
}
