//! Wake-ups across replicas on PostgreSQL (`LISTEN`/`NOTIFY`), so idle replicas need not poll often. A
//! replica that committed work due now (jobs, webhook deliveries, events to fan out) publishes its topic
//! after the commit; every replica listening forwards it to the loops that wait for it. Publishing is
//! coalesced: one `NOTIFY` in flight per topic, whatever the burst, and at most one per `SPACING`, sent
//! outside the writers' transactions, so it never serialises their commits, and a replica under load sends
//! a few hundred a second at most instead of one per round trip. A lost connection is reconnected, and
//! every loop is woken then, since notifications sent meanwhile are gone; loops still look on their own once per idle poll, so
//! nothing waits longer than that. On SQLite there is no one to tell across processes: the loops poll.

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, sqlx::postgres::PgListener};
use tokio::sync::Notify;

/// The least time between two `NOTIFY`s of one topic from this process; a wake-up waits at most this long.
const SPACING: Duration = Duration::from_millis(5);

/// What a wake-up is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    /// Jobs due now were written.
    Jobs,
    /// Webhook deliveries due now were written.
    Deliveries,
    /// Events were written, for the webhook fan-out.
    Events,
}

impl Topic {
    const ALL: [Topic; 3] = [Topic::Jobs, Topic::Deliveries, Topic::Events];

    fn channel(self) -> &'static str {
        match self {
            Self::Jobs => "frontdesk_jobs",
            Self::Deliveries => "frontdesk_deliveries",
            Self::Events => "frontdesk_events",
        }
    }

    fn at(self) -> usize {
        self as usize
    }
}

/// This process's side of the wake-ups: what it publishes and where what it hears goes.
#[derive(Clone, Default)]
pub struct Wakeups(Option<Arc<Shared>>);

struct Shared {
    /// How long an idle loop sleeps while wake-ups reach it.
    idle_poll: Duration,
    /// Per topic: set when this process has something to publish.
    outbox: [Arc<Notify>; 3],
    /// Per topic: the loops to wake when a replica published it.
    forwards: Mutex<Vec<(Topic, Arc<Notify>)>>,
    /// The listener holds a live connection.
    live: AtomicBool,
}

impl Wakeups {
    /// Starts publishing and listening on PostgreSQL (`url` is the database's), idle loops then sleeping
    /// up to `idle_poll`; none on SQLite.
    pub fn start(db: &DatabaseConnection, url: &str, idle_poll: Duration) -> Self {
        if db.get_database_backend() != DbBackend::Postgres {
            return Self(None);
        }
        let shared = Arc::new(Shared {
            idle_poll,
            outbox: Default::default(),
            forwards: Mutex::default(),
            live: AtomicBool::new(false),
        });
        for topic in Topic::ALL {
            tokio::spawn(publish_loop(db.clone(), topic, shared.outbox[topic.at()].clone()));
        }
        tokio::spawn(listen_loop(url.to_owned(), shared.clone()));
        Self(Some(shared))
    }

    /// Tells every replica about `topic` (after the commit that wrote the work).
    pub fn publish(&self, topic: Topic) {
        if let Some(shared) = &self.0 {
            shared.outbox[topic.at()].notify_one();
        }
    }

    /// Wakes `to` whenever a replica (this one included) publishes `topic`.
    pub fn forward(&self, topic: Topic, to: Arc<Notify>) {
        if let Some(shared) = &self.0 {
            shared
                .forwards
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((topic, to));
        }
    }

    /// How long a loop with nothing to do sleeps: the idle poll while wake-ups reach this process, else
    /// the loop's own `poll`.
    pub fn idle_wait(&self, poll: Duration) -> Duration {
        match &self.0 {
            Some(shared) if shared.live.load(Ordering::Relaxed) => shared.idle_poll.max(poll),
            _ => poll,
        }
    }
}

async fn publish_loop(db: DatabaseConnection, topic: Topic, pending: Arc<Notify>) {
    let sql = format!("NOTIFY {}", topic.channel());
    loop {
        pending.notified().await;
        if let Err(err) = db.execute_unprepared(&sql).await {
            tracing::debug!(topic = topic.channel(), error = %err, "a wake-up was not published; replicas find the work by polling");
        }
        // What arrives meanwhile goes out with the next one.
        tokio::time::sleep(SPACING).await;
    }
}

async fn listen_loop(url: String, shared: Arc<Shared>) {
    let wake = |topic: Option<Topic>| {
        let forwards = shared.forwards.lock().unwrap_or_else(PoisonError::into_inner);
        for (forwarded, to) in forwards.iter() {
            if topic.is_none_or(|topic| topic == *forwarded) {
                to.notify_one();
            }
        }
    };
    loop {
        let mut listener = match PgListener::connect(&url).await {
            Ok(listener) => listener,
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for wake-ups; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let channels: Vec<&str> = Topic::ALL.iter().map(|t| t.channel()).collect();
        if let Err(err) = listener.listen_all(channels).await {
            tracing::warn!(error = %err, "cannot listen for wake-ups; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        shared.live.store(true, Ordering::Relaxed);
        // Whatever was published before this connection listened is looked for now.
        wake(None);
        loop {
            match listener.try_recv().await {
                Ok(Some(notification)) => {
                    let topic = Topic::ALL.into_iter().find(|t| t.channel() == notification.channel());
                    wake(topic);
                }
                // The connection was lost and is being made again: what was published meanwhile is gone.
                Ok(None) => wake(None),
                Err(err) => {
                    tracing::warn!(error = %err, "listening for wake-ups failed; reconnecting");
                    break;
                }
            }
        }
        shared.live.store(false, Ordering::Relaxed);
        wake(None);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
