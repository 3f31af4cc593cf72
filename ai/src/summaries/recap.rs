//! `POST /v1/summaries`: the recap of a contact's latest closed conversation (else its open one), written by
//! the account's provider in the agent's language and charged as one AI reply at the agent's tier. The price
//! is held before anything is written (402 when the balance less other holds does not cover it; 429 past
//! `AT_ONCE` recaps of the account at once); the charge settling the hold, the recap stored on the contact
//! and `summary.created` then commit together. A recap that fails releases its hold.

use std::sync::Arc;

use frontdesk_api::v1::Summary;
use sea_orm::{ActiveEnum, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, sea_query::Expr};

use super::facts;
use crate::{
    access::AccountId,
    accounts::holds,
    agents::tier::{DEFAULT_TIER, reply_cost},
    clock::Clock,
    contacts::{
        address::{E164Phone, Email},
        store as contact_store,
    },
    error::{ApiError, ApiResult, Reason},
    events::{self, EventType},
    replies::provider_choice::{Chosen, Providers},
    store::{
        self,
        entities::{agents, contacts, conversations},
    },
    timestamps,
};

/// Recaps of one account written at once; more are refused (429) until one ends.
pub const AT_ONCE: u64 = 2;

/// Whose conversation is recapped.
pub enum Subject {
    Phone(E164Phone),
    Email(Email),
}

/// The recapped conversation, its contact and its agent.
#[derive(Clone, Copy)]
struct Target<'a> {
    contact: &'a contacts::Model,
    conversation: &'a conversations::Model,
    agent: Option<&'a agents::Model>,
}

pub struct Recaps {
    pub db: DatabaseConnection,
    pub clock: Arc<dyn Clock>,
    pub providers: Arc<Providers>,
}

impl Recaps {
    pub async fn create(&self, account_id: &AccountId, subject: &Subject) -> ApiResult<Summary> {
        let contact = match subject {
            Subject::Phone(phone) => contact_store::find_by_phone(&self.db, account_id, phone).await?,
            Subject::Email(email) => contact_store::find_by_email(&self.db, account_id, email).await?,
        }
        .ok_or_else(|| ApiError::not_found("contact"))?;
        let conversation = self.recapped(&contact).await?.ok_or_else(|| {
            ApiError::new(
                tonic::Code::NotFound,
                Reason::NotFound,
                "the contact has no conversation to summarise",
            )
        })?;
        let agent = if conversation.agent_id.is_empty() {
            None
        } else {
            store::owned::<agents::Entity>(&self.db, agents::Column::AccountId, account_id, &conversation.agent_id)
                .await?
        };
        let tier = agent.as_ref().map_or(DEFAULT_TIER, |a| a.ai_tier);
        let chosen = self.providers.for_agent(account_id, agent.as_ref()).await?;
        let cost = reply_cost(tier, chosen.own_key);
        // The price is held before anything is written, and the hold is one of the account's few recaps at
        // once: a burst of requests neither writes recaps it cannot pay for nor runs the model many times over.
        let key = format!("summary:{}", crate::ids::base62(16));
        let hold = holds::Hold {
            account_id,
            key: &key,
            amount_milli: cost,
            purpose: holds::Purpose::Summary,
            lasts: self.providers.hold_time(),
            at_once: Some(AT_ONCE),
        };
        holds::hold(&self.db, &hold, self.clock.now())
            .await
            .map_err(|err| named(err, cost))?;
        let target = Target {
            contact: &contact,
            conversation: &conversation,
            agent: agent.as_ref(),
        };
        let written = self.write(account_id, &target, &chosen, &key, cost).await;
        if written.is_err() {
            holds::release_or_log(&self.db, &key).await;
        }
        written
    }

    /// Writes the recap and stores it with its charge (settling the hold `key`) and its event.
    async fn write(
        &self,
        account_id: &AccountId,
        target: &Target<'_>,
        chosen: &Chosen,
        key: &str,
        cost: i64,
    ) -> ApiResult<Summary> {
        let Target {
            contact,
            conversation,
            agent,
        } = *target;
        let language = agent.map_or("en", |a| a.language.as_str());
        let facts = facts::gather(&self.db, conversation, language).await?;
        let recap = chosen.provider.recap(&facts).await;
        metrics::counter!("frontdesk_summaries_total", "provider" => chosen.provider.name()).increment(1);

        let now = self.clock.now();
        let summary = Summary {
            contact_id: contact.id.to_string(),
            conversation_id: conversation.id.to_string(),
            conversation_status: conversation.status.to_value(),
            recap,
            generated_at: Some(timestamps::to_proto(now)),
            credits_used: cost as f64 / 1_000.0,
        };
        let txn = store::begin_write(&self.db).await?;
        holds::settle(&txn, account_id, key, cost, "summary", Some(&conversation.id), now)
            .await
            .map_err(|err| named(err, cost))?;
        let stored = contacts::Entity::update_many()
            .col_expr(contacts::Column::Recap, Expr::value(summary.recap.as_str()))
            .col_expr(contacts::Column::RecapAt, Expr::value(now))
            .col_expr(contacts::Column::UpdatedAt, Expr::value(now))
            .filter(contacts::Column::Id.eq(contact.id.as_str()))
            .filter(contacts::Column::AccountId.eq(account_id))
            .exec(&txn)
            .await?;
        if stored.rows_affected == 0 {
            return Err(ApiError::not_found("contact"));
        }
        let data = serde_json::json!({"summary": events::payload(&summary, "frontdesk.v1.Summary")});
        events::record(&txn, account_id, EventType::SummaryCreated, data, now).await?;
        txn.commit().await?;
        Ok(summary)
    }

    /// The contact's most recently closed conversation, else its latest open one.
    async fn recapped(&self, contact: &contacts::Model) -> ApiResult<Option<conversations::Model>> {
        let of_contact = || {
            conversations::Entity::find()
                .filter(conversations::Column::ContactId.eq(contact.id.as_str()))
                .filter(conversations::Column::AccountId.eq(contact.account_id.as_str()))
        };
        let closed = of_contact()
            .filter(conversations::Column::Status.eq(conversations::ConversationStatus::Closed))
            .order_by_desc(conversations::Column::ClosedAt)
            .order_by_desc(conversations::Column::CreatedAt)
            .one(&self.db)
            .await?;
        if closed.is_some() {
            return Ok(closed);
        }
        Ok(of_contact()
            .filter(conversations::Column::Status.eq(conversations::ConversationStatus::Open))
            .order_by_desc(conversations::Column::LastMessageAt)
            .one(&self.db)
            .await?)
    }
}

/// A refusal for want of credits, said of a summary.
fn named(err: ApiError, cost: i64) -> ApiError {
    if err.reason != Reason::InsufficientCredits {
        return err;
    }
    ApiError::new(
        tonic::Code::FailedPrecondition,
        Reason::InsufficientCredits,
        format!(
            "the credit balance does not cover this summary ({} credits)",
            cost as f64 / 1_000.0
        ),
    )
}
