//! The contact a send goes to: the one named by id (404 when it is not the account's), or the one found by
//! phone, e-mail or channel identity, created (`contact.created`) when the account does not know it yet.

use chrono::{DateTime, Utc};
use sea_orm::ConnectionTrait;

use super::outgoing::{IDENTITY_TYPES, Recipient};
use crate::{
    contacts::store::{self as contacts, FoundOrCreated, NewContact},
    error::{ApiError, ApiResult},
    routing::channels::connected,
    store::entities::{contact_identities, contacts as contact_rows},
};

/// The contact with its identities, and whether this send created it.
pub struct Resolved {
    pub contact: contact_rows::Model,
    pub identities: Vec<contact_identities::Model>,
    pub created: bool,
}

pub async fn resolve(
    db: &impl ConnectionTrait,
    account_id: &str,
    recipient: &Recipient,
    name: &str,
    now: DateTime<Utc>,
) -> ApiResult<Resolved> {
    let found = match recipient {
        Recipient::Contact(id) => FoundOrCreated::Found(
            contacts::find(db, account_id, id)
                .await?
                .ok_or_else(|| ApiError::not_found("contact"))?,
        ),
        Recipient::Phone(phone) => {
            let new = NewContact {
                name: name.to_owned(),
                phone: Some(phone.clone()),
                ..NewContact::default()
            };
            contacts::find_or_create(db, account_id, new, now).await?
        }
        Recipient::Email(email) => {
            let new = NewContact {
                name: name.to_owned(),
                email: Some(email.clone()),
                ..NewContact::default()
            };
            contacts::find_or_create(db, account_id, new, now).await?
        }
        Recipient::Identity { channel, external_id } => {
            let row = connected(db, account_id, channel)
                .await?
                .ok_or_else(|| ApiError::field("channel", format!("no connected channel named `{channel}`")))?;
            if !IDENTITY_TYPES.contains(&row.kind.as_str()) || row.kind == "whatsapp" {
                return Err(ApiError::field(
                    "external_id",
                    format!("a {} channel reaches contacts by phone, not by id", row.kind),
                ));
            }
            let new = NewContact {
                name: name.to_owned(),
                identities: vec![contacts::NewIdentity {
                    kind: row.kind.clone(),
                    external_id: external_id.clone(),
                    channel: row.name.clone(),
                }],
                ..NewContact::default()
            };
            contacts::find_or_create(db, account_id, new, now).await?
        }
    };
    let (contact, created) = match found {
        FoundOrCreated::Found(contact) => (contact, false),
        FoundOrCreated::Created(contact) => (contact, true),
    };
    let identities = contacts::identities_of(db, account_id, std::slice::from_ref(&contact.id)).await?;
    Ok(Resolved {
        contact,
        identities,
        created,
    })
}
