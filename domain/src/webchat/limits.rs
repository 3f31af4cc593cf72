//! Visitors' rate limits, per minute, counted like accounts' requests (in Redis when configured, shared by
//! every replica; in process otherwise) but kept out of the accounts' usage figures. New sessions count
//! against their client address (an IPv6 address with its /64: `client::address_group`), their channel and
//! their account; messages against their session, channel and account; resumes, thread reads and socket
//! openings against their session (`read`); and every other frame a socket sends (`typing`, `seen`) against
//! its token, before the session is even read (`signal`). So one widget key, however many addresses and
//! sessions it is used from, cannot take more of the service than its channel's and account's budgets. A
//! refusal says what was limited and when to retry.

use std::time::Duration;

use tonic::Code;

use super::Refusal;
use crate::error::Reason;
use crate::{
    access::rate_limit::{RateLimiter, RedisWindows},
    error::ApiError,
    store::entities::{channels, chat_sessions},
    webchat::WebChatConfig,
};

const WINDOW: Duration = Duration::from_secs(60);

pub struct VisitorLimits {
    limiter: RateLimiter,
    budgets: WebChatConfig,
}

/// A refusal: retry after this many seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limited {
    pub retry_after: u32,
}

impl Limited {
    pub fn error(self, what: &str) -> ApiError {
        ApiError::new(
            Code::ResourceExhausted,
            Reason::RateLimited,
            format!("too many {what}; retry after {} s", self.retry_after),
        )
    }
}

impl VisitorLimits {
    pub fn new(redis_url: Option<&str>, budgets: &WebChatConfig) -> anyhow::Result<Self> {
        let redis = redis_url
            .map(RedisWindows::new)
            .transpose()?
            .map(RedisWindows::without_usage);
        Ok(Self {
            limiter: RateLimiter::new(redis, WINDOW),
            budgets: budgets.clone(),
        })
    }

    /// One new session on `channel` from the client address group `address` ("" when unknown: those share
    /// one budget).
    pub async fn new_session(&self, address: &str, channel: &channels::Model) -> Result<(), Refusal> {
        let b = &self.budgets;
        self.count(
            "webchat:addr",
            address,
            b.sessions_per_minute,
            "new sessions from this address",
        )
        .await?;
        self.count(
            "webchat:channel-sessions",
            &channel.id,
            b.channel_sessions_per_minute,
            "new sessions on this web chat channel",
        )
        .await?;
        self.count(
            "webchat:account-sessions",
            channel.account_id.as_str(),
            b.account_sessions_per_minute,
            "new sessions on this account's web chat",
        )
        .await
    }

    /// One message of the session.
    pub async fn message(&self, session: &chat_sessions::Model) -> Result<(), Refusal> {
        let b = &self.budgets;
        self.count("webchat:session", &session.id, b.messages_per_minute, "messages")
            .await?;
        self.count(
            "webchat:channel-messages",
            &session.channel_id,
            b.channel_messages_per_minute,
            "messages on this web chat channel",
        )
        .await?;
        self.count(
            "webchat:account-messages",
            session.account_id.as_str(),
            b.account_messages_per_minute,
            "messages on this account's web chat",
        )
        .await
    }

    /// One resume, thread read or socket opening of the session.
    pub async fn read(&self, session_id: &str) -> Result<(), Refusal> {
        let limit = self.budgets.reads_per_minute;
        self.count("webchat:reads", session_id, limit, "reads of this session")
            .await
    }

    /// One frame other than a message on the socket of the token whose hash is `token_hash`.
    pub async fn signal(&self, token_hash: &str) -> Result<(), Refusal> {
        let limit = self.budgets.signals_per_minute;
        self.count("webchat:signals", token_hash, limit, "frames").await
    }

    async fn count(&self, kind: &str, id: &str, limit: u32, what: &'static str) -> Result<(), Refusal> {
        let decision = self.limiter.check(&format!("{kind}:{id}"), limit).await;
        if decision.allowed {
            Ok(())
        } else {
            let limited = Limited {
                retry_after: decision.retry_after,
            };
            Err(Refusal::Limited(limited, what))
        }
    }
}
