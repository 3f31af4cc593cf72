//! Storing a message that arrived from a contact, in one transaction: the contact (created from the sender's
//! phone or channel id when new), sms opt-out keywords, the open conversation (opened with the agent routing
//! picks from the first text and referral), the message (once per provider message id: a provider's retry
//! stores nothing new), the conversation's unread count and latest activity, and `message.received`.

use chrono::{DateTime, Utc};
use sea_orm::DatabaseConnection;

use super::{
    lookup,
    new_message::{self, NewMessage},
    render,
    threads::{self, Opening},
};
use crate::{
    channels::{InboundMessage, Sender},
    contacts::{
        E164Phone, IdentityKind, NewIdentity,
        store::{self as contacts, NewContact},
    },
    error::{ApiError, ApiResult},
    events::{self, EventType},
    routing::resolver::Inbound,
    store::entities::{channels, messages},
};

use super::render::StoredAttachment;

/// Keywords that opt a contact out of sms, and back in (carriers' standard set; matched on the whole text).
const STOP_WORDS: &[&str] = &["STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT"];
const START_WORDS: &[&str] = &["START", "UNSTOP", "YES"];

/// The stored message, or `None` when the provider's message id was stored before (a retry).
pub async fn receive(
    db: &DatabaseConnection,
    channel: &channels::Model,
    inbound: &InboundMessage,
    now: DateTime<Utc>,
) -> ApiResult<Option<messages::Model>> {
    let provider_message_id = without_nul(&inbound.provider_message_id);
    if lookup::by_provider_id(db, &channel.id, &provider_message_id)
        .await?
        .is_some()
    {
        return Ok(None);
    }
    let account_id = channel.account_id.as_str();
    let txn = crate::store::begin_write(db).await?;
    let new = match &inbound.sender {
        Sender::Phone(phone) => NewContact {
            name: without_nul(&inbound.sender_name),
            phone: Some(E164Phone::parse(phone).ok_or_else(|| ApiError::field("From", "is not an E.164 number"))?),
            ..NewContact::default()
        },
        Sender::Identity { kind, external_id } => NewContact {
            name: without_nul(&inbound.sender_name),
            identities: vec![NewIdentity {
                kind: IdentityKind::parse(kind)
                    .ok_or_else(|| ApiError::internal("an adapter named an unknown identity kind"))?,
                external_id: external_id.clone(),
                channel: channel.name.clone(),
            }],
            ..NewContact::default()
        },
    };
    let (contact, _) = contacts::find_or_create(&txn, account_id, new, now).await?;
    if channel.kind == "sms" {
        let word = inbound.text.trim().to_uppercase();
        if STOP_WORDS.contains(&word.as_str()) && !contact.opted_out {
            contacts::set_opted_out(&txn, account_id, &contact.id, true, now).await?;
        } else if START_WORDS.contains(&word.as_str()) && contact.opted_out {
            contacts::set_opted_out(&txn, account_id, &contact.id, false, now).await?;
        }
    }
    let opening = Opening {
        inbound: Inbound {
            text: &inbound.text,
            referral: &inbound.referral,
            url: "",
        },
        broadcast_id: "",
        agent_id: None,
    };
    let (conversation, _) = threads::open_or_start(&txn, account_id, &contact.id, channel, opening, now).await?;
    // No database stores U+0000 in text (PostgreSQL refuses it): a provider's text never fails the store.
    let attachments: Vec<StoredAttachment> = inbound
        .attachments
        .iter()
        .map(|a| StoredAttachment {
            url: without_nul(&a.url),
            content_type: without_nul(&a.content_type),
            filename: without_nul(&a.filename),
        })
        .collect();
    let text = without_nul(&inbound.text);
    let new = NewMessage {
        conversation: &conversation,
        direction: "inbound",
        author: "contact",
        text: &text,
        attachments: &attachments,
        status: "received",
        provider_message_id: Some(&provider_message_id),
        reply_to: "",
        broadcast_id: "",
    };
    let Some(message) = new_message::store(&txn, new, now).await? else {
        // The same provider message arrived twice at once; the other request stored it.
        txn.rollback().await?;
        return Ok(None);
    };
    events::record(
        &txn,
        account_id,
        EventType::MessageReceived,
        render::message_data(&message),
        now,
    )
    .await?;
    txn.commit().await?;
    Ok(Some(message))
}

fn without_nul(text: &str) -> String {
    text.replace('\0', "")
}
