//! Small order statistics shared by the live summary, reports and comparisons.

/// Nearest-rank percentile of an ascending-sorted slice.
///
/// `q` is a fraction in `[0, 1]` (0.95 = p95); values outside are clamped and NaN is treated as 0.
/// The result is the element at rank `ceil(q * n)` (1-based), with rank 0 mapped to the smallest
/// element, so it is always a value that was actually observed (no interpolation). Returns `None`
/// for an empty slice. The caller sorts; NaN entries are the caller's problem.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.max(1) - 1])
}

/// Sorts floats ascending (NaN last), the order `percentile` expects.
pub fn sort_f64(values: &mut [f64]) {
    values.sort_by(|a, b| a.total_cmp(b));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_none() {
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn single_value_is_every_percentile() {
        for q in [0.0, 0.01, 0.5, 0.99, 1.0] {
            assert_eq!(percentile(&[7.0], q), Some(7.0));
        }
    }

    #[test]
    fn nearest_rank_on_one_to_ten() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 0.1), Some(1.0));
        assert_eq!(percentile(&v, 0.11), Some(2.0));
        assert_eq!(percentile(&v, 0.5), Some(5.0));
        assert_eq!(percentile(&v, 0.51), Some(6.0));
        assert_eq!(percentile(&v, 0.95), Some(10.0));
        assert_eq!(percentile(&v, 1.0), Some(10.0));
    }

    #[test]
    fn p95_of_hundred_is_ninety_fifth() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.95), Some(95.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
    }

    #[test]
    fn out_of_range_q_is_clamped() {
        let v = [1.0, 2.0, 3.0];
        assert_eq!(percentile(&v, -1.0), Some(1.0));
        assert_eq!(percentile(&v, 2.0), Some(3.0));
        assert_eq!(percentile(&v, f64::NAN), Some(1.0));
    }

    #[test]
    fn sort_f64_orders_ascending() {
        let mut v = [3.0, -1.0, 2.5, 0.0];
        sort_f64(&mut v);
        assert_eq!(v, [-1.0, 0.0, 2.5, 3.0]);
    }
}
