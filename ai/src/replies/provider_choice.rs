//! Which provider answers a reply: the account's own (`PUT /v1/model-provider`) when it connected one, else
//! the server's (`FRONTDESK_MODEL_PROVIDER`), else the local one. On the server's key the agent's tier decides
//! its Claude model (`agents::tier`); on the account's own key the connection's model, else the agent's. An
//! account's own base URL is a customer's URL: it is called through the outbound policy's client (no private
//! addresses unless allowed, no redirects); the server's are the operator's and are called as configured.

use std::{sync::Arc, time::Duration};

use sea_orm::{DatabaseConnection, EntityTrait};

use super::{
    chat::{ChatModel, anthropic::Anthropic, openai::OpenAi},
    config::{ModelConfig, ProviderKind},
    local::LocalModel,
    provider::ModelProvider,
    remote::{RemoteProvider, ReplyLimits},
};
use crate::{
    access::AccountId,
    agents::tier::TierModels,
    error::ApiResult,
    integrations::outbound::OutboundPolicy,
    knowledge::import::pairs::PairWriter,
    secrets::Sealer,
    store::entities::{agents, model_providers},
};

/// The APIs an account's own key is used with when it named no base URL, and OpenAI's model then.
const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
const OPENAI_MODEL: &str = "gpt-4o-mini";
/// What a hold of a model's work lasts beyond the reply's time limit: reading tools and storing the reply.
const HOLD_MARGIN: Duration = Duration::from_secs(120);

fn vendor_base_url(kind: ProviderKind) -> &'static str {
    if kind == ProviderKind::Anthropic {
        ANTHROPIC_BASE_URL
    } else {
        OPENAI_BASE_URL
    }
}

/// The provider of one reply.
pub struct Chosen {
    pub provider: Arc<dyn ModelProvider>,
    /// The account's own key pays the model: pro replies cost no credits.
    pub own_key: bool,
}

pub struct Providers {
    db: DatabaseConnection,
    sealer: Sealer,
    config: ModelConfig,
    tiers: TierModels,
    limits: ReplyLimits,
    local: Arc<LocalModel>,
    /// For the server's providers.
    server_client: reqwest::Client,
    /// For accounts' own base URLs.
    guarded_client: reqwest::Client,
}

impl Providers {
    pub fn new(
        db: DatabaseConnection,
        sealer: Sealer,
        config: ModelConfig,
        policy: &OutboundPolicy,
    ) -> anyhow::Result<Self> {
        config.check()?;
        let limits = ReplyLimits {
            per_reply: config.reply_time_limit,
            context_tokens: config.context_tokens as usize,
            ..ReplyLimits::default()
        };
        Ok(Self {
            server_client: crate::integrations::http::client(config.call_timeout)?,
            guarded_client: policy.client(config.call_timeout)?,
            db,
            sealer,
            tiers: config.tiers(),
            config,
            limits,
            local: Arc::new(LocalModel::default()),
        })
    }

    /// The provider for a reply of `agent` on `account_id`'s behalf.
    pub async fn for_reply(&self, account_id: &AccountId, agent: &agents::Model) -> ApiResult<Chosen> {
        self.for_agent(account_id, Some(agent)).await
    }

    /// The provider for work on `account_id`'s behalf, of `agent` when one is concerned (its Claude model).
    pub async fn for_agent(&self, account_id: &AccountId, agent: Option<&agents::Model>) -> ApiResult<Chosen> {
        Ok(match self.remote_for(account_id, agent).await? {
            Some((provider, own_key)) => Chosen { provider, own_key },
            None => Chosen {
                provider: self.local.clone(),
                own_key: false,
            },
        })
    }

    fn remote(
        &self,
        kind: ProviderKind,
        api_key: String,
        base_url: Option<&str>,
        model: Option<&str>,
        agent: Option<&agents::Model>,
        client: &reqwest::Client,
    ) -> Arc<RemoteProvider> {
        let (chat, model): (Arc<dyn ChatModel>, String) = match kind {
            ProviderKind::Openai => (
                Arc::new(OpenAi {
                    client: client.clone(),
                    base_url: base_url.unwrap_or(&self.config.openai_base_url).to_owned(),
                    api_key,
                }),
                model.unwrap_or(&self.config.openai_model).to_owned(),
            ),
            _ => (
                Arc::new(Anthropic {
                    client: client.clone(),
                    base_url: base_url.unwrap_or(&self.config.anthropic_base_url).to_owned(),
                    api_key,
                }),
                model.map_or_else(|| self.claude_model(agent), str::to_owned),
            ),
        };
        Arc::new(RemoteProvider {
            chat,
            model,
            limits: self.limits,
        })
    }

    /// How long a model's work is held against credits: a reply's time limit, and time to store it.
    pub fn hold_time(&self) -> Duration {
        self.config.reply_time_limit + HOLD_MARGIN
    }

    /// The Claude model of work on the server's key: of an agent, the first of its own model and the
    /// server's default that its tier allows, else the tier's default; of other work, the server's default.
    fn claude_model(&self, agent: Option<&agents::Model>) -> String {
        match agent {
            Some(agent) => self
                .tiers
                .pick(
                    agent.ai_tier,
                    &[agent.anthropic_model.as_str(), self.config.anthropic_model.as_str()],
                )
                .to_owned(),
            None => self.config.anthropic_model.clone(),
        }
    }

    /// The account's model-backed provider (its own, else the server's), or `None` when only the local one
    /// answers for it; and whether it is the account's own.
    async fn remote_for(
        &self,
        account_id: &AccountId,
        agent: Option<&agents::Model>,
    ) -> ApiResult<Option<(Arc<RemoteProvider>, bool)>> {
        let own = model_providers::Entity::find_by_id(account_id.clone())
            .one(&self.db)
            .await?;
        if let Some(own) = own {
            match self.sealer.open(account_id.as_str(), &own.sealed_key) {
                Ok(key) => {
                    let key = String::from_utf8_lossy(&key).into_owned();
                    let kind = if own.provider == "anthropic" {
                        ProviderKind::Anthropic
                    } else {
                        ProviderKind::Openai
                    };
                    // The vendor's own API and model when the account named none: never the operator's
                    // endpoint or model, which are the server's and may be private.
                    let base_url = Some(own.base_url.as_str())
                        .filter(|u| !u.is_empty())
                        .unwrap_or(vendor_base_url(kind));
                    // Any model on the account's own key: its own connection's, else the agent's.
                    let model = Some(own.model.as_str())
                        .filter(|m| !m.is_empty())
                        .or((kind == ProviderKind::Openai).then_some(OPENAI_MODEL))
                        .or(agent.map(|a| a.anthropic_model.as_str()).filter(|m| !m.is_empty()));
                    let provider = self.remote(kind, key, Some(base_url), model, agent, &self.guarded_client);
                    return Ok(Some((provider, true)));
                }
                Err(_) => {
                    tracing::error!(account = %account_id, "the account's model key cannot be opened with this server's key; the server's provider answers")
                }
            }
        }
        let key = match self.config.provider {
            ProviderKind::Local => return Ok(None),
            ProviderKind::Anthropic => self.config.anthropic_api_key.clone(),
            ProviderKind::Openai => self.config.openai_api_key.clone(),
        };
        let provider = self.remote(
            self.config.provider,
            key.unwrap_or_default(),
            None,
            None,
            agent,
            &self.server_client,
        );
        Ok(Some((provider, false)))
    }
}

#[async_trait::async_trait]
impl PairWriter for Providers {
    async fn writes_for(&self, account_id: &AccountId) -> bool {
        match self.remote_for(account_id, None).await {
            Ok(found) => found.is_some(),
            Err(err) => {
                tracing::warn!(account = %account_id, error = %err.message, "the account's model provider could not be read; the sections stay FAQs as they are");
                false
            }
        }
    }

    fn time_limit(&self) -> Duration {
        self.hold_time()
    }

    async fn pairs(&self, account_id: &AccountId, heading: &str, text: &str) -> Option<Vec<(String, String)>> {
        match self.remote_for(account_id, None).await {
            Ok(Some((provider, _))) => provider.write_pairs(heading, text).await,
            Ok(None) => None,
            Err(err) => {
                tracing::warn!(account = %account_id, error = %err.message, "the account's model provider could not be read; the section stays one FAQ");
                None
            }
        }
    }
}
