//! Web chat (docs/webchat.md): the core's side of the widget. Visitors carry no API key: a channel's public
//! widget key starts a session, whose token is the credential after that (`sessions`, `token`). The visitor
//! API's plain calls (`visitor_api`) and the live socket (`socket`) reach the core through the edge as the
//! `WebChat` gRPC service (`service`); a visitor's message is stored like any channel's (`Arrivals`), and the
//! business's replies reach the visitor through the web chat adapter (`channels::webchat`), which pushes them
//! to the visitor's sockets on any replica (`live`). Presence, visitors' rate limits and the business's view
//! of a session live here too.

pub mod adapter;
mod client;
mod config;
pub mod empty_sessions;
mod expiry;
pub mod frames;
mod limits;
pub mod live;
mod presence;
pub mod pushes;
mod receipts;
mod replay;
pub mod service;
pub mod sessions;
mod socket;
mod socket_caps;
mod token;
mod visitor_api;

pub use config::WebChatConfig;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};

use self::{
    frames::Change,
    limits::{Limited, VisitorLimits},
    live::{Live, Push},
    presence::Presence,
    sessions::Visitor,
    socket_caps::SocketCaps,
};
use crate::{
    channels::{
        InboundMessage, Sender,
        widget::{self, Widget},
    },
    clock::Clock,
    conversations::inbound::{Arrival, Arrivals},
    error::{ApiError, ApiResult},
    secrets::Sealer,
    store::entities::{channels, messages},
};

/// Longest visitor message, in characters.
const MAX_TEXT_CHARS: usize = 4_000;
const MAX_CLIENT_MESSAGE_ID_CHARS: usize = 64;

/// Everything web chat needs, shared by its gRPC services.
pub struct WebChat {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    live: Live,
    presence: Presence,
    limits: VisitorLimits,
    sockets: SocketCaps,
    arrivals: Arrivals,
    widgets: Widgets,
    session_ttl: chrono::Duration,
    /// The origin of `FRONTDESK_PUBLIC_URL`: this server's own pages are no foreign origin.
    public_origin: String,
}

/// Why a visitor's request was refused: as any call, or by a rate limit (which says when to retry).
#[derive(Debug)]
pub enum Refusal {
    Api(ApiError),
    Limited(Limited, &'static str),
}

impl From<ApiError> for Refusal {
    fn from(error: ApiError) -> Self {
        Self::Api(error)
    }
}

impl From<sea_orm::DbErr> for Refusal {
    fn from(error: sea_orm::DbErr) -> Self {
        Self::Api(error.into())
    }
}

impl Refusal {
    fn into_api_error(self) -> ApiError {
        match self {
            Self::Api(error) => error,
            Self::Limited(limited, what) => limited.error(what),
        }
    }
}

/// What web chat takes from the service's configuration.
pub struct Setup<'a> {
    pub webchat: &'a WebChatConfig,
    /// The service's public URL, whose origin the widget's script is served from.
    pub public_url: &'a str,
    /// Redis, for the visitor limits shared by every replica.
    pub redis_url: Option<&'a str>,
}

impl WebChat {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        live: Live,
        arrivals: Arrivals,
        sealer: Sealer,
        setup: Setup<'_>,
    ) -> anyhow::Result<Self> {
        let webchat = setup.webchat;
        Ok(Self {
            public_origin: widget::origin_of(setup.public_url),
            presence: Presence::start(db.clone(), clock.clone()),
            limits: VisitorLimits::new(setup.redis_url, webchat)?,
            sockets: SocketCaps::new(webchat.sockets_per_session, webchat.sockets_per_address),
            widgets: Widgets::new(sealer),
            session_ttl: chrono::Duration::from_std(webchat.session_ttl)?,
            db,
            clock,
            live,
            arrivals,
        })
    }

    /// This server, as a request that came to `host` sees it.
    fn here<'a>(&'a self, host: &'a str) -> widget::Here<'a> {
        widget::Here {
            host,
            public_origin: &self.public_origin,
        }
    }

    /// The channel's widget; a channel whose config cannot be opened is an internal error (logged).
    fn widget_of(&self, channel: &channels::Model) -> ApiResult<Arc<Widget>> {
        self.widgets.of(channel)
    }

    /// Stores a message the visitor wrote (once per `client_message_id`) and shows it on every socket of
    /// the session. Returns the message and whether it is new (false: a repeat, answered with the first).
    async fn visitor_message(
        &self,
        visitor: &Visitor,
        text: String,
        client_message_id: String,
    ) -> Result<(messages::Model, bool), Refusal> {
        let session = &visitor.session;
        self.limits.message(session).await?;
        check_text(&text)?;
        let client_message_id = checked_client_id(client_message_id)?;
        // A provider's message id means something on its channel only; a visitor's on its session only.
        let provider_message_id = format!("{}/{}", session.id, client_message_id);
        let arrival = Arrival {
            channel: visitor.channel.clone(),
            message: InboundMessage {
                provider_message_id: provider_message_id.clone(),
                sender: Sender::Identity {
                    kind: "webchat",
                    external_id: session.id.clone(),
                },
                recipient: visitor.channel.id.to_string(),
                text,
                attachments: Vec::new(),
                sender_name: session.visitor_name.clone(),
                referral: sessions::page_ref(&session.page_url),
                page_url: session.page_url.clone(),
                answerable: true,
            },
            trace_parent: crate::telemetry::traceparent(),
        };
        self.presence.seen(&session.id);
        let Some(stored) = self.arrivals.receive(arrival).await? else {
            let first = messages::Entity::find()
                .filter(messages::Column::ChannelId.eq(&visitor.channel.id))
                .filter(messages::Column::ProviderMessageId.eq(&provider_message_id))
                .one(&self.db)
                .await?
                .ok_or_else(|| ApiError::internal("a repeated visitor message is not stored"))?;
            return Ok((first, false));
        };
        let echo = frames::message(Change::New, &stored, Some(&client_message_id));
        if let Err(err) = self.live.publish(&sessions::key(session), Push::Frame(echo)).await {
            tracing::warn!(error = %err, "a visitor's message was stored but not shown on their other sockets");
        }
        Ok((stored, true))
    }
}

fn check_text(text: &str) -> ApiResult<()> {
    if text.trim().is_empty() {
        return Err(ApiError::field("text", "must not be empty"));
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(ApiError::field(
            "text",
            format!("must be at most {MAX_TEXT_CHARS} characters"),
        ));
    }
    Ok(())
}

/// The client's id of a message, or a new one when it gave none (such a message is never a repeat).
fn checked_client_id(id: String) -> ApiResult<String> {
    if id.is_empty() {
        return Ok(format!("srv-{}", crate::ids::base62(16)));
    }
    let fine = id.chars().count() <= MAX_CLIENT_MESSAGE_ID_CHARS && id.chars().all(|c| !c.is_control());
    if fine {
        Ok(id)
    } else {
        Err(ApiError::field(
            "client_message_id",
            format!("must be at most {MAX_CLIENT_MESSAGE_ID_CHARS} characters, none of them control characters"),
        ))
    }
}

/// Channels' widgets, read from their sealed configs once (a channel's config never changes).
struct Widgets {
    sealer: Sealer,
    read: Mutex<HashMap<String, Arc<Widget>>>,
}

impl Widgets {
    fn new(sealer: Sealer) -> Self {
        Self {
            sealer,
            read: Mutex::default(),
        }
    }

    fn of(&self, channel: &channels::Model) -> ApiResult<Arc<Widget>> {
        if let Some(widget) = self
            .read
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(channel.id.as_str())
        {
            return Ok(widget.clone());
        }
        let config: std::collections::BTreeMap<String, String> = self
            .sealer
            .open(&channel.id, &channel.config)
            .ok()
            .and_then(|opened| serde_json::from_slice(&opened).ok())
            .ok_or_else(|| ApiError::internal(format!("the config of channel {} cannot be opened", channel.id)))?;
        let widget = Arc::new(Widget::from_config(&config).map_err(|problems| {
            ApiError::internal(format!(
                "the stored web chat config of {} is invalid: {problems:?}",
                channel.id
            ))
        })?);
        self.read
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(channel.id.to_string(), widget.clone());
        Ok(widget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visitor_text_and_ids_are_checked() {
        assert!(check_text("hi").is_ok());
        assert_eq!(check_text("  \n").unwrap_err().fields[0].field, "text");
        assert!(check_text(&"é".repeat(4_000)).is_ok());
        assert!(check_text(&"é".repeat(4_001)).is_err());
        assert_eq!(checked_client_id("c-1".into()).unwrap(), "c-1");
        assert!(checked_client_id(String::new()).unwrap().starts_with("srv-"));
        assert!(checked_client_id("a\nb".into()).is_err());
        assert!(checked_client_id("x".repeat(65)).is_err());
    }
}
