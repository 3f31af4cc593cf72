//! What this process has in hand: running jobs by lane (the claim keeps each lane under its cap, so one
//! channel whose provider hangs holds only its share of the workers), and the claim tokens whose outcomes
//! are not yet recorded (their leases are renewed until they are). A run that brings a lane back under its
//! cap wakes the claim loop, which passed over that lane's jobs.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
};

use super::{Job, Wake};

#[derive(Default)]
struct Counts {
    lanes: HashMap<String, u32>,
    /// Claim token -> its jobs whose outcomes are not yet committed.
    tokens: HashMap<i64, u32>,
}

pub struct InFlight {
    lane_cap: u32,
    counts: Mutex<Counts>,
    wake: Wake,
}

impl InFlight {
    pub fn new(lane_cap: u32, wake: Wake) -> Self {
        Self {
            lane_cap: lane_cap.max(1),
            counts: Mutex::default(),
            wake,
        }
    }

    pub fn lane_cap(&self) -> u32 {
        self.lane_cap
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        // A panic while holding the lock leaves plain counters behind; they stay usable.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Jobs of `lane` running now ("" is no lane and never full).
    pub fn load(&self, lane: &str) -> u32 {
        self.counts().lanes.get(lane).copied().unwrap_or(0)
    }

    /// Lanes at their cap: the next claim passes over their jobs.
    pub fn full_lanes(&self) -> Vec<String> {
        self.counts()
            .lanes
            .iter()
            .filter(|(lane, n)| !lane.is_empty() && **n >= self.lane_cap)
            .map(|(lane, _)| lane.clone())
            .collect()
    }

    pub fn started(&self, job: &Job) {
        let mut counts = self.counts();
        *counts.lanes.entry(job.lane.clone()).or_default() += 1;
        *counts.tokens.entry(job.token).or_default() += 1;
    }

    /// The run of `job` ended: its lane has room again.
    pub fn ran(&self, job: &Job) {
        let was = decrement(&mut self.counts().lanes, &job.lane);
        if was >= self.lane_cap {
            self.wake.notify();
        }
    }

    /// The outcome of a job claimed with `token` is committed (or never will be): its lease needs no more
    /// renewal.
    pub fn recorded(&self, token: i64) {
        decrement(&mut self.counts().tokens, &token);
    }

    /// The claim tokens whose leases must be kept alive.
    pub fn tokens(&self) -> Vec<i64> {
        self.counts().tokens.keys().copied().collect()
    }
}

/// Lowers the count of `key`; returns what it was.
fn decrement<K: std::hash::Hash + Eq>(map: &mut HashMap<K, u32>, key: &K) -> u32 {
    let Some(count) = map.get_mut(key) else {
        return 0;
    };
    let was = *count;
    *count -= 1;
    if *count == 0 {
        map.remove(key);
    }
    was
}
