//! API keys verified in this replica's memory, so that a platform call costs one Redis round trip (the
//! rate-limit script) and no database read.
//!
//! An entry is the key's row and its account's, plus the sub-accounts agencies act on, each with the
//! account's access stamp (`stamps`) as it was read *before* the rows. Every call hands those stamps to
//! the rate-limit script, which counts the call only when they are still current; a change renews the
//! stamp after it commits and before it answers, so a call that starts after the change returned finds
//! its entry stale, and reads the rows again. When Redis cannot answer, the database decides.
//!
//! Bounds: at most `entries` keys and as many sub-accounts, least recently used out first; each entry
//! lives at most `ttl` (a backstop for a renewal that could not reach Redis). Unknown keys are never
//! cached, so a flood of made-up keys costs one indexed read each, as without a cache. Without Redis
//! nothing is cached: another replica's change could not be seen.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use hashlink::LruCache;
use sea_orm::DatabaseConnection;
use tonic::Code;

use super::{
    api_key::ApiKey,
    key_store,
    stamps::{self, AccessStamps, Stamp},
};
use crate::{
    accounts::store as account_store,
    error::ApiError,
    store::entities::{accounts, api_keys},
};

/// How many entries, and for how long.
#[derive(Clone, Copy, Debug)]
pub struct CacheBounds {
    pub entries: usize,
    pub ttl: Duration,
}

/// A key and its account, as read under `stamp`.
#[derive(Debug)]
pub struct KeyEntry {
    pub key: api_keys::Model,
    pub account: accounts::Model,
    stamp: Option<Stamp>,
    read_at: Instant,
}

/// A sub-account, as read under `stamp`.
#[derive(Debug)]
pub struct AccountEntry {
    pub account: accounts::Model,
    stamp: Option<Stamp>,
    read_at: Instant,
}

/// What a call's credentials name, verified: the live key and its account, and the sub-account the call
/// names, if any.
#[derive(Clone, Debug)]
pub struct Verified {
    pub key: Arc<KeyEntry>,
    pub sub_account: SubAccount,
}

#[derive(Clone, Debug)]
pub enum SubAccount {
    /// The call names none.
    None,
    /// The call names an id no live account has.
    Unknown,
    Live(Arc<AccountEntry>),
}

impl Verified {
    /// The stamps this verification was read under, as the rate-limit script compares them (Redis key,
    /// stamp); empty when it was read without them (it is then never reused).
    pub fn stamps(&self) -> Vec<(String, Stamp)> {
        let key = self
            .key
            .stamp
            .as_ref()
            .map(|s| (stamps::key(&self.key.account.id), s.clone()));
        let sub = match &self.sub_account {
            SubAccount::Live(entry) => entry
                .stamp
                .as_ref()
                .map(|s| (stamps::key(&entry.account.id), s.clone())),
            _ => None,
        };
        key.into_iter().chain(sub).collect()
    }

    /// This verification as read under the key's account's stamp and the sub-account's, at `read_at`.
    fn stamped(self, key_stamp: Option<Stamp>, sub_stamp: Option<Stamp>, read_at: Instant) -> Self {
        let key = Arc::new(KeyEntry {
            key: self.key.key.clone(),
            account: self.key.account.clone(),
            stamp: key_stamp,
            read_at,
        });
        let sub_account = match self.sub_account {
            SubAccount::Live(entry) => SubAccount::Live(Arc::new(AccountEntry {
                account: entry.account.clone(),
                stamp: sub_stamp,
                read_at,
            })),
            other => other,
        };
        Self { key, sub_account }
    }
}

pub struct VerifiedKeys {
    stamps: Option<Arc<AccessStamps>>,
    keys: Mutex<LruCache<String, Arc<KeyEntry>>>,
    sub_accounts: Mutex<LruCache<String, Arc<AccountEntry>>>,
    ttl: Duration,
}

impl VerifiedKeys {
    /// A cache whose entries Redis validates; `None`: nothing is cached.
    pub fn new(stamps: Option<Arc<AccessStamps>>, bounds: CacheBounds) -> Self {
        let entries = bounds.entries.max(1);
        Self {
            stamps,
            keys: Mutex::new(LruCache::new(entries)),
            sub_accounts: Mutex::new(LruCache::new(entries)),
            ttl: bounds.ttl,
        }
    }

    /// The cached verification of the key with `hash` (and of `sub_account`), when every part of it is
    /// cached and younger than the time to live.
    pub fn cached(&self, hash: &str, sub_account: Option<&str>) -> Option<Verified> {
        let key = fresh(&self.keys, hash, self.ttl, |e| e.read_at)?;
        let sub_account = match sub_account {
            None => SubAccount::None,
            Some(id) => SubAccount::Live(fresh(&self.sub_accounts, id, self.ttl, |e| e.read_at)?),
        };
        metrics::counter!("frontdesk_api_key_cache_hits_total").increment(1);
        Some(Verified { key, sub_account })
    }

    /// Reads the key and the sub-account from the database; with Redis, under their stamps, and cached.
    /// `None` when the key is unknown or no longer live.
    pub async fn load(
        &self,
        db: &DatabaseConnection,
        key: &ApiKey,
        sub_account: Option<&str>,
    ) -> Result<Option<Verified>, ApiError> {
        let read_at = Instant::now();
        let Some(first) = read(db, key, sub_account).await? else {
            return Ok(None);
        };
        let Some(stamps) = &self.stamps else {
            return Ok(Some(first));
        };
        // The stamps are read before the rows they vouch for: a change that renews one after this read
        // makes the entry stale at its first use; one that renewed it before had committed before the
        // rows below are read.
        let mut accounts = vec![first.key.account.id.as_str()];
        if let SubAccount::Live(entry) = &first.sub_account {
            accounts.push(entry.account.id.as_str());
        }
        let current = match stamps.read(&accounts).await {
            Ok(current) => current,
            Err(error) => {
                stamps.warn_unreachable(&error);
                return Ok(Some(first));
            }
        };
        let Some(second) = read(db, key, sub_account).await? else {
            return Ok(None);
        };
        let key_stamp = current.first().cloned();
        // A sub-account found only by the second read has no stamp read for it, and is not kept.
        let sub_stamp = current.get(1).cloned();
        let verified = second.stamped(key_stamp, sub_stamp, read_at);
        self.keep(&verified);
        Ok(Some(verified))
    }

    /// The key and the sub-account from the database alone, kept nowhere: what a call trusts while Redis
    /// cannot vouch for the cache.
    pub async fn read(
        &self,
        db: &DatabaseConnection,
        key: &ApiKey,
        sub_account: Option<&str>,
    ) -> Result<Option<Verified>, ApiError> {
        read(db, key, sub_account).await
    }

    /// Drops what `verified` was made of, once a call found it stale.
    pub fn forget(&self, verified: &Verified) {
        lock(&self.keys).remove(&verified.key.key.key_hash);
        if let SubAccount::Live(entry) = &verified.sub_account {
            lock(&self.sub_accounts).remove(&entry.account.id);
        }
        self.record_size();
    }

    /// After a change to `account_id` (a key of it revoked or rotated, its switches, plan, limit, or the
    /// account deleted) has committed: forgets it here and renews its stamp so every other replica does.
    /// Returns once the stamp is renewed or Redis failed to answer; a renewal that failed is retried in
    /// the background for the time to live, after which no replica holds an entry read before the change.
    pub async fn changed(&self, account_id: &str) {
        lock(&self.keys).retain(|_, entry| entry.account.id != account_id);
        lock(&self.sub_accounts).remove(account_id);
        self.record_size();
        let Some(stamps) = &self.stamps else {
            return;
        };
        let Err(error) = stamps.renew(account_id).await else {
            return;
        };
        stamps.warn_unreachable(&error);
        metrics::counter!("frontdesk_api_key_stamp_renewals_failed_total").increment(1);
        let (stamps, account_id, ttl) = (stamps.clone(), account_id.to_owned(), self.ttl);
        tokio::spawn(async move {
            let until = Instant::now() + ttl;
            while Instant::now() < until {
                tokio::time::sleep(RENEWAL_RETRY).await;
                if stamps.renew(&account_id).await.is_ok() {
                    return;
                }
            }
        });
    }

    /// Entries held now (keys and sub-accounts).
    pub fn held(&self) -> usize {
        lock(&self.keys).len() + lock(&self.sub_accounts).len()
    }

    /// Keeps the parts of `verified` read under a stamp.
    fn keep(&self, verified: &Verified) {
        if verified.key.stamp.is_some() {
            lock(&self.keys).insert(verified.key.key.key_hash.clone(), verified.key.clone());
        }
        if let SubAccount::Live(entry) = &verified.sub_account
            && entry.stamp.is_some()
        {
            lock(&self.sub_accounts).insert(entry.account.id.clone(), entry.clone());
        }
        self.record_size();
    }

    fn record_size(&self) {
        metrics::gauge!("frontdesk_api_key_cache_entries").set(self.held() as f64);
    }
}

/// How often a failed stamp renewal is tried again.
const RENEWAL_RETRY: Duration = Duration::from_millis(200);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The entry under `id` when it is younger than `ttl`; an older one is dropped.
fn fresh<T>(
    cache: &Mutex<LruCache<String, Arc<T>>>,
    id: &str,
    ttl: Duration,
    read_at: impl Fn(&T) -> Instant,
) -> Option<Arc<T>> {
    let mut cache = lock(cache);
    let entry = cache.get(id)?.clone();
    if read_at(&entry).elapsed() < ttl {
        return Some(entry);
    }
    cache.remove(id);
    None
}

/// The rows of `key` and `sub_account` from the database, unstamped.
async fn read(db: &DatabaseConnection, key: &ApiKey, sub_account: Option<&str>) -> Result<Option<Verified>, ApiError> {
    let read_at = Instant::now();
    let found = key_store::find_active(db, key).await?;
    metrics::counter!("frontdesk_api_key_lookups_total", "outcome" => if found.is_some() { "found" } else { "unknown" })
        .increment(1);
    let Some((key, account)) = found else {
        return Ok(None);
    };
    let sub_account = match sub_account {
        None => SubAccount::None,
        // Not found answers 403 like not a child, so the answer reveals nothing; a database failure stays
        // a 500.
        Some(id) => match account_store::find_live(db, id).await {
            Ok(account) => SubAccount::Live(Arc::new(AccountEntry {
                account,
                stamp: None,
                read_at,
            })),
            Err(error) if error.code == Code::NotFound => SubAccount::Unknown,
            Err(error) => return Err(error),
        },
    };
    let key = Arc::new(KeyEntry {
        key,
        account,
        stamp: None,
        read_at,
    });
    Ok(Some(Verified { key, sub_account }))
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    fn entry(n: usize, account_id: &str) -> Verified {
        let now = Utc::now();
        let account = accounts::Model {
            id: account_id.to_owned(),
            name: "bound".into(),
            plan: "growth".into(),
            api_access: true,
            webhooks_enabled: true,
            credit_milli: 0,
            rate_limit: 600,
            parent_account_id: None,
            created_at: now,
            updated_at: now,
            deleted_at: None,
        };
        let key = api_keys::Model {
            id: format!("key_{n}"),
            account_id: crate::access::AccountId::of_row(account_id),
            key_hash: format!("{n:064x}"),
            masked: "fdk_...0000".into(),
            scopes: "*".into(),
            created_at: now,
            revoked_at: None,
        };
        let unstamped = Verified {
            key: Arc::new(KeyEntry {
                key,
                account,
                stamp: None,
                read_at: Instant::now(),
            }),
            sub_account: SubAccount::None,
        };
        unstamped.stamped(Some(String::new()), None, Instant::now())
    }

    fn cache(entries: usize, ttl: Duration) -> VerifiedKeys {
        VerifiedKeys::new(None, CacheBounds { entries, ttl })
    }

    #[test]
    fn a_hundred_thousand_keys_never_hold_more_than_the_bound() {
        let keys = cache(1_000, Duration::from_secs(60));
        for n in 0..100_000 {
            keys.keep(&entry(n, "acc_a"));
            assert!(keys.held() <= 1_000, "{} held after {n} keys", keys.held());
        }
        assert_eq!(keys.held(), 1_000);
        assert!(
            keys.cached(&format!("{:064x}", 99_999), None).is_some(),
            "the newest are kept"
        );
        assert!(
            keys.cached(&format!("{:064x}", 0), None).is_none(),
            "the oldest went first"
        );
    }

    #[test]
    fn an_entry_past_its_time_to_live_is_dropped() {
        let keys = cache(10, Duration::ZERO);
        keys.keep(&entry(1, "acc_a"));
        assert!(keys.cached(&format!("{:064x}", 1), None).is_none());
        assert_eq!(keys.held(), 0);
    }

    #[test]
    fn unstamped_reads_are_never_kept() {
        let keys = cache(10, Duration::from_secs(60));
        let mut unstamped = entry(1, "acc_a");
        unstamped = unstamped.stamped(None, None, Instant::now());
        keys.keep(&unstamped);
        assert_eq!(keys.held(), 0);
    }

    #[tokio::test]
    async fn a_change_forgets_the_accounts_keys_here_at_once() {
        let keys = cache(10, Duration::from_secs(60));
        keys.keep(&entry(1, "acc_a"));
        keys.keep(&entry(2, "acc_b"));
        keys.changed("acc_a").await;
        assert!(keys.cached(&format!("{:064x}", 1), None).is_none());
        assert!(keys.cached(&format!("{:064x}", 2), None).is_some());
    }
}
