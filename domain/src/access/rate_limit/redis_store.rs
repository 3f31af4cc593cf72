//! Rate-limit windows in Redis: one `EVALSHA` of `sliding_window.lua` per request (which also checks the
//! caller's access stamps), guarded so that an
//! unreachable Redis never holds a request up (`store::redis_script`): the in-process windows answer instead.

use std::time::Duration;

use crate::store::redis_script::GuardedScript;

use super::Decision;

/// How long usage hashes are kept: a week of daily figures for dashboards.
const USAGE_RETENTION_SECS: u64 = 8 * 24 * 3600;

pub struct RedisWindows {
    script: GuardedScript,
    /// Count each request in the daily usage hashes operators' dashboards read (accounts' requests only).
    record_usage: bool,
}

impl RedisWindows {
    /// Does not connect: the first request does, so the service starts while Redis is down. Needs a Tokio
    /// runtime (the connection manager's background task runs on it).
    pub fn new(url: &str) -> anyhow::Result<Self> {
        Ok(Self {
            script: GuardedScript::new(
                url,
                super::SLIDING_WINDOW_LUA,
                "rate limits are counted in this process",
            )?,
            record_usage: true,
        })
    }

    /// The same windows for keys that are no account (web chat visitors, client addresses): they are kept
    /// out of the daily usage hashes, which list accounts.
    pub fn without_usage(mut self) -> Self {
        self.record_usage = false;
        self
    }

    /// One request of `account_id` counted in Redis when each of `stamps` (an access stamp's key and the
    /// value the caller read) is still current; `None`, counting nothing, when one is not. An error when
    /// Redis is unreachable, slow, or backing off.
    pub async fn check(
        &self,
        account_id: &str,
        limit: u32,
        window: Duration,
        stamps: &[(String, String)],
    ) -> redis::RedisResult<Option<Decision>> {
        let (allowed, used, reset, retry) = self
            .script
            .call::<(i64, i64, i64, i64)>(|call| {
                call.arg(account_id)
                    .arg(limit)
                    .arg(window.as_secs().max(1))
                    .arg(USAGE_RETENTION_SECS)
                    .arg(u8::from(self.record_usage));
                for (key, stamp) in stamps {
                    call.arg(key).arg(stamp);
                }
            })
            .await?;
        if allowed < 0 {
            return Ok(None);
        }
        let clamp = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
        Ok(Some(Decision {
            allowed: allowed == 1,
            limit,
            used: clamp(used),
            reset_seconds: clamp(reset),
            retry_after: clamp(retry),
        }))
    }

    /// Logs that Redis is unreachable, at most once per interval.
    pub fn warn_unreachable(&self, err: &redis::RedisError) {
        self.script.warn_unreachable(err);
    }
}
