//! Rate-limit windows in Redis: one `EVALSHA` of `sliding_window.lua` per request over a multiplexed,
//! self-reconnecting connection with short time limits, so a slow or dead Redis costs a request at most
//! a few hundred milliseconds before the in-process fallback answers.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use redis::{Script, aio::ConnectionManager};
use tokio::sync::OnceCell;

use super::Decision;

/// How long usage hashes are kept: a week of daily figures for dashboards.
const USAGE_RETENTION_SECS: u64 = 8 * 24 * 3600;
/// Time limit of one Redis call (and of connecting).
const REDIS_TIMEOUT: Duration = Duration::from_millis(300);
/// At most one "Redis unreachable" warning per this interval.
const WARN_EVERY: Duration = Duration::from_secs(30);

pub struct RedisWindows {
    client: redis::Client,
    connection: OnceCell<ConnectionManager>,
    script: Script,
    last_warning: Mutex<Option<Instant>>,
    /// When the last failed connection attempt was, so a dead Redis is not dialled on every request.
    last_connect_failure: Mutex<Option<Instant>>,
}

impl RedisWindows {
    /// Does not connect: the first request does, so the service starts while Redis is down.
    pub fn new(url: &str) -> anyhow::Result<Self> {
        Ok(Self {
            client: redis::Client::open(url)?,
            connection: OnceCell::new(),
            script: Script::new(super::SLIDING_WINDOW_LUA),
            last_warning: Mutex::new(None),
            last_connect_failure: Mutex::new(None),
        })
    }

    pub async fn check(&self, account_id: &str, limit: u32, window: Duration) -> redis::RedisResult<Decision> {
        let mut connection = self.connection().await?.clone();
        let (allowed, used, reset, retry): (i64, i64, i64, i64) = self
            .script
            .arg(account_id)
            .arg(limit)
            .arg(window.as_secs().max(1))
            .arg(USAGE_RETENTION_SECS)
            .invoke_async(&mut connection)
            .await?;
        let clamp = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
        Ok(Decision {
            allowed: allowed == 1,
            limit,
            used: clamp(used),
            reset_seconds: clamp(reset),
            retry_after: clamp(retry),
        })
    }

    async fn connection(&self) -> redis::RedisResult<&ConnectionManager> {
        if let Some(connection) = self.connection.get() {
            return Ok(connection);
        }
        let recently_failed = self
            .last_connect_failure
            .lock()
            .ok()
            .and_then(|at| *at)
            .is_some_and(|at| at.elapsed() < Duration::from_secs(1));
        if recently_failed {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "redis recently unreachable",
            )));
        }
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_secs(1));
        let client = self.client.clone();
        let result = self
            .connection
            .get_or_try_init(|| ConnectionManager::new_with_config(client, config))
            .await;
        if result.is_err()
            && let Ok(mut at) = self.last_connect_failure.lock()
        {
            *at = Some(Instant::now());
        }
        result
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
