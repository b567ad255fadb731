//! The crate's clock, and times and durations as operators type them: RFC 3339 timestamps
//! (`2026-12-01T09:40:00Z`) and durations (`7d`, `12h`, `30m`, `500ms`).
//!
//! Every time the crate records comes from [`since_epoch`]: milliseconds ([`now_ms`]) for write
//! times, markers and record timestamps, microseconds ([`now_us`]) for history. Calendar maths is
//! `jiff`'s; only the accepted spelling of a time is checked here, so that every form the tools
//! took before is taken the same way (and no other).
//!
//! A leaf: it imports nothing of the crate but its error type.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{Error, Result};

/// The time since the Unix epoch now; zero when the system clock is set before it.
pub fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Milliseconds since the Unix epoch now: the time stores record for a write.
pub fn now_ms() -> u64 {
    since_epoch().as_millis() as u64
}

/// Microseconds since the Unix epoch now (history's times).
pub fn now_us() -> i64 {
    i64::try_from(since_epoch().as_micros()).unwrap_or(i64::MAX)
}

/// Parses a duration such as `30d`, `12h`, `90m`, `45s` or `500ms` (one whole number and one
/// unit; `w` for weeks too). The error says what was wrong.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let bad = |why: String| {
        format!(
            "`{text}` is not a duration: {why} (a whole number and a unit, e.g. 30d, 12h, 90m, 45s or 500ms)"
        )
    };
    let t = text.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = t.split_at(digits);
    if number.is_empty() {
        return Err(bad("it does not start with a number".into()));
    }
    let n: u64 = number
        .parse()
        .map_err(|_| bad(format!("{number} is too large")))?;
    let ms_per = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        "" => return Err(bad("it has no unit: say ms, s, m, h, d or w".into())),
        other => return Err(bad(format!("unknown unit `{other}`"))),
    };
    n.checked_mul(ms_per)
        .map(Duration::from_millis)
        .ok_or_else(|| bad("it is too long".into()))
}

/// [`parse_duration`] of a duration that must be longer than zero (a retention: `7d`, `90s`),
/// failing with [`Error::Settings`].
pub fn parse_positive_duration(s: &str) -> Result<Duration> {
    let d = parse_duration(s).map_err(Error::Settings)?;
    if d.is_zero() {
        return Err(Error::Settings(format!(
            "`{s}` is not a duration: it must be longer than zero"
        )));
    }
    Ok(d)
}

/// A duration as an operator reads it, in its two largest units: `30d`, `3d 4h`, `2h 5m`, `45s`,
/// `4.2s`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    let two = |a: u64, ua: &str, b: u64, ub: &str| {
        if b == 0 {
            format!("{a}{ua}")
        } else {
            format!("{a}{ua} {b}{ub}")
        }
    };
    if s >= 86_400 {
        two(s / 86_400, "d", s / 3_600 % 24, "h")
    } else if s >= 3_600 {
        two(s / 3_600, "h", s / 60 % 60, "m")
    } else if s >= 60 {
        two(s / 60, "m", s % 60, "s")
    } else if d.subsec_millis() == 0 {
        format!("{s}s")
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Formats `us` (microseconds since the epoch) as RFC 3339 in UTC, with six fraction digits, so that
/// what `history` prints can be given back to `rewind --to` exactly. A time outside the years
/// -9999 to 9999 (only a damaged record holds one) prints as the first or last moment of them.
pub fn format_rfc3339(us: i64) -> String {
    let at = EPOCH
        .checked_add(jiff::SignedDuration::from_micros(us))
        .unwrap_or(if us < 0 {
            jiff::civil::DateTime::MIN
        } else {
            jiff::civil::DateTime::MAX
        });
    format!("{at:.6}Z")
}

/// The Unix epoch as a civil time in UTC.
const EPOCH: jiff::civil::DateTime = jiff::civil::date(1970, 1, 1).at(0, 0, 0, 0);

/// Parses an RFC 3339 time (`2026-12-01T09:40:00Z`, `2026-12-01T10:40:00.250+01:00`) into
/// microseconds since the epoch (fraction digits beyond the sixth are dropped; a leap second reads
/// as the last microsecond of the minute before it).
pub fn parse_rfc3339(s: &str) -> Result<i64> {
    let bad = |why: &str| {
        Error::Input(format!(
            "`{s}` is not an RFC 3339 time ({why}; e.g. 2026-12-01T09:40:00Z or 2026-12-01T10:40:00+01:00)"
        ))
    };
    let b = s.as_bytes();
    // The spelling: `YYYY-MM-DD`, `T`, `t` or a space, `HH:MM:SS`, an optional fraction, a zone.
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let sep = |at: usize, allowed: &[u8]| b.get(at).is_some_and(|c| allowed.contains(c));
    if b.len() < 20
        || !sep(4, b"-")
        || !sep(7, b"-")
        || !sep(10, b"Tt ")
        || !sep(13, b":")
        || !sep(16, b":")
    {
        return Err(bad("expected YYYY-MM-DDTHH:MM:SS and a zone"));
    }
    let field = |from, len, what: &str| num(from, len).ok_or_else(|| bad(&format!("bad {what}")));
    let (year, month, day) = (
        field(0, 4, "year")?,
        field(5, 2, "month")?,
        field(8, 2, "day")?,
    );
    let (hour, minute) = (field(11, 2, "hour")?, field(14, 2, "minute")?);
    let second = field(17, 2, "second")?;
    if !(1..=12).contains(&month) {
        return Err(bad("the month must be 01 to 12"));
    }
    // Four digits and a month in range: both fit jiff's types.
    let date = jiff::civil::Date::new(year as i16, month as i8, day as i8)
        .map_err(|_| bad(&format!("{year:04}-{month:02} has no day {day:02}")))?;
    if hour > 23 || minute > 59 || second > 60 {
        return Err(bad("the time of day is out of range"));
    }
    let mut i = 19;
    let mut micros = 0i64;
    if b.get(i) == Some(&b'.') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return Err(bad("no digits after the decimal point"));
        }
        for (k, d) in b[i + 1..i + 1 + digits.min(6)].iter().enumerate() {
            micros += i64::from(d - b'0') * 10i64.pow(5 - k as u32);
        }
        i += 1 + digits;
    }
    let offset_secs = match b.get(i..) {
        Some(b"Z" | b"z") => 0,
        Some([sign @ (b'+' | b'-'), ..]) if b.len() == i + 6 && b[i + 3] == b':' => {
            let (h, m) = (
                field(i + 1, 2, "zone hour")?,
                field(i + 4, 2, "zone minute")?,
            );
            if h > 23 || m > 59 {
                return Err(bad("the zone offset is out of range"));
            }
            let secs = h * 3600 + m * 60;
            if *sign == b'-' { -secs } else { secs }
        }
        _ => return Err(bad("expected a zone after the time: Z or +HH:MM / -HH:MM")),
    };
    let (second, micros) = if second == 60 {
        (59, 999_999)
    } else {
        (second, micros)
    };
    let days = date.duration_since(EPOCH.date()).as_secs() / 86_400;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    Ok(secs * 1_000_000 + micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_or_say_why_not() {
        assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration(" 2w "), Ok(Duration::from_secs(14 * 86_400)));
        for (bad, says) in [
            ("", "not a duration"),
            ("d", "not a duration"),
            ("-1d", "not a duration"),
            ("10", "no unit"),
            ("10y", "unknown unit `y`"),
            ("1.5h", "unknown unit `.5h`"),
            ("99999999999999999999d", "too large"),
            ("9999999999999999d", "too long"),
        ] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn ages_read_in_their_largest_units() {
        assert_eq!(
            format_duration(Duration::from_secs(3 * 86_400 + 4 * 3600)),
            "3d 4h"
        );
        assert_eq!(format_duration(Duration::from_secs(7_500)), "2h 5m");
        assert_eq!(format_duration(Duration::from_millis(4_200)), "4.2s");
        assert_eq!(format_duration(Duration::from_secs(30 * 86_400)), "30d");
        assert_eq!(format_duration(Duration::from_secs(2)), "2s");
    }

    #[test]
    fn times_round_trip_and_zones_apply() {
        let t = parse_rfc3339("2026-12-01T09:40:00Z").unwrap();
        assert_eq!(t, 1_796_118_000_000_000);
        assert_eq!(format_rfc3339(t), "2026-12-01T09:40:00.000000Z");
        assert_eq!(parse_rfc3339("2026-12-01T10:40:00+01:00").unwrap(), t);
        assert_eq!(
            parse_rfc3339("2026-12-01t09:40:00.25z").unwrap(),
            t + 250_000
        );
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59.999999Z").unwrap(), -1);
        assert_eq!(format_rfc3339(-1), "1969-12-31T23:59:59.999999Z");
        for us in [0, 951_782_400_123_456, 4_107_542_400_000_001] {
            assert_eq!(parse_rfc3339(&format_rfc3339(us)).unwrap(), us);
        }
    }

    #[test]
    fn the_spellings_taken_before_jiff_still_are() {
        let t = parse_rfc3339("2026-12-01T09:40:00Z").unwrap();
        assert_eq!(parse_rfc3339("2026-12-01 09:40:00Z").unwrap(), t);
        assert_eq!(parse_rfc3339("2026-12-01T04:10:00-05:30").unwrap(), t);
        // Digits past the sixth are dropped, not rounded.
        assert_eq!(
            parse_rfc3339("2026-12-01T09:40:00.1234567899Z").unwrap(),
            t + 123_456
        );
        assert_eq!(
            parse_rfc3339("2026-12-01T09:39:60Z").unwrap(),
            t - 1_000_000 + 999_999
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T00:00:00Z").unwrap(),
            1_709_164_800_000_000
        );
        assert_eq!(
            parse_rfc3339("0000-01-01T00:00:00Z").unwrap(),
            -62_167_219_200_000_000
        );
        assert_eq!(
            format_rfc3339(-62_167_219_200_000_000),
            "0000-01-01T00:00:00.000000Z"
        );
        assert_eq!(
            parse_rfc3339("9999-12-31T23:59:59.999999+23:59").unwrap(),
            253_402_214_459_999_999
        );
        for (s, why) in [
            ("2026-12-01T09:40:00.Z", "no digits after the decimal point"),
            ("2026-12-01T09:40:00+24:00", "zone offset is out of range"),
            ("2026-12-01T09:40:00+01", "expected a zone"),
            ("2026-12-01T09:40:61Z", "time of day"),
            ("2100-02-29T00:00:00Z", "has no day 29"),
            ("2026-00-01T00:00:00Z", "month"),
            ("+02026-12-01T09:40:00Z", "expected YYYY-MM-DD"),
        ] {
            let e = parse_rfc3339(s).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(s), "{s}: {e}");
        }
    }

    #[test]
    fn bad_times_and_durations_say_why() {
        for (s, why) in [
            ("yesterday", "expected YYYY-MM-DD"),
            ("2026-02-29T00:00:00Z", "has no day 29"),
            ("2026-13-01T00:00:00Z", "month"),
            ("2026-12-01T09:40:00", "expected YYYY-MM-DD"),
            ("2026-12-01T09:40:00+0100", "expected a zone"),
            ("2026-12-01T25:40:00Z", "time of day"),
        ] {
            let e = parse_rfc3339(s).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(s), "{s}: {e}");
        }
        assert_eq!(
            parse_positive_duration("7d").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(
            parse_positive_duration("500ms").unwrap(),
            Duration::from_millis(500)
        );
        for (s, why) in [
            ("7", "no unit"),
            ("d", "number"),
            ("7y", "unknown unit `y`"),
            ("0h", "longer than zero"),
            ("99999999999999999999d", "too large"),
        ] {
            let e = parse_positive_duration(s).unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
        }
    }
}
