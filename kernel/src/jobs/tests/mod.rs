//! The engine's primitives on both databases, with handlers of the tests' own: a deferred job leaves its
//! lane open; enqueue-or-reschedule, run-again marks and dedup windows under concurrent enqueues; cancel of
//! a group of 10,000 jobs, running ones included, and of 12,000 busy ones through the claim guard, with the
//! group's tombstone; deadlines; keys released by failed jobs and the retention; a handler that panics;
//! jobs whose runs keep crashing; and no effect started past shutdown's cutoff. `scale`: many queues and
//! many accounts.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use chrono::Utc;
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use tokio::{sync::watch, task::JoinHandle};

use super::*;
use crate::{
    clock::{Clock, SteerableClock, SystemClock},
    jobs::JobConfig,
    shutdown::Shutdown,
    store::{
        entities::jobs,
        test_databases::{Kind, TestDb},
    },
};

const WAIT: Duration = Duration::from_secs(30);

/// The kinds these tests run, as argument types (handlers are registered by them); the jobs themselves are
/// written with `job(kind, ...)` and carry whatever payload a test gives them.
macro_rules! test_kinds {
    ($($args:ident = $kind:literal),* $(,)?) => {
        $(
            #[derive(serde::Serialize, serde::Deserialize)]
            struct $args {}

            impl JobArgs for $args {
                const KIND: &'static str = $kind;
            }
        )*
    };
}

test_kinds! {
    BroadcastSendJob = "broadcast_send",
    DailyJob = "daily",
    FollowUpJob = "follow_up",
    FreshJob = "fresh",
    ImportJob = "import",
    LaterJob = "later",
    OtherSendJob = "other_send",
    PanicsJob = "panics",
    ReplyJob = "reply",
    SendJob = "send",
    SlowSendJob = "slow_send",
    StuckJob = "stuck",
    SucceedsJob = "succeeds",
    WorkJob = "work",
}

macro_rules! on_both_databases {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let test = TestDb::new(Kind::Sqlite, 8).await;
                ($body)(test.db.clone()).await;
                test.remove().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let test = TestDb::new(Kind::Postgres, 8).await;
                ($body)(test.db.clone()).await;
                test.remove().await;
            }
        }
    };
}

/// One run as a test handler saw it.
#[derive(Clone, Debug)]
struct Run {
    kind: String,
    started: Instant,
    ended: Option<Instant>,
    /// The engine dropped the run before it ended (stopped); `ended` is when.
    dropped: bool,
    /// When the run passed the claim guard and made its effect.
    effect: Option<Instant>,
}

/// What the test handlers saw, shared with the test.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Run>>>);

impl Seen {
    fn all(&self) -> Vec<Run> {
        self.0.lock().unwrap().clone()
    }

    fn of(&self, kind: &str) -> Vec<Run> {
        self.all().into_iter().filter(|r| r.kind == kind).collect()
    }

    async fn until(&self, what: &str, holds: impl Fn(&[Run]) -> bool) -> Vec<Run> {
        let started = Instant::now();
        loop {
            let runs = self.all();
            if holds(&runs) {
                return runs;
            }
            assert!(started.elapsed() < WAIT, "{what}: {runs:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Marks its run dropped unless it ended.
struct RunGuard {
    seen: Seen,
    at: usize,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        let mut runs = self.seen.0.lock().unwrap();
        let run = &mut runs[self.at];
        if run.ended.is_none() {
            run.dropped = true;
            run.ended = Some(Instant::now());
        }
    }
}

/// A handler that records its runs, takes `took` (jittered up to `jitter` more), and answers `outcome`.
struct Scripted {
    seen: Seen,
    took: Duration,
    jitter: Duration,
    outcome: fn(&Job) -> Outcome,
    deadline: Duration,
    /// After its wait, the run makes an effect through the claim guard that takes this long.
    effect: Option<Duration>,
}

impl Scripted {
    fn new(seen: &Seen, outcome: fn(&Job) -> Outcome) -> Self {
        Self {
            seen: seen.clone(),
            took: Duration::ZERO,
            jitter: Duration::ZERO,
            outcome,
            deadline: DEFAULT_DEADLINE,
            effect: None,
        }
    }

    fn with_effect(mut self, took: Duration) -> Self {
        self.effect = Some(took);
        self
    }

    fn taking(mut self, took: Duration, jitter: Duration) -> Self {
        self.took = took;
        self.jitter = jitter;
        self
    }
}

#[async_trait::async_trait]
impl Handler for Scripted {
    fn deadline(&self) -> Duration {
        self.deadline
    }

    async fn run(&self, job: &Job) -> Outcome {
        let at = {
            let mut runs = self.seen.0.lock().unwrap();
            runs.push(Run {
                kind: job.kind.clone(),
                started: Instant::now(),
                ended: None,
                dropped: false,
                effect: None,
            });
            runs.len() - 1
        };
        let _guard = RunGuard {
            seen: self.seen.clone(),
            at,
        };
        let extra = self.jitter.mul_f64(rand::random::<f64>());
        tokio::time::sleep(self.took + extra).await;
        if let Some(took) = self.effect {
            guard::before_effect().await;
            self.seen.0.lock().unwrap()[at].effect = Some(Instant::now());
            tokio::time::sleep(took).await;
        }
        self.seen.0.lock().unwrap()[at].ended = Some(Instant::now());
        (self.outcome)(job)
    }
}

fn done(_: &Job) -> Outcome {
    Outcome::Done(None)
}

fn config(concurrency: u32, lane: u32) -> JobConfig {
    JobConfig {
        concurrency,
        lane_concurrency: lane,
        account_concurrency: 128,
        bulk_concurrency: None,
        lease: Duration::from_secs(2),
        max_crashes: 5,
        idle_poll: Duration::from_secs(1),
        poll_interval: Duration::from_millis(20),
        retention: Duration::from_secs(30 * 24 * 3600),
    }
}

/// A running engine; `stop` shuts it down as SIGTERM would.
struct Running {
    stop: watch::Sender<bool>,
    done: JoinHandle<()>,
    /// Rings the engine as a commit that enqueued work due now does.
    wake: Wake,
}

impl Running {
    fn start(db: &DatabaseConnection, config: JobConfig, handlers: Handlers) -> Self {
        Self::on_clock(db, Arc::new(SystemClock), config, handlers)
    }

    fn on_clock(db: &DatabaseConnection, clock: Arc<dyn Clock>, config: JobConfig, handlers: Handlers) -> Self {
        let (stop, shutdown) = Shutdown::by_hand();
        let wake = Wake::default();
        let engine = JobEngine::new(
            db.clone(),
            clock,
            config,
            handlers,
            wake.clone(),
            crate::store::leader::Leader::always(),
        );
        Self {
            stop,
            done: engine.spawn(shutdown).unwrap(),
            wake,
        }
    }

    async fn stop(self) {
        self.stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(30), self.done)
            .await
            .unwrap()
            .unwrap();
    }
}

fn job(kind: &'static str, lane: &str, payload: serde_json::Value) -> NewJob {
    NewJob {
        account_id: "acc_a".into(),
        kind,
        lane: lane.into(),
        payload,
        run_at_ms: Utc::now().timestamp_millis(),
        max_attempts: 3,
        ..NewJob::default()
    }
}

async fn failed_jobs(db: &DatabaseConnection) -> Vec<jobs::Model> {
    let failed = inspection::Filter {
        status: jobs::JobStatus::Failed,
        ..inspection::Filter::default()
    };
    inspection::list(db, &failed, 10).await.unwrap()
}

async fn pending(db: &DatabaseConnection) -> Vec<jobs::Model> {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    jobs::Entity::find()
        .filter(jobs::Column::Status.eq("pending"))
        .all(db)
        .await
        .unwrap()
}

// A follow-up deferred on a channel's lane left the lane resting in its process until the deferred time:
// the channel's sends waited as long.
on_both_databases!(
    a_deferred_job_leaves_its_lane_open,
    |db: DatabaseConnection| async move {
        let seen = Seen::default();
        fn later(_: &Job) -> Outcome {
            Outcome::Defer {
                until_ms: Utc::now().timestamp_millis() + 60_000,
            }
        }
        let handlers = Handlers::default()
            .with::<FollowUpJob>(Arc::new(Scripted::new(&seen, later)))
            .with::<SendJob>(Arc::new(Scripted::new(&seen, done)));
        let engine = Running::start(&db, config(8, 4), handlers);
        enqueue(&db, job("follow_up", "ch_1", serde_json::json!({})), Utc::now())
            .await
            .unwrap();
        seen.until("the follow-up runs", |runs| runs.iter().any(|r| r.ended.is_some()))
            .await;
        let sent_at = Instant::now();
        enqueue(&db, job("send", "ch_1", serde_json::json!({})), Utc::now())
            .await
            .unwrap();
        let runs = seen
            .until("the send on the same lane runs", |runs| {
                runs.iter().any(|r| r.kind == "send")
            })
            .await;
        let send = runs.iter().find(|r| r.kind == "send").unwrap();
        assert!(
            send.started - sent_at < Duration::from_secs(2),
            "the send waited {:?}",
            send.started - sent_at
        );
        let follow_up: Vec<jobs::Model> = pending(&db)
            .await
            .into_iter()
            .filter(|j| j.kind == "follow_up")
            .collect();
        assert_eq!(follow_up.len(), 1, "the follow-up alone is rescheduled: {follow_up:?}");
        assert!(follow_up[0].run_at_ms > Utc::now().timestamp_millis() + 50_000);
        engine.stop().await;
    }
);

// A test that moved its clock forward past a run in progress ended that run's lease too: the job was
// claimed again and ran twice (a follow-up sent twice). Steering moves when scheduled work is due, not
// how long a claim holds.
on_both_databases!(
    a_steered_clock_makes_work_due_and_ends_no_lease,
    |db: DatabaseConnection| async move {
        let seen = Seen::default();
        let clock = Arc::new(SteerableClock::default());
        let handlers = Handlers::default()
            .with::<SlowSendJob>(Arc::new(
                Scripted::new(&seen, done).taking(Duration::from_secs(3), Duration::ZERO),
            ))
            .with::<LaterJob>(Arc::new(Scripted::new(&seen, done)));
        let engine = Running::on_clock(&db, clock.clone(), config(8, 4), handlers);
        let in_an_hour = NewJob {
            run_at_ms: Utc::now().timestamp_millis() + 3_600_000,
            ..job("later", "ch_2", serde_json::json!({}))
        };
        enqueue(&db, in_an_hour, Utc::now()).await.unwrap();
        enqueue(&db, job("slow_send", "ch_1", serde_json::json!({})), Utc::now())
            .await
            .unwrap();
        seen.until("the send runs", |runs| !runs.is_empty()).await;
        clock.set(Some(Utc::now() + chrono::Duration::hours(2)));
        engine.wake.notify();
        seen.until("the send ends and the job an hour away runs", |runs| {
            runs.iter().filter(|r| r.ended.is_some()).count() >= 2
        })
        .await;
        // A claim of the send's row on the steered clock would have taken it in the 3 s it ran.
        let sends = seen.of("slow_send");
        assert_eq!(sends.len(), 1, "the send ran once: {sends:?}");
        assert!(!sends[0].dropped, "its run was never stopped: {sends:?}");
        assert_eq!(seen.of("later").len(), 1);
        engine.stop().await;
    }
);

fn keyed(run_in: Duration, n: usize) -> NewJob {
    NewJob {
        unique_key: Some("reply:conv_1".into()),
        on_conflict: OnConflict::Reschedule,
        run_at_ms: Utc::now().timestamp_millis() + i64::try_from(run_in.as_millis()).unwrap(),
        ..job("reply", "conv_1", serde_json::json!({ "n": n }))
    }
}

on_both_databases!(
    enqueue_or_reschedule_keeps_one_job_and_moves_it,
    |db: DatabaseConnection| async move {
        // Sixteen concurrent enqueues of one key: one job is written, the others reschedule it.
        let enqueues = (0..16).map(|n| {
            let db = db.clone();
            tokio::spawn(async move {
                enqueue(&db, keyed(Duration::from_secs(60), n), Utc::now())
                    .await
                    .unwrap()
            })
        });
        let mut written = 0;
        for result in futures_util::future::join_all(enqueues).await {
            match result.unwrap() {
                Enqueued::Written(_) => written += 1,
                Enqueued::Rescheduled(_) => {}
                Enqueued::Skipped => panic!("a reschedule is never skipped"),
            }
        }
        assert_eq!(written, 1);
        assert_eq!(pending(&db).await.len(), 1);
        // A debounce pushes the job back, with the latest payload.
        let before = pending(&db).await[0].clone();
        let later = enqueue(&db, keyed(Duration::from_secs(120), 99), Utc::now())
            .await
            .unwrap();
        assert_eq!(later, Enqueued::Rescheduled(before.id.clone()));
        let after = pending(&db).await;
        assert_eq!(after.len(), 1);
        assert!(after[0].run_at_ms >= before.run_at_ms + 50_000, "{after:?}");
        assert_eq!(after[0].payload, r#"{"n":99}"#);
        // The default keeps the job as it is.
        let kept = NewJob {
            on_conflict: OnConflict::Keep,
            ..keyed(Duration::ZERO, 100)
        };
        assert_eq!(enqueue(&db, kept, Utc::now()).await.unwrap(), Enqueued::Skipped);
        assert_eq!(pending(&db).await[0].run_at_ms, after[0].run_at_ms);
    }
);

// Work enqueued while the key's job runs is never left undone: every enqueue is followed by a run that
// started after it committed, runs of the key never overlap, and bursts are coalesced.
on_both_databases!(
    a_key_enqueued_while_its_job_runs_runs_again_after_it,
    |db: DatabaseConnection| async move {
        let seen = Seen::default();
        let handler = Scripted::new(&seen, done).taking(Duration::from_millis(10), Duration::from_millis(60));
        let engine = Running::start(
            &db,
            config(8, 8),
            Handlers::default().with::<ReplyJob>(Arc::new(handler)),
        );
        let mut committed = Vec::new();
        for n in 0..150 {
            enqueue(&db, keyed(Duration::ZERO, n), Utc::now()).await.unwrap();
            committed.push(Instant::now());
            let pause = rand::random::<u64>() % 25;
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
        let last = *committed.last().unwrap();
        let runs = seen
            .until("a run after the last enqueue ends", |runs| {
                runs.iter().any(|r| r.started > last && r.ended.is_some() && !r.dropped)
            })
            .await;
        // Nothing left behind, no run lost.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(pending(&db).await.is_empty(), "the key's job is gone once it ran");
        for (n, at) in committed.iter().enumerate() {
            assert!(
                runs.iter().any(|r| r.started > *at && !r.dropped),
                "enqueue {n} was followed by no run"
            );
        }
        let mut ordered = seen.of("reply");
        ordered.sort_by_key(|r| r.started);
        for pair in ordered.windows(2) {
            let ended = pair[0].ended.expect("every run ended");
            assert!(pair[1].started >= ended, "two runs of one key overlapped");
        }
        assert!(ordered.len() < 150, "bursts are coalesced ({} runs)", ordered.len());
        engine.stop().await;
    }
);

on_both_databases!(a_dedup_key_holds_for_its_window, |db: DatabaseConnection| async move {
    let seen = Seen::default();
    let engine = Running::start(
        &db,
        config(8, 8),
        Handlers::default().with::<DailyJob>(Arc::new(Scripted::new(&seen, done))),
    );
    let window_ends = Utc::now().timestamp_millis() + 2_000;
    let daily = || NewJob {
        dedup: Some(Dedup {
            key: "daily:acc_a:2026-11-27".into(),
            until_ms: window_ends,
        }),
        ..job("daily", "", serde_json::json!({}))
    };
    let enqueues = (0..10).map(|_| {
        let (db, new) = (db.clone(), daily());
        tokio::spawn(async move { enqueue(&db, new, Utc::now()).await.unwrap() })
    });
    let results = futures_util::future::join_all(enqueues).await;
    let written = results
        .iter()
        .filter(|r| matches!(r.as_ref().unwrap(), Enqueued::Written(_)))
        .count();
    assert_eq!(written, 1, "{results:?}");
    seen.until("the job runs", |runs| runs.iter().any(|r| r.ended.is_some()))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(pending(&db).await.is_empty());
    // The job is gone; its key is not, until the window ends.
    assert_eq!(enqueue(&db, daily(), Utc::now()).await.unwrap(), Enqueued::Skipped);
    tokio::time::sleep(Duration::from_millis(
        u64::try_from(window_ends - Utc::now().timestamp_millis()).unwrap_or(0) + 50,
    ))
    .await;
    assert!(matches!(
        enqueue(&db, daily(), Utc::now()).await.unwrap(),
        Enqueued::Written(_)
    ));
    assert!(
        retention::prune(&db, None, Utc::now().timestamp_millis() + 10_000)
            .await
            .unwrap()
            >= 1
    );
    engine.stop().await;
});

/// Counts the payloads its kind's cancels settled.
struct CancelCounter(Arc<Mutex<usize>>);

#[async_trait::async_trait]
impl Handler for CancelCounter {
    async fn run(&self, _job: &Job) -> Outcome {
        tokio::time::sleep(Duration::from_secs(600)).await;
        Outcome::Done(None)
    }

    async fn abandoned(
        &self,
        _txn: &sea_orm::DatabaseTransaction,
        payloads: &[String],
        _why: super::Abandoned,
        _now: chrono::DateTime<Utc>,
    ) -> Result<(), sea_orm::DbErr> {
        *self.0.lock().unwrap() += payloads.len();
        Ok(())
    }
}

on_both_databases!(
    a_group_of_ten_thousand_is_cancelled_running_jobs_included,
    |db: DatabaseConnection| async move {
        let seen = Seen::default();
        let settled = Arc::new(Mutex::new(0));
        let blocking = Scripted::new(&seen, done).taking(Duration::from_secs(600), Duration::ZERO);
        let handlers = Handlers::default()
            .with::<BroadcastSendJob>(Arc::new(blocking))
            .with::<OtherSendJob>(Arc::new(CancelCounter(settled.clone())));
        let in_group = |n: usize, kind: &'static str| NewJob {
            group: Some("bc_1".into()),
            class: Class::Bulk,
            ..job(kind, "ch_1", serde_json::json!({ "n": n }))
        };
        let mut batch: Vec<NewJob> = (0..9_990).map(|n| in_group(n, "broadcast_send")).collect();
        // Scheduled for later: the group's running jobs are its broadcast sends.
        let later = Utc::now().timestamp_millis() + 3_600_000;
        batch.extend((0..10).map(|n| NewJob {
            run_at_ms: later,
            ..in_group(n, "other_send")
        }));
        for chunk in batch.chunks(1_000) {
            enqueue_all(&db, chunk.to_vec(), Utc::now()).await.unwrap();
        }
        let outside = job("broadcast_send", "ch_2", serde_json::json!({"outside": true}));
        enqueue(
            &db,
            NewJob {
                run_at_ms: Utc::now().timestamp_millis() + 600_000,
                ..outside
            },
            Utc::now(),
        )
        .await
        .unwrap();
        let engine = Running::start(&db, config(8, 4), handlers);
        seen.until("four of the group run", |runs| runs.len() >= 4).await;

        let started = Instant::now();
        let which = cancel::Selector::Group("bc_1".into());
        let cancelled = cancel::cancel(&db, &Handlers::default(), &which, Some("acc_a"), Utc::now()).await;
        let took = started.elapsed();
        assert!(took < Duration::from_secs(20), "cancelling took {took:?}");
        // Jobs claimed between the tombstone and their chunk were cancelled at their claim instead.
        let at_claim = inspection::stats(&db, Utc::now().timestamp_millis())
            .await
            .unwrap()
            .cancelled;
        assert_eq!(at_claim, 10_000, "{} by the cancel itself", cancelled.unwrap());
        // The running ones stop at their worker's next renewal (a third of the lease).
        let runs = seen
            .until("the running jobs are stopped", |runs| runs.iter().all(|r| r.dropped))
            .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            seen.all().len(),
            runs.len(),
            "no job of the group started after the cancel"
        );
        let left = pending(&db).await;
        assert_eq!(left.len(), 1, "only the job outside the group is pending");
        assert_eq!(left[0].payload, r#"{"outside":true}"#);
        // No worker runs from here on, so the jobs enqueued next are still pending when cancelled.
        engine.stop().await;
        // Cancelled jobs release their keys and show as such; a handler settles what its jobs stood for.
        let handlers = Handlers::default().with::<OtherSendJob>(Arc::new(CancelCounter(settled.clone())));
        let again = (0..3).map(|n| in_group(n, "other_send")).collect();
        enqueue_all(&db, again, Utc::now() + chrono::Duration::hours(1))
            .await
            .unwrap();
        let which = cancel::Selector::Group("bc_1".into());
        assert_eq!(
            cancel::cancel(&db, &handlers, &which, None, Utc::now()).await.unwrap(),
            3
        );
        assert_eq!(*settled.lock().unwrap(), 3);
        let stats = inspection::stats(&db, Utc::now().timestamp_millis()).await.unwrap();
        assert_eq!(stats.cancelled, 10_003);
    }
);

on_both_databases!(
    a_run_past_its_deadline_is_stopped_and_frees_its_slot,
    |db: DatabaseConnection| async move {
        let seen = Seen::default();
        let mut stuck = Scripted::new(&seen, done).taking(Duration::from_secs(600), Duration::ZERO);
        stuck.deadline = Duration::from_millis(500);
        let handlers = Handlers::default()
            .with::<StuckJob>(Arc::new(stuck))
            .with::<SendJob>(Arc::new(Scripted::new(&seen, done)));
        // One slot in the lane: the stuck run holds it until its deadline.
        let engine = Running::start(&db, config(8, 1), handlers);
        let once = NewJob {
            max_attempts: 1,
            ..job("stuck", "ch_1", serde_json::json!({}))
        };
        enqueue(&db, once, Utc::now()).await.unwrap();
        seen.until("the stuck job runs", |runs| !runs.is_empty()).await;
        enqueue(&db, job("send", "ch_1", serde_json::json!({})), Utc::now())
            .await
            .unwrap();
        let runs = seen
            .until("the send runs once the stuck run is stopped", |runs| {
                runs.iter().any(|r| r.kind == "send" && r.ended.is_some())
            })
            .await;
        assert!(runs[0].dropped, "the stuck run was stopped");
        let failed = failed_jobs(&db).await;
        assert_eq!(failed.len(), 1);
        let error = failed[0].last_error.clone().unwrap_or_default();
        assert!(error.contains("longer than its deadline"), "{error}");
        engine.stop().await;
    }
);

on_both_databases!(
    a_failed_job_releases_its_key_and_the_retention_deletes_it,
    |db: DatabaseConnection| async move {
        let seen = Seen::default();
        fn refuse(_: &Job) -> Outcome {
            Outcome::Fail {
                error: "refused".into(),
                effect: None,
            }
        }
        let engine = Running::start(
            &db,
            config(8, 8),
            Handlers::default().with::<ImportJob>(Arc::new(Scripted::new(&seen, refuse))),
        );
        let keyed = || NewJob {
            unique_key: Some("import:src_1".into()),
            ..job("import", "", serde_json::json!({}))
        };
        assert!(matches!(
            enqueue(&db, keyed(), Utc::now()).await.unwrap(),
            Enqueued::Written(_)
        ));
        seen.until("the import runs", |runs| runs.iter().any(|r| r.ended.is_some()))
            .await;
        let started = Instant::now();
        while failed_jobs(&db).await.is_empty() {
            assert!(started.elapsed() < WAIT);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        engine.stop().await;
        // The failed job no longer holds the key.
        assert!(matches!(
            enqueue(&db, keyed(), Utc::now()).await.unwrap(),
            Enqueued::Written(_)
        ));
        // Settled 31 days ago, it is past the 30-day retention; the pending one stays.
        let old = Utc::now() - chrono::Duration::days(31);
        let sql = "UPDATE jobs SET updated_at = $1 WHERE status = 'failed'";
        db.execute_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            sql,
            [old.into()],
        ))
        .await
        .unwrap();
        // The engine's own recurring retention job deletes it, in a process that runs no other kind.
        enqueue(&db, recurring::job::<retention::Retention>(Utc::now()), Utc::now())
            .await
            .unwrap();
        let engine = Running::start(&db, config(8, 8), Handlers::default());
        let started = Instant::now();
        while !failed_jobs(&db).await.is_empty() {
            assert!(
                started.elapsed() < WAIT,
                "the retention job never deleted the failed job"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        engine.stop().await;
        // What stays: the keyed job, and the retention's next turn (put off, not ended).
        let mut kinds: Vec<&str> = Vec::new();
        let pending = pending(&db).await;
        kinds.extend(pending.iter().map(|job| job.kind.as_str()));
        kinds.sort_unstable();
        assert_eq!(kinds, ["import", <retention::Retention as recurring::Recurring>::KIND]);
        let turn = pending
            .iter()
            .find(|job| job.kind == <retention::Retention as recurring::Recurring>::KIND)
            .unwrap();
        assert!(turn.run_at_ms > Utc::now().timestamp_millis(), "its next turn is later");
    }
);

/// Panics on every run.
struct Panics;

#[async_trait::async_trait]
impl Handler for Panics {
    async fn run(&self, job: &Job) -> Outcome {
        panic!("cannot handle {}", job.payload)
    }
}

// With one slot in the lane, a panic that kept its slot (or its claim) would stop the lane's next job.
on_both_databases!(
    a_panicking_handler_fails_its_job_with_the_message_and_its_lane_runs_on,
    |db: DatabaseConnection| async move {
        let seen = Seen::default();
        let handlers = Handlers::default()
            .with::<PanicsJob>(Arc::new(Panics))
            .with::<SucceedsJob>(Arc::new(Scripted::new(&seen, done)));
        let once = |kind| NewJob {
            max_attempts: 1,
            ..job(kind, "one-lane", serde_json::json!({"kind": kind}))
        };
        enqueue_all(&db, vec![once("panics"), once("panics"), once("succeeds")], Utc::now())
            .await
            .unwrap();
        let engine = Running::start(&db, config(4, 1), handlers);
        seen.until("the lane's last job runs", |runs| !runs.is_empty()).await;
        let started = Instant::now();
        loop {
            let failed = failed_jobs(&db).await;
            if failed.len() == 2 {
                for job in failed {
                    let error = job.last_error.unwrap_or_default();
                    assert!(error.starts_with("the handler panicked: cannot handle {"), "{error}");
                }
                break;
            }
            assert!(started.elapsed() < WAIT, "{failed:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        engine.stop().await;
    }
);

// 12,000 jobs of a group run by 5-20 ms handlers that each make an effect through the claim guard, beside
// a few of the group's slow jobs whose effect comes 5 s into their run. The cancel returns while those are
// waiting: none of them makes its effect after that (with a 30 s lease, the renewal alone would have let
// them), nothing of the group is pending afterwards, whatever finished while the chunks were cancelled, and
// a job enqueued into the group later is cancelled rather than run.
on_both_databases!(
    a_cancelled_group_makes_no_effect_after_the_cancel_and_takes_no_new_job,
    |db: DatabaseConnection| async move {
        let seen = Seen::default();
        let settled = Arc::new(Mutex::new(0));
        let busy = Scripted::new(&seen, done)
            .taking(Duration::from_millis(5), Duration::from_millis(15))
            .with_effect(Duration::ZERO);
        let slow = Scripted::new(&seen, done)
            .taking(Duration::from_secs(5), Duration::ZERO)
            .with_effect(Duration::ZERO);
        let handlers = Handlers::default()
            .with::<BroadcastSendJob>(Arc::new(busy))
            .with::<SlowSendJob>(Arc::new(slow));
        let in_group = |n: usize, kind: &'static str| NewJob {
            group: Some("bc_busy".into()),
            class: Class::Bulk,
            ..job(kind, &format!("ch_{}", n % 4), serde_json::json!({ "n": n }))
        };
        let mut batch: Vec<NewJob> = (0..4).map(|n| in_group(n, "slow_send")).collect();
        batch.extend((0..12_000).map(|n| in_group(n, "broadcast_send")));
        for chunk in batch.chunks(1_000) {
            enqueue_all(&db, chunk.to_vec(), Utc::now()).await.unwrap();
        }
        let config = JobConfig {
            lease: Duration::from_secs(30),
            ..config(32, 16)
        };
        let engine = Running::start(&db, config, handlers);
        seen.until("the group is under way", |runs| {
            runs.iter().filter(|r| r.effect.is_some()).count() >= 300
                && runs.iter().filter(|r| r.kind == "slow_send").count() == 4
        })
        .await;

        let settling = Handlers::default().with::<BroadcastSendJob>(Arc::new(CancelCounter(settled.clone())));
        let which = cancel::Selector::Group("bc_busy".into());
        let cancelled = cancel::cancel(&db, &settling, &which, Some("acc_a"), Utc::now())
            .await
            .unwrap();
        let returned = Instant::now();
        assert!(cancelled > 10_000, "{cancelled}");
        let slow_waiting = seen.of("slow_send").iter().filter(|r| r.effect.is_none()).count();
        assert_eq!(
            slow_waiting, 4,
            "the slow runs were still waiting when the cancel returned"
        );
        tokio::time::sleep(Duration::from_secs(6)).await;
        let late: Vec<Run> = seen
            .all()
            .into_iter()
            .filter(|r| r.effect.is_some_and(|at| at > returned))
            .collect();
        assert!(late.is_empty(), "effects after the cancel returned: {late:?}");
        assert!(pending(&db).await.is_empty(), "nothing of the group is pending");

        // Jobs claimed between the tombstone and their chunk were cancelled at their claim instead.
        let before = inspection::stats(&db, Utc::now().timestamp_millis())
            .await
            .unwrap()
            .cancelled;
        assert!(before as u64 >= cancelled);
        let runs_before = seen.all().len();
        enqueue(&db, in_group(12_000, "broadcast_send"), Utc::now())
            .await
            .unwrap();
        let started = Instant::now();
        loop {
            let stats = inspection::stats(&db, Utc::now().timestamp_millis()).await.unwrap();
            if stats.pending == 0 && stats.cancelled == before + 1 {
                break;
            }
            assert!(started.elapsed() < WAIT, "the later job was not cancelled: {stats:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(seen.all().len(), runs_before, "the later job never ran");
        engine.stop().await;
    }
);

/// Settles what its abandoned jobs stood for, remembering why.
struct Settles(Arc<Mutex<Vec<Abandoned>>>);

#[async_trait::async_trait]
impl Handler for Settles {
    async fn run(&self, _job: &Job) -> Outcome {
        Outcome::Done(None)
    }

    async fn abandoned(
        &self,
        _txn: &sea_orm::DatabaseTransaction,
        payloads: &[String],
        why: Abandoned,
        _now: chrono::DateTime<Utc>,
    ) -> Result<(), sea_orm::DbErr> {
        self.0.lock().unwrap().extend(payloads.iter().map(|_| why));
        Ok(())
    }
}

// A job claimed five times without an outcome (its workers died each time: the count a claim leaves is
// cleared only by an outcome or a release) fails as `crashed` at its next claim instead of running, and its
// handler settles what it stood for; one cut short four times still runs.
on_both_databases!(
    a_job_whose_runs_keep_crashing_fails_as_crashed,
    |db: DatabaseConnection| async move {
        let why = Arc::new(Mutex::new(Vec::new()));
        let handlers = Handlers::default().with::<SendJob>(Arc::new(Settles(why.clone())));
        let crashed = enqueue(&db, job("send", "ch_1", serde_json::json!({"n": 1})), Utc::now())
            .await
            .unwrap();
        let survived = enqueue(&db, job("send", "ch_1", serde_json::json!({"n": 2})), Utc::now())
            .await
            .unwrap();
        let (Enqueued::Written(crashed), Enqueued::Written(survived)) = (crashed, survived) else {
            panic!("both jobs are written");
        };
        for (id, cut) in [(&crashed, 5), (&survived, 4)] {
            let sql = "UPDATE jobs SET unfinished_runs = $1 WHERE id = $2";
            db.execute_raw(Statement::from_sql_and_values(
                db.get_database_backend(),
                sql,
                [cut.into(), id.as_str().into()],
            ))
            .await
            .unwrap();
        }
        let engine = Running::start(&db, config(4, 4), handlers);
        let started = Instant::now();
        loop {
            let stats = inspection::stats(&db, Utc::now().timestamp_millis()).await.unwrap();
            if stats.pending == 0 && stats.failed == 1 {
                break;
            }
            assert!(started.elapsed() < WAIT, "{stats:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let failed = failed_jobs(&db).await;
        assert_eq!(
            (failed[0].id.as_str(), failed[0].last_error.as_deref()),
            (crashed.as_str(), Some("crashed"))
        );
        assert_eq!(*why.lock().unwrap(), vec![Abandoned::Crashed]);
        engine.stop().await;
    }
);

// Shutdown's grace is ten seconds; a run reaches its effect 9.8 s after shutdown began, past the cutoff
// (half the grace) from which no effect starts. It is refused, released with no try spent and no crash
// counted, and the next worker makes the effect: once in all. Before, the effect started and was cut by the
// grace's end, and the released job made it again.
on_both_databases!(
    an_effect_due_past_the_shutdown_cutoff_is_made_once_by_the_next_worker,
    |db: DatabaseConnection| async move {
        let seen = Seen::default();
        let late = Scripted::new(&seen, done)
            .taking(Duration::from_millis(9_800), Duration::ZERO)
            .with_effect(Duration::from_secs(1));
        let engine = Running::start(&db, config(4, 4), Handlers::default().with::<SendJob>(Arc::new(late)));
        enqueue(&db, job("send", "ch_1", serde_json::json!({})), Utc::now())
            .await
            .unwrap();
        seen.until("the run starts", |runs| !runs.is_empty()).await;
        engine.stop().await;
        assert!(
            seen.all().iter().all(|r| r.effect.is_none()),
            "no effect past the cutoff"
        );
        let left = pending(&db).await;
        assert_eq!(left.len(), 1);
        assert_eq!(
            (left[0].claim_token, left[0].attempts, left[0].unfinished_runs),
            (None, 0, 0)
        );

        let quick = Scripted::new(&seen, done).with_effect(Duration::ZERO);
        let next = Running::start(&db, config(4, 4), Handlers::default().with::<SendJob>(Arc::new(quick)));
        let started = Instant::now();
        while !pending(&db).await.is_empty() {
            assert!(started.elapsed() < WAIT);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        next.stop().await;
        let effects = seen.all().iter().filter(|r| r.effect.is_some()).count();
        assert_eq!(effects, 1, "{:?}", seen.all());
    }
);

/// Blocks every read of the group cancels' table (which a claim's read of grouped jobs makes) until
/// released, on PostgreSQL, in a transaction of its own.
struct GroupReadsBlocked(sea_orm::DatabaseTransaction);

impl GroupReadsBlocked {
    #[allow(clippy::disallowed_methods)]
    async fn hold(db: &DatabaseConnection) -> Self {
        use sea_orm::TransactionTrait;
        let txn = db.begin().await.unwrap();
        txn.execute_unprepared("LOCK TABLE job_group_cancels IN ACCESS EXCLUSIVE MODE")
            .await
            .unwrap();
        Self(txn)
    }

    async fn release(self) {
        self.0.rollback().await.unwrap();
    }
}

/// A grouped send on `ch_1`, due now.
fn grouped_send() -> NewJob {
    NewJob {
        group: Some("campaign_1".into()),
        ..job("send", "ch_1", serde_json::json!({"grouped": true}))
    }
}

/// Waits until a claim holds the job.
async fn until_claimed(db: &DatabaseConnection) {
    let started = Instant::now();
    while !pending(db).await.iter().any(|j| j.claim_token.is_some()) {
        assert!(started.elapsed() < WAIT, "the job was never claimed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// A claim's rows are read (grouped jobs: their group's cancels) while the next claim goes on: a send due
// on another lane runs while the read of the claim before it is held up. Before, the claim loop waited for
// each claim's read, so one slow read held back every row due meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_does_not_wait_for_the_read_of_the_claim_before_it() {
    let test = TestDb::new(Kind::Postgres, 8).await;
    let db = test.db.clone();
    let seen = Seen::default();
    let handlers = Handlers::default().with::<SendJob>(Arc::new(Scripted::new(&seen, done)));
    let blocked = GroupReadsBlocked::hold(&db).await;
    enqueue(&db, grouped_send(), Utc::now()).await.unwrap();
    let engine = Running::start(&db, config(8, 4), handlers);
    until_claimed(&db).await;
    enqueue(&db, job("send", "ch_2", serde_json::json!({})), Utc::now())
        .await
        .unwrap();
    engine.wake.notify();
    let started = Instant::now();
    while seen.all().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the send on ch_2 waited for the grouped send's read"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen.all().len(), 1, "the grouped send's read is still held up");
    blocked.release().await;
    seen.until("the grouped send runs once its read ends", |runs| runs.len() == 2)
        .await;
    engine.stop().await;
    test.remove().await;
}

// A bulk job's claim is being read while the next claim is made: the job already holds the bulk class's one
// slot, so another bulk job due meanwhile waits for it instead of taking a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_rows_being_read_count_against_the_bulk_share() {
    let test = TestDb::new(Kind::Postgres, 8).await;
    let db = test.db.clone();
    let seen = Seen::default();
    let handlers = Handlers::default().with::<BroadcastSendJob>(Arc::new(Scripted::new(&seen, done)));
    let config = JobConfig {
        bulk_concurrency: Some(1),
        ..config(8, 4)
    };
    let bulk = |lane: &str, group: Option<&str>| NewJob {
        class: Class::Bulk,
        group: group.map(str::to_owned),
        ..job("broadcast_send", lane, serde_json::json!({}))
    };
    let blocked = GroupReadsBlocked::hold(&db).await;
    enqueue(&db, bulk("ch_1", Some("campaign_1")), Utc::now())
        .await
        .unwrap();
    let engine = Running::start(&db, config, handlers);
    until_claimed(&db).await;
    enqueue(&db, bulk("ch_2", None), Utc::now()).await.unwrap();
    engine.wake.notify();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(seen.all().is_empty(), "a second bulk job ran beside the one being read");
    blocked.release().await;
    seen.until("both bulk jobs run, one after the other", |runs| runs.len() == 2)
        .await;
    engine.stop().await;
    test.remove().await;
}

// Shutdown begins while a claim's rows are still being read: it waits for the read, so the run is in hand
// when shutdown asks runs to drain, and an effect it reaches past the cutoff (half the ten seconds' grace)
// is refused; the job is released for the next worker with no try spent. A run started after the drain
// began would have made its effect past the cutoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_a_claims_read_and_drains_its_run() {
    let test = TestDb::new(Kind::Postgres, 8).await;
    let db = test.db.clone();
    let seen = Seen::default();
    let late = Scripted::new(&seen, done)
        .taking(Duration::from_millis(5_500), Duration::ZERO)
        .with_effect(Duration::ZERO);
    let handlers = Handlers::default().with::<SendJob>(Arc::new(late));
    let blocked = GroupReadsBlocked::hold(&db).await;
    enqueue(&db, grouped_send(), Utc::now()).await.unwrap();
    let engine = Running::start(&db, config(8, 4), handlers);
    until_claimed(&db).await;
    let stopping = tokio::spawn(engine.stop());
    tokio::time::sleep(Duration::from_millis(300)).await;
    blocked.release().await;
    stopping.await.unwrap();
    let runs = seen.all();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].effect.is_none(), "an effect past the cutoff: {runs:?}");
    let left = pending(&db).await;
    assert_eq!(left.len(), 1);
    assert_eq!((left[0].claim_token, left[0].attempts), (None, 0));
    test.remove().await;
}

// After the macro and helpers it uses.
mod scale;
