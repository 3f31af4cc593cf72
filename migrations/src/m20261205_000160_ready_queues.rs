//! The ready queues: one row per queue of the work-queue tables (`jobs`, `webhook_deliveries`) that may
//! have pending rows, with when it is next ready (`ready_ms`), so a claim reads the queues that are due
//! and nothing else, however many queues wait for later. The database keeps them from every write:
//!
//! - On PostgreSQL a write that makes a row due (an insert, a release, a retry sooner than its lease's end,
//!   a failed job retried) appends a wake to `job_queue_wakes` from a trigger: an insert with no unique key,
//!   so writers never wait for one another or for a claim. Claims fold the wakes into `job_queues`
//!   (`woken` counts the folds, so a claim that recomputes a queue's time leaves it alone when a wake
//!   arrived after it read it).
//! - On SQLite, with one writer at a time, the trigger updates `job_queues` directly.
//!
//! Queues ready at the same moment go in the order of `tie`, a draw made when the queue was last made
//! ready, so no key order (account ids) wins ties. A claim moves a queue it served to the back of the line
//! (`ready_ms` = now, or its next waiting row if later) and deletes the row of a queue with no waiting
//! rows: running rows keep no queue ready. A run whose worker died is found from its own index
//! (`*_running`: pending rows with a claim, by due time, so by lease end), which holds only the rows
//! running now.

use sea_orm_migration::{prelude::*, sea_orm::DbBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// A random 64-bit number on PostgreSQL (SQLite's `random()` is one).
const RANDOM_POSTGRES: &str = "((random() - 0.5) * 1.8e19)::int8";

/// A work-queue table's columns, as the triggers read them (`class` and `kind` are constants where the
/// table has none).
struct Queued {
    table: &'static str,
    due: &'static str,
    class: &'static str,
    lane: &'static str,
    kind: &'static str,
}

const TABLES: [Queued; 2] = [
    Queued {
        table: "jobs",
        due: "run_at_ms",
        class: "class",
        lane: "lane",
        kind: "kind",
    },
    Queued {
        table: "webhook_deliveries",
        due: "next_attempt_ms",
        class: "0",
        lane: "webhook_id",
        kind: "''",
    },
];

/// `column` of the row `row` (`NEW`), or the constant that stands for it.
fn of(row: &str, column: &str) -> String {
    if column.starts_with(|c: char| c.is_ascii_alphabetic()) {
        format!("{row}.{column}")
    } else {
        column.to_owned()
    }
}

/// The rows an update made waiting: pending and not claimed now, and before either not pending, claimed
/// (a retry, a release, a run marked to run again) or due later.
fn made_due(q: &Queued) -> String {
    format!(
        "NEW.status = 'pending' AND NEW.claim_token IS NULL AND (OLD.status <> 'pending' \
         OR OLD.claim_token IS NOT NULL OR NEW.{due} < OLD.{due})",
        due = q.due
    )
}

fn postgres(q: &Queued) -> Vec<String> {
    let t = q.table;
    let key = |row: &str| {
        format!(
            "{}, {row}.account_id, {}, {}",
            of(row, q.class),
            of(row, q.lane),
            of(row, q.kind)
        )
    };
    vec![
        format!(
            "CREATE FUNCTION {t}_inserted_wake() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             INSERT INTO job_queue_wakes (tbl, class, account_id, lane, kind, due_ms) \
             SELECT '{t}', {key}, min(n.{due}) FROM new_rows AS n WHERE n.status = 'pending' \
             AND n.claim_token IS NULL GROUP BY 2, 3, 4, 5; \
             RETURN NULL; END $$",
            key = key("n"),
            due = q.due
        ),
        format!(
            "CREATE TRIGGER {t}_inserted_wake AFTER INSERT ON {t} REFERENCING NEW TABLE AS new_rows \
             FOR EACH STATEMENT EXECUTE FUNCTION {t}_inserted_wake()"
        ),
        format!(
            "CREATE FUNCTION {t}_updated_wake() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             INSERT INTO job_queue_wakes (tbl, class, account_id, lane, kind, due_ms) \
             VALUES ('{t}', {key}, NEW.{due}); RETURN NULL; END $$",
            key = key("NEW"),
            due = q.due
        ),
        format!(
            "CREATE TRIGGER {t}_updated_wake AFTER UPDATE ON {t} FOR EACH ROW WHEN ({}) \
             EXECUTE FUNCTION {t}_updated_wake()",
            made_due(q)
        ),
    ]
}

fn sqlite(q: &Queued) -> Vec<String> {
    let t = q.table;
    let upsert = format!(
        "INSERT INTO job_queues (tbl, class, account_id, lane, kind, ready_ms, woken, tie) \
         VALUES ('{t}', {}, NEW.account_id, {}, {}, NEW.{due}, 0, random()) \
         ON CONFLICT (tbl, class, account_id, lane, kind) DO UPDATE SET \
         ready_ms = min(job_queues.ready_ms, excluded.ready_ms), woken = job_queues.woken + 1;",
        of("NEW", q.class),
        of("NEW", q.lane),
        of("NEW", q.kind),
        due = q.due
    );
    vec![
        format!(
            "CREATE TRIGGER {t}_inserted_wake AFTER INSERT ON {t} WHEN NEW.status = 'pending' AND NEW.claim_token IS NULL BEGIN {upsert} END"
        ),
        format!(
            "CREATE TRIGGER {t}_updated_wake AFTER UPDATE ON {t} WHEN {} BEGIN {upsert} END",
            made_due(q)
        ),
    ]
}

/// The queues that have waiting rows now, with their earliest due time.
fn backfill(q: &Queued, random: &str) -> String {
    let key = format!("{}, account_id, {}, {}", q.class, q.lane, q.kind);
    format!(
        "INSERT INTO job_queues (tbl, class, account_id, lane, kind, ready_ms, woken, tie) \
         SELECT '{t}', {key}, min({due}), 0, {random} FROM {t} WHERE status = 'pending' \
         AND claim_token IS NULL GROUP BY 2, 3, 4, 5",
        t = q.table,
        due = q.due
    )
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let backend = manager.get_database_backend();
        let mut statements = vec![
            "CREATE TABLE job_queues (tbl TEXT NOT NULL, class INTEGER NOT NULL, account_id TEXT NOT NULL, \
             lane TEXT NOT NULL, kind TEXT NOT NULL, ready_ms BIGINT NOT NULL, woken BIGINT NOT NULL, \
             tie BIGINT NOT NULL, PRIMARY KEY (tbl, class, account_id, lane, kind))"
                .to_owned(),
            "CREATE INDEX job_queues_ready ON job_queues (tbl, class, ready_ms, tie)".to_owned(),
        ];
        if backend == DbBackend::Postgres {
            statements.push(
                "CREATE TABLE job_queue_wakes (tbl TEXT NOT NULL, class INTEGER NOT NULL, account_id TEXT NOT NULL, \
                 lane TEXT NOT NULL, kind TEXT NOT NULL, due_ms BIGINT NOT NULL)"
                    .to_owned(),
            );
            // The fold reads a table's wakes by this index: a plan with no sequential scan, however the
            // session's planner is set (with sequential scans costed away and JIT on, the fold was compiled
            // on every claim).
            statements.push("CREATE INDEX job_queue_wakes_tbl ON job_queue_wakes (tbl)".to_owned());
        }
        for q in &TABLES {
            statements.push(format!(
                "CREATE INDEX {t}_running ON {t} ({due}) WHERE status = 'pending' AND claim_token IS NOT NULL",
                t = q.table,
                due = q.due
            ));
            statements.push(backfill(
                q,
                match backend {
                    DbBackend::Postgres => RANDOM_POSTGRES,
                    _ => "random()",
                },
            ));
            statements.extend(match backend {
                DbBackend::Postgres => postgres(q),
                _ => sqlite(q),
            });
        }
        for sql in statements {
            db.execute_unprepared(&sql).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let backend = manager.get_database_backend();
        for q in &TABLES {
            let t = q.table;
            db.execute_unprepared(&format!("DROP INDEX {t}_running")).await?;
            for event in ["inserted", "updated"] {
                db.execute_unprepared(&format!(
                    "DROP TRIGGER {t}_{event}_wake{}",
                    match backend {
                        DbBackend::Postgres => format!(" ON {t}"),
                        _ => String::new(),
                    }
                ))
                .await?;
                if backend == DbBackend::Postgres {
                    db.execute_unprepared(&format!("DROP FUNCTION {t}_{event}_wake()"))
                        .await?;
                }
            }
        }
        if backend == DbBackend::Postgres {
            db.execute_unprepared("DROP TABLE job_queue_wakes").await?;
        }
        db.execute_unprepared("DROP TABLE job_queues").await?;
        Ok(())
    }
}
