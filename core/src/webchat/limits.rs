//! Visitors' rate limits: messages per session and new sessions per client address, per minute, counted
//! like accounts' requests (in Redis when configured, shared by every replica; in process otherwise) but kept
//! out of the accounts' usage figures. A refusal says when to retry.

use std::time::Duration;

use tonic::Code;

use crate::{
    access::rate_limit::{RateLimiter, RedisWindows},
    error::ApiError,
};

const WINDOW: Duration = Duration::from_secs(60);

pub struct VisitorLimits {
    limiter: RateLimiter,
    messages_per_minute: u32,
    sessions_per_minute: u32,
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
            "rate_limited",
            format!("too many {what}; retry after {} s", self.retry_after),
        )
    }
}

impl VisitorLimits {
    pub fn new(redis_url: Option<&str>, messages_per_minute: u32, sessions_per_minute: u32) -> anyhow::Result<Self> {
        let redis = redis_url
            .map(RedisWindows::new)
            .transpose()?
            .map(RedisWindows::without_usage);
        Ok(Self {
            limiter: RateLimiter::new(redis, WINDOW),
            messages_per_minute,
            sessions_per_minute,
        })
    }

    /// One message of the session.
    pub async fn message(&self, session_id: &str) -> Result<(), Limited> {
        self.count(&format!("webchat:session:{session_id}"), self.messages_per_minute)
            .await
    }

    /// One new session from the client address `addr` ("" when unknown: those share one budget).
    pub async fn new_session(&self, addr: &str) -> Result<(), Limited> {
        self.count(&format!("webchat:addr:{addr}"), self.sessions_per_minute)
            .await
    }

    async fn count(&self, key: &str, limit: u32) -> Result<(), Limited> {
        let decision = self.limiter.check(key, limit).await;
        if decision.allowed {
            Ok(())
        } else {
            Err(Limited {
                retry_after: decision.retry_after,
            })
        }
    }
}
