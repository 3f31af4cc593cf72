//! The tools every model-backed agent has: `book_appointment` (when booking is on; stores the appointment on
//! the contact and emits `appointment.booked`), `handoff_to_human`, `create_deal` (source `ai_agent`, linked
//! to the contact) and `create_task`. Each write is its own short transaction, keyed so that a reply run again
//! after a failure does not make it twice; what the model gave wrong (a missing title, a time that is not RFC
//! 3339 or outside the booking window) goes back to it as a tool error, and so does a write past the limits
//! (`WRITES_PER_REPLY`, `WRITES_PER_CONVERSATION_DAY`: `limit_reached`).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, DatabaseConnection, DatabaseTransaction, EntityTrait, PaginatorTrait, QueryFilter};
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::{chat::ToolSpec, provider::ToolOutcome};
use crate::{
    access::AccountId,
    clock::Clock,
    deals::{fields::DealFields, service::create_in},
    events::{self, EventType},
    store::entities::{appointments, conversations, tasks, tool_effects},
};

/// The most characters of a handoff reason kept.
const REASON_CHARS: usize = 200;
/// The most characters of a title kept.
const TITLE_CHARS: usize = 200;
/// Writes (deals, tasks, appointments) one reply may make: a model steered by a customer's text must not
/// fill the account with rows.
pub const WRITES_PER_REPLY: u32 = 10;
/// Writes one conversation's replies may make in a day.
pub const WRITES_PER_CONVERSATION_DAY: u64 = 100;

pub const NAMES: &[&str] = &["book_appointment", "handoff_to_human", "create_deal", "create_task"];

/// The built-ins' declarations; `book_appointment` only when the agent's booking is on.
pub fn specs(booking: bool) -> Vec<ToolSpec> {
    let spec = |name: &str, description: &str, parameters: Value| ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
    };
    let mut specs = Vec::new();
    if booking {
        specs.push(spec(
            "book_appointment",
            "Book an appointment for the customer at a time they agreed to.",
            json!({"type": "object", "properties": {
                "start_time": {"type": "string", "description": "RFC 3339 date and time, e.g. 2026-12-01T10:00:00+05:30"},
                "name": {"type": "string"},
                "email": {"type": "string"},
                "notes": {"type": "string"}
            }, "required": ["start_time"]}),
        ));
    }
    specs.push(spec(
        "handoff_to_human",
        "Hand the conversation to a person of the team, when the knowledge does not hold the answer or the customer asks for a person.",
        json!({"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]}),
    ));
    specs.push(spec(
        "create_deal",
        "Record a sales opportunity with this customer in the pipeline.",
        json!({"type": "object", "properties": {
            "title": {"type": "string"},
            "value": {"type": "number"},
            "stage": {"type": "string", "description": "a stage id; the main pipeline's first stage when left out"}
        }, "required": ["title"]}),
    ));
    specs.push(spec(
        "create_task",
        "Create a follow-up task for the team.",
        json!({"type": "object", "properties": {
            "title": {"type": "string"},
            "due": {"type": "string", "description": "RFC 3339 date and time"}
        }, "required": ["title"]}),
    ));
    specs
}

/// The built-ins of one reply: the conversation they act on.
pub struct Builtins {
    pub db: DatabaseConnection,
    pub clock: Arc<dyn Clock>,
    pub conversation: conversations::Model,
    pub booking: bool,
    /// How far ahead `book_appointment` may book.
    pub booking_days: i32,
    /// Writing calls made so far in this reply, by tool: the n-th call of a tool is the same write in every
    /// run of the reply, whatever words the model chose for it this time.
    pub calls: std::sync::Mutex<std::collections::HashMap<String, u32>>,
}

/// How long a write's key is kept: far longer than a reply can be run again.
pub const EFFECTS_KEPT: chrono::Duration = chrono::Duration::days(7);

/// Forgets the keys of writes older than `EFFECTS_KEPT` (the housekeeping job), at most `limit` at a time.
pub async fn prune_effects(
    db: &impl sea_orm::ConnectionTrait,
    now: DateTime<Utc>,
    limit: u64,
) -> Result<u64, sea_orm::DbErr> {
    let sql = format!(
        "DELETE FROM tool_effects WHERE key IN (SELECT key FROM tool_effects WHERE created_at <= $1 LIMIT {limit})"
    );
    let done = db
        .execute_raw(sea_orm::Statement::from_sql_and_values(
            db.get_database_backend(),
            sql,
            [(now - EFFECTS_KEPT).into()],
        ))
        .await?;
    Ok(done.rows_affected())
}

#[derive(Deserialize)]
struct Booking {
    start_time: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    notes: String,
}

#[derive(Deserialize)]
struct Handoff {
    #[serde(default)]
    reason: String,
}

#[derive(Deserialize)]
struct Deal {
    title: String,
    value: Option<f64>,
    stage: Option<String>,
}

#[derive(Deserialize)]
struct Task {
    title: String,
    due: Option<String>,
}

impl Builtins {
    /// Runs the built-in `name`; `None` when no built-in has that name.
    pub async fn call(&self, name: &str, arguments: &Value) -> Option<ToolOutcome> {
        let outcome = match name {
            "book_appointment" if self.booking => self.write(name, arguments).await,
            "handoff_to_human" => read::<Handoff>(arguments).map(|h| {
                let reason: String = h.reason.trim().chars().take(REASON_CHARS).collect();
                ToolOutcome::Handoff(if reason.is_empty() {
                    "requested_by_agent".into()
                } else {
                    reason
                })
            }),
            "create_deal" | "create_task" => self.write(name, arguments).await,
            _ => return None,
        };
        Some(outcome.unwrap_or_else(ToolOutcome::Error))
    }

    fn account(&self) -> AccountId {
        self.conversation.account_id.clone()
    }

    /// A write of the tool `name`, at most once per key: the n-th call of a tool in a reply run again (its
    /// process died after the write, before the reply was stored) answers what the first run wrote. The write,
    /// its event and its key commit together.
    async fn write(&self, name: &str, arguments: &Value) -> Result<ToolOutcome, String> {
        let Some(key) = self.effect_key(name) else {
            return Err(format!(
                "limit_reached: at most {WRITES_PER_REPLY} deals, tasks and appointments per reply"
            ));
        };
        if let Some(done) = self.recorded(&key).await? {
            return Ok(ToolOutcome::Answer(done));
        }
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await.map_err(unstored)?;
        if self.written_today(&txn, now).await.map_err(unstored)? >= WRITES_PER_CONVERSATION_DAY {
            return Err(format!(
                "limit_reached: at most {WRITES_PER_CONVERSATION_DAY} deals, tasks and appointments per conversation a day"
            ));
        }
        let result = match name {
            "book_appointment" => self.book(&txn, arguments, now).await?,
            "create_deal" => self.deal(&txn, arguments, now).await?,
            _ => self.task(&txn, arguments, now).await?,
        };
        let effect = tool_effects::Model {
            key: key.clone(),
            account_id: self.conversation.account_id.clone(),
            conversation_id: self.conversation.id.clone(),
            result: result.clone(),
            created_at: now,
        };
        let kept = tool_effects::Entity::insert(tool_effects::ActiveModel::from(effect))
            .exec_without_returning(&txn)
            .await;
        match kept {
            Ok(_) => txn.commit().await.map_err(unstored)?,
            // Another run of the same reply wrote it meanwhile (PostgreSQL lets both look first): its answer.
            Err(err) => {
                drop(txn);
                return match self.recorded(&key).await? {
                    Some(done) => Ok(ToolOutcome::Answer(done)),
                    None => Err(unstored(err)),
                };
            }
        }
        Ok(ToolOutcome::Answer(result))
    }

    async fn recorded(&self, key: &str) -> Result<Option<String>, String> {
        let found = tool_effects::Entity::find_by_id(key)
            .one(&self.db)
            .await
            .map_err(unstored)?;
        Ok(found.map(|effect| effect.result))
    }

    /// The writes of the conversation's replies in the day before `now`, counted under the conversation's
    /// lock (PostgreSQL; SQLite's writer holds the database), so concurrent replies do not both pass the limit.
    async fn written_today(&self, txn: &DatabaseTransaction, now: DateTime<Utc>) -> Result<u64, sea_orm::DbErr> {
        crate::replies::reply::locked(txn, &self.conversation).await?;
        tool_effects::Entity::find()
            .filter(tool_effects::Column::ConversationId.eq(self.conversation.id.as_str()))
            .filter(tool_effects::Column::CreatedAt.gt(now - chrono::Duration::days(1)))
            .count(txn)
            .await
    }

    /// The conversation, the point the reply answers from (it moves only when a reply is stored, a person
    /// answers or a handoff ends: not when the contact writes again before a run again), the tool, and which
    /// of its writing calls in this reply this is; `None` once the reply made `WRITES_PER_REPLY` writing
    /// calls.
    fn effect_key(&self, name: &str) -> Option<String> {
        let nth = {
            let mut calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if calls.values().sum::<u32>() >= WRITES_PER_REPLY {
                return None;
            }
            let count = calls.entry(name.to_owned()).or_insert(0);
            *count += 1;
            *count
        };
        let identity = format!(
            "{}\n{}\n{name}\n{nth}",
            self.conversation.id, self.conversation.ai_answered_seq
        );
        Some(hex::encode(ring::digest::digest(
            &ring::digest::SHA256,
            identity.as_bytes(),
        )))
    }

    async fn book(&self, txn: &DatabaseTransaction, arguments: &Value, now: DateTime<Utc>) -> Result<String, String> {
        let booking: Booking = read(arguments)?;
        let start = time("start_time", &booking.start_time)?;
        if start <= now {
            return Err(format!("start_time {start} is in the past; it is now {now}"));
        }
        let window = now + chrono::Duration::days(i64::from(self.booking_days));
        if start > window {
            return Err(format!(
                "start_time {start} is past the booking window: at most {} days ahead, until {window}",
                self.booking_days
            ));
        }
        let row = appointments::Model {
            id: crate::ids::new_id(crate::ids::Kind::Appointment),
            account_id: self.conversation.account_id.clone(),
            contact_id: self.conversation.contact_id.clone(),
            conversation_id: self.conversation.id.clone(),
            agent_id: self.conversation.agent_id.clone().into(),
            start_time: start,
            name: cut(&booking.name),
            email: cut(&booking.email),
            notes: booking.notes.chars().take(2_000).collect(),
            created_at: now,
        };
        let data = json!({"appointment": {
            "id": row.id, "contact_id": row.contact_id, "conversation_id": row.conversation_id,
            "agent_id": row.agent_id, "start_time": row.start_time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "name": row.name, "email": row.email, "notes": row.notes,
        }});
        appointments::Entity::insert(appointments::ActiveModel::from(row.clone()))
            .exec_without_returning(txn)
            .await
            .map_err(unstored)?;
        events::record(txn, &self.account(), EventType::AppointmentBooked, data, now)
            .await
            .map_err(unstored)?;
        Ok(format!("booked: appointment {} at {}", row.id, start.to_rfc3339()))
    }

    async fn deal(&self, txn: &DatabaseTransaction, arguments: &Value, now: DateTime<Utc>) -> Result<String, String> {
        let deal: Deal = read(arguments)?;
        let stage = match deal.stage.filter(|s| !s.trim().is_empty()) {
            Some(stage) => stage,
            None => crate::deals::store::first_stage(txn, &self.account())
                .await
                .map_err(unstored)?
                .map(|stage| stage.id)
                .ok_or("the main pipeline has no stage; name one")?,
        };
        let fields = DealFields {
            title: Some(cut(&deal.title)),
            value: deal.value,
            stage: Some(stage),
            source: Some("ai_agent".into()),
            contact_id: Some(self.conversation.contact_id.to_string()),
            ..DealFields::default()
        };
        // A field the model got wrong (an unknown stage) is its to mend: the API's message goes back to it.
        let created = create_in(txn, &self.account(), fields, || now)
            .await
            .map_err(|err| err.to_string())?;
        Ok(format!("created: deal {} in stage {}", created.id, created.stage))
    }

    async fn task(&self, txn: &DatabaseTransaction, arguments: &Value, now: DateTime<Utc>) -> Result<String, String> {
        let task: Task = read(arguments)?;
        let title = cut(&task.title);
        if title.is_empty() {
            return Err("title must not be empty".into());
        }
        let due = task.due.as_deref().map(|d| time("due", d)).transpose()?;
        let new = crate::tasks::NewTask {
            title,
            due,
            kind: crate::tasks::FROM_TOOL,
            reason: String::new(),
            conversation: &self.conversation,
        };
        let row = crate::tasks::row(new, now);
        tasks::Entity::insert(tasks::ActiveModel::from(row.clone()))
            .exec_without_returning(txn)
            .await
            .map_err(unstored)?;
        Ok(format!("created: task {}", row.id))
    }
}

/// A database failure, logged here, said to the model in words it can act on.
fn unstored(err: sea_orm::DbErr) -> String {
    tracing::error!(error = %err, "an agent's tool could not write");
    "the change could not be stored; try again later".to_owned()
}

/// The arguments as `T`, or what is wrong with them (for the model).
fn read<T: for<'de> Deserialize<'de>>(arguments: &Value) -> Result<T, String> {
    serde_json::from_value(arguments.clone()).map_err(|err| format!("invalid arguments: {err}"))
}

fn time(field: &str, text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| format!("{field} must be an RFC 3339 date and time such as 2026-12-01T10:00:00Z"))
}

fn cut(text: &str) -> String {
    text.trim().chars().take(TITLE_CHARS).collect()
}
