//! The adapter of each connected channel, built from its sealed configuration on first use and kept (a
//! channel's configuration never changes: reconnecting makes a new channel with a new id).

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, PoisonError},
};

use super::{
    ChannelAdapter, ConfigError, TwilioAdapter,
    meta::{GraphApi, MessengerAdapter, WhatsAppAdapter},
    pacing,
};
use crate::{
    secrets::Sealer,
    store::entities::channels::{self, ChannelProvider},
};

/// An adapter ready to use, with the channel's send pace.
#[derive(Clone)]
pub struct Ready {
    pub adapter: Arc<dyn ChannelAdapter>,
    /// `max_per_second` of the channel's config (default 10; web chat: unpaced).
    pub per_second: f64,
}

/// Why a channel has no adapter.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    #[error("the channel's stored configuration cannot be opened with this FRONTDESK_SECRET_KEY")]
    Unsealable,
    #[error(transparent)]
    Config(#[from] ConfigError),
}

pub struct Adapters {
    sealer: Sealer,
    twilio_base_url: String,
    graph: GraphApi,
    http: reqwest::Client,
    /// The built-in web chat's adapter (web chat sits above the channels and hands it in).
    webchat: Arc<dyn ChannelAdapter>,
    built: Mutex<HashMap<String, Ready>>,
}

impl Adapters {
    pub fn new(
        sealer: Sealer,
        twilio_base_url: &str,
        graph: GraphApi,
        http: reqwest::Client,
        webchat: Arc<dyn ChannelAdapter>,
    ) -> Self {
        Self {
            sealer,
            twilio_base_url: twilio_base_url.trim_end_matches('/').to_owned(),
            graph,
            http,
            webchat,
            built: Mutex::default(),
        }
    }

    pub fn for_channel(&self, channel: &channels::Model) -> Result<Ready, AdapterError> {
        if let Some(ready) = self
            .built
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(channel.id.as_str())
        {
            return Ok(ready.clone());
        }
        let config = self.config(channel)?;
        let (verify_token, http) = (&channel.verify_token, self.http.clone());
        let adapter: Arc<dyn ChannelAdapter> = match channel.provider {
            ChannelProvider::Twilio => Arc::new(TwilioAdapter::new(&config, &self.twilio_base_url, http)?),
            ChannelProvider::WhatsappCloud => Arc::new(WhatsAppAdapter::new(&config, verify_token, &self.graph, http)?),
            ChannelProvider::Meta => Arc::new(MessengerAdapter::new(
                channel.kind,
                &config,
                verify_token,
                &self.graph,
                http,
            )?),
            ChannelProvider::Builtin => self.webchat.clone(),
        };
        // Web chat's "provider" is this service: nothing to pace.
        let default_pace = if channel.provider == ChannelProvider::Builtin {
            pacing::MAX_PER_SECOND
        } else {
            pacing::DEFAULT_PER_SECOND
        };
        let ready = Ready {
            adapter,
            per_second: pacing::per_second(config.get("max_per_second").map(String::as_str), default_pace),
        };
        self.built
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(channel.id.to_string(), ready.clone());
        Ok(ready)
    }

    /// The channel's configuration, unsealed.
    pub fn config(&self, channel: &channels::Model) -> Result<BTreeMap<String, String>, AdapterError> {
        let opened = self
            .sealer
            .open(&channel.id, &channel.config)
            .map_err(|_| AdapterError::Unsealable)?;
        serde_json::from_slice(&opened).map_err(|_| AdapterError::Unsealable)
    }
}
