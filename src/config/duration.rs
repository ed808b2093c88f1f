//! Human durations: `100us`, `250ms`, `2s`, `1.5s`, `1m`, `1h`.
//!
//! A tiny parser rather than a dependency: one number, one unit, nothing else.

use std::time::Duration;

/// Parses `<number><unit>` where unit is `us`, `ms`, `s`, `m` or `h`. The number may have a
/// fractional part (`1.5s`). Surrounding whitespace is ignored.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid =
        || format!("invalid duration \"{text}\": expected a number followed by us, ms, s, m or h");
    let s = text.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(invalid)?;
    let (number, unit) = s.split_at(split);
    let seconds_per_unit = match unit {
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(invalid()),
    };
    // `str::parse::<f64>` also accepts "inf", "1e3" and the like; the digit scan above already
    // limited `number` to digits and dots, so only plain decimals get here.
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return Err(invalid());
    }
    let value: f64 = number.parse().map_err(|_| invalid())?;
    Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| invalid())
}

/// Formats a duration the way it would be written in the file (`500ms`, `2s`, `1.5s`).
pub fn format_duration(d: Duration) -> String {
    let micros = d.as_micros();
    if micros % 1_000_000 == 0 {
        format!("{}s", micros / 1_000_000)
    } else if micros % 1000 == 0 && micros < 1_000_000 {
        format!("{}ms", micros / 1000)
    } else if micros < 1000 {
        format!("{micros}us")
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse_duration("100us"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration(" 0s "), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_garbage_with_a_hint() {
        for bad in [
            "2x", "2", "", "s", "ms", "1.s", ".5s", "1..2s", "-1s", "1e3s", "inf", "2 s",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert_eq!(
                err,
                format!(
                    "invalid duration \"{bad}\": expected a number followed by us, ms, s, m or h"
                ),
            );
        }
    }

    #[test]
    fn formats_round_trip() {
        for text in ["500ms", "2s", "1.5s", "100us", "120s"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
    }
}
