//! What this process has in hand: running jobs by lane (the claim keeps each lane under its cap, so one
//! channel whose provider hangs holds only its share of the workers), lanes resting after a job of theirs
//! was deferred (a paced channel whose slots are taken: claiming its other jobs now would only defer them
//! too), and the claim tokens whose outcomes are not yet recorded (their leases are renewed until they are).
//! A run that brings a lane back under its cap wakes the claim loop, which passed over that lane's jobs.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
};

use crate::tally::decrement;

use super::{Job, Wake};

#[derive(Default)]
struct Counts {
    lanes: HashMap<String, u32>,
    /// Lane -> until when (Unix milliseconds) the claim passes over it.
    resting: HashMap<String, i64>,
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

    /// Lanes running some jobs but under their cap ("" aside), with how many more each may take.
    pub fn room(&self) -> Vec<(String, u32)> {
        let mut room: Vec<(String, u32)> = self
            .counts()
            .lanes
            .iter()
            .filter(|(lane, n)| !lane.is_empty() && **n > 0 && **n < self.lane_cap)
            .map(|(lane, n)| (lane.clone(), self.lane_cap - n))
            .collect();
        room.sort_unstable();
        room
    }

    /// Lanes at their cap or resting at `now_ms`: the next claim passes over their jobs.
    pub fn closed_lanes(&self, now_ms: i64) -> Vec<String> {
        let mut counts = self.counts();
        counts.resting.retain(|_, until| *until > now_ms);
        let full = counts
            .lanes
            .iter()
            .filter(|(lane, n)| !lane.is_empty() && **n >= self.lane_cap)
            .map(|(lane, _)| lane);
        let mut closed: Vec<String> = full.chain(counts.resting.keys()).cloned().collect();
        closed.sort_unstable();
        closed.dedup();
        closed
    }

    /// A job of `lane` was deferred to `until_ms` (at `now_ms`): its lane's other jobs wait as long, or until
    /// an earlier rest still running ends.
    pub fn rest(&self, lane: &str, until_ms: i64, now_ms: i64) {
        if !lane.is_empty() {
            let mut counts = self.counts();
            let until = counts.resting.entry(lane.to_owned()).or_insert(until_ms);
            // A rest that already ended (and no claim has cleared yet) does not cut the new one short.
            *until = if *until <= now_ms {
                until_ms
            } else {
                (*until).min(until_ms)
            };
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_rests_until_its_earliest_rest_and_an_ended_rest_does_not_shorten_a_new_one() {
        let in_flight = InFlight::new(2, Wake::default());
        in_flight.rest("ch", 2_000, 1_000);
        in_flight.rest("ch", 1_500, 1_000);
        assert_eq!(in_flight.closed_lanes(1_400), ["ch"]);
        // The rest to 1,500 ended; no claim cleared it before the next deferral, to 3,000.
        in_flight.rest("other", 1_500, 1_000);
        in_flight.rest("other", 3_000, 1_600);
        assert_eq!(in_flight.closed_lanes(2_000), ["other"]);
        assert!(in_flight.closed_lanes(3_000).is_empty());
        in_flight.rest("", 9_000, 3_000);
        assert!(
            in_flight.closed_lanes(3_000).is_empty(),
            "jobs without a lane never rest"
        );
    }
}
