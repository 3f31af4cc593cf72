//! What a reconnecting socket missed since the message `after`, read a page at a time as the socket takes
//! it: first the messages it had that were corrected, removed or reacted to since (`message_updated`,
//! `message_removed`), then those stored after it (`message`), at most `LIMIT` of each. A socket holds one
//! page, however long its visitor was away; more missed than that, and the widget reads the thread instead
//! (it also does so on every reconnect).

use std::{
    collections::VecDeque,
    task::{Context, Poll},
};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sea_orm::{DatabaseConnection, DbErr};

use super::{
    frames::{self, Change},
    receipts, sessions,
};
use crate::store::entities::{chat_sessions, messages};

/// The most messages of each kind replayed.
const LIMIT: u64 = 500;
/// Messages read at once.
const PAGE: u64 = 50;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Revised,
    New,
    Done,
}

pub struct Replay {
    db: DatabaseConnection,
    session: chat_sessions::Model,
    after: messages::Model,
    now: DateTime<Utc>,
    stage: Stage,
    /// The `seq` of the last message read in this stage.
    cursor: i64,
    /// Messages read in this stage.
    read: u64,
    page: VecDeque<Bytes>,
    reading: Option<BoxFuture<'static, Result<Vec<messages::Model>, DbErr>>>,
}

impl Replay {
    /// What the visitor of `session` missed since `after` (a message of its thread); nothing is read yet.
    pub fn since(
        db: DatabaseConnection,
        session: chat_sessions::Model,
        after: messages::Model,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            db,
            session,
            after,
            now,
            stage: Stage::Revised,
            cursor: i64::MIN,
            read: 0,
            page: VecDeque::new(),
            reading: None,
        }
    }

    /// The next frame; `None` once all is replayed.
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, DbErr>>> {
        loop {
            if let Some(frame) = self.page.pop_front() {
                return Poll::Ready(Some(Ok(frame)));
            }
            if self.stage == Stage::Done {
                return Poll::Ready(None);
            }
            let wanted = PAGE.min(LIMIT - self.read);
            if self.reading.is_none() {
                self.reading = Some(self.read_page(wanted));
            }
            let Some(reading) = self.reading.as_mut() else {
                continue;
            };
            let read = std::task::ready!(reading.as_mut().poll(cx));
            self.reading = None;
            let messages = match read {
                Ok(messages) => messages,
                Err(err) => {
                    self.stage = Stage::Done;
                    return Poll::Ready(Some(Err(err)));
                }
            };
            self.turn(&messages, wanted);
        }
    }

    /// Takes a page read: its frames, and the next stage once this one is read out.
    fn turn(&mut self, messages: &[messages::Model], wanted: u64) {
        let stage = self.stage;
        for message in messages {
            let change = match stage {
                Stage::New => Change::New,
                _ if message.removed => Change::Removed,
                _ => Change::Updated,
            };
            self.page.push_back(frames::message(change, message, None));
        }
        self.read += messages.len() as u64;
        if let Some(last) = messages.last() {
            self.cursor = last.seq;
        }
        let read_out = (messages.len() as u64) < wanted || self.read >= LIMIT;
        if read_out {
            (self.stage, self.cursor, self.read) = match stage {
                Stage::Revised => (Stage::New, self.after.seq, 0),
                _ => (Stage::Done, self.cursor, self.read),
            };
        }
    }

    fn read_page(&self, wanted: u64) -> BoxFuture<'static, Result<Vec<messages::Model>, DbErr>> {
        let (db, session, after) = (self.db.clone(), self.session.clone(), self.after.clone());
        let (stage, cursor, now) = (self.stage, self.cursor, self.now);
        Box::pin(async move {
            if stage == Stage::Revised {
                return sessions::revised_since(&db, &session, &after, cursor, wanted).await;
            }
            let new = sessions::after(&db, &session, cursor, wanted).await?;
            // The visitor has them once they are sent: delivered.
            receipts::reached(&db, &new, now).await?;
            Ok(new)
        })
    }
}
