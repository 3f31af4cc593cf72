//! The accept's storage floors: what PostgreSQL and Redis on this machine allow the authenticated call and a
//! send when no service code runs, from plain clients on the engine's own database, right after the API
//! replica's send. The call's floor is the rate-limit script per request (a key verified in memory reads nothing); a
//! send's adds the rows an accept writes (its message, its delivery job, its conversation's touch) with the
//! service's own statement (`messaging::accept::queued_writes`), group-committed as the service's are
//! (`store::group_commit`, with the writers and batch size the bench's environment gives the service), to
//! the account's open conversations in turn. The send floor over
//! the call floor is the most a send's share of the call can be here with those rows, whatever the service
//! does above them; both floors' PostgreSQL CPU per request says what the rows cost the database.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use chrono::Utc;
use clap::Parser;
use frontdesk_domain::{
    conversations::new_message::{self, NewMessage},
    messaging::{accept::queued_writes, deliver},
};
use frontdesk_kernel::store::{
    entities::{conversations, messages},
    group_commit::{BatchWriter, GroupCommit},
};
use frontdesk_server::config::ConversationConfig;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};

use super::Engine;
use crate::{
    load::Shape,
    scenarios::{FloorStores, Measured, Setup, measure},
};

pub const CALL_FLOOR: &str = "engine floor: the call's storage work, no HTTP (the rate-limit script)";
pub const SEND_FLOOR: &str =
    "engine floor: a send's storage work, no HTTP (the call's + the accept's message, job and touch, group-committed)";

/// The service's conversation settings, read from the environment the bench hands its servers
/// (`FRONTDESK_MESSAGE_WRITERS`, `FRONTDESK_MESSAGE_BATCH`, `FRONTDESK_SEND_RETRY_SCHEDULE`, ...).
#[derive(clap::Parser)]
struct ServiceSettings {
    #[command(flatten)]
    conversations: ConversationConfig,
}

/// Both floors, the call's first.
pub async fn run(setup: &Setup, engine: &Engine, postgres: &str, shape: Shape) -> anyhow::Result<[Measured; 2]> {
    let settings = ServiceSettings::try_parse_from(["frontdesk"])?.conversations;
    let stores = FloorStores::connect(setup, postgres, &engine.key).await?;
    let call = measure(CALL_FLOOR, &[], stores.drive(shape, || async { Ok(()) })).await?;
    let open = conversations::Entity::find()
        .filter(conversations::Column::AccountId.eq(stores.account_id.as_str()))
        .filter(conversations::Column::Status.eq("open"))
        .order_by_asc(conversations::Column::Id)
        .all(&stores.db)
        .await?;
    anyhow::ensure!(
        open.len() >= shape.concurrency,
        "the send floor needs an open conversation per sender, as the sends left them ({} found)",
        open.len()
    );
    let rows = GroupCommit::start(
        RowsWriter {
            db: stores.db.clone(),
            open,
            send_attempts: settings.send_attempts(),
        },
        settings.message_batching(),
    );
    let turns = Arc::new(AtomicUsize::new(0));
    let send = stores.drive(shape, move || {
        let (rows, turn) = (rows.clone(), turns.fetch_add(1, Ordering::Relaxed));
        async move { rows.submit(turn).await.unwrap_or_else(|| Err("no writer".to_owned())) }
    });
    Ok([call, measure(SEND_FLOOR, &[], send).await?])
}

/// Writes a batch of sends' rows, each to the next open conversation.
struct RowsWriter {
    db: DatabaseConnection,
    open: Vec<conversations::Model>,
    send_attempts: i32,
}

#[async_trait::async_trait]
impl BatchWriter for RowsWriter {
    type Item = usize;
    type Answer = Result<(), String>;

    const KIND: &'static str = "bench floor";

    async fn write(&self, turns: Vec<usize>) -> Vec<Result<(), String>> {
        let now = Utc::now();
        let messages: Vec<messages::Model> = turns
            .iter()
            .map(|turn| {
                let message = NewMessage {
                    conversation: &self.open[turn % self.open.len()],
                    direction: messages::Direction::Outbound,
                    author: messages::Author::Api,
                    text: super::SEND_TEXT,
                    attachments: &[],
                    status: messages::MessageStatus::Queued,
                    provider_message_id: None,
                    reply_to: "",
                    broadcast_id: "",
                    template: "",
                };
                new_message::row(&message, now)
            })
            .collect();
        let jobs = messages
            .iter()
            .map(|m| deliver::job(m, &m.channel_id, self.send_attempts, now))
            .collect();
        let written = self.db.execute_raw(queued_writes(&messages, jobs, now)).await;
        let answer = written.map(|_| ()).map_err(|e| e.to_string());
        vec![answer; turns.len()]
    }
}
