//! The `agent_reply` job: answers what a conversation's counts say is unanswered. It reads the conversation,
//! the agent, the latest messages and the knowledge passages for the question, asks the provider (no
//! transaction is held meanwhile), and stores the outcome in one transaction: the reply (or the handoff
//! sentence and the handoff), its delivery job, the charge, and "answered up to here". A model is asked only
//! once the reply's price is held against the account's credits (`accounts::holds`); without the credits the
//! reply is the handoff sentence (`insufficient_credits`) and no model or tool is called. The store settles
//! the hold (an answer, or a handoff the model chose) or releases it (`model_unavailable`). That transaction goes
//! ahead only if nothing answered the conversation meanwhile (the answered count is the one read) and it is
//! still open, not handed off and with the same agent: a person's send, a handoff or another worker's reply
//! made meanwhile wins. A crash anywhere leaves either nothing (the job runs again) or the whole reply (the
//! job's next run finds nothing unanswered): never a lost reply, never two.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Statement,
};

use super::{
    gaps,
    provider::{Basis, Context, Decision, HandoffReason, NoTools, Profile, Speaker, Turn},
    provider_choice::Providers,
    tools::ToolKit,
};
use crate::error::Reason;
use crate::{
    access::AccountId,
    accounts::holds,
    agents::{fields::BookingSettings, tier::reply_cost},
    clock::Clock,
    conversations::{
        new_message::{self, NewMessage},
        render::StoredAttachment,
        replies::{self, ReplyArgs},
        state::{self, Change},
    },
    error::{ApiError, ApiResult},
    jobs::{self, Handler, Job, Outcome, Wake},
    knowledge::retrieval::{Retrieval, excerpt::cut_at_word},
    messaging::{deliver, outgoing::max_chars},
    store::{
        self,
        entities::{agents, conversations, messages},
        from_json_text,
    },
};

/// Messages of the conversation a provider sees.
const HISTORY: u64 = 20;
/// The most unanswered messages a reply reads.
const MAX_ASKED: u64 = 50;
/// Wait before running again after a database error.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// What the provider decided, and how the reply pays for it.
struct Decided {
    decision: Decision,
    had_text: bool,
    payment: Payment,
    provider: &'static str,
    /// The question it handed off for want of an answer, for the agent's knowledge gaps.
    unanswered: Option<gaps::Asked>,
}

/// How a reply pays its tier.
enum Payment {
    /// Nothing to pay: a pro reply on the account's own key.
    Free,
    /// The local provider (no model is paid): an answer is charged when it is stored, a handoff is free.
    OnAnswer { cost: i64 },
    /// A model was asked under this hold: what the model decided is charged (but `model_unavailable`).
    Held { key: String, cost: i64 },
}

impl Payment {
    fn hold_key(&self) -> Option<&str> {
        match self {
            Self::Held { key, .. } => Some(key),
            _ => None,
        }
    }
}

pub struct AgentReply {
    pub db: DatabaseConnection,
    pub clock: Arc<dyn Clock>,
    pub retrieval: Arc<Retrieval>,
    pub providers: Arc<Providers>,
    pub tools: Arc<ToolKit>,
    /// This process's job engine, woken for the reply's delivery.
    pub wake: Wake,
    /// Tries of the reply's delivery.
    pub send_attempts: i32,
}

/// What the reply was decided from, as read before the provider was asked.
struct Read {
    conversation: conversations::Model,
    agent: agents::Model,
}

#[async_trait::async_trait]
impl Handler for AgentReply {
    async fn run(&self, job: &Job) -> Outcome {
        let payload: ReplyArgs = match job.args() {
            Ok(payload) => payload,
            Err(unreadable) => return unreadable,
        };
        match self.reply(&job.account(), &payload.conversation_id).await {
            Ok(()) => Outcome::Done(None),
            Err(err) => Outcome::Retry {
                error: err.message,
                after: RETRY_AFTER,
            },
        }
    }
}

impl AgentReply {
    async fn reply(&self, account_id: &AccountId, conversation_id: &str) -> ApiResult<()> {
        let Some(read) = self.read(account_id, conversation_id).await? else {
            return Ok(());
        };
        let started = std::time::Instant::now();
        let chosen = self.providers.for_reply(account_id, &read.agent).await?;
        let provider = chosen.provider.as_ref();
        let cost = reply_cost(read.agent.ai_tier, chosen.own_key);
        let payment = match (cost, provider.is_model()) {
            (0, _) => Payment::Free,
            (cost, false) => Payment::OnAnswer { cost },
            (cost, true) => {
                let key = hold_key(&read.conversation);
                match self.hold(account_id, &key, cost).await {
                    Ok(()) => Payment::Held { key, cost },
                    // No hold, no call: no model, no tool.
                    Err(err) if err.reason == Reason::InsufficientCredits => {
                        let decided = Decided {
                            decision: insufficient(&read.agent),
                            had_text: true,
                            payment: Payment::Free,
                            provider: provider.name(),
                            unanswered: None,
                        };
                        return self.store(&read, decided).await;
                    }
                    Err(err) => return Err(err),
                }
            }
        };
        let context = self.context(&read).await?;
        let decision = if provider.is_model() {
            let tools = self.tools.for_reply(&read.conversation, &read.agent).await?;
            provider.decide(&context, &tools).await
        } else {
            provider.decide(&context, &NoTools).await
        };
        metrics::histogram!("frontdesk_ai_decision_seconds", "provider" => provider.name())
            .record(started.elapsed().as_secs_f64());
        let unanswered = match &decision {
            Decision::Handoff { reason, .. } if is_gap(reason) => {
                let (vector, terms) = self
                    .retrieval
                    .question_signals(&read.agent.language, &context.question)
                    .await;
                Some(gaps::Asked {
                    question: context.question.clone(),
                    vector,
                    terms,
                })
            }
            _ => None,
        };
        let decided = Decided {
            decision,
            had_text: !context.question.trim().is_empty(),
            payment,
            provider: provider.name(),
            unanswered,
        };
        self.store(&read, decided).await
    }

    /// Holds a model-written reply's price for as long as the reply may take, and then some.
    async fn hold(&self, account_id: &AccountId, key: &str, cost: i64) -> ApiResult<()> {
        let hold = holds::Hold {
            account_id,
            key,
            amount_milli: cost,
            purpose: holds::Purpose::Reply,
            lasts: self.providers.hold_time(),
            at_once: None,
        };
        holds::hold(&self.db, &hold, self.clock.now()).await
    }

    /// The conversation and its agent, when it has messages the agent must answer.
    async fn read(&self, account_id: &AccountId, conversation_id: &str) -> ApiResult<Option<Read>> {
        let conversation = store::owned::<conversations::Entity>(
            &self.db,
            conversations::Column::AccountId,
            account_id,
            conversation_id,
        )
        .await?;
        let Some(conversation) = conversation.filter(|c| replies::answers(c) && c.inbound_seq > c.ai_answered_seq)
        else {
            return Ok(None);
        };
        // A deleted agent, or one paused, answers nothing.
        let agent =
            store::owned::<agents::Entity>(&self.db, agents::Column::AccountId, account_id, &conversation.agent_id)
                .await?
                .filter(|agent| agent.status == agents::AgentStatus::Active);
        Ok(agent.map(|agent| Read { conversation, agent }))
    }

    /// The provider's context: the agent, the latest messages, the unanswered ones as the question, and
    /// the passages found for it.
    async fn context(&self, read: &Read) -> ApiResult<Context> {
        let Read { conversation, agent } = read;
        let history = history(&self.db, conversation).await?;
        // The latest of them at most: the question is cut at QUERY_CHARS anyway, and a long silence (a
        // reply job failing for hours) must not load a whole history into memory.
        let unanswered = u64::try_from(conversation.inbound_seq - conversation.ai_answered_seq)
            .unwrap_or(0)
            .min(MAX_ASKED);
        let asked = messages::Entity::find()
            .filter(messages::Column::ConversationId.eq(conversation.id.as_str()))
            .filter(messages::Column::Direction.eq(messages::Direction::Inbound))
            .order_by_desc(messages::Column::Seq)
            .limit(unanswered)
            .all(&self.db)
            .await?;
        let texts: Vec<&str> = asked
            .iter()
            .rev()
            .filter(|m| !m.removed)
            .map(|m| m.text.trim())
            .filter(|t| !t.is_empty())
            .collect();
        let question = texts.join("\n");
        let attachments_only = question.is_empty()
            && asked
                .iter()
                .any(|m| !from_json_text::<Vec<StoredAttachment>>(&m.attachments).is_empty());
        let semantic = self.retrieval.embedder().is_some();
        let found = super::passages::for_messages(&self.retrieval, &self.db, agent, &texts).await?;
        Ok(Context {
            agent: profile(agent),
            history,
            question,
            attachments_only,
            passages: found.passages,
            questions: found.questions,
            semantic,
        })
    }

    /// Stores the decision, unless the conversation was answered, handed off or closed meanwhile (then the
    /// reply's hold is released: nothing was said, nothing is charged).
    async fn store(&self, read: &Read, decided: Decided) -> ApiResult<()> {
        let hold = decided.payment.hold_key().map(str::to_owned);
        let stored = self.store_decided(read, decided).await?;
        if !stored && let Some(key) = hold {
            holds::release_or_log(&self.db, &key).await;
        }
        Ok(())
    }

    /// Whether the decision was stored.
    async fn store_decided(&self, read: &Read, decided: Decided) -> ApiResult<bool> {
        let Decided {
            decision,
            had_text,
            payment,
            provider,
            unanswered,
        } = decided;
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        let Some(conversation) = locked(&txn, &read.conversation).await? else {
            return Ok(false);
        };
        let still_ours = replies::answers(&conversation)
            && conversation.agent_id == read.agent.id
            && conversation.ai_answered_seq == read.conversation.ai_answered_seq;
        if !still_ours {
            return Ok(false);
        }
        // The text to send, and whether it answers (follow-ups start from an answer, not a handoff).
        let charged = match decision {
            Decision::Answer { text, basis } => {
                if pay(&txn, &conversation, &payment, &basis, now).await? {
                    Some((text, true))
                } else {
                    let sentence = super::phrases::of(&read.agent.language).handoff;
                    hand_off(&txn, &conversation, &HandoffReason::InsufficientCredits, now).await?;
                    send(&txn, &conversation, sentence, self.send_attempts, now).await?;
                    None
                }
            }
            Decision::Handoff { text, reason } => {
                match &payment {
                    // The model was asked and chose the handoff: it costs what an answer would. A balance
                    // spent meanwhile (a hold that expired) leaves it free; the handoff stands.
                    Payment::Held { .. } if reason.is_models_choice() => {
                        pay(&txn, &conversation, &payment, &Basis::Model, now).await?;
                    }
                    _ => release(&txn, &payment).await?,
                }
                hand_off(&txn, &conversation, &reason, now).await?;
                if let Some(asked) = &unanswered {
                    gaps::record(&txn, &conversation, asked, now).await?;
                }
                Some((text, false))
            }
            Decision::Silent => {
                release(&txn, &payment).await?;
                None
            }
        };
        if let Some((text, answered)) = charged {
            send(&txn, &conversation, &text, self.send_attempts, now).await?;
            if answered {
                super::follow_up::restart(&txn, &conversation, &read.agent, read.conversation.inbound_seq, now).await?;
            }
        }
        answered_up_to(&txn, &conversation.id, read.conversation.inbound_seq).await?;
        txn.commit().await?;
        self.wake.notify();
        metrics::counter!("frontdesk_ai_replies_total", "provider" => provider, "text" => if had_text { "yes" } else { "no" })
            .increment(1);
        Ok(true)
    }
}

/// Whether a handoff for this reason is a question the knowledge could not answer: the local provider found
/// no confident answer, or a model handed off by its own choice.
fn is_gap(reason: &HandoffReason) -> bool {
    matches!(reason, HandoffReason::NoConfidentAnswer | HandoffReason::Requested(_))
}

/// The key of a reply's hold: the conversation and the point it answers from (which moves only when a reply
/// is stored), so a reply run again after a crash takes the same hold.
fn hold_key(conversation: &conversations::Model) -> String {
    format!("reply:{}:{}", conversation.id, conversation.ai_answered_seq)
}

/// The handoff of a reply the balance does not cover.
fn insufficient(agent: &agents::Model) -> Decision {
    Decision::Handoff {
        text: super::phrases::of(&agent.language).handoff.to_owned(),
        reason: HandoffReason::InsufficientCredits,
    }
}

/// Pays the reply in its transaction: settles its hold, or debits an answer of the local provider; `false`
/// when the balance does not cover it.
async fn pay(
    txn: &DatabaseTransaction,
    conversation: &conversations::Model,
    payment: &Payment,
    basis: &Basis,
    now: DateTime<Utc>,
) -> ApiResult<bool> {
    match payment {
        Payment::Free => Ok(true),
        Payment::OnAnswer { cost } => charge(txn, conversation, None, *cost, basis, now).await,
        Payment::Held { key, cost } => charge(txn, conversation, Some(key), *cost, basis, now).await,
    }
}

/// Releases the reply's hold in its transaction, when it has one.
async fn release(txn: &DatabaseTransaction, payment: &Payment) -> ApiResult<()> {
    if let Some(key) = payment.hold_key() {
        holds::release(txn, key).await?;
    }
    Ok(())
}

/// The conversation's latest messages, oldest first.
pub(super) async fn history(db: &DatabaseConnection, conversation: &conversations::Model) -> ApiResult<Vec<Turn>> {
    let latest = messages::Entity::find()
        .filter(messages::Column::ConversationId.eq(conversation.id.as_str()))
        .filter(messages::Column::Removed.eq(false))
        .order_by_desc(messages::Column::Seq)
        .limit(HISTORY)
        .all(db)
        .await?;
    Ok(latest.iter().rev().map(turn).collect())
}

/// The conversation as it is now, locked until the transaction ends (PostgreSQL; SQLite's writer holds the
/// database already).
pub(super) async fn locked(
    txn: &DatabaseTransaction,
    read: &conversations::Model,
) -> Result<Option<conversations::Model>, DbErr> {
    if txn.get_database_backend() == DbBackend::Postgres {
        txn.execute_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE",
            [read.id.as_str().into()],
        ))
        .await?;
    }
    conversations::Entity::find_by_id(read.id.as_str()).one(txn).await
}

/// Debits the reply's cost (ledger entry `ai_reply: <basis>` naming the conversation), settling its hold when
/// it had one; `false` when the balance does not cover it.
pub(super) async fn charge(
    txn: &DatabaseTransaction,
    conversation: &conversations::Model,
    hold: Option<&str>,
    cost: i64,
    basis: &Basis,
    now: DateTime<Utc>,
) -> ApiResult<bool> {
    let reason = match basis {
        Basis::Faq(faq) => format!("ai_reply: faq {faq}"),
        Basis::Faqs(faqs) => format!("ai_reply: faqs {}", faqs.join(" ")),
        Basis::Greeting => "ai_reply: greeting".to_owned(),
        Basis::Thanks => "ai_reply: thanks".to_owned(),
        Basis::Booking => "ai_reply: booking".to_owned(),
        Basis::Model => "ai_reply: model".to_owned(),
        Basis::FollowUp => "ai_reply: follow-up".to_owned(),
    };
    let account_id = conversation.account_id.clone();
    let debit = match hold {
        Some(key) => holds::settle(txn, &account_id, key, cost, &reason, Some(&conversation.id), now).await,
        None => {
            crate::accounts::store::adjust_credits_in(txn, &account_id, -cost, &reason, Some(&conversation.id), now)
                .await
                .map(drop)
        }
    };
    match debit {
        Ok(_) => Ok(true),
        Err(err) if err.reason == Reason::InsufficientCredits => Ok(false),
        Err(err) => Err(err),
    }
}

async fn hand_off(
    txn: &DatabaseTransaction,
    conversation: &conversations::Model,
    reason: &HandoffReason,
    now: DateTime<Utc>,
) -> ApiResult<()> {
    let which = state::one_of(&conversation.account_id, &conversation.id);
    state::apply(txn, which, Change::hand_off(reason.as_str()), now).await?;
    Ok(())
}

/// The agent's message, queued, with its delivery job; a text longer than one message of the channel carries
/// (a model's long answer on sms) is cut to it.
pub(super) async fn send(
    txn: &DatabaseTransaction,
    conversation: &conversations::Model,
    text: &str,
    send_attempts: i32,
    now: DateTime<Utc>,
) -> ApiResult<()> {
    let text = cut_at_word(text, max_chars(conversation.channel_type));
    let row = new_message::row(
        &NewMessage {
            conversation,
            direction: messages::Direction::Outbound,
            author: messages::Author::Agent,
            text: &text,
            attachments: &[],
            status: messages::MessageStatus::Queued,
            provider_message_id: None,
            reply_to: "",
            broadcast_id: "",
            template: "",
        },
        now,
    );
    new_message::store_all(txn, std::slice::from_ref(&row), now).await?;
    let job = deliver::job(&row, &conversation.channel_id, send_attempts, now);
    jobs::enqueue(txn, job, now).await?;
    Ok(())
}

async fn answered_up_to(txn: &DatabaseTransaction, conversation_id: &str, inbound_seq: i64) -> ApiResult<()> {
    let changed = conversations::Entity::update_many()
        .col_expr(
            conversations::Column::AiAnsweredSeq,
            sea_orm::sea_query::Expr::value(inbound_seq),
        )
        .filter(conversations::Column::Id.eq(conversation_id))
        .exec(txn)
        .await?;
    if changed.rows_affected == 0 {
        return Err(ApiError::internal(
            "the conversation vanished while its reply was stored",
        ));
    }
    Ok(())
}

pub(super) fn profile(agent: &agents::Model) -> Profile {
    Profile {
        name: agent.name.clone(),
        instructions: agent.instructions.clone(),
        rules: from_json_text(&agent.rules),
        goal: agent.goal.clone(),
        personality: agent.personality.clone(),
        language: agent.language.clone(),
        booking: from_json_text::<BookingSettings>(&agent.booking),
    }
}

/// A stored message as a provider reads it.
pub fn turn(message: &messages::Model) -> Turn {
    let speaker = match (message.direction, message.author) {
        (messages::Direction::Inbound, _) => Speaker::Contact,
        (_, messages::Author::Agent) => Speaker::Agent,
        _ => Speaker::Business,
    };
    Turn {
        speaker,
        text: message.text.clone(),
    }
}
