//! What this process has in hand: each claimed row from its claim until its outcome is committed, with the
//! lease its run watches. A run is told to stop when its claim is lost (renewal no longer finds the row: it
//! was taken over or cancelled), when its lease runs out without a renewal (the database is unreachable, or
//! the process was paused past it), when the claim guard refuses an effect (`guard`), and when shutdown
//! ends; it is told to drain when shutdown begins, and from the drain's cutoff on no effect starts.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use tokio::sync::watch;

use super::{
    fair::BULK,
    guard::{Confirmer, Fence},
    queue::QueueKey,
};

/// Why a run was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// Another worker holds the row now, or it was cancelled.
    Lost,
    /// No renewal reached the database for a whole lease.
    Expired,
    /// Shutdown's grace is over.
    Shutdown,
    /// Shutdown began and its cutoff for effects passed before the run made its next one: released, and
    /// run by the next worker.
    Draining,
}

impl StopReason {
    pub fn label(self) -> &'static str {
        match self {
            Self::Lost => "lost",
            Self::Expired => "expired",
            Self::Shutdown => "shutdown",
            Self::Draining => "draining",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Signal {
    Run,
    Drain,
    Stop(StopReason),
}

/// A run's view of its claim: whether it still holds it, and the signals to wind down or stop. A run that
/// is told to stop is dropped by the engine at its next await; one about to make a side effect outside the
/// database goes through the claim guard (`guard::before_effect`), which confirms the claim first.
#[derive(Clone, Debug)]
pub struct Lease(Arc<LeaseState>);

#[derive(Debug)]
struct LeaseState {
    /// Until when the claim is surely held: the last renewal's start plus the lease, less a margin for a
    /// renewal's round trip.
    held_until: Mutex<Instant>,
    /// Once shutdown began: the instant from which no effect starts.
    effects_until: Mutex<Option<Instant>>,
    signal: watch::Sender<Signal>,
    /// The row and claim the guard confirms in the database; none outside the engine.
    fence: Option<Fence>,
}

impl Lease {
    fn new(held_until: Instant, fence: Option<Fence>) -> Self {
        Self(Arc::new(LeaseState {
            held_until: Mutex::new(held_until),
            effects_until: Mutex::new(None),
            signal: watch::Sender::new(Signal::Run),
            fence,
        }))
    }

    /// A lease for work run outside the engine (tests, a one-off run): held for `for_how_long`.
    pub fn detached(for_how_long: Duration) -> Self {
        Self::new(Instant::now() + for_how_long, None)
    }

    fn held_until(&self) -> MutexGuard<'_, Instant> {
        self.0.held_until.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether an effect may start now, and if not, why: the run was stopped, the lease was not renewed in
    /// time (a pause counts: the time is monotonic), the drain's cutoff passed, or the row no longer carries
    /// the claim in the database.
    pub(super) async fn confirm(&self) -> Result<(), StopReason> {
        self.confirm_here()?;
        if let Some(fence) = &self.0.fence
            && !fence.confirmer.holds(&fence.id, fence.token).await
        {
            return Err(StopReason::Lost);
        }
        // The database's answer took a while: the lease must still hold after it.
        self.confirm_here()
    }

    fn confirm_here(&self) -> Result<(), StopReason> {
        if let Signal::Stop(reason) = *self.0.signal.borrow() {
            return Err(reason);
        }
        let now = Instant::now();
        if now >= *self.held_until() {
            return Err(StopReason::Expired);
        }
        let cutoff = *self.0.effects_until.lock().unwrap_or_else(PoisonError::into_inner);
        if cutoff.is_some_and(|cutoff| now >= cutoff) {
            return Err(StopReason::Draining);
        }
        Ok(())
    }

    /// The guard refused an effect: the run stops for `reason`.
    pub(super) fn refuse(&self, reason: StopReason) {
        metrics::counter!("frontdesk_job_effects_refused_total", "reason" => reason.label()).increment(1);
        self.stop(reason);
    }

    /// Whether shutdown began or the run must stop: work that goes on in steps takes no next step.
    pub fn winding_down(&self) -> bool {
        *self.0.signal.borrow() != Signal::Run
    }

    /// Resolves once shutdown began (finish soon) or the run must stop.
    pub async fn draining(&self) {
        let mut signal = self.0.signal.subscribe();
        let _ = signal.wait_for(|s| *s != Signal::Run).await;
    }

    /// Resolves with the reason once the run must stop.
    pub(super) async fn stopped(&self) -> StopReason {
        let mut signal = self.0.signal.subscribe();
        match signal.wait_for(|s| matches!(s, Signal::Stop(_))).await {
            Ok(signal) => match *signal {
                Signal::Stop(reason) => reason,
                _ => StopReason::Shutdown,
            },
            Err(_) => StopReason::Shutdown,
        }
    }

    fn stop(&self, reason: StopReason) {
        self.0.signal.send_if_modified(|s| {
            let first = !matches!(s, Signal::Stop(_));
            if first {
                *s = Signal::Stop(reason);
            }
            first
        });
    }

    fn drain(&self, effects_until: Instant) {
        *self.0.effects_until.lock().unwrap_or_else(PoisonError::into_inner) = Some(effects_until);
        self.0.signal.send_if_modified(|s| {
            let first = *s == Signal::Run;
            if first {
                *s = Signal::Drain;
            }
            first
        });
    }

    fn renewed(&self, until: Instant) {
        let mut held_until = self.held_until();
        *held_until = (*held_until).max(until);
    }

    fn expired(&self, now: Instant) -> bool {
        *self.held_until() <= now
    }
}

struct Entry {
    token: i64,
    key: QueueKey,
    lease: Lease,
    /// The run ended; its outcome waits for the recorder.
    ran: bool,
}

/// The rows in hand, by id.
pub struct Running {
    /// How long a claim or renewal holds, less the margin (see `LeaseState::held_until`).
    hold: Duration,
    entries: Mutex<HashMap<String, Entry>>,
    /// Confirms the claims of this table's rows for the guard.
    confirmer: Option<Arc<Confirmer>>,
}

/// A claim or renewal that started at `at` holds its rows until `at + hold`.
pub fn hold_for(lease: Duration) -> Duration {
    lease - lease / 4
}

impl Running {
    pub fn new(lease: Duration, confirmer: Option<Confirmer>) -> Self {
        Self {
            hold: hold_for(lease),
            entries: Mutex::default(),
            confirmer: confirmer.map(Arc::new),
        }
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding the lock leaves plain data behind; it stays usable.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A row claimed by a claim that started at `claimed_at`; its run's lease.
    pub fn start(&self, id: &str, token: i64, key: QueueKey, claimed_at: Instant) -> Lease {
        let fence = self.confirmer.as_ref().map(|confirmer| Fence {
            id: id.to_owned(),
            token,
            confirmer: confirmer.clone(),
        });
        let lease = Lease::new(claimed_at + self.hold, fence);
        let entry = Entry {
            token,
            key,
            lease: lease.clone(),
            ran: false,
        };
        self.entries().insert(id.to_owned(), entry);
        lease
    }

    /// The run of `id` ended; its outcome is on its way to the recorder.
    pub fn ran(&self, id: &str) {
        if let Some(entry) = self.entries().get_mut(id) {
            entry.ran = true;
        }
    }

    /// The outcome of `id` is committed, or never will be: it is no longer in hand.
    pub fn done(&self, id: &str) {
        self.entries().remove(id);
    }

    /// The rows in hand and their claims' tokens, for a renewal.
    pub fn in_hand(&self) -> (Vec<String>, Vec<i64>) {
        let entries = self.entries();
        let ids = entries.keys().cloned().collect();
        let tokens: HashSet<i64> = entries.values().map(|e| e.token).collect();
        (ids, tokens.into_iter().collect())
    }

    /// A renewal that started at `started` found `held` among `asked`: those rows hold on; the runs of the
    /// others, if still running, are stopped (`Lost`). How many runs were stopped.
    pub fn renewed(&self, asked: &[String], held: &HashSet<String>, started: Instant) -> usize {
        let entries = self.entries();
        let mut lost = 0;
        for id in asked {
            let Some(entry) = entries.get(id) else {
                continue;
            };
            if held.contains(id) {
                entry.lease.renewed(started + self.hold);
            } else if !entry.ran {
                entry.lease.stop(StopReason::Lost);
                lost += 1;
            }
        }
        lost
    }

    /// Stops the runs whose lease ran out without renewal by `now`; how many.
    pub fn expire(&self, now: Instant) -> usize {
        let entries = self.entries();
        let mut expired = 0;
        for entry in entries.values().filter(|e| !e.ran && e.lease.expired(now)) {
            entry.lease.stop(StopReason::Expired);
            expired += 1;
        }
        expired
    }

    /// Shutdown began: every run is asked to finish soon, and none starts an effect from `effects_until` on.
    pub fn drain_all(&self, effects_until: Instant) {
        for entry in self.entries().values() {
            entry.lease.drain(effects_until);
        }
    }

    /// Shutdown's grace is over: every run still going stops now.
    pub fn stop_all(&self) {
        for entry in self.entries().values() {
            entry.lease.stop(StopReason::Shutdown);
        }
    }

    /// The rows whose runs ended and whose outcomes are not yet committed.
    pub fn finished(&self) -> Vec<String> {
        self.entries()
            .iter()
            .filter(|(_, e)| e.ran)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Bulk rows in hand, which count against the bulk class's share of the slots.
    pub fn bulk(&self) -> usize {
        self.entries().values().filter(|e| e.key.class == BULK).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> QueueKey {
        QueueKey {
            class: 0,
            account: "acc".into(),
            lane: "ch".into(),
            kind: "k".into(),
        }
    }

    #[tokio::test]
    async fn a_row_the_renewal_no_longer_finds_stops_its_run_unless_the_run_had_ended() {
        let running = Running::new(Duration::from_secs(4), None);
        let now = Instant::now();
        let lost = running.start("a", 1, key(), now);
        let ended = running.start("b", 1, key(), now);
        let kept = running.start("c", 1, key(), now);
        running.ran("b");
        let asked: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let held: HashSet<String> = ["c".to_owned()].into();
        assert_eq!(running.renewed(&asked, &held, now + Duration::from_secs(2)), 1);
        assert_eq!(lost.stopped().await, StopReason::Lost);
        assert_eq!(lost.confirm().await, Err(StopReason::Lost));
        assert_eq!(
            ended.confirm().await,
            Ok(()),
            "an ended run's outcome is fenced by the recorder instead"
        );
        assert_eq!(kept.confirm().await, Ok(()));
    }

    #[tokio::test]
    async fn a_lease_not_renewed_in_time_is_no_longer_held_and_the_watchdog_stops_its_run() {
        let running = Running::new(Duration::from_secs(4), None);
        let claimed_at = Instant::now() - Duration::from_secs(10);
        let lease = running.start("a", 1, key(), claimed_at);
        assert_eq!(
            lease.confirm().await,
            Err(StopReason::Expired),
            "a paused process must not trust a claim older than its lease"
        );
        assert_eq!(running.expire(Instant::now()), 1);
        assert_eq!(lease.stopped().await, StopReason::Expired);
    }

    #[tokio::test]
    async fn shutdown_drains_first_refuses_effects_past_the_cutoff_and_stops_after() {
        let running = Running::new(Duration::from_secs(4), None);
        let lease = running.start("a", 1, key(), Instant::now());
        let other = running.start("b", 1, key(), Instant::now());
        running.drain_all(Instant::now() + Duration::from_secs(60));
        lease.draining().await;
        assert_eq!(
            lease.confirm().await,
            Ok(()),
            "before the cutoff effects may still start"
        );
        running.drain_all(Instant::now());
        assert_eq!(other.confirm().await, Err(StopReason::Draining));
        running.stop_all();
        assert_eq!(lease.stopped().await, StopReason::Shutdown);
    }
}
