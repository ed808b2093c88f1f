//! RFC 3339 UTC timestamps (`2026-11-30T12:00:00.123Z`) without a date-time dependency; used by
//! bench manifests and by the mock engine's Ollama `created_at`.

/// Unix seconds as RFC 3339 UTC with `digits` fractional digits (rounded).
pub fn format_unix(unix_s: f64, digits: u32) -> String {
    let scale = 10i64.pow(digits);
    let total = (unix_s * scale as f64).round() as i64;
    let (secs, frac) = (total.div_euclid(scale), total.rem_euclid(scale));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let time = format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60);
    if digits == 0 { format!("{time}Z") } else { format!("{time}.{frac:0width$}Z", width = digits as usize) }
}

/// The current time, RFC 3339 UTC with microseconds.
pub fn now() -> String {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    format_unix(d.as_secs_f64(), 6)
}

/// Days since 1970-01-01 -> (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(format_unix(0.0, 3), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_unix(951_782_400.5, 3), "2000-02-29T00:00:00.500Z");
        assert_eq!(format_unix(1_796_083_200.0, 3), "2026-12-01T00:00:00.000Z");
        assert_eq!(format_unix(1_796_083_200.25, 6), "2026-12-01T00:00:00.250000Z");
        assert_eq!(format_unix(-1.0, 0), "1969-12-31T23:59:59Z");
    }
}
