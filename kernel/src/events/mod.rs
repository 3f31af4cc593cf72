//! The event outbox: every change that clients may be told about writes its event here, in the same
//! transaction as the change, so an event exists exactly when its change committed. The webhook dispatcher
//! (`crate::webhooks`) fans each event out to deliveries.

use std::sync::{Arc, LazyLock};

use chrono::{DateTime, Utc};
use frontdesk_api::FILE_DESCRIPTOR_SET;
use frontdesk_api::json_out::{self, Naming};
use prost_reflect::{DescriptorPool, DynamicMessage};
use sea_orm::{ActiveValue::NotSet, ConnectionTrait, DbBackend, DbErr, EntityTrait, Set, Statement, Value};

use crate::{
    store::{
        entities::event_outbox,
        wakeups::{Topic, Wakeups},
    },
    tenant::AccountId,
};

/// The contract's descriptors, for rendering payloads exactly as the REST API renders the same message.
static DESCRIPTORS: LazyLock<Option<DescriptorPool>> =
    LazyLock::new(|| DescriptorPool::decode(FILE_DESCRIPTOR_SET).ok());

/// An event's `data`: the message (`full_name`, e.g. `frontdesk.v1.Deal`) in the platform API's JSON.
pub fn payload(message: &impl prost::Message, full_name: &str) -> serde_json::Value {
    DESCRIPTORS
        .as_ref()
        .and_then(|pool| pool.get_message_by_name(full_name))
        .and_then(|descriptor| DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice()).ok())
        .map_or(serde_json::Value::Null, |dynamic| {
            json_out::to_value(&dynamic, Naming::Snake)
        })
}

macro_rules! event_types {
    ($($variant:ident => $name:literal,)*) => {
        /// Every event type of the API (README, "Events and webhooks"), with its wire name. Adding one is one line below.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum EventType {
            $($variant,)*
        }

        impl EventType {
            pub const ALL: &[EventType] = &[$(Self::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }
        }
    };
}

event_types! {
    ContactCreated => "contact.created",
    ContactUpdated => "contact.updated",
    ConversationCreated => "conversation.created",
    ConversationClosed => "conversation.closed",
    MessageReceived => "message.received",
    MessageSent => "message.sent",
    MessageDelivered => "message.delivered",
    MessageRead => "message.read",
    MessageFailed => "message.failed",
    AppointmentBooked => "appointment.booked",
    DealCreated => "deal.created",
    DealUpdated => "deal.updated",
    DealStageChanged => "deal.stage_changed",
    KbSourceReady => "kb_source.ready",
    KbSourceFailed => "kb_source.failed",
    SummaryCreated => "summary.created",
    BroadcastCompleted => "broadcast.completed",
    ConversationHandoff => "conversation.handoff",
    WebhookTest => "webhook.test",
}

impl EventType {
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|t| t.as_str() == name)
    }
}

/// Tells the webhook fan-out that events were committed, so it reads them now instead of at its next poll:
/// this process's at once, and on PostgreSQL every replica's (`Wakeups`). Only the busiest writers (arrived
/// messages) signal; every other event waits for the fan-out's next look (`FRONTDESK_WEBHOOK_POLL_INTERVAL`,
/// one read of the undispatched events' index).
#[derive(Clone, Default)]
pub struct Committed {
    local: Arc<tokio::sync::Notify>,
    across: Wakeups,
}

impl Committed {
    /// Signals that also reach, and are reached by, the other replicas.
    pub fn across(wakeups: Wakeups) -> Self {
        let local = Arc::new(tokio::sync::Notify::new());
        wakeups.forward(Topic::Events, local.clone());
        Self { local, across: wakeups }
    }

    /// Called after the commit of a transaction that wrote events.
    pub fn signal(&self) {
        self.local.notify_one();
        self.across.publish(Topic::Events);
    }

    /// Resolves at the next signal (at once if one came since the last wait).
    pub async fn wait(&self) {
        self.local.notified().await;
    }

    /// The wake-ups across replicas these signals travel on.
    pub fn wakeups(&self) -> &Wakeups {
        &self.across
    }
}

/// Writes one event for `account_id` on `db` (a transaction, so it commits with the change); the webhook
/// dispatcher fans it out to the account's subscriptions. Returns the event id.
pub async fn record(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    event: EventType,
    data: serde_json::Value,
    now: DateTime<Utc>,
) -> Result<String, DbErr> {
    insert(db, account_id, event, data, now, None).await
}

/// Writes an event that is delivered by its own delivery rows (written by the caller in the same
/// transaction) rather than fanned out, such as `webhook.test` to one subscription.
pub async fn record_directed(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    event: EventType,
    data: serde_json::Value,
    now: DateTime<Utc>,
) -> Result<String, DbErr> {
    insert(db, account_id, event, data, now, Some(now)).await
}

/// Writes several events (account, type, data) with one statement (a batch of arrived messages'
/// `message.received`, of sent messages' `message.sent`). On PostgreSQL the events are one array per column,
/// so the statement reads the same for any number of them and its plan is reused.
pub async fn record_all(
    db: &impl ConnectionTrait,
    events: Vec<(AccountId, EventType, serde_json::Value)>,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    if events.is_empty() {
        return Ok(());
    }
    if db.get_database_backend() != DbBackend::Postgres {
        let rows = events
            .into_iter()
            .map(|(account_id, event, data)| row(new_id(), &account_id, event, data, now, None));
        event_outbox::Entity::insert_many(rows)
            .exec_without_returning(db)
            .await?;
        return Ok(());
    }
    const SQL: &str = "INSERT INTO event_outbox (id, account_id, event_type, payload, created_at) \
        SELECT id, account_id, event_type, payload, $5 \
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY \
        AS new(id, account_id, event_type, payload, position) ORDER BY position";
    let n = events.len();
    let (mut ids, mut accounts, mut types, mut payloads) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for (account_id, event, data) in events {
        ids.push(new_id());
        accounts.push(account_id.to_string());
        types.push(event.as_str().to_owned());
        payloads.push(data.to_string());
    }
    let values: Vec<Value> = vec![ids.into(), accounts.into(), types.into(), payloads.into(), now.into()];
    db.execute_raw(Statement::from_sql_and_values(DbBackend::Postgres, SQL, values))
        .await?;
    Ok(())
}

async fn insert(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    event: EventType,
    data: serde_json::Value,
    now: DateTime<Utc>,
    dispatched_at: Option<DateTime<Utc>>,
) -> Result<String, DbErr> {
    let id = new_id();
    event_outbox::Entity::insert(row(id.clone(), account_id, event, data, now, dispatched_at))
        .exec_without_returning(db)
        .await?;
    Ok(id)
}

fn new_id() -> String {
    crate::ids::new_id(crate::ids::Kind::Event)
}

fn row(
    id: String,
    account_id: &AccountId,
    event: EventType,
    data: serde_json::Value,
    now: DateTime<Utc>,
    dispatched_at: Option<DateTime<Utc>>,
) -> event_outbox::ActiveModel {
    event_outbox::ActiveModel {
        seq: NotSet,
        id: Set(id.into()),
        account_id: Set(account_id.clone()),
        event_type: Set(event.as_str().to_owned()),
        payload: Set(data.to_string()),
        created_at: Set(now),
        dispatched_at: Set(dispatched_at),
    }
}

#[cfg(test)]
mod tests {
    use super::EventType;

    #[test]
    fn names_parse_back() {
        for event in EventType::ALL {
            assert_eq!(EventType::parse(event.as_str()), Some(*event));
        }
        assert_eq!(EventType::parse("deal.deleted"), None);
    }
}
