//! What this process has in flight: attempts on the wire by subscription and by account (the claim keeps
//! each under its cap, so one tenant's slow or dead endpoint cannot take every slot), and the claim tokens
//! whose results are not yet recorded (their leases are renewed until they are). An answer that brings a
//! subscription or an account back under its cap wakes the claim loop, which passed over their deliveries.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tokio::sync::Notify;

use crate::tally::decrement;

use super::claim::Claimed;

/// Attempts on the wire at once, per subscription and per account.
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    pub endpoint: u32,
    pub account: u32,
}

impl Caps {
    /// An account may hold half the slots (and at least one endpoint's share).
    pub fn new(concurrency: u32, endpoint: u32) -> Self {
        let endpoint = endpoint.min(concurrency).max(1);
        Self {
            endpoint,
            account: (concurrency / 2).max(endpoint),
        }
    }
}

#[derive(Default)]
struct Counts {
    webhooks: HashMap<String, u32>,
    accounts: HashMap<String, u32>,
    /// Claim token -> its deliveries whose results are not yet committed.
    tokens: HashMap<i64, u32>,
}

pub struct InFlight {
    caps: Caps,
    counts: Mutex<Counts>,
    /// The claim loop's wake-up.
    wake: Arc<Notify>,
}

/// Subscriptions and accounts at their cap: the next claim passes over their deliveries.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Full {
    pub webhooks: Vec<String>,
    pub accounts: Vec<String>,
}

fn increment(map: &mut HashMap<String, u32>, key: &str) {
    *map.entry(key.to_owned()).or_default() += 1;
}

impl InFlight {
    pub fn new(caps: Caps, wake: Arc<Notify>) -> Self {
        Self {
            caps,
            counts: Mutex::default(),
            wake,
        }
    }

    pub fn caps(&self) -> Caps {
        self.caps
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        // A panic while holding the lock leaves plain counters behind; they stay usable.
        self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// On-the-wire counts of one subscription and one account.
    pub fn load(&self, webhook_id: &str, account_id: &str) -> (u32, u32) {
        let counts = self.counts();
        (
            counts.webhooks.get(webhook_id).copied().unwrap_or(0),
            counts.accounts.get(account_id).copied().unwrap_or(0),
        )
    }

    pub fn full(&self) -> Full {
        let (caps, counts) = (self.caps, self.counts());
        let at_cap = |map: &HashMap<String, u32>, cap: u32| {
            map.iter()
                .filter(|(_, n)| **n >= cap)
                .map(|(k, _)| k.clone())
                .collect::<Vec<_>>()
        };
        Full {
            webhooks: at_cap(&counts.webhooks, caps.endpoint),
            accounts: at_cap(&counts.accounts, caps.account),
        }
    }

    /// The attempt of `claimed` is about to go on the wire.
    pub fn started(&self, claimed: &Claimed) {
        let mut counts = self.counts();
        increment(&mut counts.webhooks, &claimed.webhook_id);
        increment(&mut counts.accounts, &claimed.account_id);
        *counts.tokens.entry(claimed.token).or_default() += 1;
    }

    /// The attempt of `claimed` has its answer (or gave up): its endpoint's slot is free.
    pub fn answered(&self, claimed: &Claimed) {
        let mut counts = self.counts();
        let webhook_was = decrement(&mut counts.webhooks, &claimed.webhook_id);
        let account_was = decrement(&mut counts.accounts, &claimed.account_id);
        if webhook_was >= self.caps.endpoint || account_was >= self.caps.account {
            self.wake.notify_one();
        }
    }

    /// The result of a delivery claimed with `token` is committed (or was never going to be): its lease
    /// needs no more renewal.
    pub fn recorded(&self, token: i64) {
        decrement(&mut self.counts().tokens, &token);
    }

    /// The claim tokens whose leases must be kept alive.
    pub fn tokens(&self) -> Vec<i64> {
        self.counts().tokens.keys().copied().collect()
    }
}
