//! Changes to a message after it was written. A correction replaces an outbound message's text and keeps the
//! old one in `edits`; where the channel cannot edit a sent message (sms, whatsapp, messenger, instagram) a
//! `Correction: <text>` message follows through the send pipeline, while web chat shows the edit itself. A
//! removal erases text and attachments from storage (a message not yet handed to the provider is not sent).
//! A reaction is the caller's one emoji on the message, stored, and passed on to the providers that show
//! reactions (`provider_signal` job). The contract has no event for any of them.

use std::sync::Arc;

use frontdesk_api::v1::{CorrectMessageRequest, SendMessageRequest};
use sea_orm::{
    ActiveEnum, ActiveModelTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, EntityTrait,
    IntoActiveModel, QuerySelect,
};

use super::{accept::Sender, deliver, emoji::Emoji, outgoing::Outgoing};
use crate::{
    access::AccountId,
    channels::{
        live_feed::{Change, Feed},
        signals::{self, Action},
    },
    clock::Clock,
    conversations::{
        lookup,
        render::{StoredEdit, StoredReaction},
    },
    error::{ApiError, ApiResult},
    jobs,
    store::{
        entities::{
            channels::{self, ChannelKind},
            conversations, messages,
        },
        from_json_text, to_json_text,
    },
};

/// Channel types whose providers cannot edit a message once sent: a correction goes out as a new message.
const RESENT_ON: [ChannelKind; 4] = [
    ChannelKind::Sms,
    ChannelKind::Whatsapp,
    ChannelKind::Messenger,
    ChannelKind::Instagram,
];
const CORRECTION_PREFIX: &str = "Correction: ";

#[derive(Clone)]
pub struct Edits {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    sender: Sender,
    feed: Feed,
}

impl Edits {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, sender: Sender, feed: Feed) -> Self {
        Self {
            db,
            clock,
            sender,
            feed,
        }
    }

    /// `PATCH /v1/messages/{id}`: the message with its new text. The correction message, when one is due, is
    /// accepted first: a send that cannot go out (an opted-out contact, a disconnected channel) changes
    /// nothing.
    pub async fn correct(&self, account_id: &AccountId, r: CorrectMessageRequest) -> ApiResult<messages::Model> {
        let message = lookup::message(&self.db, account_id, &r.message_id)
            .await?
            .ok_or_else(not_found)?;
        correctable(&message)?;
        let conversation = lookup::conversation(&self.db, account_id, &message.conversation_id)
            .await?
            .ok_or_else(not_found)?;
        // The new text is checked as a send's text on this channel.
        send_on(&conversation, &message, r.text.clone())?;
        if r.text == message.text {
            return Ok(message);
        }
        if r.resend.unwrap_or(true) && RESENT_ON.contains(&conversation.channel_type) {
            let text = format!("{CORRECTION_PREFIX}{}", r.text);
            let correction = send_on(&conversation, &message, text).map_err(|_| {
                let kind = &conversation.channel_type;
                let problem = format!(
                    "with `{CORRECTION_PREFIX}` before it the correction is too long for this {kind} channel; \
                     shorten it or set resend to false"
                );
                ApiError::field("text", problem)
            })?;
            self.sender
                .accept(account_id, correction, messages::Author::Api)
                .await?;
        }
        self.rewrite(account_id, &message.id, r.text).await
    }

    /// Replaces the message's text with `text`, the old one going to `edits`.
    async fn rewrite(&self, account_id: &AccountId, message_id: &str, text: String) -> ApiResult<messages::Model> {
        let (txn, mut message) = self.locked(account_id, message_id).await?;
        // Removed while the correction was being sent.
        correctable(&message)?;
        let mut edits: Vec<StoredEdit> = from_json_text(&message.edits);
        edits.push(StoredEdit {
            text: std::mem::replace(&mut message.text, text),
            edited_at: self.clock.now(),
        });
        message.edits = to_json_text(&edits);
        message.edited = true;
        message.revised_at = Some(self.clock.now());
        let saved = save(txn, message).await?;
        self.feed.message_changed(&saved, Change::Updated).await;
        Ok(saved)
    }

    /// `DELETE /v1/messages/{id}`: text and attachments erased (earlier texts too), `removed` true. An
    /// outbound message still queued fails as `cancelled` (`message.failed`) instead of going out empty.
    /// Removing it again changes nothing.
    pub async fn remove(&self, account_id: &AccountId, message_id: &str) -> ApiResult<messages::Model> {
        let (txn, mut message) = self.locked(account_id, message_id).await?;
        if message.removed {
            return Ok(message);
        }
        message.text = String::new();
        message.attachments = "[]".to_owned();
        message.edits = "[]".to_owned();
        message.removed = true;
        message.revised_at = Some(self.clock.now());
        if message.direction == messages::Direction::Outbound && message.status == messages::MessageStatus::Queued {
            let now = self.clock.now();
            message.status = messages::MessageStatus::Failed;
            message.error_code = Some("cancelled".to_owned());
            message.error_message = Some("the message was removed before it was sent".to_owned());
            deliver::record(&txn, &message, messages::MessageStatus::Failed, now).await?;
        }
        let saved = save(txn, message).await?;
        self.feed.message_changed(&saved, Change::Removed).await;
        Ok(saved)
    }

    /// `POST /v1/messages/{id}/reactions`: the API's reaction becomes `emoji` (`""` removes it).
    pub async fn react(&self, account_id: &AccountId, message_id: &str, emoji: &str) -> ApiResult<messages::Model> {
        let emoji = match emoji {
            "" => None,
            text => Some(Emoji::parse(text).ok_or_else(|| {
                ApiError::field(
                    "emoji",
                    "must be a single emoji (one grapheme), or \"\" to remove the reaction",
                )
            })?),
        };
        let author = messages::Author::Api.to_value();
        let (txn, mut message) = self.locked(account_id, message_id).await?;
        let mut reactions: Vec<StoredReaction> = from_json_text(&message.reactions);
        let mine = reactions.iter().position(|r| r.author == author);
        match (&emoji, mine) {
            (None, None) => return Ok(message),
            (Some(emoji), Some(at)) if reactions[at].emoji == emoji.as_str() => return Ok(message),
            (Some(_), _) if message.removed => {
                return Err(ApiError::field(
                    "message_id",
                    "the message was removed; it takes no reactions",
                ));
            }
            _ => {}
        }
        reactions.retain(|r| r.author != author);
        if let Some(emoji) = &emoji {
            reactions.push(StoredReaction {
                emoji: emoji.as_str().to_owned(),
                author: author.clone(),
                created_at: self.clock.now(),
            });
        }
        message.reactions = to_json_text(&reactions);
        let now = self.clock.now();
        message.revised_at = Some(now);
        if message.provider_message_id.is_some() && tells_provider(&txn, &message.channel_id).await? {
            jobs::enqueue(&txn, signals::job(&message, Action::React, now), now).await?;
        }
        let saved = save(txn, message).await?;
        self.feed.message_changed(&saved, Change::Reaction).await;
        Ok(saved)
    }

    /// The account's message in a write transaction that keeps it from other writers, or 404.
    async fn locked(
        &self,
        account_id: &AccountId,
        message_id: &str,
    ) -> ApiResult<(DatabaseTransaction, messages::Model)> {
        let txn = crate::store::begin_write(&self.db).await?;
        let message = lookup::message_for_update(&txn, account_id, message_id)
            .await?
            .ok_or_else(not_found)?;
        Ok((txn, message))
    }
}

fn not_found() -> ApiError {
    ApiError::not_found("message")
}

/// Only outbound messages that are still there can be corrected.
fn correctable(message: &messages::Model) -> ApiResult<()> {
    if message.direction != messages::Direction::Outbound {
        return Err(ApiError::field(
            "message_id",
            "only an outbound message can be corrected; this one came from the contact (DELETE removes it)",
        ));
    }
    if message.removed {
        return Err(ApiError::field(
            "message_id",
            "the message was removed; it cannot be corrected",
        ));
    }
    Ok(())
}

/// A send of `text` to the message's contact on its conversation's channel, answering it; checked as any
/// send is (1 to 4,096 characters, at most 1,600 on sms).
fn send_on(conversation: &conversations::Model, message: &messages::Model, text: String) -> ApiResult<Outgoing> {
    let request = SendMessageRequest {
        contact_id: message.contact_id.to_string(),
        text,
        channel: conversation.channel.clone(),
        reply_to: message.id.to_string(),
        ..SendMessageRequest::default()
    };
    let outgoing = Outgoing::to_contact(request, None)?;
    outgoing.fits(conversation.channel_type)?;
    Ok(outgoing)
}

/// Whether the provider of the channel `channel_id` is told of reactions and reads.
async fn tells_provider(db: &impl ConnectionTrait, channel_id: &str) -> ApiResult<bool> {
    let kind: Option<ChannelKind> = channels::Entity::find_by_id(channel_id)
        .select_only()
        .column(channels::Column::Kind)
        .into_tuple()
        .one(db)
        .await?;
    Ok(kind.is_some_and(signals::takes_signals))
}

/// Writes the message and commits.
async fn save(txn: DatabaseTransaction, message: messages::Model) -> ApiResult<messages::Model> {
    let saved = message.into_active_model().reset_all().update(&txn).await?;
    txn.commit().await?;
    Ok(saved)
}
