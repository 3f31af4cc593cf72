//! The daily summary (`GET /v1/summaries/daily`) of an account with a million messages over 100 days, on
//! PostgreSQL + Redis, beside its floor: the guard's rate-limit script, then the summary's own
//! queries (`frontdesk_ai::summaries::daily::summary`), straight from a client, no HTTP, no gRPC. The
//! seeded rows are written by SQL, spread evenly over the days, with the account's other tables in
//! proportion (conversations, contacts, ledger entries, tasks, appointments, deals).

use chrono::{Duration as Days, Utc};
use sea_orm::{ConnectionTrait, Statement};

use crate::{
    load::Shape,
    process::ServerProcess,
    scenarios::{FloorStores, Measured, Setup, bench_account, get, measure},
};

pub const DAILY: &str = "GET /v1/summaries/daily, 1,000,000 messages over 100 days (PostgreSQL, 4 concurrent)";
pub const DAILY_FLOOR: &str = "floor: rate script + the daily summary's queries, no HTTP (4 concurrent)";
/// The day summarised: this many days ago, in this zone.
const DAYS_AGO: i64 = 50;
const TZ: &str = "Asia/Kolkata";
/// Days the seeded traffic covers.
const SPAN_DAYS: i64 = 100;

/// The figures, and the plan of the day's message counts.
pub struct Daily {
    pub measured: Vec<Measured>,
    pub plan: String,
}

pub async fn run(setup: &Setup, shape: Shape) -> anyhow::Result<Daily> {
    let messages: i64 = if shape.smoke() { 20_000 } else { 1_000_000 };
    let shape = Shape {
        concurrency: shape.concurrency.min(4),
        ..shape
    };
    let postgres = setup.postgres_database().await?;
    let serve = ServerProcess::spawn(&setup.frontdesk, &["serve"], &setup.env(&postgres, true), 2)?;
    let key = bench_account(serve.grpc.expect("grpc")).await?;
    let floor = FloorStores::connect(setup, &postgres, &key).await?;
    seed(&floor.db, &floor.account_id, messages).await?;
    let date = (Utc::now() - Days::days(DAYS_AGO)).date_naive().to_string();
    let day = frontdesk_ai::summaries::day::Day::parse(&date, TZ, Utc::now())
        .map_err(|err| anyhow::anyhow!("{}", err.message))?;
    let account = frontdesk_domain::access::AccountId::of_row(floor.account_id.as_str());
    let plan = plan(&floor.db, &account, &day).await?;

    let mut measured = Vec::new();
    let path = format!("/v1/summaries/daily?date={date}&tz={TZ}");
    let request = get(&path, Some(&key));
    let addr = serve.http.expect("http");
    measured.push(measure(DAILY, &[&serve], crate::load::http(addr, request, shape)).await?);
    let (db, now) = (floor.db.clone(), Utc::now());
    let outcome = floor
        .drive(shape, move || {
            let (db, account) = (db.clone(), account.clone());
            async move {
                frontdesk_ai::summaries::daily::summary(&db, &account, &day, now)
                    .await
                    .map(|_| ())
                    .map_err(|err| err.message)
            }
        })
        .await?;
    measured.push(Measured::floor(DAILY_FLOOR, outcome));
    drop(serve);
    setup.drop_database(&postgres).await?;
    Ok(Daily { measured, plan })
}

/// `messages` messages over `SPAN_DAYS` days, evenly, ending now; a conversation per 10 messages (half of them
/// closed an hour after they began, the rest open), a contact per 2 conversations, a ledger entry per 2 messages, a task
/// per 100, an appointment per 100, a deal per 50.
async fn seed(db: &sea_orm::DatabaseConnection, account_id: &str, messages: i64) -> anyhow::Result<()> {
    let backend = db.get_database_backend();
    let step = SPAN_DAYS as f64 * 86_400.0 / messages as f64;
    let statements: [(&str, i64); 7] = [
        (
            "INSERT INTO contacts (id, account_id, name, phone, email, tags, attributes, opted_out, recap, recap_at, \
             created_at, updated_at) \
             SELECT 'ct_' || lpad(g::text, 16, '0'), $1, 'Contact ' || g, '+1555' || lpad(g::text, 8, '0'), NULL, \
             '[]', '{}', false, '', NULL, now() - make_interval(secs => g * $3 * 20), now() \
             FROM generate_series(1, $2) AS g",
            messages / 20,
        ),
        (
            "INSERT INTO conversations (id, account_id, contact_id, channel, channel_id, channel_type, agent_id, status, \
             handoff, handoff_reason, unread_count, last_message_at, activity_bucket, broadcast_id, created_at, \
             closed_at, inbound_seq, ai_answered_seq, follow_up_seq, follow_ups_sent) \
             SELECT 'cv_' || lpad(g::text, 16, '0'), $1, 'ct_' || lpad((1 + g / 2)::text, 16, '0'), 'sms', \
             'ch_bench', 'sms', '', CASE WHEN g % 2 = 0 THEN 'closed' ELSE 'open' END, false, '', 0, now() - make_interval(secs => g * $3 * 10), 0, '', \
             now() - make_interval(secs => g * $3 * 10), \
             CASE WHEN g % 2 = 0 THEN now() - make_interval(secs => g * $3 * 10 - 3600) END, 5, 5, 0, 0 \
             FROM generate_series(1, $2) AS g",
            messages / 10,
        ),
        (
            "INSERT INTO messages (id, account_id, conversation_id, contact_id, channel_id, direction, author, text, \
             attachments, status, provider_message_id, reactions, edited, edits, removed, reply_to, broadcast_id, \
             created_at, template) \
             SELECT 'msg_' || lpad(g::text, 16, '0'), $1, 'cv_' || lpad((1 + g / 10)::text, 16, '0'), \
             'ct_' || lpad((1 + g / 20)::text, 16, '0'), 'ch_bench', \
             CASE WHEN g % 2 = 0 THEN 'inbound' ELSE 'outbound' END, \
             CASE WHEN g % 2 = 0 THEN 'contact' WHEN g % 4 = 1 THEN 'agent' ELSE 'api' END, \
             'Bench message ' || g, '[]', \
             CASE WHEN g % 2 = 0 THEN 'received' WHEN g % 50 = 1 THEN 'failed' ELSE 'delivered' END, \
             'SM' || g, '[]', false, '[]', false, '', '', now() - make_interval(secs => g * $3), '' \
             FROM generate_series(1, $2) AS g",
            messages,
        ),
        (
            "INSERT INTO credit_ledger (id, account_id, delta_milli, balance_after_milli, reason, created_at, \
             conversation_id) \
             SELECT 'led_' || lpad(g::text, 16, '0'), $1, -250, 0, 'ai_reply: model', \
             now() - make_interval(secs => g * $3 * 2), 'cv_' || lpad((1 + g / 5)::text, 16, '0') \
             FROM generate_series(1, $2) AS g",
            messages / 2,
        ),
        (
            "INSERT INTO tasks (id, account_id, title, due, status, kind, reason, contact_id, conversation_id, agent_id, \
             created_at, updated_at) \
             SELECT 'task_' || lpad(g::text, 16, '0'), $1, 'Answer the contact on sms', NULL, \
             CASE WHEN g % 3 = 0 THEN 'open' ELSE 'done' END, 'handoff', 'no_confident_answer', \
             'ct_' || lpad((1 + g * 5)::text, 16, '0'), 'cv_' || lpad((1 + g * 10)::text, 16, '0'), '', \
             now() - make_interval(secs => g * $3 * 100), now() \
             FROM generate_series(1, $2) AS g",
            messages / 100,
        ),
        (
            "INSERT INTO appointments (id, account_id, contact_id, conversation_id, agent_id, start_time, name, email, \
             notes, created_at) \
             SELECT 'apt_' || lpad(g::text, 16, '0'), $1, 'ct_' || lpad((1 + g * 5)::text, 16, '0'), \
             'cv_' || lpad((1 + g * 10)::text, 16, '0'), '', now() - make_interval(secs => g * $3 * 100 - 86400), \
             'Guest ' || g, '', 'first visit', now() - make_interval(secs => g * $3 * 100) \
             FROM generate_series(1, $2) AS g",
            messages / 100,
        ),
        (
            "INSERT INTO deals (id, account_id, title, description, company, stage, pipeline_id, value, probability, \
             priority, status, source, position, contact_id, assigned_to, tags, close_date, created_at, updated_at, \
             stage_entered_at) \
             SELECT 'deal_' || lpad(g::text, 16, '0'), $1, 'Deal ' || g, '', '', 'new', 'default', 100, 10, 'medium', \
             'open', 'ai_agent', g, 'ct_' || lpad((1 + g * 2)::text, 16, '0'), '', '[]', NULL, \
             now() - make_interval(secs => g * $3 * 50), now(), now() \
             FROM generate_series(1, $2) AS g",
            messages / 50,
        ),
    ];
    for (sql, rows) in statements {
        db.execute_raw(Statement::from_sql_and_values(
            backend,
            sql,
            [account_id.into(), rows.into(), step.into()],
        ))
        .await?;
    }
    // What autovacuum does after a load: statistics, and the visibility map an index-only scan needs.
    db.execute_unprepared("VACUUM ANALYZE").await?;
    Ok(())
}

/// `EXPLAIN ANALYZE` of the day's counts, the service's own statements.
async fn plan(
    db: &sea_orm::DatabaseConnection,
    account: &frontdesk_domain::access::AccountId,
    day: &frontdesk_ai::summaries::day::Day,
) -> anyhow::Result<String> {
    let backend = db.get_database_backend();
    let mut out = String::new();
    for (statement, _) in frontdesk_ai::summaries::daily::statements(backend, account, day) {
        let explain = Statement::from_sql_and_values(
            backend,
            format!(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {}",
                statement.sql
            ),
            statement.values.map(|v| v.0).unwrap_or_default(),
        );
        for row in db.query_all_raw(explain).await? {
            out.push_str(&row.try_get_by_index::<String>(0)?);
            out.push('\n');
        }
    }
    Ok(out)
}
