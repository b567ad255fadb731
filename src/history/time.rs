//! Times and durations as operators type them: RFC 3339 timestamps (`2026-12-01T09:40:00Z`) and
//! durations (`7d`, `12h`, `30m`). Times are microseconds since the Unix epoch, UTC.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{Error, Result};

/// Now, in microseconds since the Unix epoch.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Parses a retention: [`crate::expire::parse_duration`]'s form (`7d`, `90s`), longer than zero.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let d = crate::expire::parse_duration(s).map_err(Error::Config)?;
    if d.is_zero() {
        return Err(Error::Config(format!(
            "`{s}` is not a duration: it must be longer than zero"
        )));
    }
    Ok(d)
}

/// Formats `us` (microseconds since the epoch) as RFC 3339 in UTC, with six fraction digits, so that
/// what `history` prints can be given back to `rewind --to` exactly.
pub fn format_rfc3339(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    let micros = us.rem_euclid(1_000_000);
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60
    )
}

/// Parses an RFC 3339 time (`2026-12-01T09:40:00Z`, `2026-12-01T10:40:00.250+01:00`) into
/// microseconds since the epoch (fraction digits beyond the sixth are dropped).
pub fn parse_rfc3339(s: &str) -> Result<i64> {
    let bad = |why: &str| {
        Error::Input(format!(
            "`{s}` is not an RFC 3339 time ({why}; e.g. 2026-12-01T09:40:00Z or 2026-12-01T10:40:00+01:00)"
        ))
    };
    let b = s.as_bytes();
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
    if day < 1 || day > days_in_month(year, month) {
        return Err(bad(&format!("{year:04}-{month:02} has no day {day:02}")));
    }
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
    // A leap second reads as the last microsecond of the minute before it.
    let (second, micros) = if second == 60 {
        (59, 999_999)
    } else {
        (second, micros)
    };
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_secs;
    Ok(secs * 1_000_000 + micros)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's civil calendar algorithms (proleptic Gregorian, day 0 = 1970-01-01).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        for (s, why) in [
            ("7", "no unit"),
            ("d", "number"),
            ("7y", "unknown unit `y`"),
            ("0h", "longer than zero"),
            ("99999999999999999999d", "too large"),
        ] {
            let e = parse_duration(s).unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
        }
    }
}
