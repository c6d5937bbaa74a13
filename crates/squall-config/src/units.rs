//! Durations ("250ms", "10s", "1m", "2h") and sizes (bytes, "16KiB", "1GiB").
//!
//! Both are an unsigned integer followed by a unit, with no space and no fraction, like
//! nginx's. A duration must name its unit because a bare number is ambiguous between
//! seconds and milliseconds, the mistake behind many an accidental 1000x timeout. Sizes use
//! binary units only, so "16KiB" means exactly what the operator computed.

use std::time::Duration;

/// The longest duration accepted: a year. Every duration ends up added to an `Instant`, and a
/// bound far below `Instant`'s range means that addition never overflows (it would panic).
pub const DURATION_MAX: Duration = Duration::from_secs(365 * 24 * 3600);

const DURATION_UNITS: &str = "use ms, s, m or h";
const SIZE_UNITS: &str = "use KiB, MiB or GiB (powers of 1024), or a plain number of bytes";

/// Parses "250ms", "10s", "1m" or "2h". The error is a sentence for the operator.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (number, unit) = split_number(s, "duration", "\"10s\"")?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60 * 1000,
        "h" => 3600 * 1000,
        "" => return Err(format!("duration without a unit: {DURATION_UNITS}")),
        _ if unit.starts_with('.') => {
            return Err("fractions are not supported; use a smaller unit, as in \"1500ms\"".into());
        }
        _ => return Err(format!("unknown duration unit {unit:?}: {DURATION_UNITS}")),
    };
    let too_long = || {
        format!(
            "duration longer than a year ({}h)",
            DURATION_MAX.as_secs() / 3600
        )
    };
    let millis = number.checked_mul(millis_per_unit).ok_or_else(too_long)?;
    let duration = Duration::from_millis(millis);
    if duration > DURATION_MAX {
        return Err(too_long());
    }
    Ok(duration)
}

/// Parses a size: a plain number of bytes ("1024", or "1024B") or a number with KiB, MiB or GiB.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (number, unit) = split_number(s, "size", "\"16KiB\"")?;
    let bytes_per_unit: u64 = match unit {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ if unit.starts_with('.') => {
            return Err(
                "fractions are not supported; use a smaller unit, as in \"1536KiB\"".into(),
            );
        }
        _ => return Err(format!("unknown size unit {unit:?}: {SIZE_UNITS}")),
    };
    number
        .checked_mul(bytes_per_unit)
        .ok_or_else(|| "size too large".to_owned())
}

/// Splits "10s" into (10, "s"). `what` and `example` make the errors specific.
fn split_number<'a>(s: &'a str, what: &str, example: &str) -> Result<(u64, &'a str), String> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if s.is_empty() {
        return Err(format!("empty {what}; write one as in {example}"));
    }
    if digits == 0 {
        return Err(format!(
            "{what} {s:?} does not start with a number, as in {example}"
        ));
    }
    // `digits` counts ASCII bytes, so it is a char boundary.
    let (number, unit) = s.split_at(digits);
    let number = number
        .parse()
        .map_err(|_| format!("{what} {number} is too large"))?;
    Ok((number, unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ok = [
            ("0s", Duration::ZERO),
            ("250ms", Duration::from_millis(250)),
            ("10s", Duration::from_secs(10)),
            ("1m", Duration::from_secs(60)),
            ("2h", Duration::from_secs(7200)),
            ("8760h", DURATION_MAX),
            ("007s", Duration::from_secs(7)),
        ];
        for (input, expected) in ok {
            assert_eq!(parse_duration(input), Ok(expected), "{input}");
        }
    }

    #[test]
    fn duration_errors() {
        let errors = [
            ("10", "duration without a unit: use ms, s, m or h"),
            ("10x", "unknown duration unit \"x\": use ms, s, m or h"),
            ("10 s", "unknown duration unit \" s\": use ms, s, m or h"),
            ("10S", "unknown duration unit \"S\": use ms, s, m or h"),
            ("1m30s", "unknown duration unit \"m30s\": use ms, s, m or h"),
            (
                "1.5s",
                "fractions are not supported; use a smaller unit, as in \"1500ms\"",
            ),
            ("", "empty duration; write one as in \"10s\""),
            (
                "s",
                "duration \"s\" does not start with a number, as in \"10s\"",
            ),
            (
                "-1s",
                "duration \"-1s\" does not start with a number, as in \"10s\"",
            ),
            ("8761h", "duration longer than a year (8760h)"),
            (
                "99999999999999999999s",
                "duration 99999999999999999999 is too large",
            ),
            (
                "18446744073709551615h",
                "duration longer than a year (8760h)",
            ),
        ];
        for (input, expected) in errors {
            assert_eq!(parse_duration(input), Err(expected.to_owned()), "{input}");
        }
    }

    #[test]
    fn sizes() {
        let ok = [
            ("0", 0),
            ("1024", 1024),
            ("512B", 512),
            ("16KiB", 16 * 1024),
            ("8MiB", 8 << 20),
            ("1GiB", 1 << 30),
            ("16383GiB", 16383 << 30),
        ];
        for (input, expected) in ok {
            assert_eq!(parse_size(input), Ok(expected), "{input}");
        }
    }

    #[test]
    fn size_errors() {
        let units = "use KiB, MiB or GiB (powers of 1024), or a plain number of bytes";
        let errors = [
            ("16KB", format!("unknown size unit \"KB\": {units}")),
            ("16k", format!("unknown size unit \"k\": {units}")),
            ("1TiB", format!("unknown size unit \"TiB\": {units}")),
            (
                "1.5GiB",
                "fractions are not supported; use a smaller unit, as in \"1536KiB\"".into(),
            ),
            ("", "empty size; write one as in \"16KiB\"".into()),
            (
                "KiB",
                "size \"KiB\" does not start with a number, as in \"16KiB\"".into(),
            ),
            ("17179869184GiB", "size too large".into()),
        ];
        for (input, expected) in errors {
            assert_eq!(parse_size(input), Err(expected), "{input}");
        }
    }
}
