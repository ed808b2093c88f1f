//! RFC 3339 timestamps: formatting (`2026-11-30T12:00:00.123Z`, UTC) by hand, used by bench
//! manifests and by the mock engine's Ollama `created_at`; parsing (`--start-at`) by the `time`
//! crate, which knows the calendar (no February 31st, leap years, offsets).

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// An RFC 3339 date-time with its offset (`2026-01-01T12:00:00Z`,
/// `2026-01-01T13:00:00.25+01:00`) -> Unix seconds. The date and time may be separated by `T`,
/// `t` or a space; a leap second (`23:59:60`, only at the end of a month, UTC) reads as the
/// instant before the next minute. The error names the value and what is wrong with it.
pub fn parse_unix(text: &str) -> Result<f64, String> {
    let bad = |why: &dyn std::fmt::Display| format!("{text:?}: not an RFC 3339 date-time ({why})");
    // `time` takes any character between date and time; RFC 3339 names only these.
    if text.len() > 10 && !matches!(text.as_bytes()[10], b'T' | b't' | b' ') {
        return Err(bad(&"date and time must be separated by T"));
    }
    let t = OffsetDateTime::parse(text, &Rfc3339).map_err(|e| bad(&e))?;
    Ok(t.unix_timestamp() as f64 + f64::from(t.nanosecond()) / 1e9)
}

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

    /// Days since 1970-01-01 -> Unix seconds.
    fn day(days: i64) -> f64 {
        (days * 86_400) as f64
    }

    #[test]
    fn parses_dates_offsets_and_fractions() {
        let table: &[(&str, f64)] = &[
            ("1970-01-01T00:00:00Z", 0.0),
            ("1970-01-01t00:00:00z", 0.0),
            ("1970-01-01 00:00:00Z", 0.0),
            ("2026-01-01T00:00:00Z", 1_767_225_600.0),
            ("2026-01-01T01:00:00.250+01:00", 1_767_225_600.25),
            ("2025-12-31T19:30:00-04:30", 1_767_225_600.0),
            ("2026-01-01T00:00:00+00:00", 1_767_225_600.0),
            ("2026-01-01T00:00:00-00:00", 1_767_225_600.0),
            ("2026-01-01T00:00:00.5Z", 1_767_225_600.5),
            ("2026-01-01T00:00:00.000001Z", 1_767_225_600.000_001),
            ("2026-01-01T00:00:00.123456789123Z", 1_767_225_600.123_457),
            ("2000-02-29T00:00:00.5Z", 951_782_400.5),
            ("1969-12-31T23:59:59Z", -1.0),
            ("2016-12-31T23:59:60Z", 1_483_228_800.0 - 1e-9),
        ];
        for &(text, want) in table {
            let got = parse_unix(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!((got - want).abs() < 1e-6, "{text}: {got} != {want}");
        }
    }

    #[test]
    fn leap_years_follow_the_gregorian_rules() {
        // Divisible by 4 but not 100, or by 400.
        for (year, leap) in [(1900, false), (2000, true), (2023, false), (2024, true), (2100, false), (2400, true)] {
            let feb29 = parse_unix(&format!("{year}-02-29T00:00:00Z"));
            assert_eq!(feb29.is_ok(), leap, "{year}: {feb29:?}");
            if leap {
                let mar1 = parse_unix(&format!("{year}-03-01T00:00:00Z")).unwrap();
                assert_eq!(mar1 - feb29.unwrap(), 86_400.0, "{year}");
            }
        }
    }

    #[test]
    fn every_day_of_four_centuries_roundtrips_and_no_day_past_the_month_is_taken() {
        // 1970-01-01 + n days formats and parses back to itself; the day after each month's
        // last is refused.
        for n in (-146_097..146_097).step_by(7) {
            let text = format_unix(day(n), 0);
            assert_eq!(parse_unix(&text), Ok(day(n)), "{text}");
        }
        for year in [1999, 2000, 2024, 2026, 2100] {
            for month in 1..=12u32 {
                let next = if month == 12 { format!("{}-01-01", year + 1) } else { format!("{year}-{:02}-01", month + 1) };
                let last = parse_unix(&format!("{next}T00:00:00Z")).unwrap() - 86_400.0;
                let last_day = format_unix(last, 0)[8..10].parse::<u32>().unwrap();
                let past = format!("{year}-{month:02}-{:02}T00:00:00Z", last_day + 1);
                if last_day < 31 {
                    let e = parse_unix(&past).expect_err(&past);
                    assert!(e.contains(&past), "{e}");
                }
            }
        }
    }

    #[test]
    fn invalid_values_are_errors_that_name_them() {
        for text in [
            "2026-02-31T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-00-01T00:00:00Z",
            "2026-01-00T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:60:00Z",
            "2026-01-01T12:59:60Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00+24:00",
            "2026-01-01T00:00:00+0100",
            "2026-01-01T00:00:00.Z",
            "2026-01-01X00:00:00Z",
            "2026-1-01T00:00:00Z",
            "2026-01-01T00:00Z",
            "2026-01-01",
            "tomorrow",
            "",
        ] {
            let e = parse_unix(text).expect_err(text);
            assert!(e.starts_with(&format!("{text:?}: ")), "{e}");
        }
        assert!(parse_unix("2026-02-31T00:00:00Z").unwrap_err().contains("day"));
    }

    #[test]
    fn known_instants() {
        assert_eq!(format_unix(0.0, 3), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_unix(951_782_400.5, 3), "2000-02-29T00:00:00.500Z");
        assert_eq!(format_unix(1_796_083_200.0, 3), "2026-12-01T00:00:00.000Z");
        assert_eq!(format_unix(1_796_083_200.25, 6), "2026-12-01T00:00:00.250000Z");
        assert_eq!(format_unix(-1.0, 0), "1969-12-31T23:59:59Z");
    }
}
