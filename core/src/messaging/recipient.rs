//! The contact a send goes to: the one named by id (404 when it is not the account's), or the one found by
//! phone, e-mail or channel identity, created (`contact.created`) when the account does not know it yet.

use chrono::{DateTime, Utc};
use sea_orm::ConnectionTrait;

use super::outgoing::Recipient;
use crate::{
    contacts::{
        IdentityKind, NewIdentity,
        store::{self as contacts, NewContact},
    },
    error::{ApiError, ApiResult},
    routing::channels::connected,
    store::entities::{contact_identities, contacts as contact_rows},
};

/// The contact with its identities.
pub struct Resolved {
    pub contact: contact_rows::Model,
    pub identities: Vec<contact_identities::Model>,
}

pub async fn resolve(
    db: &impl ConnectionTrait,
    account_id: &str,
    recipient: &Recipient,
    name: &str,
    now: DateTime<Utc>,
) -> ApiResult<Resolved> {
    let new = match recipient {
        Recipient::Contact(id) => {
            let contact = contacts::find(db, account_id, id)
                .await?
                .ok_or_else(|| ApiError::not_found("contact"))?;
            let identities = contacts::identities(db, account_id, &contact.id).await?;
            return Ok(Resolved { contact, identities });
        }
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
            let kind = IdentityKind::parse(&row.kind)
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
