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
    use sea_orm::{ConnectionTrait, EntityTrait, QueryOrder, Statement};

    use super::*;
    use crate::store::{
        self,
        entities::conversations,
        test_databases::{self, Kind, TestDb},
    };

    /// Conversations stored before the window existed, with times as the service writes them (the driver's
    /// own encoding of a `DateTime<Utc>`), get the window of their `last_message_at` from the migration.
    async fn the_migration_backfills_each_conversations_window(kind: Kind) {
        let test = TestDb::unmigrated(kind, 1).await;
        let db = &test.db;
        test_databases::migrate_before(db, "m20261125_000050_conversation_activity").await;
        let times = [
            Utc.with_ymd_and_hms(2026, 11, 25, 9, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2026, 11, 25, 9, 4, 59).unwrap() + chrono::Duration::microseconds(999_999),
            Utc.with_ymd_and_hms(2026, 11, 25, 9, 5, 0).unwrap() + chrono::Duration::milliseconds(1),
        ];
        for (n, at) in times.iter().enumerate() {
            let sql = "INSERT INTO conversations (id, account_id, contact_id, channel, channel_id, channel_type, \
                       agent_id, status, handoff, handoff_reason, unread_count, last_message_at, broadcast_id, \
                       created_at) VALUES ($1, 'acc_1', $1, 'sms', 'ch_1', 'sms', '', 'open', false, '', 0, $2, '', $2)";
            let backend = db.get_database_backend();
            let sql = match backend {
                sea_orm::DbBackend::Postgres => sql.to_owned(),
                _ => sql.replace('$', "?"),
            };
            let values = vec![format!("cv_{n}").into(), (*at).into()];
            let statement = Statement::from_sql_and_values(backend, sql, values);
            db.execute_raw(statement).await.unwrap();
        }
        store::migrate(db).await.unwrap();
        let rows = conversations::Entity::find()
            .order_by_asc(conversations::Column::Id)
            .all(db)
            .await
            .unwrap();
        let windows: Vec<i64> = rows.iter().map(|row| row.activity_bucket).collect();
        let expected: Vec<i64> = times.iter().map(|at| bucket(*at)).collect();
        assert_eq!(windows, expected);
        assert_eq!(expected[0], expected[1], "the same window");
        assert_eq!(expected[2], expected[1] + 1, "the next window");
        test.remove().await;
    }

    frontdesk_kernel::on_both_kinds!(the_migration_backfills_each_conversations_window);

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
