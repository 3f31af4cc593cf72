//! The inbox's coarse activity order. A conversation's exact `last_message_at` changes with every message, so
//! no index holds it: on PostgreSQL an update that changes no indexed column is heap-only (HOT) and writes no
//! index entry, where one that does writes an entry in each of the table's indexes. The indexes hold
//! `activity_bucket` instead, the five-minute window of `last_message_at`, which a conversation leaves at
//! most once per window; lists and the idle sweep bound their scans by window and order the exact times
//! within it. The window's width is fixed by the schema's backfill (migration `conversation_activity`).

use chrono::{DateTime, Utc};

/// The width of an activity window. Wider windows make more touches HOT; each list page reads at least the
/// conversations active in its newest window.
const WINDOW_SECONDS: i64 = 300;

/// The window `at` falls in: whole windows since the unix epoch.
pub fn bucket(at: DateTime<Utc>) -> i64 {
    at.timestamp().div_euclid(WINDOW_SECONDS)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn a_window_is_five_minutes_and_follows_time() {
        let start = Utc.with_ymd_and_hms(2026, 11, 25, 9, 0, 0).unwrap();
        let next = start + chrono::Duration::minutes(5);
        assert_eq!(bucket(start), start.timestamp() / 300);
        assert_eq!(bucket(start + chrono::Duration::milliseconds(299_999)), bucket(start));
        assert_eq!(bucket(next), bucket(start) + 1);
        assert!(bucket(start - chrono::Duration::milliseconds(1)) < bucket(start));
    }
}
