//! The one calendar: days since 1970-01-01 to and from (year, month, day) (Howard
//! Hinnant's days-from-civil, so askdb does not depend on a date crate), the text formats
//! both databases accept, and the clock read as Unix time. The demo generator, the
//! PostgreSQL value decoder, run folders and ledgers all use it.

use std::time::{SystemTime, UNIX_EPOCH};

/// A calendar date as a day number: days since 1970-01-01 (negative before).
pub type DayNumber = i64;

/// Days since 1970-01-01 for a proleptic Gregorian date. `month` is 1-12.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> DayNumber {
    // Shift the year so it starts in March: the leap day then falls at the end.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of a day number; inverse of [`days_from_civil`].
pub fn civil_from_days(days: DayNumber) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Both values are bounded by construction (1..=31 and 1..=12).
    (year, day_part(month), day_part(day))
}

fn day_part(value: i64) -> u32 {
    u32::try_from(value).unwrap_or(1)
}

/// Day of the week, 0 = Monday .. 6 = Sunday (1970-01-01 was a Thursday).
pub fn weekday(days: DayNumber) -> u32 {
    day_part((days + 3).rem_euclid(7))
}

/// 'YYYY-MM-DD'.
pub fn format_date(days: DayNumber) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// 'YYYY-MM-DD HH:MM:SS' for a day and a number of seconds after midnight.
pub fn format_timestamp(days: DayNumber, seconds: u32) -> String {
    format!(
        "{} {:02}:{:02}:{:02}",
        format_date(days),
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// The calendar year of a day number.
pub fn year_of(days: DayNumber) -> i64 {
    civil_from_days(days).0
}

/// Seconds since 1970-01-01 UTC (0 if the clock is before it).
pub fn unix_seconds() -> u64 {
    unix_millis() / 1000
}

/// Milliseconds since 1970-01-01 UTC (0 if the clock is before it).
pub fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The UTC time now as `YYYY-MM-DD HH:MM:SS` and as a folder-safe stamp
/// (`YYYYMMDD-HHMMSS`).
pub fn utc_now() -> (String, String) {
    let seconds = unix_seconds();
    let days = i64::try_from(seconds / 86_400).unwrap_or(0);
    let text = format_timestamp(days, u32::try_from(seconds % 86_400).unwrap_or(0));
    let stamp = text.replace(['-', ':'], "").replace(' ', "-");
    (text, stamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(format_date(days_from_civil(2024, 2, 29)), "2024-02-29");
        assert_eq!(
            days_from_civil(2026, 10, 31) - days_from_civil(2025, 1, 1),
            668
        );
        for day in days_from_civil(2022, 1, 1)..days_from_civil(2027, 1, 1) {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
        // 2025-01-01 was a Wednesday.
        assert_eq!(weekday(days_from_civil(2025, 1, 1)), 2);
        assert_eq!(format_timestamp(0, 3661), "1970-01-01 01:01:01");
    }
}
