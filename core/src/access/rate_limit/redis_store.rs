//! Rate-limit windows in Redis: one `EVALSHA` of `sliding_window.lua` per request over a multiplexed,
//! self-reconnecting connection. An unreachable Redis never holds a request up: the connection is made
//! lazily and shared by every caller (never one attempt per waiting request), every call is time-boxed,
//! and after a failure Redis is skipped for `BACK_OFF`, so the in-process fallback answers at once.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use redis::{
    ErrorKind, RedisError, Script,
    aio::{ConnectionManager, ConnectionManagerConfig},
};

use super::Decision;

/// How long usage hashes are kept: a week of daily figures for dashboards.
const USAGE_RETENTION_SECS: u64 = 8 * 24 * 3600;
/// Time limit of one rate-limit call, connecting included.
const REDIS_TIMEOUT: Duration = Duration::from_millis(300);
/// After a failed call, Redis is not tried again for this long.
const BACK_OFF: Duration = Duration::from_secs(1);
/// At most one "Redis unreachable" warning per this interval.
const WARN_EVERY: Duration = Duration::from_secs(30);

pub struct RedisWindows {
    /// Connects on first use and reconnects after a connection error, in the background.
    connection: ConnectionManager,
    script: Script,
    last_warning: Mutex<Option<Instant>>,
    /// When a call last failed: Redis is skipped until `BACK_OFF` has passed since.
    last_failure: Mutex<Option<Instant>>,
    /// Count each request in the daily usage hashes operators' dashboards read (accounts' requests only).
    record_usage: bool,
}

impl RedisWindows {
    /// Does not connect: the first request does, so the service starts while Redis is down. Needs a Tokio
    /// runtime (the connection manager's background task runs on it).
    pub fn new(url: &str) -> anyhow::Result<Self> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT))
            // One attempt per (re)connection: the back-off below spaces the attempts out.
            .set_number_of_retries(0);
        Ok(Self {
            connection: ConnectionManager::new_lazy_with_config(redis::Client::open(url)?, config)?,
            script: Script::new(super::SLIDING_WINDOW_LUA),
            last_warning: Mutex::new(None),
            last_failure: Mutex::new(None),
            record_usage: true,
        })
    }

    /// The same windows for keys that are no account (web chat visitors, client addresses): they are kept
    /// out of the daily usage hashes, which list accounts.
    pub fn without_usage(mut self) -> Self {
        self.record_usage = false;
        self
    }

    /// One request of `account_id` counted in Redis; an error (Redis unreachable, slow, or backing off)
    /// within `REDIS_TIMEOUT`.
    pub async fn check(&self, account_id: &str, limit: u32, window: Duration) -> redis::RedisResult<Decision> {
        if self.backing_off() {
            return Err(RedisError::from((ErrorKind::Io, "redis recently unreachable")));
        }
        let mut connection = self.connection.clone();
        let mut invocation = self.script.prepare_invoke();
        invocation
            .arg(account_id)
            .arg(limit)
            .arg(window.as_secs().max(1))
            .arg(USAGE_RETENTION_SECS)
            .arg(u8::from(self.record_usage));
        let call = invocation.invoke_async::<(i64, i64, i64, i64)>(&mut connection);
        let answer = match tokio::time::timeout(REDIS_TIMEOUT, call).await {
            Ok(answer) => answer,
            Err(_) => Err(RedisError::from((ErrorKind::Io, "redis did not answer in time"))),
        };
        let (allowed, used, reset, retry) = answer.inspect_err(|_| self.note_failure())?;
        let clamp = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
        Ok(Decision {
            allowed: allowed == 1,
            limit,
            used: clamp(used),
            reset_seconds: clamp(reset),
            retry_after: clamp(retry),
        })
    }

    fn backing_off(&self) -> bool {
        self.last_failure
            .lock()
            .ok()
            .and_then(|at| *at)
            .is_some_and(|at| at.elapsed() < BACK_OFF)
    }

    fn note_failure(&self) {
        if let Ok(mut at) = self.last_failure.lock() {
            *at = Some(Instant::now());
        }
    }

    /// Logs that Redis is unreachable, at most once per `WARN_EVERY`.
    pub fn warn_unreachable(&self, err: &redis::RedisError) {
        let Ok(mut last) = self.last_warning.lock() else {
            return;
        };
        if last.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            tracing::warn!(error = %err, "Redis unreachable: rate limits are counted in this process until it is back");
        }
    }
}
