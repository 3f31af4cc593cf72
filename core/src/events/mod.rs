//! The event outbox: every change that clients may be told about writes its event here, in the same
//! transaction as the change, so an event exists exactly when its change committed. Delivery (webhooks)
//! reads from this table.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use frontdesk_api::FILE_DESCRIPTOR_SET;
use frontdesk_edge::{Naming, json_out};
use prost_reflect::{DescriptorPool, DynamicMessage};
use sea_orm::{ActiveValue::NotSet, ConnectionTrait, DbErr, EntityTrait, Set};

use crate::store::entities::event_outbox;

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

/// Every event type, with its wire name. Adding one is one line here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    DealCreated,
    DealUpdated,
    DealStageChanged,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DealCreated => "deal.created",
            Self::DealUpdated => "deal.updated",
            Self::DealStageChanged => "deal.stage_changed",
        }
    }
}

/// Writes one event for `account_id` on `db` (a transaction, so it commits with the change).
pub async fn record(
    db: &impl ConnectionTrait,
    account_id: &str,
    event: EventType,
    data: serde_json::Value,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    event_outbox::Entity::insert(event_outbox::ActiveModel {
        seq: NotSet,
        id: Set(format!("evt_{}", crate::ids::base62(20))),
        account_id: Set(account_id.to_owned()),
        event_type: Set(event.as_str().to_owned()),
        payload: Set(data.to_string()),
        created_at: Set(now),
    })
    .exec_without_returning(db)
    .await?;
    Ok(())
}
