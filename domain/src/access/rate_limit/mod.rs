//! Per-account rate limits: requests per window, as a sliding window over two fixed windows. With Redis the
//! state is shared by every replica (one Lua script per request, time from Redis); without Redis, or while a
//! configured Redis is unreachable, the same algorithm runs in this process, so requests are never refused
//! because the counter store is down.

mod local;
mod redis_store;

use std::time::Duration;

pub use local::LocalWindows;

/// The sliding-window script, one call per request (the benchmark's storage floor runs it too).
pub const SLIDING_WINDOW_LUA: &str = include_str!("sliding_window.lua");
pub use redis_store::RedisWindows;

/// The outcome for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: u32,
    /// Requests counted in the window, this one included when allowed; the limit when refused.
    pub used: u32,
    /// Seconds until the current fixed window ends.
    pub reset_seconds: u32,
    /// Seconds to wait before retrying; 0 when allowed.
    pub retry_after: u32,
}

impl Decision {
    pub fn remaining(&self) -> u32 {
        self.limit.saturating_sub(self.used)
    }
}

/// Counts for one account's window pair, and the sliding estimate they give.
pub(crate) fn decide(limit: u32, window: f64, elapsed: f64, prev: f64, cur: f64) -> Decision {
    let estimate = prev * (window - elapsed) / window + cur;
    let limit_f = f64::from(limit);
    let reset_seconds = (window - elapsed).ceil() as u32;
    if estimate + 1.0 > limit_f {
        let retry = if cur + 1.0 > limit_f {
            (window - elapsed) + window * (1.0 - (limit_f - 1.0) / cur)
        } else {
            window - (limit_f - 1.0 - cur) * window / prev - elapsed
        };
        return Decision {
            allowed: false,
            limit,
            // Refused: nothing remains, whatever the sliding estimate rounds down to.
            used: limit,
            reset_seconds,
            retry_after: retry.ceil().max(1.0) as u32,
        };
    }
    Decision {
        allowed: true,
        limit,
        used: estimate.floor() as u32 + 1,
        reset_seconds,
        retry_after: 0,
    }
}

/// The limiter: Redis when configured and reachable, else the in-process windows.
pub struct RateLimiter {
    redis: Option<RedisWindows>,
    local: LocalWindows,
    window: Duration,
}

impl RateLimiter {
    pub fn new(redis: Option<RedisWindows>, window: Duration) -> Self {
        Self {
            redis,
            local: LocalWindows::default(),
            window,
        }
    }

    pub fn window_seconds(&self) -> u32 {
        self.window.as_secs() as u32
    }

    /// Counts one request of `account_id` against `limit` per window.
    pub async fn check(&self, account_id: &str, limit: u32) -> Decision {
        match self.count(account_id, limit, &[]).await {
            Counted::Vouched(decision) | Counted::Unvouched(decision) => decision,
            // Only a stamp can be stale, and none was given; counted here as while Redis is away.
            Counted::Stale => self.count_here(account_id, limit.max(1)),
        }
    }

    /// Counts one request of `account_id` against `limit` per window, if the access `stamps` a cached
    /// verification was read under (key, value) are still current.
    pub async fn count(&self, account_id: &str, limit: u32, stamps: &[(String, String)]) -> Counted {
        let limit = limit.max(1);
        if let Some(redis) = &self.redis {
            match redis.check(account_id, limit, self.window, stamps).await {
                Ok(Some(decision)) => {
                    record(&decision, "redis");
                    return Counted::Vouched(decision);
                }
                Ok(None) => return Counted::Stale,
                Err(err) => {
                    metrics::counter!("frontdesk_ratelimit_redis_fallbacks_total").increment(1);
                    redis.warn_unreachable(&err);
                }
            }
        }
        Counted::Unvouched(self.count_here(account_id, limit))
    }

    fn count_here(&self, account_id: &str, limit: u32) -> Decision {
        let decision = self.local.check(account_id, limit, self.window);
        record(&decision, "local");
        decision
    }
}

/// A request counted, and what became of the access stamps it was counted under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// Counted in Redis, which found every stamp current.
    Vouched(Decision),
    /// Counted in this process: Redis is not configured or could not answer, so no stamp was checked.
    Unvouched(Decision),
    /// A stamp had changed: nothing was counted.
    Stale,
}

fn record(decision: &Decision, store: &'static str) {
    let outcome = if decision.allowed { "allowed" } else { "throttled" };
    metrics::counter!("frontdesk_ratelimit_decisions_total", "outcome" => outcome, "store" => store).increment(1);
}

#[cfg(test)]
mod tests {
    use super::decide;

    #[test]
    fn the_previous_window_weighs_by_the_time_left() {
        // Half-way through the window, 100 of the previous 200 still count.
        let d = decide(600, 60.0, 30.0, 200.0, 10.0);
        assert!(d.allowed);
        assert_eq!((d.used, d.remaining(), d.reset_seconds), (111, 489, 30));
    }

    #[test]
    fn a_full_window_is_refused_with_a_useful_retry_after() {
        let d = decide(3, 60.0, 10.0, 0.0, 3.0);
        assert!(!d.allowed);
        // 50 s to the window's end, then a third of the next for the weight of 3 to drop below 2.
        assert_eq!(d.retry_after, 70);
        let d = decide(3, 60.0, 10.0, 6.0, 0.0);
        assert!(!d.allowed);
        assert_eq!(
            d.remaining(),
            0,
            "a refusal leaves nothing, though the estimate (5) would say otherwise"
        );
        let straddling = decide(3, 2.0, 0.1, 2.0, 1.0);
        assert!(
            !straddling.allowed && straddling.remaining() == 0,
            "estimate 2.9 rounds to 2, still refused"
        );
        assert!(d.retry_after >= 1 && d.retry_after <= 50, "{}", d.retry_after);
        let after = decide(3, 60.0, 10.0 + f64::from(d.retry_after), 6.0, 0.0);
        assert!(after.allowed, "allowed once Retry-After has passed");
    }
}
