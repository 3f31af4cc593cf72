//! Agent fields as the domain accepts them: a create, an update or a bot-config change is read into
//! `AgentFields` (`None`: not given), checked as a whole, then applied to the stored row.

use frontdesk_api::v1::{
    Agent, Booking, BotConfig, CreateAgentRequest, FollowUps, UpdateAgentRequest, UpdateBotConfigRequest,
};
use sea_orm::ActiveEnum;
use serde::{Deserialize, Serialize};

use super::tier::{DEFAULT_TIER, is_model_name};

use crate::{
    access::AccountId,
    error::ApiResult,
    platform_calls::apply_mask,
    store::{entities::agents, from_json_text, to_json_text},
    timestamps,
    validate::{Violations, is_language_tag},
};

const DEFAULT_LANGUAGE: &str = "en";
const DEFAULT_DELAY_MINUTES: i32 = 60;
const MAX_DELAY_MINUTES: i32 = 7 * 24 * 60;
const DEFAULT_FOLLOW_UPS: i32 = 1;
const MAX_FOLLOW_UPS: i32 = 10;

/// How far ahead an agent books when it does not say, in days.
pub const DEFAULT_BOOKING_DAYS: i32 = 60;
const MAX_BOOKING_DAYS: i32 = 365;

/// Booking as stored (JSON) and answered; a zero window reads as the default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BookingSettings {
    pub enabled: bool,
    pub link: String,
    pub instructions: String,
    pub max_days_ahead: i32,
}

impl Default for BookingSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            link: String::new(),
            instructions: String::new(),
            max_days_ahead: DEFAULT_BOOKING_DAYS,
        }
    }
}

/// Follow-ups as stored (JSON) and answered; zero counts read as the defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FollowUpSettings {
    pub enabled: bool,
    pub delay_minutes: i32,
    pub max_count: i32,
    pub message: String,
}

impl Default for FollowUpSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            delay_minutes: DEFAULT_DELAY_MINUTES,
            max_count: DEFAULT_FOLLOW_UPS,
            message: String::new(),
        }
    }
}

impl From<Booking> for BookingSettings {
    fn from(b: Booking) -> Self {
        Self {
            enabled: b.enabled,
            link: b.link,
            instructions: b.instructions,
            max_days_ahead: if b.max_days_ahead == 0 {
                DEFAULT_BOOKING_DAYS
            } else {
                b.max_days_ahead
            },
        }
    }
}

impl From<FollowUps> for FollowUpSettings {
    fn from(f: FollowUps) -> Self {
        let or = |value: i32, default: i32| if value == 0 { default } else { value };
        Self {
            enabled: f.enabled,
            delay_minutes: or(f.delay_minutes, DEFAULT_DELAY_MINUTES),
            max_count: or(f.max_count, DEFAULT_FOLLOW_UPS),
            message: f.message,
        }
    }
}

/// The fields a request sets; `None` leaves a field as it is (or at its default on create).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentFields {
    pub name: Option<String>,
    pub instructions: Option<String>,
    pub rules: Option<Vec<String>>,
    pub goal: Option<String>,
    pub personality: Option<String>,
    pub language: Option<String>,
    pub ai_tier: Option<String>,
    pub anthropic_model: Option<String>,
    pub booking: Option<BookingSettings>,
    pub follow_ups: Option<FollowUpSettings>,
    pub status: Option<String>,
}

impl AgentFields {
    /// Checks every set field; `creating` also requires the name.
    pub fn validate(&self, creating: bool) -> ApiResult<()> {
        let mut v = Violations::new();
        if creating || self.name.is_some() {
            v.text("name", self.name.as_deref().unwrap_or_default(), true, 200);
        }
        let texts = [
            ("instructions", &self.instructions, 20_000),
            ("goal", &self.goal, 2_000),
            ("personality", &self.personality, 2_000),
        ];
        for (field, value, max) in texts {
            if let Some(value) = value {
                v.text(field, value, false, max);
            }
        }
        if let Some(rules) = &self.rules {
            v.list("rules", rules, 50, 1_000);
        }
        if let Some(language) = &self.language {
            v.check(
                is_language_tag(language),
                "language",
                "must be a BCP 47 language tag such as en, hi-IN or pt-BR",
            );
        }
        if let Some(tier) = &self.ai_tier {
            v.one_of_variants::<agents::AiTier>("ai_tier", tier);
        }
        if let Some(status) = &self.status {
            v.one_of_variants::<agents::AgentStatus>("status", status);
        }
        if let Some(model) = &self.anthropic_model {
            v.check(
                model.is_empty() || is_model_name(model),
                "anthropic_model",
                "must be empty or a model name such as claude-sonnet-4-5",
            );
        }
        if let Some(booking) = &self.booking {
            let https = booking.link.starts_with("https://") && url::Url::parse(&booking.link).is_ok();
            v.check(
                !booking.enabled || https,
                "booking.link",
                "must be an https URL when booking is enabled",
            );
            v.check(booking.link.is_empty() || https, "booking.link", "must be an https URL");
            v.text("booking.instructions", &booking.instructions, false, 2_000);
            v.check(
                (1..=MAX_BOOKING_DAYS).contains(&booking.max_days_ahead),
                "booking.max_days_ahead",
                format!("must be between 1 and {MAX_BOOKING_DAYS}"),
            );
        }
        if let Some(follow_ups) = &self.follow_ups {
            v.check(
                (1..=MAX_DELAY_MINUTES).contains(&follow_ups.delay_minutes),
                "follow_ups.delay_minutes",
                format!("must be between 1 and {MAX_DELAY_MINUTES}"),
            );
            v.check(
                (1..=MAX_FOLLOW_UPS).contains(&follow_ups.max_count),
                "follow_ups.max_count",
                format!("must be between 1 and {MAX_FOLLOW_UPS}"),
            );
            v.text("follow_ups.message", &follow_ups.message, false, 1_000);
        }
        v.finish()
    }

    /// Copies the set fields onto the agent.
    pub fn apply(self, agent: &mut agents::Model) {
        let set = |target: &mut String, value: Option<String>| {
            if let Some(value) = value {
                *target = value;
            }
        };
        set(&mut agent.name, self.name.map(|n| n.trim().to_owned()));
        set(&mut agent.instructions, self.instructions);
        set(&mut agent.rules, self.rules.map(|r| to_json_text(&r)));
        set(&mut agent.goal, self.goal);
        set(&mut agent.personality, self.personality);
        set(&mut agent.language, self.language);
        set(&mut agent.anthropic_model, self.anthropic_model);
        set(&mut agent.booking, self.booking.map(|b| to_json_text(&b)));
        set(&mut agent.follow_ups, self.follow_ups.map(|f| to_json_text(&f)));
        // Validated before: a tier or status given is one of the API's words.
        if let Some(tier) = self.ai_tier.and_then(|word| agents::AiTier::try_from_value(&word).ok()) {
            agent.ai_tier = tier;
        }
        if let Some(status) = self
            .status
            .and_then(|word| agents::AgentStatus::try_from_value(&word).ok())
        {
            agent.status = status;
        }
    }

    /// A new agent's fields: what `self` sets, defaults for the rest.
    pub fn into_new(self, id: String, account_id: &AccountId, now: chrono::DateTime<chrono::Utc>) -> agents::Model {
        let mut agent = agents::Model {
            id: id.into(),
            account_id: account_id.clone(),
            name: String::new(),
            instructions: String::new(),
            rules: "[]".to_owned(),
            goal: String::new(),
            personality: String::new(),
            language: DEFAULT_LANGUAGE.to_owned(),
            ai_tier: DEFAULT_TIER,
            anthropic_model: String::new(),
            booking: to_json_text(&BookingSettings::default()),
            follow_ups: to_json_text(&FollowUpSettings::default()),
            status: agents::AgentStatus::Active,
            created_at: now,
            updated_at: now,
        };
        self.apply(&mut agent);
        agent
    }
}

/// Empty strings in a create mean "not given" for the fields that have defaults.
fn given(value: String) -> Option<String> {
    Some(value).filter(|v| !v.is_empty())
}

impl From<CreateAgentRequest> for AgentFields {
    fn from(r: CreateAgentRequest) -> Self {
        Self {
            name: Some(r.name),
            instructions: Some(r.instructions),
            rules: Some(r.rules),
            goal: Some(r.goal),
            personality: Some(r.personality),
            language: given(r.language),
            ai_tier: given(r.ai_tier),
            anthropic_model: Some(r.anthropic_model),
            booking: r.booking.map(Into::into),
            follow_ups: r.follow_ups.map(Into::into),
            status: given(r.status),
        }
    }
}

/// The fields an agent update sets, from its mask (REST fills the mask from the body's keys).
pub fn update_fields(r: UpdateAgentRequest) -> ApiResult<AgentFields> {
    let mut fields = AgentFields::default();
    apply_mask(r.update_mask.as_ref(), "an agent", |path| {
        match path {
            "name" => fields.name = Some(r.name.clone()),
            "instructions" => fields.instructions = Some(r.instructions.clone()),
            "rules" => fields.rules = Some(r.rules.clone()),
            "goal" => fields.goal = Some(r.goal.clone()),
            "personality" => fields.personality = Some(r.personality.clone()),
            "language" => fields.language = Some(r.language.clone()),
            "ai_tier" => fields.ai_tier = Some(r.ai_tier.clone()),
            "anthropic_model" => fields.anthropic_model = Some(r.anthropic_model.clone()),
            "booking" => fields.booking = Some(r.booking.clone().unwrap_or_default().into()),
            "follow_ups" => fields.follow_ups = Some(r.follow_ups.clone().unwrap_or_default().into()),
            "status" => fields.status = Some(r.status.clone()),
            "agent_id" => {}
            _ => return false,
        }
        true
    })?;
    Ok(fields)
}

/// The fields a bot-config update sets, from its mask.
pub fn bot_config_fields(r: UpdateBotConfigRequest) -> ApiResult<AgentFields> {
    let mut fields = AgentFields::default();
    apply_mask(r.update_mask.as_ref(), "a bot configuration", |path| {
        match path {
            "instructions" => fields.instructions = Some(r.instructions.clone()),
            "rules" => fields.rules = Some(r.rules.clone()),
            "goal" => fields.goal = Some(r.goal.clone()),
            "personality" => fields.personality = Some(r.personality.clone()),
            "language" => fields.language = Some(r.language.clone()),
            "ai_tier" => fields.ai_tier = Some(r.ai_tier.clone()),
            "agent_id" => {}
            _ => return false,
        }
        true
    })?;
    Ok(fields)
}

pub fn agent_message(m: &agents::Model) -> Agent {
    let booking: BookingSettings = from_json_text(&m.booking);
    let follow_ups: FollowUpSettings = from_json_text(&m.follow_ups);
    Agent {
        id: m.id.to_string(),
        name: m.name.clone(),
        instructions: m.instructions.clone(),
        rules: from_json_text(&m.rules),
        goal: m.goal.clone(),
        personality: m.personality.clone(),
        language: m.language.clone(),
        ai_tier: m.ai_tier.to_value(),
        anthropic_model: m.anthropic_model.clone(),
        booking: Some(Booking {
            enabled: booking.enabled,
            link: booking.link,
            instructions: booking.instructions,
            max_days_ahead: booking.max_days_ahead,
        }),
        follow_ups: Some(FollowUps {
            enabled: follow_ups.enabled,
            delay_minutes: follow_ups.delay_minutes,
            max_count: follow_ups.max_count,
            message: follow_ups.message,
        }),
        status: m.status.to_value(),
        created_at: Some(timestamps::to_proto(m.created_at)),
        updated_at: Some(timestamps::to_proto(m.updated_at)),
    }
}

pub fn bot_config_message(m: &agents::Model) -> BotConfig {
    BotConfig {
        agent_id: m.id.to_string(),
        instructions: m.instructions.clone(),
        rules: from_json_text(&m.rules),
        goal: m.goal.clone(),
        personality: m.personality.clone(),
        language: m.language.clone(),
        ai_tier: m.ai_tier.to_value(),
    }
}
