//! When failed work is tried again (webhook deliveries, jobs): a configured schedule, each wait +-20% so retries
//! of many spread out, and a receiver's `Retry-After` honoured up to twice the scheduled wait.

use std::time::Duration;

use rand::Rng;

#[derive(Clone, Debug)]
pub struct RetrySchedule {
    waits: Vec<Duration>,
}

impl RetrySchedule {
    pub fn new(waits: Vec<Duration>) -> Self {
        Self { waits }
    }

    /// The wait after failed attempt number `attempt` (1-based), or `None` when retries are used up.
    /// `retry_after` is the receiver's request; it may lengthen the wait, never beyond twice the schedule.
    pub fn wait_after(&self, attempt: i32, retry_after: Option<Duration>) -> Option<Duration> {
        let scheduled = *self.waits.get(usize::try_from(attempt).ok()?.checked_sub(1)?)?;
        let jittered = scheduled.mul_f64(rand::rng().random_range(0.8..=1.2));
        Some(match retry_after {
            Some(asked) => asked.max(jittered).min(scheduled * 2),
            None => jittered,
        })
    }
}

/// The wait an answer's `Retry-After` header asks for, the one reading of it for every outside call. Its
/// HTTP-date form is the server's wall clock, so it is compared with this machine's (never a test clock).
pub fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    parse_retry_after(value, chrono::Utc::now())
}

/// A `Retry-After` value: seconds, or an HTTP date (the wait from `now` until then).
fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    (at.with_timezone(&chrono::Utc) - now).to_std().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule() -> RetrySchedule {
        RetrySchedule::new(vec![Duration::from_secs(5), Duration::from_secs(300)])
    }

    #[test]
    fn waits_follow_the_schedule_with_jitter() {
        for _ in 0..100 {
            let first = schedule().wait_after(1, None).unwrap();
            assert!(
                first >= Duration::from_secs(4) && first <= Duration::from_secs(6),
                "{first:?}"
            );
            let second = schedule().wait_after(2, None).unwrap();
            assert!(second >= Duration::from_secs(240) && second <= Duration::from_secs(360));
        }
        assert_eq!(schedule().wait_after(3, None), None);
        assert_eq!(schedule().wait_after(0, None), None);
    }

    #[test]
    fn retry_after_lengthens_up_to_twice_the_schedule() {
        let long = schedule().wait_after(1, Some(Duration::from_secs(3600))).unwrap();
        assert_eq!(long, Duration::from_secs(10));
        let asked = schedule().wait_after(2, Some(Duration::from_secs(500))).unwrap();
        assert_eq!(asked, Duration::from_secs(500));
        let short = schedule().wait_after(1, Some(Duration::ZERO)).unwrap();
        assert!(short >= Duration::from_secs(4));
    }

    #[test]
    fn retry_after_forms() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
            .unwrap()
            .to_utc();
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(
            parse_retry_after("Sun, 22 Nov 2026 10:01:00 GMT", now),
            Some(Duration::from_secs(60))
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after(" 5 ", now), Some(Duration::from_secs(5)));
    }

    #[test]
    fn reads_the_header() {
        let headers = |value: &str| http::HeaderMap::from_iter([(http::header::RETRY_AFTER, value.parse().unwrap())]);
        assert_eq!(retry_after(&headers("5")), Some(Duration::from_secs(5)));
        let later = (chrono::Utc::now() + chrono::Duration::seconds(120)).to_rfc2822();
        let wait = retry_after(&headers(&later)).unwrap();
        assert!(
            wait > Duration::from_secs(100) && wait <= Duration::from_secs(120),
            "{wait:?}"
        );
        assert_eq!(retry_after(&http::HeaderMap::new()), None);
    }
}
