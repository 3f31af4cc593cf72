//! Which model answers: the server's provider and its defaults, and the limits of a model-written reply.
//! Keys come from the environment only (never a command-line flag, which the process list shows).

use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::{agents::tier::TierModels, env_values::parse_positive_duration};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProviderKind {
    /// In process: retrieval over the agent's knowledge, no network.
    Local,
    /// Anthropic's Messages API.
    Anthropic,
    /// OpenAI's Chat Completions, or any server that speaks it (vLLM, Ollama, llama.cpp).
    Openai,
}

/// Model providers. Not `Debug`: it holds the keys.
#[derive(Args, Clone)]
pub struct ModelConfig {
    /// The server's model provider for every account that has not connected its own: `local` (default),
    /// `anthropic` (needs ANTHROPIC_API_KEY) or `openai` (OPENAI_API_KEY; none for a local server).
    #[arg(
        id = "model_provider",
        long = "model-provider",
        env = "FRONTDESK_MODEL_PROVIDER",
        value_enum,
        default_value = "local"
    )]
    pub provider: ProviderKind,

    /// Base URL of Anthropic's API (`/v1/messages` is under it).
    #[arg(
        long = "anthropic-base-url",
        env = "ANTHROPIC_BASE_URL",
        default_value = "https://api.anthropic.com"
    )]
    pub anthropic_base_url: String,

    /// The Claude model of agents without an `anthropic_model` of their own.
    #[arg(
        long = "anthropic-model",
        env = "FRONTDESK_ANTHROPIC_MODEL",
        default_value = "claude-sonnet-4-5"
    )]
    pub anthropic_model: String,

    #[arg(skip = std::env::var("ANTHROPIC_API_KEY").ok().map(|k| k.trim().to_owned()).filter(|k| !k.is_empty()))]
    pub anthropic_api_key: Option<String>,

    /// Base URL of an OpenAI-compatible API, up to its version (`/chat/completions` is under it): OpenAI's,
    /// or a local server's such as `http://localhost:11434/v1` (Ollama).
    #[arg(
        long = "openai-base-url",
        env = "OPENAI_BASE_URL",
        default_value = "https://api.openai.com/v1"
    )]
    pub openai_base_url: String,

    /// The model asked on the OpenAI-compatible API.
    #[arg(long = "openai-model", env = "FRONTDESK_OPENAI_MODEL", default_value = "gpt-4o-mini")]
    pub openai_model: String,

    #[arg(skip = std::env::var("OPENAI_API_KEY").ok().map(|k| k.trim().to_owned()).filter(|k| !k.is_empty()))]
    pub openai_api_key: Option<String>,

    /// Time limit of one call to a model; a call that runs out is tried again (four tries in all).
    #[arg(long = "model-timeout", env = "FRONTDESK_MODEL_TIMEOUT", default_value = "30s", value_parser = parse_positive_duration)]
    pub call_timeout: Duration,

    /// Time limit of a whole model-written reply: every call, wait and tool call. Past it the
    /// conversation goes to a person with `model_unavailable`.
    #[arg(long = "reply-time-limit", env = "FRONTDESK_REPLY_TIME_LIMIT", default_value = "60s", value_parser = parse_positive_duration)]
    pub reply_time_limit: Duration,

    /// The Claude models a `mini` agent may name on the server's key, comma-separated; the first is the
    /// tier's default. On an account's own key any model may be named.
    #[arg(
        long = "models-mini",
        env = "FRONTDESK_MODELS_MINI",
        value_delimiter = ',',
        default_value = "claude-haiku-4-5"
    )]
    pub models_mini: Vec<String>,

    /// The Claude models a `max` agent may name on the server's key, comma-separated; the first is the default.
    #[arg(
        long = "models-max",
        env = "FRONTDESK_MODELS_MAX",
        value_delimiter = ',',
        default_value = "claude-sonnet-4-5,claude-haiku-4-5"
    )]
    pub models_max: Vec<String>,

    /// The Claude models a `pro` agent may name on the server's key, comma-separated; the first is the default.
    #[arg(
        long = "models-pro",
        env = "FRONTDESK_MODELS_PRO",
        value_delimiter = ',',
        default_value = "claude-sonnet-4-5,claude-opus-4-5,claude-haiku-4-5"
    )]
    pub models_pro: Vec<String>,

    /// Tokens of instructions, knowledge and conversation a model is sent at most (counted as characters / 4).
    #[arg(long = "model-context-tokens", env = "FRONTDESK_MODEL_CONTEXT_TOKENS", default_value_t = 8_000, value_parser = clap::value_parser!(u32).range(500..=1_000_000))]
    pub context_tokens: u32,
}

impl ModelConfig {
    /// The server's provider can run: a remote one has what it needs.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.provider == ProviderKind::Anthropic && self.anthropic_api_key.is_none() {
            anyhow::bail!("FRONTDESK_MODEL_PROVIDER=anthropic needs ANTHROPIC_API_KEY");
        }
        self.tiers().check()
    }

    /// The models each tier may name on the server's key.
    pub fn tiers(&self) -> TierModels {
        let list = |models: &[String]| -> Vec<String> {
            models
                .iter()
                .map(|m| m.trim().to_owned())
                .filter(|m| !m.is_empty())
                .collect()
        };
        TierModels {
            mini: list(&self.models_mini),
            max: list(&self.models_max),
            pro: list(&self.models_pro),
        }
    }
}
