//! The one engine that runs durable work, whatever its table: jobs and webhook deliveries. Every core
//! process runs, per table, a claim loop that keeps up to `concurrency` rows in hand, fairly (`fair`,
//! `claim`); a run task per row, stopped when its claim is lost, its lease runs out unrenewed, or its
//! deadline passes; a recorder that writes outcomes in batches (a slot is free again only once its outcome
//! is committed, so a slow database slows claiming instead of piling up outcomes); and a renewer that
//! keeps the leases of the rows in hand and learns which it lost. At shutdown the claim loop stops, runs
//! are asked to drain and get the grace to finish and be recorded; then the runs still going are stopped,
//! and only then are their claims released for the next worker, so no row runs in two places at once.
//!
//! What differs between tables is the `Work`: how claimed rows become runnable items, what a run does,
//! and how outcomes are written.

use std::{
    collections::{HashMap, HashSet},
    panic::AssertUnwindSafe,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use sea_orm::{DatabaseConnection, DbErr, QueryResult};
use tokio::{
    sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc},
    task::JoinHandle,
};
use tracing::Instrument;

use super::{
    claim::{self, Wanted},
    fair::{BULK, Budget, Caps},
    guard::{self, Confirmer},
    lease,
    queue::{QueueKey, Table},
    ready,
    running::{Lease, Running, StopReason},
};
use crate::{clock::Clock, shutdown::Shutdown, store::wakeups::Wakeups};

/// Outcomes written per transaction at most.
const RECORD_BATCH: usize = 500;
/// Wait before retrying after a database error.
const ERROR_BACKOFF: Duration = Duration::from_secs(1);
/// Between tries of writing outcomes: short, so a database back from a restart records them at once.
const OUTCOME_BACKOFF: Duration = Duration::from_millis(250);
/// After shutdown's grace, how long stopped runs and the recorder get before the claims are released.
const STOP_WAIT: Duration = Duration::from_secs(5);
/// The shortest lease: renewals (every third of it) must fit a database round trip with room to spare.
pub const MIN_LEASE: Duration = Duration::from_secs(1);

/// Why a run produced no outcome of its own.
#[derive(Debug)]
pub enum RunFailure {
    /// It ran past its deadline and was stopped.
    Overran(Duration),
    /// It panicked (a bug); the message.
    Panicked(String),
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Overran(deadline) => write!(f, "the run took longer than its deadline of {deadline:?}"),
            Self::Panicked(message) => write!(f, "the handler panicked: {message}"),
        }
    }
}

/// What one table's work is.
#[async_trait::async_trait]
pub trait Work: Send + Sync + 'static {
    /// A claimed row, ready to run.
    type Item: Clone + Send + Sync + 'static;
    /// What a run ended with, for the recorder.
    type Done: Send + 'static;

    fn table(&self) -> &'static Table;

    /// The kinds this process runs (those it has handlers for); `None` for a table without kinds. A claim
    /// reads only their queues, so queues of a kind no replica runs cannot hide others.
    fn kinds(&self) -> Option<Vec<String>>;

    /// The claimed rows (key columns, `id`, then the table's `returning` columns) as items with their ids.
    /// Rows that must not run may be settled here and left out.
    async fn load(
        &self,
        db: &DatabaseConnection,
        rows: Vec<(QueueKey, QueryResult)>,
        token: i64,
    ) -> Result<Vec<(String, QueueKey, Self::Item)>, DbErr>;

    /// How long a run of `item` may take before it is stopped.
    fn deadline(&self, item: &Self::Item) -> Duration;

    async fn run(&self, item: Self::Item, lease: &Lease) -> Self::Done;

    /// The span a run of `item` is inside (none by default).
    fn span(&self, _item: &Self::Item) -> tracing::Span {
        tracing::Span::none()
    }

    /// The outcome of a run that overran its deadline or panicked.
    fn failed(&self, item: Self::Item, why: RunFailure) -> Self::Done;

    /// Until when (Unix milliseconds) the run's queue rests in this process: a paced channel whose next
    /// slot is far, whose other rows would only be deferred as well.
    fn rests_until(&self, _done: &Self::Done) -> Option<i64> {
        None
    }

    /// Counts the run in the metrics.
    fn observe(&self, key: &QueueKey, done: &Self::Done, took: Duration);

    /// Writes a batch of outcomes in one transaction; the ids whose outcomes were dropped because their
    /// rows no longer carry the run's claim (taken over, cancelled).
    async fn record(
        &self,
        db: &DatabaseConnection,
        batch: &mut [Self::Done],
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, DbErr>;
}

/// How one table's engine runs.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Rows in hand at once in this process; 0 runs none.
    pub concurrency: u32,
    /// Running at once across replicas, per lane and per account and class.
    pub caps: Caps,
    /// Of this process's slots, how many bulk work may hold.
    pub bulk_slots: u32,
    pub lease: Duration,
    pub poll_interval: Duration,
    /// How long runs may take to finish once shutdown began.
    pub grace: Duration,
    /// Claims are worth batching: a claim waits until this share of the slots is free (4: a quarter).
    pub claim_when_free: u32,
}

/// A finished run on its way to the recorder, with the slot it holds until its outcome is committed.
struct Finished<D> {
    done: D,
    id: String,
    key: QueueKey,
    slot: OwnedSemaphorePermit,
}

pub struct Engine<W: Work> {
    pub db: DatabaseConnection,
    pub clock: Arc<dyn Clock>,
    pub config: EngineConfig,
    pub work: Arc<W>,
    /// Rung when this process, or with wake-ups any replica, wrote work due now.
    pub wake: Arc<Notify>,
    /// Whether wake-ups reach this process, so an idle claimer may sleep long.
    pub wakeups: Wakeups,
}

/// Queues resting in this process, until when (Unix milliseconds on the service's clock).
struct Rests {
    clock: Arc<dyn Clock>,
    until: Mutex<HashMap<QueueKey, i64>>,
}

impl Rests {
    /// The queue rests until `until_ms`, or until an earlier rest still running ends (a rest that already
    /// ended does not cut the new one short).
    fn rest(&self, key: QueueKey, until_ms: i64) {
        let now_ms = self.clock.now().timestamp_millis();
        let mut rests = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        let until = rests.entry(key).or_insert(until_ms);
        *until = if *until <= now_ms {
            until_ms
        } else {
            (*until).min(until_ms)
        };
    }

    /// How long until the first rest ends.
    fn next_end_in_ms(&self, now_ms: i64) -> Option<i64> {
        let rests = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        rests.values().map(|until| until - now_ms).filter(|ms| *ms > 0).min()
    }

    fn resting(&self, now_ms: i64) -> HashSet<QueueKey> {
        let mut rests = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        rests.retain(|_, until| *until > now_ms);
        rests.keys().cloned().collect()
    }
}

impl<W: Work> Engine<W> {
    /// Starts the loops; the handle resolves once shutdown began and every run was recorded, or stopped and
    /// its claim released.
    pub fn spawn(self, shutdown: Shutdown) -> anyhow::Result<JoinHandle<()>> {
        let table = self.work.table().name;
        anyhow::ensure!(
            self.config.lease >= MIN_LEASE,
            "the lease of {table} must be at least {MIN_LEASE:?}"
        );
        if self.config.concurrency == 0 {
            return Ok(tokio::spawn(async {}));
        }
        let confirmer = Confirmer::spawn(self.db.clone(), self.work.table());
        let running = Arc::new(Running::new(self.config.lease, Some(confirmer)));
        let (outcomes, recorded) = mpsc::unbounded_channel();
        let renewer = tokio::spawn(renew_loop(
            self.db.clone(),
            self.work.table(),
            running.clone(),
            self.config.lease,
        ));
        let recorder = tokio::spawn(record_loop(
            self.db.clone(),
            self.clock.clone(),
            self.work.clone(),
            running.clone(),
            self.wake.clone(),
            recorded,
            self.config.lease,
        ));
        let claimer = tokio::spawn(claim_loop(self, running, outcomes, shutdown));
        Ok(tokio::spawn(async move {
            let _ = claimer.await;
            recorder.abort();
            renewer.abort();
        }))
    }
}

async fn claim_loop<W: Work>(
    engine: Engine<W>,
    running: Arc<Running>,
    outcomes: mpsc::UnboundedSender<Finished<W::Done>>,
    shutdown: Shutdown,
) {
    let config = &engine.config;
    let table = engine.work.table();
    let capacity = config.concurrency as usize;
    let slots = Arc::new(Semaphore::new(capacity));
    let lease_ms = millis(config.lease);
    let rests = Arc::new(Rests {
        clock: engine.clock.clone(),
        until: Mutex::default(),
    });
    let batch = (config.concurrency / config.claim_when_free.max(1)).max(1);
    let kinds = engine.work.kinds();
    let mut expired_from_ms = 0;
    // Claims whose rows are being read before their runs start, and how many of those rows are bulk.
    let mut starting = tokio::task::JoinSet::new();
    let loading_bulk = Arc::new(AtomicUsize::new(0));
    while !shutdown.is_stopping() {
        tokio::select! {
            ready = slots.acquire_many(batch) => match ready {
                Ok(ready) => drop(ready),
                Err(_) => break,
            },
            () = shutdown.clone().wait() => break,
        }
        let free = slots.available_permits();
        let now_ms = engine.clock.now().timestamp_millis();
        let wanted = Wanted {
            kinds: kinds.as_deref(),
            resting: &rests.resting(now_ms),
            caps: config.caps,
            budget: Budget {
                free,
                bulk: (config.bulk_slots as usize)
                    .saturating_sub(running.bulk() + loading_bulk.load(Ordering::Acquire)),
            },
            finished: running.finished(),
        };
        let claimed_at = Instant::now();
        let reading = ready::Reading {
            steer_ms: engine.clock.steered_by().num_milliseconds(),
            expired_from_ms,
        };
        let taken = match claim::claim(&engine.db, table, wanted, reading, lease_ms).await {
            Ok(taken) => taken,
            Err(err) => {
                tracing::warn!(table = table.name, error = %err, "claim failed; retrying");
                sleep_or_stop(ERROR_BACKOFF, &shutdown).await;
                continue;
            }
        };
        if taken.now_ms >= expired_from_ms {
            expired_from_ms = taken.now_ms + ready::EXPIRED_EVERY_MS;
        }
        let (idle, token) = (taken.idle, taken.token);
        let wait = idle_wait(&engine, &taken, &rests, now_ms);
        if !taken.rows.is_empty() {
            // The claim took at most the free slots, so they are there now; the rows are read and their runs
            // started beside the next claim, which would otherwise wait for that read.
            let Ok(permits) = slots.clone().acquire_many_owned(taken.rows.len() as u32).await else {
                break;
            };
            let runner = Runner {
                work: engine.work.clone(),
                running: running.clone(),
                rests: rests.clone(),
                outcomes: outcomes.clone(),
                wake: engine.wake.clone(),
            };
            let bulk = taken.rows.iter().filter(|(key, _)| key.class == BULK).count();
            loading_bulk.fetch_add(bulk, Ordering::AcqRel);
            let rows = ClaimedRows {
                rows: taken.rows,
                token,
                at: claimed_at,
                bulk: LoadingBulk {
                    count: loading_bulk.clone(),
                    rows: bulk,
                },
            };
            starting.spawn(start_runs(engine.db.clone(), runner, rows, permits));
        }
        while starting.try_join_next().is_some() {}
        if idle {
            tokio::select! {
                () = engine.wake.notified() => {},
                () = sleep_or_stop(wait, &shutdown) => {},
            }
        }
    }
    // Their runs must be in hand before shutdown drains or releases what is.
    while starting.join_next().await.is_some() {}
    stop_runs(&engine, &running, &slots).await;
}

/// The rows of one claim, with its token and when it was made.
struct ClaimedRows {
    rows: Vec<(QueueKey, QueryResult)>,
    token: i64,
    at: Instant,
    bulk: LoadingBulk,
}

/// A claim's bulk rows, counted against the bulk class's share of the slots until their runs are in hand
/// (or they are left out); dropped then.
struct LoadingBulk {
    count: Arc<AtomicUsize>,
    rows: usize,
}

impl Drop for LoadingBulk {
    fn drop(&mut self) {
        self.count.fetch_sub(self.rows, Ordering::AcqRel);
    }
}

/// Reads a claim's rows (`Work::load`) and starts a run for each, in a slot of `permits` (the slots of rows
/// left out go back). Rows that cannot be read stay claimed and run again when their lease ends.
async fn start_runs<W: Work>(
    db: DatabaseConnection,
    runner: Runner<W>,
    claimed: ClaimedRows,
    mut permits: OwnedSemaphorePermit,
) {
    let ClaimedRows { rows, token, at, bulk } = claimed;
    let items = match runner.work.load(&db, rows, token).await {
        Ok(items) => items,
        Err(err) => {
            tracing::warn!(table = runner.work.table().name, error = %err, "reading claimed work failed; it runs when its lease ends");
            return;
        }
    };
    for (id, key, item) in items {
        let Some(slot) = permits.split(1) else {
            break;
        };
        let lease = runner.running.start(&id, token, key.clone(), at);
        tokio::spawn(run_one(runner.clone(), Claimed { id, key, item, lease }, slot));
    }
    drop(bulk);
}

/// How long an idle claimer sleeps unless woken: the poll interval while due work waits for a cap (a slot
/// freed on another replica wakes no one here); else until the next head is due or a rest ends, and at
/// most the idle poll (the poll interval without wake-ups).
fn idle_wait<W: Work>(engine: &Engine<W>, taken: &claim::Taken, rests: &Rests, now_ms: i64) -> Duration {
    let poll = engine.config.poll_interval;
    if taken.waiting {
        return poll;
    }
    let longest = engine.wakeups.idle_wait(poll);
    [taken.next_in_ms, rests.next_end_in_ms(now_ms)]
        .into_iter()
        .flatten()
        .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
        .fold(longest, Duration::min)
}

/// Shutdown: the runs drain within the grace, starting no effect in its second half; those still going are
/// stopped, and the claims of every run that did not finish are released.
async fn stop_runs<W: Work>(engine: &Engine<W>, running: &Running, slots: &Semaphore) {
    let capacity = engine.config.concurrency;
    let grace = engine.config.grace;
    running.drain_all(Instant::now() + grace / 2);
    if tokio::time::timeout(grace, slots.acquire_many(capacity)).await.is_err() {
        running.stop_all();
        // A stopped run gives its slot back at once; one already finished does once the recorder wrote it.
        let _ = tokio::time::timeout(STOP_WAIT, slots.acquire_many(capacity)).await;
    }
    let (_, tokens) = running.in_hand();
    if tokens.is_empty() {
        return;
    }
    let table = engine.work.table();
    let steer_ms = engine.clock.steered_by().num_milliseconds();
    match lease::release(&engine.db, table, &tokens, steer_ms).await {
        Ok(()) => tracing::info!(
            table = table.name,
            claims = tokens.len(),
            "stopped unfinished runs and released them"
        ),
        Err(err) => {
            tracing::warn!(table = table.name, error = %err, "releasing unfinished runs failed; their leases will end")
        }
    }
}

struct Claimed<I> {
    id: String,
    key: QueueKey,
    item: I,
    lease: Lease,
}

/// What a run task shares with the engine.
struct Runner<W: Work> {
    work: Arc<W>,
    running: Arc<Running>,
    rests: Arc<Rests>,
    outcomes: mpsc::UnboundedSender<Finished<W::Done>>,
    /// The claim loop's: a run that ended leaves its lane's and account's caps room at once.
    wake: Arc<Notify>,
}

impl<W: Work> Clone for Runner<W> {
    fn clone(&self) -> Self {
        Self {
            work: self.work.clone(),
            running: self.running.clone(),
            rests: self.rests.clone(),
            outcomes: self.outcomes.clone(),
            wake: self.wake.clone(),
        }
    }
}

/// Runs one claimed row until it ends, its deadline passes, or it must stop.
async fn run_one<W: Work>(runner: Runner<W>, claimed: Claimed<W::Item>, slot: OwnedSemaphorePermit) {
    let Runner {
        work,
        running,
        rests,
        outcomes,
        wake,
    } = runner;
    let Claimed { id, key, item, lease } = claimed;
    let started = Instant::now();
    let deadline = work.deadline(&item);
    let backup = item.clone();
    let span = work.span(&item);
    let run = AssertUnwindSafe(guard::scoped(lease.clone(), work.run(item, &lease)).instrument(span)).catch_unwind();
    let ended = tokio::select! {
        biased;
        reason = lease.stopped() => Err(reason),
        ran = tokio::time::timeout(deadline, run) => Ok(match ran {
            Ok(Ok(done)) => done,
            Ok(Err(panic)) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".to_owned());
                // The panic hook has printed the message already.
                tracing::error!(table = work.table().name, id, kind = key.kind, "a run panicked; it spends a try");
                work.failed(backup, RunFailure::Panicked(message))
            }
            Err(_) => {
                tracing::warn!(table = work.table().name, id, kind = key.kind, ?deadline, "a run overran its deadline and was stopped");
                work.failed(backup, RunFailure::Overran(deadline))
            }
        }),
    };
    match ended {
        Ok(done) => {
            if let Some(until_ms) = work.rests_until(&done) {
                rests.rest(key.clone(), until_ms);
            }
            work.observe(&key, &done, started.elapsed());
            running.ran(&id);
            wake.notify_one();
            let _ = outcomes.send(Finished { done, id, key, slot });
        }
        Err(reason) => {
            metrics::counter!("frontdesk_job_runs_stopped_total", "table" => work.table().name, "kind" => key.kind.clone(), "reason" => reason.label())
                .increment(1);
            // Stopped for shutdown, the claim is released once every run ended; otherwise it is not ours.
            if !matches!(reason, StopReason::Shutdown | StopReason::Draining) {
                tracing::warn!(
                    table = work.table().name,
                    id,
                    kind = key.kind,
                    reason = reason.label(),
                    "a run was stopped: its claim is no longer this worker's"
                );
                // Not ours any more: nothing to record or release.
                running.done(&id);
            }
        }
    }
}

async fn record_loop<W: Work>(
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    work: Arc<W>,
    running: Arc<Running>,
    wake: Arc<Notify>,
    mut recorded: mpsc::UnboundedReceiver<Finished<W::Done>>,
    lease: Duration,
) {
    let table = work.table().name;
    while let Some(first) = recorded.recv().await {
        let mut batch = vec![first];
        while batch.len() < RECORD_BATCH {
            match recorded.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let mut dones = Vec::with_capacity(batch.len());
        let mut rest = Vec::with_capacity(batch.len());
        for finished in batch {
            dones.push(finished.done);
            rest.push((finished.id, finished.key, finished.slot));
        }
        let dropped = write_outcomes(&db, clock.as_ref(), work.as_ref(), &mut dones, lease).await;
        for (id, key, _) in &rest {
            if dropped.contains(id) {
                metrics::counter!("frontdesk_job_outcomes_dropped_total", "table" => table, "kind" => key.kind.clone())
                    .increment(1);
            }
            running.done(id);
        }
        // Slots are free again: a claim that found every due queue at a cap may now take more.
        drop(rest);
        wake.notify_one();
    }
}

/// Writes a batch of outcomes. A database that cannot be reached is waited for up to a lease (`patience`):
/// the rows stay in hand meanwhile, so the renewer extends their leases as soon as it is back, and a run
/// whose provider call was answered is recorded rather than run, and called, again. A batch that keeps
/// failing is then written one outcome at a time, so one whose effect cannot be written does not hold back
/// the others. An outcome that cannot be written at all runs again once its lease, no longer renewed,
/// ends: at least once, never lost.
async fn write_outcomes<W: Work>(
    db: &DatabaseConnection,
    clock: &dyn Clock,
    work: &W,
    dones: &mut [W::Done],
    patience: Duration,
) -> HashSet<String> {
    let table = work.table().name;
    let started = Instant::now();
    for attempt in 1.. {
        match record_guarded(db, clock, work, dones).await {
            Ok(dropped) => return dropped.into_iter().collect(),
            Err(err) => {
                tracing::warn!(table, error = %err, attempt, batch = dones.len(), "recording outcomes failed");
                if attempt >= 3 && started.elapsed() + OUTCOME_BACKOFF > patience {
                    break;
                }
                tokio::time::sleep(OUTCOME_BACKOFF).await;
            }
        }
    }
    let mut dropped = HashSet::new();
    if dones.len() > 1 {
        for one in dones.chunks_mut(1) {
            match record_guarded(db, clock, work, one).await {
                Ok(lost) => dropped.extend(lost),
                Err(err) => tracing::warn!(table, error = %err, "recording an outcome failed; it will run again"),
            }
        }
    }
    dropped
}

/// `Work::record`, a panic in it taken as a failed write: the recorder goes on (its rows run again once
/// their leases end) instead of ending and leaving every slot of the engine taken.
async fn record_guarded<W: Work>(
    db: &DatabaseConnection,
    clock: &dyn Clock,
    work: &W,
    dones: &mut [W::Done],
) -> Result<Vec<String>, DbErr> {
    match AssertUnwindSafe(work.record(db, dones, clock.now()))
        .catch_unwind()
        .await
    {
        Ok(recorded) => recorded,
        Err(_) => Err(DbErr::Custom("recording the outcomes panicked".into())),
    }
}

/// Renews the leases of the rows in hand every third of the lease, stops the runs of rows it no longer
/// holds, and those whose lease ran out unrenewed; runs until aborted.
async fn renew_loop(db: DatabaseConnection, table: &'static Table, running: Arc<Running>, lease: Duration) {
    let lease_ms = millis(lease);
    loop {
        let started = Instant::now();
        let (ids, tokens) = running.in_hand();
        if !tokens.is_empty() {
            match lease::renew(&db, table, &tokens, lease_ms).await {
                Ok(held) => {
                    let lost = running.renewed(&ids, &held, started);
                    if lost > 0 {
                        metrics::counter!("frontdesk_job_claims_lost_total", "table" => table.name)
                            .increment(lost as u64);
                    }
                }
                Err(err) => {
                    metrics::counter!("frontdesk_job_lease_renewal_failures_total", "table" => table.name).increment(1);
                    tracing::warn!(table = table.name, error = %err, "renewing leases failed");
                }
            }
        }
        let expired = running.expire(Instant::now());
        if expired > 0 {
            metrics::counter!("frontdesk_job_claims_lost_total", "table" => table.name).increment(expired as u64);
        }
        tokio::time::sleep(lease / 3).await;
    }
}

pub fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4)
}

pub async fn sleep_or_stop(duration: Duration, shutdown: &Shutdown) {
    tokio::select! {
        () = tokio::time::sleep(duration) => {},
        () = shutdown.clone().wait() => {},
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::{DateTime, Utc};
    use sea_orm::{DatabaseConnection, DbErr, QueryResult};

    use super::{RunFailure, Work, write_outcomes};
    use crate::{
        clock::SystemClock,
        jobs::{
            Lease,
            queue::{QueueKey, Table},
        },
        store::test_databases::{Kind, TestDb},
    };

    static NOWHERE: Table = Table {
        name: "nowhere",
        due: "due_ms",
        class: None,
        lane: "lane",
        kind: None,
        returning: "id",
        unfinished_runs: None,
    };

    /// Work whose recording panics: a bug in a table's writer.
    struct PanicsWhenRecording;

    #[async_trait::async_trait]
    impl Work for PanicsWhenRecording {
        type Item = ();
        type Done = ();

        fn table(&self) -> &'static Table {
            &NOWHERE
        }

        fn kinds(&self) -> Option<Vec<String>> {
            None
        }

        async fn load(
            &self,
            _db: &DatabaseConnection,
            _rows: Vec<(QueueKey, QueryResult)>,
            _token: i64,
        ) -> Result<Vec<(String, QueueKey, ())>, DbErr> {
            Ok(Vec::new())
        }

        fn deadline(&self, _item: &()) -> Duration {
            Duration::from_secs(1)
        }

        async fn run(&self, _item: (), _lease: &Lease) {}

        fn failed(&self, _item: (), _why: RunFailure) {}

        fn observe(&self, _key: &QueueKey, _done: &(), _took: Duration) {}

        async fn record(
            &self,
            _db: &DatabaseConnection,
            _batch: &mut [()],
            _now: DateTime<Utc>,
        ) -> Result<Vec<String>, DbErr> {
            panic!("a writer's bug")
        }
    }

    /// A panic while writing outcomes is a failed write: the recorder lives on to write the next batch (the
    /// batch's rows run again when their leases end). Before, the panic ended the recorder, and every slot
    /// it would have freed stayed taken.
    #[tokio::test]
    async fn a_panic_while_recording_is_a_failed_write() {
        let test = TestDb::new(Kind::Sqlite, 1).await;
        let mut dones = [(), ()];
        let dropped = write_outcomes(
            &test.db,
            &SystemClock,
            &PanicsWhenRecording,
            &mut dones,
            Duration::from_millis(10),
        )
        .await;
        assert!(dropped.is_empty(), "nothing was written, so nothing was dropped");
        test.remove().await;
    }
}
