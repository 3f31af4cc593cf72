//! The tools every model-backed agent has: `book_appointment` (when booking is on; stores the appointment on
//! the contact and emits `appointment.booked`), `handoff_to_human`, `create_deal` (source `ai_agent`, linked
//! to the contact) and `create_task`. Each write is its own short transaction; what the model gave wrong
//! (a missing title, a time that is not RFC 3339) goes back to it as a tool error.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseConnection, EntityTrait};
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::{chat::ToolSpec, provider::ToolOutcome};
use crate::{
    access::AccountId,
    clock::Clock,
    deals::{fields::DealFields, service::DealsService},
    events::{self, EventType},
    store::entities::{appointments, conversations, tasks},
};

/// The most characters of a handoff reason kept.
const REASON_CHARS: usize = 200;
/// The most characters of a title kept.
const TITLE_CHARS: usize = 200;

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
            "book_appointment" if self.booking => self.book(arguments).await,
            "handoff_to_human" => read::<Handoff>(arguments).map(|h| {
                let reason: String = h.reason.trim().chars().take(REASON_CHARS).collect();
                ToolOutcome::Handoff(if reason.is_empty() {
                    "requested_by_agent".into()
                } else {
                    reason
                })
            }),
            "create_deal" => self.deal(arguments).await,
            "create_task" => self.task(arguments).await,
            _ => return None,
        };
        Some(outcome.unwrap_or_else(ToolOutcome::Error))
    }

    fn account(&self) -> AccountId {
        AccountId::of_row(&self.conversation.account_id)
    }

    async fn book(&self, arguments: &Value) -> Result<ToolOutcome, String> {
        let booking: Booking = read(arguments)?;
        let start = time("start_time", &booking.start_time)?;
        let now = self.clock.now();
        if start <= now {
            return Err(format!("start_time {start} is in the past; it is now {now}"));
        }
        let row = appointments::Model {
            id: format!("apt_{}", crate::ids::base62(16)),
            account_id: self.conversation.account_id.clone(),
            contact_id: self.conversation.contact_id.clone(),
            conversation_id: self.conversation.id.clone(),
            agent_id: self.conversation.agent_id.clone(),
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
        let stored = async {
            let txn = crate::store::begin_write(&self.db).await?;
            appointments::Entity::insert(appointments::ActiveModel::from(row.clone()))
                .exec_without_returning(&txn)
                .await?;
            events::record(&txn, &self.account(), EventType::AppointmentBooked, data, now).await?;
            txn.commit().await
        };
        stored.await.map_err(|err| {
            tracing::error!(error = %err, "an appointment could not be stored");
            "the appointment could not be stored; try again later".to_owned()
        })?;
        Ok(ToolOutcome::Answer(format!(
            "booked: appointment {} at {}",
            row.id,
            start.to_rfc3339()
        )))
    }

    async fn deal(&self, arguments: &Value) -> Result<ToolOutcome, String> {
        let deal: Deal = read(arguments)?;
        let stage = match deal.stage.filter(|s| !s.trim().is_empty()) {
            Some(stage) => stage,
            None => crate::deals::store::first_stage(&self.db, &self.account())
                .await
                .map_err(|err| err.to_string())?
                .map(|stage| stage.id)
                .ok_or("the main pipeline has no stage; name one")?,
        };
        let fields = DealFields {
            title: Some(cut(&deal.title)),
            value: deal.value,
            stage: Some(stage),
            source: Some("ai_agent".into()),
            contact_id: Some(self.conversation.contact_id.clone()),
            ..DealFields::default()
        };
        let service = DealsService::new(self.db.clone(), self.clock.clone());
        let created = service
            .create(&self.account(), fields)
            .await
            .map_err(|err| err.to_string())?;
        Ok(ToolOutcome::Answer(format!(
            "created: deal {} in stage {}",
            created.id, created.stage
        )))
    }

    async fn task(&self, arguments: &Value) -> Result<ToolOutcome, String> {
        let task: Task = read(arguments)?;
        let title = cut(&task.title);
        if title.is_empty() {
            return Err("title must not be empty".into());
        }
        let due = task.due.as_deref().map(|d| time("due", d)).transpose()?;
        let now = self.clock.now();
        let row = tasks::Model {
            id: format!("task_{}", crate::ids::base62(16)),
            account_id: self.conversation.account_id.clone(),
            title,
            due,
            status: "open".into(),
            contact_id: self.conversation.contact_id.clone(),
            conversation_id: self.conversation.id.clone(),
            agent_id: self.conversation.agent_id.clone(),
            created_at: now,
            updated_at: now,
        };
        tasks::Entity::insert(tasks::ActiveModel::from(row.clone()))
            .exec_without_returning(&self.db)
            .await
            .map_err(|err| {
                tracing::error!(error = %err, "a task could not be stored");
                "the task could not be stored; try again later".to_owned()
            })?;
        Ok(ToolOutcome::Answer(format!("created: task {}", row.id)))
    }
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
