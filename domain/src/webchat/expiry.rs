//! When an open socket's session token runs out. A token lasts until `expires_at`, and a resume (another page
//! load) moves that instant for the same token, so reaching it only means "read the session again": the socket
//! lives on to the new instant, or closes if the session expired or is gone. The instant is checked when the
//! timer for it fires and before each push (the clock may be the test clock, which jumps).

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sea_orm::{DatabaseConnection, DbErr, EntityTrait};
use tokio::time::Sleep;

use crate::{clock::Clock, store::entities::chat_sessions};

/// What a read of the session found.
pub enum Checked {
    /// The session lasts beyond now.
    Lasts,
    Expired,
}

pub struct Expiry {
    session_id: String,
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    expires_at: DateTime<Utc>,
    timer: Pin<Box<Sleep>>,
    /// A read of the session's `expires_at` in flight (it reads `None` when the session is gone).
    reading: Option<BoxFuture<'static, Result<Option<DateTime<Utc>>, DbErr>>>,
}

impl Expiry {
    pub fn new(session_id: String, expires_at: DateTime<Utc>, db: DatabaseConnection, clock: Arc<dyn Clock>) -> Self {
        let timer = Box::pin(tokio::time::sleep(until(clock.as_ref(), expires_at)));
        Self {
            session_id,
            db,
            clock,
            expires_at,
            timer,
            reading: None,
        }
    }

    /// Whether the session must be read again: the timer fired, the instant passed on the clock (which may
    /// jump, as the test clock does), or a read is in flight. Polls the timer, so a `false` wakes the task when
    /// it fires.
    pub fn due(&mut self, cx: &mut Context<'_>) -> bool {
        self.reading.is_some() || self.timer.as_mut().poll(cx).is_ready() || self.clock.now() >= self.expires_at
    }

    /// Reads the session again: it `Lasts` (to a later instant, which rearms the timer) or has `Expired`.
    pub fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<Result<Checked, DbErr>> {
        let (db, id) = (&self.db, &self.session_id);
        let reading = self.reading.get_or_insert_with(|| {
            let (db, id) = (db.clone(), id.clone());
            Box::pin(async move {
                let session = chat_sessions::Entity::find_by_id(id).one(&db).await?;
                Ok(session.map(|s| s.expires_at))
            })
        });
        let read = std::task::ready!(reading.as_mut().poll(cx));
        self.reading = None;
        Poll::Ready(read.map(|expires_at| match expires_at {
            Some(at) if at > self.clock.now() => {
                self.expires_at = at;
                self.rearm();
                Checked::Lasts
            }
            _ => Checked::Expired,
        }))
    }

    fn rearm(&mut self) {
        let deadline = tokio::time::Instant::now() + until(self.clock.as_ref(), self.expires_at);
        self.timer.as_mut().reset(deadline);
    }
}

/// How long from now until `at` on `clock` (zero if it passed).
fn until(clock: &dyn Clock, at: DateTime<Utc>) -> std::time::Duration {
    (at - clock.now()).to_std().unwrap_or_default()
}
