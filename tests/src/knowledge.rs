//! Knowledge written straight into the database: the import endpoints that will make sources and their
//! FAQs are not built yet.

use chrono::TimeZone;
use sea_orm::{ConnectionTrait, Statement, Value};

use crate::Db;

/// Runs one statement with `$n` placeholders (SQLite reads them too).
async fn execute(db: &Db, sql: &str, values: Vec<Value>) {
    let conn = db.connect().await;
    conn.execute_raw(Statement::from_sql_and_values(conn.get_database_backend(), sql, values))
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    conn.close().await.ok();
}

fn seeded_at() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap()
}

/// A ready knowledge source of the account.
pub async fn seed_kb_source(db: &Db, account_id: &str, source_id: &str) {
    let sql = "INSERT INTO kb_sources (id, account_id, kind, status, pages_total, pages_done, sections, faqs_created, \
               credits_used_milli, error, created_at, updated_at) \
               VALUES ($1, $2, 'url', 'ready', 3, 3, 12, 4, 150, NULL, $3, $4)";
    let at = seeded_at();
    execute(db, sql, vec![source_id.into(), account_id.into(), at.into(), at.into()]).await;
}

/// A FAQ of a source, as its import will write it.
pub async fn seed_source_faq(db: &Db, account_id: &str, source_id: &str, faq_id: &str, question: &str, answer: &str) {
    let sql = "INSERT INTO source_faqs (id, account_id, source_id, position, question, answer, created_at, updated_at) \
               VALUES ($1, $2, $3, 0, $4, $5, $6, $7)";
    let at = seeded_at();
    let values = vec![
        faq_id.into(),
        account_id.into(),
        source_id.into(),
        question.into(),
        answer.into(),
        at.into(),
        at.into(),
    ];
    execute(db, sql, values).await;
}

/// Deletes a source, as its DELETE will.
pub async fn delete_kb_source(db: &Db, source_id: &str) {
    execute(db, "DELETE FROM kb_sources WHERE id = $1", vec![source_id.into()]).await;
}
