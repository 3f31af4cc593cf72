//! The contact a send goes to: the one named by id (404 when it is not the account's), the visitor of a web
//! chat session of the named channel, or the one found by phone, e-mail or channel identity, created
//! (`contact.created`) when the account does not know it yet.

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};

use super::outgoing::Recipient;
use crate::{
    access::AccountId,
    contacts::{
        IdentityKind, NewIdentity,
        store::{self as contacts, NewContact},
    },
    error::{ApiError, ApiResult},
    routing::channels::connected,
    store::entities::{channels, chat_sessions, contact_identities, contacts as contact_rows},
};

/// The contact with its identities.
pub struct Resolved {
    pub contact: contact_rows::Model,
    pub identities: Vec<contact_identities::Model>,
}

pub async fn resolve(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    recipient: &Recipient,
    name: &str,
    now: DateTime<Utc>,
) -> ApiResult<Resolved> {
    let new = match recipient {
        Recipient::Contact(id) => return by_id(db, account_id, id).await,
        Recipient::Phone(phone) => NewContact {
            phone: Some(phone.clone()),
            ..NewContact::default()
        },
        Recipient::Email(email) => NewContact {
            email: Some(email.clone()),
            ..NewContact::default()
        },
        Recipient::Identity { channel, external_id } => {
            let row = connected(db, account_id, channel)
                .await?
                .ok_or_else(|| ApiError::field("channel", format!("no connected channel named `{channel}`")))?;
            if row.kind == channels::ChannelKind::Webchat {
                let contact_id = session_contact(db, &row, external_id).await?;
                return by_id(db, account_id, &contact_id).await;
            }
            let kind = IdentityKind::of_channel(row.kind)
                .filter(|kind| *kind != IdentityKind::Whatsapp)
                .ok_or_else(|| {
                    ApiError::field(
                        "external_id",
                        format!("a {} channel reaches contacts by phone, not by id", row.kind),
                    )
                })?;
            NewContact {
                identities: vec![NewIdentity {
                    kind,
                    external_id: external_id.clone(),
                    channel: row.name.clone(),
                }],
                ..NewContact::default()
            }
        }
    };
    let new = NewContact {
        name: name.to_owned(),
        ..new
    };
    let (contact, _) = contacts::find_or_create(db, account_id, new, now).await?;
    let identities = contacts::identities(db, account_id, &contact.id).await?;
    Ok(Resolved { contact, identities })
}

/// The account's contact with this id; 404 when it has none.
async fn by_id(db: &impl ConnectionTrait, account_id: &AccountId, id: &str) -> ApiResult<Resolved> {
    let contact = contacts::find(db, account_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("contact"))?;
    let identities = contacts::identities(db, account_id, &contact.id).await?;
    Ok(Resolved { contact, identities })
}

/// The contact of the visitor session `session_id` of the web chat channel `channel`: a web chat address is
/// a session of that very channel (and so of its account), never an id the caller makes up.
async fn session_contact(db: &impl ConnectionTrait, channel: &channels::Model, session_id: &str) -> ApiResult<String> {
    chat_sessions::Entity::find()
        .select_only()
        .column(chat_sessions::Column::ContactId)
        .filter(chat_sessions::Column::AccountId.eq(&channel.account_id))
        .filter(chat_sessions::Column::ChannelId.eq(&channel.id))
        .filter(chat_sessions::Column::Id.eq(session_id))
        .into_tuple()
        .one(db)
        .await?
        .ok_or_else(|| {
            ApiError::field(
                "external_id",
                format!("is not a visitor session of the web chat channel `{}`", channel.name),
            )
        })
}
