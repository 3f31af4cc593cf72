//! The day a daily summary covers: a `YYYY-MM-DD` date in an IANA time zone, from its midnight to the next
//! one there (23 or 25 hours across a daylight-saving change), as a UTC range for the indexes.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;

use crate::{
    error::{ApiError, ApiResult},
    validate::Violations,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Day {
    pub date: NaiveDate,
    pub tz: Tz,
    /// The day's first instant, and the next day's.
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl Day {
    /// The day `date` in `tz` (`""`: today there, and UTC), which must not be after today there.
    pub fn parse(date: &str, tz: &str, now: DateTime<Utc>) -> ApiResult<Self> {
        let mut v = Violations::new();
        let zone = if tz.is_empty() {
            Some(Tz::UTC)
        } else {
            let zone = tz.parse::<Tz>().ok();
            v.check(
                zone.is_some(),
                "tz",
                "must be an IANA time zone name, e.g. Asia/Kolkata or America/New_York",
            );
            zone
        };
        let parsed = if date.is_empty() {
            zone.map(|zone| now.with_timezone(&zone).date_naive())
        } else {
            // Exactly four, two and two digits (chrono alone takes signs, spaces and one-digit months), in
            // the years both databases hold.
            let shaped = date.len() == 10
                && date.bytes().enumerate().all(|(i, b)| {
                    if i == 4 || i == 7 {
                        b == b'-'
                    } else {
                        b.is_ascii_digit()
                    }
                });
            let parsed = shaped
                .then(|| NaiveDate::parse_from_str(date, "%Y-%m-%d").ok())
                .flatten()
                .filter(|d| d.year() >= 1970);
            v.check(parsed.is_some(), "date", "must be a date as YYYY-MM-DD, from 1970 on");
            parsed
        };
        if let (Some(zone), Some(day)) = (zone, parsed) {
            let today = now.with_timezone(&zone).date_naive();
            v.check(
                day <= today,
                "date",
                format!("must not be after today ({today} in {zone})"),
            );
        }
        v.finish()?;
        let (Some(tz), Some(date)) = (zone, parsed) else {
            return Err(ApiError::internal("a day without its date or zone passed the checks"));
        };
        Ok(Self {
            date,
            tz,
            start: midnight(date, tz),
            end: midnight(date + Duration::days(1), tz),
        })
    }
}

/// The first instant of `date` in `tz`: its midnight, or where a daylight-saving change skips midnight (a
/// few zones change at 00:00), the first minute after the gap.
fn midnight(date: NaiveDate, tz: Tz) -> DateTime<Utc> {
    let mut local = date.and_time(NaiveTime::MIN);
    for _ in 0..=180 {
        if let Some(first) = tz.from_local_datetime(&local).earliest() {
            return first.with_timezone(&Utc);
        }
        local += Duration::minutes(1);
    }
    // No zone has a gap of three hours; this only keeps the function total.
    Utc.from_utc_datetime(&date.and_time(NaiveTime::MIN))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-11-27T20:00:00Z".parse().unwrap()
    }

    fn fields(date: &str, tz: &str) -> Vec<String> {
        Day::parse(date, tz, now())
            .expect_err("refused")
            .fields
            .into_iter()
            .map(|f| f.field)
            .collect()
    }

    #[test]
    fn a_day_runs_from_midnight_to_midnight_in_its_zone() {
        let day = Day::parse("2026-11-26", "Asia/Kolkata", now()).unwrap();
        assert_eq!(day.start, "2026-11-25T18:30:00Z".parse::<DateTime<Utc>>().unwrap());
        assert_eq!(day.end, "2026-11-26T18:30:00Z".parse::<DateTime<Utc>>().unwrap());
        let utc = Day::parse("", "", now()).unwrap();
        assert_eq!((utc.date.to_string(), utc.tz), ("2026-11-27".to_owned(), Tz::UTC));
        // 20:00 UTC is already the next day in Auckland.
        let auckland = Day::parse("", "Pacific/Auckland", now()).unwrap();
        assert_eq!(auckland.date.to_string(), "2026-11-28");
    }

    #[test]
    fn a_daylight_saving_day_is_23_or_25_hours() {
        let spring = Day::parse("2026-03-08", "America/New_York", now()).unwrap();
        assert_eq!(spring.end - spring.start, Duration::hours(23));
        let autumn = Day::parse("2026-11-01", "America/New_York", now()).unwrap();
        assert_eq!(autumn.end - autumn.start, Duration::hours(25));
        // Santiago moved its clocks at midnight: that day starts at 01:00.
        let skipped = Day::parse("2022-09-11", "America/Santiago", now()).unwrap();
        assert_eq!(skipped.start, "2022-09-11T04:00:00Z".parse::<DateTime<Utc>>().unwrap());
    }

    #[test]
    fn bad_dates_zones_and_future_days_are_refused() {
        assert_eq!(fields("2026-13-01", ""), ["date"]);
        assert_eq!(fields("26-11-2026", ""), ["date"]);
        assert_eq!(fields("2026-11-5", ""), ["date"]);
        for odd in [
            "-5000-1-01",
            "+2026-11-5",
            "2026-11- 5",
            "1969-12-31",
            "2026/11/05",
            "２026-11-05",
        ] {
            assert_eq!(fields(odd, ""), ["date"], "{odd}");
        }
        assert_eq!(fields("2026-11-26", "Mars/Olympus"), ["tz"]);
        assert_eq!(fields("yesterday", "utc+2"), ["tz", "date"]);
        assert_eq!(fields("2026-11-28", "UTC"), ["date"]);
        // Already the 28th in Auckland.
        assert!(Day::parse("2026-11-28", "Pacific/Auckland", now()).is_ok());
    }
}
