//! Knowledge for the tests: sources and FAQs written straight into the database (for tests of retrieval
//! that need no import), and document uploads (`multipart/form-data` bodies, the fixtures of
//! `tests/fixtures/kb`).

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

/// One part of a `multipart/form-data` body: a text part, or a file part with a file name and content type.
pub struct Part<'a> {
    pub name: &'a str,
    /// `(file name, content type)` of a file part.
    pub file: Option<(&'a str, &'a str)>,
    pub data: Vec<u8>,
}

impl<'a> Part<'a> {
    pub fn text(name: &'a str, value: &str) -> Self {
        Self {
            name,
            file: None,
            data: value.as_bytes().to_vec(),
        }
    }

    pub fn file(name: &'a str, file_name: &'a str, content_type: &'a str, data: Vec<u8>) -> Self {
        Self {
            name,
            file: Some((file_name, content_type)),
            data,
        }
    }
}

/// The `multipart/form-data` body of `parts` and its content type.
pub fn multipart(parts: &[Part<'_>]) -> (Vec<u8>, String) {
    let boundary = "frontdesk-test-boundary-7MA4YWxkTrZu0gW";
    let mut body = Vec::new();
    for part in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match part.file {
            Some((file_name, content_type)) => body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{}\"; filename=\"{file_name}\"\r\nContent-Type: {content_type}\r\n\r\n",
                    part.name
                )
                .as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{}\"\r\n\r\n", part.name).as_bytes(),
            ),
        }
        body.extend_from_slice(&part.data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (body, format!("multipart/form-data; boundary={boundary}"))
}

/// `POST /v1/kb-sources/file` with `parts`, as the account of `key`.
pub async fn upload(server: &crate::Server, key: &str, parts: &[Part<'_>]) -> crate::Answer {
    let (body, content_type) = multipart(parts);
    let response = crate::http_client()
        .post(server.url("/v1/kb-sources/file"))
        .header("x-api-key", key)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("upload sent");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    crate::Answer {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
    }
}

/// A file of `tests/fixtures/kb`.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/fixtures/kb/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Polls the source until `done` says so (30 s at most); its last state.
pub async fn poll_until(
    api: &crate::platform::Platform<'_>,
    source: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let kb_source = api.ok("GET", &format!("/v1/kb-sources/{source}"), None).await["kb_source"].clone();
        if done(&kb_source) {
            return kb_source;
        }
        assert!(tokio::time::Instant::now() < deadline, "still {kb_source}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The source once its import ended (`ready` or `failed`).
pub async fn finished(api: &crate::platform::Platform<'_>, source: &str) -> serde_json::Value {
    poll_until(api, source, |s| s["status"] == "ready" || s["status"] == "failed").await
}

/// The account's credit balance, as the admin service reads it.
pub async fn balance(server: &crate::Server, account_id: &str) -> f64 {
    let request = frontdesk_api::admin::v1::GetAccountRequest {
        account_id: account_id.to_owned(),
    };
    crate::admin::client(server)
        .await
        .get_account(request)
        .await
        .unwrap()
        .into_inner()
        .credit_balance
}
