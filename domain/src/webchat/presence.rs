//! Whether a visitor is online, and when they were last seen. A session is online while a socket of it is
//! open: every process refreshes `present_until` for the sessions of its own sockets every `HEARTBEAT`, so a
//! process that died without a goodbye leaves its visitors online for at most `TTL`. A closed socket (the
//! last of its session here) ends it at once. Writes are gathered and flushed every `FLUSH` with one
//! statement per kind, so ten thousand sockets opening at once cost a handful of statements; and a visitor's
//! activity (a message, typing) is written at most once per `SEEN_EVERY`, so a lively chat does not turn
//! every message into a row update as well.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, sea_query::Expr};

use crate::{clock::Clock, store::entities::chat_sessions};

const HEARTBEAT: Duration = Duration::from_secs(20);
const TTL: Duration = Duration::from_secs(45);
const FLUSH: Duration = Duration::from_millis(250);
/// `last_seen_at` is as precise as this.
const SEEN_EVERY: Duration = Duration::from_secs(5);
/// Ids per statement.
const CHUNK: usize = 500;

#[derive(Clone)]
pub struct Presence {
    inner: Arc<Inner>,
}

struct Inner {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Open sockets of this process, by session.
    sockets: HashMap<String, u32>,
    /// Seen with a socket open: online until `TTL` from the flush.
    present: HashSet<String>,
    /// Seen without a socket (a message posted over HTTP): `last_seen_at` only.
    active: HashSet<String>,
    /// Their last socket here closed.
    left: HashSet<String>,
    /// Written for activity within the current `SEEN_EVERY`: more activity waits for the next.
    recently_seen: HashSet<String>,
}

/// An open socket's presence; dropping it is the socket closing.
pub struct Attendance {
    presence: Presence,
    session_id: String,
}

impl Drop for Attendance {
    fn drop(&mut self) {
        let mut state = self.presence.state();
        let gone = match state.sockets.get_mut(&self.session_id) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            _ => true,
        };
        if gone {
            state.sockets.remove(&self.session_id);
            state.present.remove(&self.session_id);
            state.left.insert(self.session_id.clone());
        }
    }
}

impl Presence {
    /// Starts the flusher (it runs as long as the process).
    pub fn start(db: DatabaseConnection, clock: Arc<dyn Clock>) -> Self {
        let presence = Self {
            inner: Arc::new(Inner {
                db,
                clock,
                state: Mutex::default(),
            }),
        };
        let flusher = presence.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(FLUSH);
            let ticks_per = |every: Duration| (every.as_millis() / FLUSH.as_millis()).max(1);
            let mut ticks: u128 = 0;
            loop {
                tick.tick().await;
                ticks += 1;
                if ticks.is_multiple_of(ticks_per(HEARTBEAT)) {
                    flusher.heartbeat();
                }
                if ticks.is_multiple_of(ticks_per(SEEN_EVERY)) {
                    flusher.state().recently_seen.clear();
                }
                if let Err(err) = flusher.flush().await {
                    tracing::warn!(error = %err, "web chat presence could not be written; retrying");
                }
            }
        });
        presence
    }

    /// A socket of `session_id` opened.
    pub fn attend(&self, session_id: &str) -> Attendance {
        let mut state = self.state();
        *state.sockets.entry(session_id.to_owned()).or_default() += 1;
        state.left.remove(session_id);
        state.present.insert(session_id.to_owned());
        drop(state);
        Attendance {
            presence: self.clone(),
            session_id: session_id.to_owned(),
        }
    }

    /// The visitor did something (sent a message, typed, read).
    pub fn seen(&self, session_id: &str) {
        let mut state = self.state();
        if !state.recently_seen.insert(session_id.to_owned()) {
            return;
        }
        if state.sockets.contains_key(session_id) {
            state.present.insert(session_id.to_owned());
        } else {
            state.active.insert(session_id.to_owned());
        }
    }

    fn heartbeat(&self) {
        let mut state = self.state();
        let open: Vec<String> = state.sockets.keys().cloned().collect();
        state.present.extend(open);
    }

    /// Writes what was gathered; on an error it is gathered again for the next flush.
    async fn flush(&self) -> Result<(), DbErr> {
        let (present, active, left) = {
            let mut state = self.state();
            (
                std::mem::take(&mut state.present),
                std::mem::take(&mut state.active),
                std::mem::take(&mut state.left),
            )
        };
        let now = self.inner.clock.now();
        let ttl = chrono::Duration::from_std(TTL).unwrap_or_default();
        let written = async {
            write(&self.inner.db, &present, now, Some(now + ttl)).await?;
            write(&self.inner.db, &left, now, Some(now)).await?;
            write(&self.inner.db, &active, now, None).await
        }
        .await;
        if written.is_err() {
            let mut state = self.state();
            state.present.extend(present);
            state.active.extend(active);
            let still_gone: Vec<String> = left.into_iter().filter(|s| !state.sockets.contains_key(s)).collect();
            state.left.extend(still_gone);
        }
        written
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Sets `last_seen_at` (and `present_until` when given) of the sessions.
async fn write(
    db: &DatabaseConnection,
    sessions: &HashSet<String>,
    now: DateTime<Utc>,
    present_until: Option<DateTime<Utc>>,
) -> Result<(), DbErr> {
    let ids: Vec<&String> = sessions.iter().collect();
    for chunk in ids.chunks(CHUNK) {
        let mut update =
            chat_sessions::Entity::update_many().col_expr(chat_sessions::Column::LastSeenAt, Expr::value(now));
        if let Some(until) = present_until {
            update = update.col_expr(chat_sessions::Column::PresentUntil, Expr::value(until));
        }
        update
            .filter(chat_sessions::Column::Id.is_in(chunk.iter().map(|id| id.as_str())))
            .exec(db)
            .await?;
    }
    Ok(())
}
