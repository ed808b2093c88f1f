//! Human durations: `100us`, `250ms`, `2s`, `1.5s`, `1m`, `1h`.
//!
//! A tiny parser rather than a dependency: one number, one unit, nothing else.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Visitor};

/// Parses `<number><unit>` where unit is `us`, `ms`, `s`, `m` or `h`. The number may have a
/// fractional part (`1.5s`). Surrounding whitespace is ignored.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration \"{text}\": expected a number followed by us, ms, s, m or h");
    let s = text.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(invalid)?;
    let (number, unit) = s.split_at(split);
    let nanos_per_unit: u128 = match unit {
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(invalid()),
    };
    // Integer arithmetic, not f64: `0.3s` must be exactly 300ms when compared with a latency.
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || (number.contains('.') && fraction.is_empty()) || fraction.contains('.') {
        return Err(invalid());
    }
    let whole: u128 = whole.parse().map_err(|_| invalid())?;
    // Digits beyond nanosecond precision of the largest unit cannot matter; ignore them.
    let fraction = &fraction[..fraction.len().min(15)];
    let scale = 10u128.pow(fraction.len() as u32);
    let fraction: u128 = if fraction.is_empty() { 0 } else { fraction.parse().map_err(|_| invalid())? };
    let nanos = whole.checked_mul(nanos_per_unit).and_then(|n| n.checked_add(fraction * nanos_per_unit / scale)).ok_or_else(invalid)?;
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| invalid())?;
    let d = Duration::new(secs, (nanos % 1_000_000_000) as u32);
    if d > MAX_DURATION {
        return Err(format!("duration \"{text}\" is too long: at most 720h (30 days)"));
    }
    Ok(d)
}

/// The longest duration any config field accepts: every deadline and interval stays far from
/// overflow, and nothing a prober or a benchmark does needs longer.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

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

/// A duration as written (`250ms`, `2s`). Any scalar is accepted here so that `ttft: 30`
/// reaches validation and gets the duration error message with its unit hint.
#[derive(Debug, Clone, PartialEq)]
pub struct RawDuration(pub String);

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = RawDuration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration like 250ms, 2s or 1m")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RawDuration, E> {
                Ok(RawDuration(s.to_owned()))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<RawDuration, E> {
                Ok(RawDuration(n.to_string()))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<RawDuration, E> {
                Ok(RawDuration(n.to_string()))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<RawDuration, E> {
                Ok(RawDuration(n.to_string()))
            }
        }
        d.deserialize_any(V)
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
        assert_eq!(parse_duration("0.3s"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_duration("0.1ms"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_duration("2.5h"), Ok(Duration::from_secs(9000)));
        assert_eq!(parse_duration("1.0000000001s"), Ok(Duration::new(1, 0)));
    }

    #[test]
    fn rejects_garbage_with_a_hint() {
        for bad in ["2x", "2", "", "s", "ms", "1.s", ".5s", "1..2s", "-1s", "1e3s", "inf", "2 s"] {
            let err = parse_duration(bad).unwrap_err();
            assert_eq!(err, format!("invalid duration \"{bad}\": expected a number followed by us, ms, s, m or h"),);
        }
    }

    #[test]
    fn formats_round_trip() {
        for text in ["500ms", "2s", "1.5s", "100us", "120s"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
    }
}
