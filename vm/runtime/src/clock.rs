//! Calendar times as runs record them: UTC, ISO 8601 to the second (`2025-11-22T08:14:56Z`),
//! computed from seconds since the epoch without a time-zone database.

use std::time::{SystemTime, UNIX_EPOCH};

/// The UTC date and time of `secs` since the epoch as (`YYYYMMDD`, `HHMMSS`, ISO 8601).
pub fn timestamp(secs: u64) -> (String, String, String) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    (
        format!("{y:04}{mo:02}{d:02}"),
        format!("{h:02}{m:02}{s:02}"),
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z"),
    )
}

/// Seconds since the epoch now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Seconds since the epoch of a `YYYY-MM-DDTHH:MM:SSZ` timestamp (as `run.json` writes).
pub fn parse_timestamp(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[19] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm), the inverse of the store's.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + h * 3600 + mi * 60 + sec).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(timestamp(0).0, "19700101");
        assert_eq!(
            timestamp(1_763_799_296),
            (
                "20251122".into(),
                "081456".into(),
                "2025-11-22T08:14:56Z".into()
            )
        );
        assert_eq!(timestamp(951_782_400).0, "20000229");
    }

    #[test]
    fn timestamps_read_back_what_the_store_writes() {
        for secs in [0, 951_782_400, 1_763_799_296, 4_102_444_799] {
            let (_, _, iso) = timestamp(secs);
            assert_eq!(parse_timestamp(&iso), Some(secs), "{iso}");
        }
        for bad in [
            "",
            "2025-11-22",
            "2025-13-01T00:00:00Z",
            "2025-11-22 08:14:56Z",
            "2025-11-22T08:14:56+00",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad:?}");
        }
    }
}
