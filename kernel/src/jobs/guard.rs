//! The claim guard: the one check every effect outside the database (a provider send or signal, a webhook
//! attempt, a model, tool or MCP call, a page fetch) goes through right before it is made. The engine runs
//! each handler with its claim in scope; `before_effect` passes when the claim is surely still this worker's
//! and stops the run there when it is not, so a worker that was paused past its lease, whose job was taken
//! over or cancelled, or that is shutting down makes no call another worker will make again. Code run
//! outside the engine (a request) has no claim and passes.
//!
//! The check: the run was not told to stop; the lease was renewed recently enough that no other worker can
//! have taken the row (monotonic time, so a pause counts); past the drain cutoff no effect starts; and the
//! row still carries the claim in the database (pending, same token), read by a confirmer that asks for all
//! the checks waiting at once in one statement, so a cancel that returned stops every effect after it.

use std::{collections::HashMap, future::Future, sync::Arc};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use tokio::sync::{mpsc, oneshot};

use super::{
    queue::{STILL_PENDING, Table},
    running::Lease,
};
use crate::store::sql::one_of_text;

/// Checks answered per statement at most.
const BATCH: usize = 500;

tokio::task_local! {
    static CLAIM: Lease;
}

/// Runs `run` with `lease` as the claim its effects are guarded by.
pub(super) async fn scoped<F: Future>(lease: Lease, run: F) -> F::Output {
    CLAIM.scope(lease, run).await
}

/// Call right before an effect outside the database. Returns when the effect may be made; when the run's
/// claim is no longer surely held, or the drain cutoff passed, the run is stopped here and never resumes.
pub async fn before_effect() {
    let Ok(lease) = CLAIM.try_with(Lease::clone) else {
        return;
    };
    if let Err(reason) = lease.confirm().await {
        lease.refuse(reason);
        // The engine drops the run at this await: its stop signal was just sent.
        std::future::pending::<()>().await;
    }
}

/// One check waiting for the database: the row, the claim's token, and where the answer goes.
struct Ask {
    id: String,
    token: i64,
    answer: oneshot::Sender<bool>,
}

/// Asks the database whether rows still carry their claims, many at once.
#[derive(Clone)]
pub struct Confirmer(mpsc::UnboundedSender<Ask>);

impl Confirmer {
    /// Starts the confirmer of `table`; it ends when every handle is dropped.
    pub fn spawn(db: DatabaseConnection, table: &'static Table) -> Self {
        let (asks, received) = mpsc::unbounded_channel();
        tokio::spawn(confirm_loop(db, table, received));
        Self(asks)
    }

    /// Whether row `id` is pending and still carries `token`; false when the database cannot tell.
    pub async fn holds(&self, id: &str, token: i64) -> bool {
        let (answer, answered) = oneshot::channel();
        let ask = Ask {
            id: id.to_owned(),
            token,
            answer,
        };
        if self.0.send(ask).is_err() {
            return false;
        }
        answered.await.unwrap_or(false)
    }
}

async fn confirm_loop(db: DatabaseConnection, table: &'static Table, mut received: mpsc::UnboundedReceiver<Ask>) {
    while let Some(first) = received.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match received.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let held = match claims(&db, table, &batch).await {
            Ok(held) => held,
            Err(err) => {
                tracing::warn!(table = table.name, error = %err, "confirming claims failed; the effects wait for the next run");
                HashMap::new()
            }
        };
        for ask in batch {
            let holds = held.get(&ask.id) == Some(&ask.token);
            let _ = ask.answer.send(holds);
        }
    }
}

/// The claim tokens of the pending rows among the batch's.
async fn claims(db: &DatabaseConnection, table: &Table, batch: &[Ask]) -> Result<HashMap<String, i64>, sea_orm::DbErr> {
    let ids = batch.iter().map(|a| a.id.clone()).collect();
    let rows = db
        .query_all_raw(confirm_statement(db.get_database_backend(), table, ids))
        .await?;
    let mut held = HashMap::with_capacity(rows.len());
    for row in rows {
        if let Some(token) = row.try_get_by_index::<Option<i64>>(1)? {
            held.insert(row.try_get_by_index(0)?, token);
        }
    }
    Ok(held)
}

/// The read of `ids`' claim tokens, by primary key only: a condition on `claim_token` or a plain one on
/// `status` lets the planner pick a partial index and walk all of it.
pub(super) fn confirm_statement(backend: DbBackend, table: &Table, ids: Vec<String>) -> Statement {
    let (which, values) = one_of_text(backend, "id", 1, ids);
    let sql = format!(
        "SELECT id, claim_token FROM {} WHERE {which} AND {STILL_PENDING}",
        table.name
    );
    Statement::from_sql_and_values(backend, sql, values)
}

/// The fence of one claimed row, for its lease: which row and claim to confirm, and with whom.
#[derive(Clone)]
pub struct Fence {
    pub id: String,
    pub token: i64,
    pub confirmer: Arc<Confirmer>,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence")
            .field("id", &self.id)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}
