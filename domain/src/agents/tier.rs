//! An agent's AI tier (`mini`, `max`, `pro`): what its replies cost, and on the server's model key which
//! Claude models it may name. A tier's price is what the operator's model of that tier is worth to it; an
//! agent that could name any model would buy the most expensive one at the cheapest tier's price. On the
//! account's own key (`PUT /v1/model-provider`) the account pays the model and any model may be named.

use sea_orm::{ActiveEnum, ConnectionTrait, EntityTrait};

use crate::{
    access::AccountId,
    error::{ApiError, ApiResult},
    store::entities::{
        agents::{self, AiTier},
        model_providers,
    },
};

/// An agent's tier when none is given; also what a summary of a conversation without an agent costs.
pub const DEFAULT_TIER: AiTier = AiTier::Pro;

/// What a reply costs at each tier, in milli-credits.
pub fn tier_cost(tier: AiTier) -> i64 {
    match tier {
        AiTier::Pro => 1_000,
        AiTier::Max => 250,
        AiTier::Mini => 150,
    }
}

/// What a reply costs: its tier's price, nothing for a pro reply on the account's own model key.
pub fn reply_cost(tier: AiTier, own_key: bool) -> i64 {
    if own_key && tier == AiTier::Pro {
        0
    } else {
        tier_cost(tier)
    }
}

/// The Claude models each tier may name on the server's key (`FRONTDESK_MODELS_MINI`, `_MAX`, `_PRO`); the
/// first of a tier's list is its default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TierModels {
    pub mini: Vec<String>,
    pub max: Vec<String>,
    pub pro: Vec<String>,
}

impl TierModels {
    /// The models `tier` may name.
    pub fn of(&self, tier: AiTier) -> &[String] {
        match tier {
            AiTier::Pro => &self.pro,
            AiTier::Max => &self.max,
            AiTier::Mini => &self.mini,
        }
    }

    pub fn allows(&self, tier: AiTier, model: &str) -> bool {
        self.of(tier).iter().any(|m| m == model)
    }

    /// The model a reply of `tier` uses on the server's key: the first of `wanted` (the agent's, then the
    /// server's default) that the tier allows, else the tier's own default.
    pub fn pick<'a>(&'a self, tier: AiTier, wanted: &[&'a str]) -> &'a str {
        wanted
            .iter()
            .copied()
            .find(|model| !model.is_empty() && self.allows(tier, model))
            .or(self.of(tier).first().map(String::as_str))
            .unwrap_or_default()
    }

    /// A list that is empty or names a model no request could carry is a configuration error.
    pub fn check(&self) -> anyhow::Result<()> {
        for (variable, models) in [
            ("FRONTDESK_MODELS_MINI", &self.mini),
            ("FRONTDESK_MODELS_MAX", &self.max),
            ("FRONTDESK_MODELS_PRO", &self.pro),
        ] {
            if models.is_empty() {
                anyhow::bail!("{variable} names no model");
            }
            if let Some(bad) = models.iter().find(|m| !is_model_name(m)) {
                anyhow::bail!("{variable}: `{bad}` is not a model name such as claude-sonnet-4-5");
            }
        }
        Ok(())
    }
}

/// A Claude model's name as the Messages API takes it.
pub fn is_model_name(model: &str) -> bool {
    model.starts_with("claude-")
        && model.len() <= 100
        && model
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// Refuses (400 naming `anthropic_model`) an agent whose model its tier may not name on the server's key,
/// unless the account connected its own key.
pub async fn check_model(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    agent: &agents::Model,
    tiers: &TierModels,
) -> ApiResult<()> {
    let model = agent.anthropic_model.as_str();
    if model.is_empty() || tiers.allows(agent.ai_tier, model) {
        return Ok(());
    }
    let own_key = model_providers::Entity::find_by_id(account_id.clone())
        .one(db)
        .await?
        .is_some();
    if own_key {
        return Ok(());
    }
    Err(ApiError::field(
        "anthropic_model",
        format!(
            "the {} tier may name {} on this server's key (or connect your own model key to name any model)",
            agent.ai_tier.to_value(),
            tiers.of(agent.ai_tier).join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiers() -> TierModels {
        TierModels {
            mini: vec!["claude-haiku-4-5".into()],
            max: vec!["claude-sonnet-4-5".into(), "claude-haiku-4-5".into()],
            pro: vec!["claude-sonnet-4-5".into(), "claude-opus-4-5".into()],
        }
    }

    #[test]
    fn a_tier_picks_the_first_wanted_model_it_allows_else_its_own() {
        let tiers = tiers();
        assert_eq!(
            tiers.pick(AiTier::Mini, &["claude-opus-4-5", "claude-sonnet-4-5"]),
            "claude-haiku-4-5"
        );
        assert_eq!(
            tiers.pick(AiTier::Pro, &["claude-opus-4-5", "claude-sonnet-4-5"]),
            "claude-opus-4-5"
        );
        assert_eq!(tiers.pick(AiTier::Max, &["", "claude-haiku-4-5"]), "claude-haiku-4-5");
        assert_eq!(tiers.pick(AiTier::Max, &["claude-opus-4-5"]), "claude-sonnet-4-5");
    }

    #[test]
    fn prices_and_lists_are_checked() {
        assert_eq!(reply_cost(AiTier::Pro, true), 0);
        assert_eq!(reply_cost(AiTier::Max, true), 250);
        assert_eq!(reply_cost(AiTier::Mini, false), 150);
        assert!(tiers().check().is_ok());
        let empty = TierModels {
            mini: Vec::new(),
            ..tiers()
        };
        assert!(empty.check().is_err());
        let odd = TierModels {
            max: vec!["gpt 4".into()],
            ..tiers()
        };
        assert!(odd.check().is_err());
    }
}
