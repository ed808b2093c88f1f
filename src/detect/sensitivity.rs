//! How much each scenario feels the load its target's scenarios share, learned from the hours
//! before a marker: the slope of a scenario's bin means on the other scenarios' bin means over the
//! same bins, corrected for the others' probe noise (which would bias a plain regression slope
//! toward zero). A short prompt's TTFT moves more with queueing than a long one's, so one
//! scenario's before/after test cannot take the pooled load variance as its own, and its contrast
//! with the other scenarios keeps the part of the load in which they differ.

/// The share of the shared load's variance term a scenario's contrast keeps when its sensitivity
/// cannot be learned (no load to learn it from, too few probes): the scenarios' sensitivities are
/// taken to lie within ±50% of each other.
pub(super) const ASSUMED_SPREAD: f64 = 0.5;
/// How far before a marker a scenario's sensitivity is learned from (s): six hours, which the
/// values a scenario keeps (`baseline_max_samples`) span at 0.15 probes/s.
pub(super) const SENSITIVITY_SPAN_S: f64 = 21600.0;
/// Bins in which a scenario and the others both have probes, needed to learn its slope.
const MIN_BINS: usize = 30;
/// Degrees of freedom of the within-bin probe variance, needed to correct for the probe noise.
const MIN_NOISE_DF: f64 = 30.0;
/// The others' load must stand out of their probe noise by this many standard errors: without a
/// load to learn from, the slope is one of noise.
const GATE_Z: f64 = 2.0;
/// A slope is used where its standard error is under half the assumed spread: one learned less
/// precisely says less than the assumption (with probe noise of sd 0.5 at 10 probes a bin per
/// scenario, a load of sd 0.1 over four hours gives a standard error of 0.2–0.4, sd 0.2 about 0.1).
const MAX_SE: f64 = ASSUMED_SPREAD / 2.0;
/// The largest scale a scenario's load variance takes (a sensitivity three times the pooled one).
const MAX_SCALE: f64 = 9.0;

/// One scenario's load sensitivity as scales of the pooled load variance term (`shared` of the
/// release tests): `own` for its before/after test, `contrast` for its contrast with the others.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Sensitivity {
    pub(super) own: f64,
    pub(super) contrast: f64,
    /// The point estimate relative to the pooled bins (β / (wβ + 1 − w)); `None` when assumed.
    pub(super) relative: Option<f64>,
}

impl Default for Sensitivity {
    /// What the tests assume without a learned slope: the pooled load as the scenario's own, and
    /// a spread of ±50% between scenarios.
    fn default() -> Self {
        Sensitivity { own: 1.0, contrast: ASSUMED_SPREAD * ASSUMED_SPREAD, relative: None }
    }
}

/// Probes of one scenario in one bin: count, sum and sum of squares of the values.
#[derive(Debug, Clone, Copy, Default)]
struct BinSums {
    n: f64,
    sum: f64,
    sum_sq: f64,
}

/// Per scenario, `(bin, value)` of its probes in bin order (winsorized log latency, adjusted as
/// the release tests adjust it): each scenario's sensitivity, `None` where it cannot be learned
/// (the tests then assume `Sensitivity::default()`). Each slope is taken one standard error
/// toward the wider test, so an estimate that scatters widens rather than narrows.
pub(super) fn sensitivities(series: &[Vec<(i64, f64)>]) -> Vec<Option<Sensitivity>> {
    let bins: Vec<Vec<(i64, BinSums)>> = series.iter().map(|s| bin_sums(s)).collect();
    // The bin range over every entry (not the ends of each series: out of order, an end is no bound).
    let (Some(first), Some(last)) = (bins.iter().flatten().map(|b| b.0).min(), bins.iter().flatten().map(|b| b.0).max()) else {
        return vec![None; series.len()];
    };
    // Within-bin probe variance, per scenario where it has enough pairs, else all scenarios'.
    let within: Vec<(f64, f64)> = bins
        .iter()
        .map(|b| b.iter().filter(|x| x.1.n >= 2.0).fold((0.0, 0.0), |(ss, df), (_, x)| (ss + (x.sum_sq - x.sum * x.sum / x.n).max(0.0), df + x.n - 1.0)))
        .collect();
    let (ss, df) = within.iter().fold((0.0, 0.0), |a, x| (a.0 + x.0, a.1 + x.1));
    if df < MIN_NOISE_DF {
        return vec![None; series.len()];
    }
    let noise: Vec<f64> = within.iter().map(|&(s, d)| if d >= MIN_NOISE_DF { s / d } else { ss / df }).collect();
    // All scenarios' probes per bin: count, sum, and the sum of their probe variances.
    let width = usize::try_from(last.saturating_sub(first)).unwrap_or(usize::MAX).saturating_add(1);
    if width > crate::config::MAX_HISTORY_BINS as usize {
        return vec![None; series.len()];
    }
    let mut total = vec![(0.0, 0.0, 0.0); width];
    for (b, v) in bins.iter().zip(&noise) {
        for (i, x) in b {
            let t = &mut total[(i - first) as usize];
            *t = (t.0 + x.n, t.1 + x.sum, t.2 + x.n * v);
        }
    }
    bins.iter().zip(&noise).map(|(b, &v)| one(b, v, |i| total[(i - first) as usize])).collect()
}

fn bin_sums(series: &[(i64, f64)]) -> Vec<(i64, BinSums)> {
    let mut out: Vec<(i64, BinSums)> = Vec::new();
    for &(bin, y) in series.iter().filter(|x| x.1.is_finite()) {
        match out.last_mut() {
            Some((b, x)) if *b == bin => *x = BinSums { n: x.n + 1.0, sum: x.sum + y, sum_sq: x.sum_sq + y * y },
            _ => out.push((bin, BinSums { n: 1.0, sum: y, sum_sq: y * y })),
        }
    }
    out
}

/// One scenario's sensitivity from its bins, its probe variance and the bins of all scenarios.
fn one(bins: &[(i64, BinSums)], var: f64, total: impl Fn(i64) -> (f64, f64, f64)) -> Option<Sensitivity> {
    // (own mean, others' mean, others' mean's probe-noise variance, own count, others' count)
    let pts: Vec<(f64, f64, f64, f64, f64)> = bins
        .iter()
        .filter_map(|(i, x)| {
            let (n, sum, noise) = total(*i);
            let n_o = n - x.n;
            (n_o > 0.0).then(|| (x.sum / x.n, (sum - x.sum) / n_o, (noise - x.n * var).max(0.0) / (n_o * n_o), x.n, n_o))
        })
        .collect();
    if pts.len() < MIN_BINS {
        return None;
    }
    let b = pts.len() as f64;
    let (mean_s, mean_o) = (pts.iter().map(|p| p.0).sum::<f64>() / b, pts.iter().map(|p| p.1).sum::<f64>() / b);
    let (mut sxy, mut sxx, mut noise, mut noise_sq) = (0.0, 0.0, 0.0, 0.0);
    for p in &pts {
        sxy += (p.0 - mean_s) * (p.1 - mean_o);
        sxx += (p.1 - mean_o).powi(2);
        noise += p.2 * (1.0 - 1.0 / b);
        noise_sq += p.2 * p.2;
    }
    // The others' load variance: their spread beyond probe noise, which must stand out of it.
    let load = sxx - noise;
    let stands_out = load > GATE_Z * (2.0 * noise_sq).sqrt(); // false for NaN too
    if !stands_out {
        return None;
    }
    let beta = sxy / load;
    let resid = pts.iter().map(|p| ((p.0 - mean_s) - beta * (p.1 - mean_o)).powi(2)).sum::<f64>() / (b - 2.0);
    // The slope's standard error: the residual scatter over the others' spread, and the error of
    // the noise correction itself.
    let se = (resid * sxx + beta * beta * 2.0 * noise_sq).sqrt() / load;
    // The scenario's share of the probes: the pooled sensitivity is w·β + (1 − w) in units of the
    // others', and the tests' load term is the pooled one.
    let w = pts.iter().map(|p| p.3).sum::<f64>() / pts.iter().map(|p| p.3 + p.4).sum::<f64>();
    let pooled = w * beta + (1.0 - w);
    let usable = pooled > 0.1 && se < MAX_SE; // false for NaN too
    if !usable {
        return None;
    }
    let scale = |x: f64| (x / pooled).powi(2).min(MAX_SCALE);
    Some(Sensitivity { own: scale(beta.max(0.0) + se), contrast: scale((beta - 1.0).abs() + se), relative: Some(beta / pooled) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, Normal};

    /// Three scenarios, 10 probes a bin each (probe sd 0.5), over `bins` one-minute bins of a
    /// shared load (an AR(1) of sd `load_sd`, 5-minute time constant) felt by each scenario by
    /// its factor.
    fn series(seed: u64, factors: &[f64], load_sd: f64, bins: i64) -> Vec<Vec<(i64, f64)>> {
        let mut r = SmallRng::seed_from_u64(seed);
        let noise = Normal::new(0.0, 0.5).unwrap();
        let phi = (-1.0f64 / 5.0).exp();
        let mut l = 0.0;
        let mut out = vec![Vec::new(); factors.len()];
        for b in 0..bins {
            l = phi * l + (1.0 - phi * phi).sqrt() * load_sd * noise.sample(&mut r) / 0.5;
            for (s, f) in factors.iter().enumerate() {
                for _ in 0..10 {
                    let y = f * l + noise.sample(&mut r) + if r.random::<f64>() < 0.01 { 0.3 } else { 0.0 };
                    out[s].push((b, y));
                }
            }
        }
        out
    }

    /// Median over 7 seeds of each scenario's scales.
    fn medians(factors: &[f64], load_sd: f64) -> Vec<(f64, f64)> {
        let runs: Vec<Vec<Option<Sensitivity>>> = (0..7).map(|seed| sensitivities(&series(seed, factors, load_sd, 240))).collect();
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        (0..factors.len())
            .map(|i| {
                let got: Vec<Sensitivity> = runs.iter().map(|r| r[i].expect("a load of sd 0.2 over four hours is learned")).collect();
                (median(got.iter().map(|x| x.own).collect()), median(got.iter().map(|x| x.contrast).collect()))
            })
            .collect()
    }

    #[test]
    fn scenarios_that_feel_the_load_unlike_get_their_own_scale() {
        // Factors 0.5, 1, 1.5 (the pooled sensitivity 1): own scales near 0.25, 1 and 2.25, the
        // contrast's near (f − mean of the others)² / 1: 0.56, 0, 0.56 — each slope taken one
        // standard error (about 0.1 here) wider.
        let m = medians(&[0.5, 1.0, 1.5], 0.2);
        assert!((0.15..0.5).contains(&m[0].0) && (0.8..1.6).contains(&m[1].0) && (1.7..3.2).contains(&m[2].0), "{m:?}");
        assert!((0.35..0.9).contains(&m[0].1) && (0.35..0.9).contains(&m[2].1) && m[1].1 < 0.15, "{m:?}");
    }

    #[test]
    fn alike_scenarios_narrow_the_contrast_and_no_load_teaches_nothing() {
        let m = medians(&[1.0, 1.0, 1.0], 0.2);
        for (own, contrast) in &m {
            assert!((0.8..1.6).contains(own) && *contrast < 0.12, "{m:?}");
        }
        // No shared load: nothing to learn, the tests keep their assumptions.
        for seed in 0..5 {
            let none = sensitivities(&series(seed, &[1.0, 1.0, 1.0], 0.0, 240));
            assert!(none.iter().filter(|x| x.is_none()).count() >= 2, "{none:?}");
        }
    }

    #[test]
    fn hostile_series_give_no_panic_and_finite_scales() {
        let bad = vec![vec![(0, f64::NAN), (i64::MIN, 1.0), (i64::MAX, f64::INFINITY)], vec![], vec![(5, 1e300), (5, -1e300)]];
        for x in sensitivities(&bad).into_iter().flatten() {
            assert!(x.own.is_finite() && x.contrast.is_finite());
        }
        assert!(sensitivities(&[]).is_empty());
        // Out of bin order, far apart: no index outside the bins' range.
        let unordered = vec![vec![(10, 1.0), (3, 2.0), (7, 0.5)], vec![(4, 1.0), (-2, 0.0)]];
        assert_eq!(sensitivities(&unordered), vec![None, None]);
        let one = series(1, &[1.0], 0.2, 100);
        assert_eq!(sensitivities(&one), vec![None]);
    }
}
