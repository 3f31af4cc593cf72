//! Each account's access stamp in Redis: a random token that every change able to take access away replaces
//! (a key revoked or rotated; the account's switches, plan or rate limit changed; the account deleted),
//! after the change commits and before its call answers. A replica's cached verification remembers the
//! stamps it was read under, and the rate-limit script of every call compares them, so a change made on
//! one replica is seen by the next call on any other.
//!
//! Keys (documented for operators): `frontdesk:access:{account_id}`, a string, kept a day (a missing stamp
//! only costs one database read).

use redis::RedisResult;

use crate::store::redis_script::GuardedRedis;

const PREFIX: &str = "frontdesk:access:";
/// How long a stamp is kept. Any length is safe: a cached verification whose stamp is gone no longer
/// matches, so it is read again.
const KEEP_SECS: u64 = 24 * 3600;

/// An account's stamp as read; empty when the account had none.
pub type Stamp = String;

/// The Redis key of `account_id`'s stamp.
pub fn key(account_id: &str) -> String {
    format!("{PREFIX}{account_id}")
}

pub struct AccessStamps {
    redis: GuardedRedis,
}

impl AccessStamps {
    /// Does not connect: the first call does.
    pub fn new(url: &str) -> anyhow::Result<Self> {
        Ok(Self {
            redis: GuardedRedis::new(url, "API keys are verified against the database on every call")?,
        })
    }

    /// The current stamps of `accounts`, in order.
    pub async fn read(&self, accounts: &[&str]) -> RedisResult<Vec<Stamp>> {
        let mut mget = redis::cmd("MGET");
        for account in accounts {
            mget.arg(key(account));
        }
        let stamps: Vec<Option<String>> = self.redis.query(&mget).await?;
        Ok(stamps.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// Replaces `account_id`'s stamp, so every replica's cached verification of it stops matching.
    pub async fn renew(&self, account_id: &str) -> RedisResult<()> {
        let mut set = redis::cmd("SET");
        set.arg(key(account_id))
            .arg(crate::ids::base62(16))
            .arg("EX")
            .arg(KEEP_SECS);
        self.redis.query(&set).await
    }

    /// Logs that Redis is unreachable, at most once per interval.
    pub fn warn_unreachable(&self, err: &redis::RedisError) {
        self.redis.warn_unreachable(err);
    }
}
