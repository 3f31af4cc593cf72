//! Redis on a hot path (a rate-limit window per request, a channel's pace per send, an access stamp),
//! guarded so that an unreachable Redis never holds the caller up: one multiplexed, self-reconnecting
//! connection made lazily and shared by every caller (never one attempt per waiting call), every call
//! time-boxed, and after a failure Redis skipped for `BACK_OFF`, so the caller's fallback answers at once.
//! The caller says what that fallback is; the warning names it, at most once per `WARN_EVERY`.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use redis::{
    Cmd, ErrorKind, FromRedisValue, RedisError, RedisResult, Script, ScriptInvocation,
    aio::{ConnectionManager, ConnectionManagerConfig},
};

/// Time limit of one call, connecting included.
const TIMEOUT: Duration = Duration::from_millis(300);
/// After a failed call, Redis is not tried again for this long.
const BACK_OFF: Duration = Duration::from_secs(1);
/// At most one "Redis unreachable" warning per this interval.
const WARN_EVERY: Duration = Duration::from_secs(30);

/// A Lua script run through a `GuardedRedis`.
pub struct GuardedScript {
    redis: GuardedRedis,
    script: Script,
}

impl GuardedScript {
    /// Does not connect: the first call does, so the service starts while Redis is down. Needs a Tokio
    /// runtime (the connection manager's background task runs on it).
    pub fn new(url: &str, source: &str, fallback: &'static str) -> anyhow::Result<Self> {
        Ok(Self {
            redis: GuardedRedis::new(url, fallback)?,
            script: Script::new(source),
        })
    }

    /// Runs the script with the keys and arguments `args` gives it; an error (Redis unreachable, slow, or
    /// backing off) within `TIMEOUT`.
    pub async fn call<T: FromRedisValue>(&self, args: impl FnOnce(&mut ScriptInvocation<'_>)) -> RedisResult<T> {
        let mut invocation = self.script.prepare_invoke();
        args(&mut invocation);
        let mut connection = self.redis.connection.clone();
        self.redis
            .guarded(async move { invocation.invoke_async::<T>(&mut connection).await })
            .await
    }

    /// Logs that Redis is unreachable and what the caller does meanwhile, at most once per `WARN_EVERY`.
    pub fn warn_unreachable(&self, err: &RedisError) {
        self.redis.warn_unreachable(err);
    }
}

/// One guarded connection, for plain commands and for a `GuardedScript`.
pub struct GuardedRedis {
    /// Connects on first use and reconnects after a connection error, in the background.
    connection: ConnectionManager,
    /// What the caller does while Redis is unreachable, for the warning ("rate limits are counted in this
    /// process").
    fallback: &'static str,
    last_warning: Mutex<Option<Instant>>,
    /// When a call last failed: Redis is skipped until `BACK_OFF` has passed since.
    last_failure: Mutex<Option<Instant>>,
}

impl GuardedRedis {
    /// Does not connect: the first call does, so the service starts while Redis is down. Needs a Tokio
    /// runtime (the connection manager's background task runs on it).
    pub fn new(url: &str, fallback: &'static str) -> anyhow::Result<Self> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT))
            // One attempt per (re)connection: the back-off spaces the attempts out.
            .set_number_of_retries(0);
        Ok(Self {
            connection: ConnectionManager::new_lazy_with_config(redis::Client::open(url)?, config)?,
            fallback,
            last_warning: Mutex::new(None),
            last_failure: Mutex::new(None),
        })
    }

    /// Runs `command`; an error (Redis unreachable, slow, or backing off) within `TIMEOUT`.
    pub async fn query<T: FromRedisValue>(&self, command: &Cmd) -> RedisResult<T> {
        let mut connection = self.connection.clone();
        self.guarded(async move { command.query_async::<T>(&mut connection).await })
            .await
    }

    async fn guarded<T>(&self, call: impl Future<Output = RedisResult<T>>) -> RedisResult<T> {
        if self.backing_off() {
            return Err(RedisError::from((ErrorKind::Io, "redis recently unreachable")));
        }
        let answer = match tokio::time::timeout(TIMEOUT, call).await {
            Ok(answer) => answer,
            Err(_) => Err(RedisError::from((ErrorKind::Io, "redis did not answer in time"))),
        };
        answer.inspect_err(|_| self.note_failure())
    }

    /// Logs that Redis is unreachable and what the caller does meanwhile, at most once per `WARN_EVERY`.
    pub fn warn_unreachable(&self, err: &RedisError) {
        let Ok(mut last) = self.last_warning.lock() else {
            return;
        };
        if last.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            tracing::warn!(error = %err, "Redis unreachable: {} until it is back", self.fallback);
        }
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
}
