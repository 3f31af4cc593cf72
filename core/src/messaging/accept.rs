//! Accepting a send: in one transaction the contact is found (or created), the channel chosen, the
//! conversation found or opened, the message stored as `queued` and its delivery job written; then the call
//! answers at once. Under an idempotency key a concurrent or later repeat answers the same message: the key's
//! row commits with the message, and a repeat that loses the race rolls back everything it wrote.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sea_orm::DatabaseConnection;
use tonic::Code;

use super::{
    channel_choice::{self, Reach},
    deliver,
    idempotency::{self, Answered},
    outgoing::Outgoing,
    recipient,
};
use crate::{
    clock::Clock,
    conversations::{
        new_message::{self, NewMessage},
        threads::{self, Opening},
    },
    error::{ApiError, ApiResult},
    jobs::{self, Wake},
    routing::resolver::Inbound,
};

/// Who writes an outbound message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Author {
    Api,
    Agent,
    System,
}

impl Author {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::Agent => "agent",
            Self::System => "system",
        }
    }
}

#[derive(Clone)]
pub struct Sender {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    wake: Wake,
    /// Tries a delivery gets: the first and one per wait of the retry schedule.
    send_attempts: i32,
}

impl Sender {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, wake: Wake, send_attempts: i32) -> Self {
        Self {
            db,
            clock,
            wake,
            send_attempts,
        }
    }

    /// Accepts `outgoing` for the account: the message's answer (`message_id`, `contact_id`).
    pub async fn accept(&self, account_id: &str, outgoing: Outgoing, author: Author) -> ApiResult<Answered> {
        let now = self.clock.now();
        if let Some(key) = &outgoing.idempotency_key
            && let Some(answered) = idempotency::earlier(&self.db, account_id, key, &outgoing.fingerprint, now).await?
        {
            return Ok(answered);
        }
        match self.store(account_id, &outgoing, author, now).await? {
            Stored::Accepted(answered) => {
                self.wake.notify();
                Ok(answered)
            }
            // A concurrent request under the same key committed first: answer what it answered.
            Stored::KeyTaken(key) => idempotency::earlier(&self.db, account_id, &key, &outgoing.fingerprint, now)
                .await?
                .ok_or_else(|| ApiError::new(Code::Aborted, "aborted", "a concurrent request holds this key; retry")),
        }
    }

    async fn store(
        &self,
        account_id: &str,
        outgoing: &Outgoing,
        author: Author,
        now: DateTime<Utc>,
    ) -> ApiResult<Stored> {
        let txn = crate::store::begin_write(&self.db).await?;
        let resolved = recipient::resolve(&txn, account_id, &outgoing.recipient, &outgoing.name, now).await?;
        let reach = Reach {
            contact: &resolved.contact,
            identities: &resolved.identities,
        };
        let channel = channel_choice::choose(&txn, account_id, outgoing.channel.as_deref(), &reach).await?;
        outgoing.fits(&channel.kind)?;
        if channel.kind == "sms" && resolved.contact.opted_out {
            return Err(ApiError::new(
                Code::InvalidArgument,
                "opted_out",
                "the contact opted out of sms (they sent STOP); a START from them opts back in",
            ));
        }
        if !outgoing.reply_to.is_empty()
            && !crate::conversations::lookup::belongs_to(&txn, account_id, &outgoing.reply_to, &resolved.contact.id)
                .await?
        {
            return Err(ApiError::field("reply_to", "is not a message of this contact"));
        }
        let opening = Opening {
            inbound: Inbound::default(),
            broadcast_id: "",
            agent_id: None,
        };
        let (conversation, _) =
            threads::open_or_start(&txn, account_id, &resolved.contact.id, &channel, opening, now).await?;
        let new = NewMessage {
            conversation: &conversation,
            direction: "outbound",
            author: author.as_str(),
            text: &outgoing.text,
            attachments: &outgoing.attachments,
            status: "queued",
            provider_message_id: None,
            reply_to: &outgoing.reply_to,
            broadcast_id: "",
        };
        let message = new_message::store(&txn, new, now)
            .await?
            .ok_or_else(|| ApiError::internal("a new outbound message clashed with a stored one"))?;
        jobs::enqueue(
            &txn,
            deliver::job(account_id, &message, &channel.id, self.send_attempts, now),
            now,
        )
        .await?;
        let answered = Answered {
            message_id: message.id.clone(),
            contact_id: resolved.contact.id.clone(),
        };
        if let Some(key) = &outgoing.idempotency_key
            && !idempotency::remember(&txn, account_id, key, &outgoing.fingerprint, &answered, now).await?
        {
            txn.rollback().await?;
            return Ok(Stored::KeyTaken(key.clone()));
        }
        txn.commit().await?;
        Ok(Stored::Accepted(answered))
    }
}

enum Stored {
    Accepted(Answered),
    KeyTaken(String),
}
