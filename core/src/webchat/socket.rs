//! A visitor's live socket, as the core feeds it. Opening one checks the token and the page's origin,
//! subscribes to the session's pushes, and only then reads what the visitor missed since `after` (so nothing
//! published meanwhile falls between the two; a frame that comes both ways changes nothing, since frames
//! carry whole messages). The feed sends that replay, then every push, and ends with a close when the session
//! is revoked or expires (`expiry`), or the process stops. Frames the visitor sends come back one by one (`post`).

use std::{
    collections::VecDeque,
    pin::Pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use frontdesk_api::webchat::v1::{ClientFrame, OpenRequest, PostAnswer, ServerFrame};
use tonic::Code;

use super::{
    Refusal, WebChat,
    expiry::{Checked, Expiry},
    frames::{self, Change, Read},
    live::{Push, Subscription, close},
    presence::Attendance,
    receipts,
    sessions::{self, Visitor},
    visitor_api::origin_not_allowed,
};
use crate::error::{ApiError, ApiResult};

/// The most messages a reconnecting socket is sent before live frames: more missed than this, and the
/// widget reads the thread instead (it also does so on every reconnect).
const REPLAY_LIMIT: u64 = 500;

/// What one socket is sent: the replay, then the session's pushes.
pub struct Feed {
    replay: VecDeque<Bytes>,
    subscription: Subscription,
    /// A close was sent: the feed ends.
    closed: bool,
    expiry: Expiry,
    /// A push that came after the token's instant, waiting for the session to be read again.
    held: Option<Push>,
    /// Keeps the visitor online while the socket is open.
    _attendance: Attendance,
}

impl futures_util::Stream for Feed {
    type Item = Result<ServerFrame, tonic::Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.closed {
            return Poll::Ready(None);
        }
        if let Some(json) = self.replay.pop_front() {
            return Poll::Ready(Some(Ok(text_frame(json))));
        }
        loop {
            if self.expiry.due(cx) {
                match std::task::ready!(self.expiry.poll_read(cx)) {
                    Ok(Checked::Lasts) => {}
                    Ok(Checked::Expired) => {
                        self.held = None;
                        return Poll::Ready(Some(Ok(self.close(close::REVOKED, "the session expired".to_owned()))));
                    }
                    Err(err) => {
                        self.closed = true;
                        return Poll::Ready(Some(Err(ApiError::from(err).into())));
                    }
                }
            }
            let push = match self.held.take() {
                Some(push) => push,
                None => match std::task::ready!(self.subscription.rx.poll_recv(cx)) {
                    Some(push) => push,
                    None => return Poll::Ready(None),
                },
            };
            if self.expiry.due(cx) {
                self.held = Some(push);
                continue;
            }
            return Poll::Ready(Some(Ok(match push {
                Push::Frame(json) => text_frame(json),
                Push::Close(code, reason) => self.close(code, reason),
            })));
        }
    }
}

impl Feed {
    /// The frame that closes the socket; the feed ends after it.
    fn close(&mut self, code: u16, reason: String) -> ServerFrame {
        self.closed = true;
        ServerFrame {
            json: Vec::new(),
            close_code: u32::from(code),
            close_reason: reason,
        }
    }
}

fn text_frame(json: Bytes) -> ServerFrame {
    ServerFrame {
        json: json.into(),
        ..ServerFrame::default()
    }
}

impl WebChat {
    pub async fn open(&self, r: OpenRequest) -> ApiResult<Feed> {
        let now = self.clock.now();
        let visitor = sessions::authenticate(&self.db, &r.token, now).await?;
        let here = self.here(&r.host);
        if !self.widget_of(&visitor.channel)?.origins.allow(&r.origin, &here) {
            return Err(origin_not_allowed());
        }
        let session = &visitor.session;
        let subscription = self
            .live
            .subscribe(&session.id, &visitor.channel.id)
            .await
            .map_err(|err| ApiError::new(Code::Unavailable, "unavailable", err.to_string()))?;
        let mut replay = VecDeque::new();
        if !r.after.is_empty() {
            let after = sessions::message_in_thread(&self.db, session, &r.after, "after").await?;
            let revised = sessions::revised_since(&self.db, session, &after, REPLAY_LIMIT).await?;
            let new = sessions::after(&self.db, session, &after, REPLAY_LIMIT).await?;
            for message in &revised {
                let change = if message.removed {
                    Change::Removed
                } else {
                    Change::Updated
                };
                replay.push_back(frames::message(change, message, None));
            }
            for message in &new {
                replay.push_back(frames::message(Change::New, message, None));
            }
            receipts::reached(&self.db, &new, now).await?;
        }
        Ok(Feed {
            replay,
            subscription,
            closed: false,
            expiry: Expiry::new(
                session.id.clone(),
                session.expires_at,
                self.db.clone(),
                self.clock.clone(),
            ),
            held: None,
            _attendance: self.presence.attend(&session.id),
        })
    }

    /// One frame the visitor sent: a refusal the visitor can act on (too long, too many) is an error frame
    /// on the open socket; a frame that is no JSON object is INVALID_ARGUMENT, and a revoked session
    /// UNAUTHENTICATED (the edge closes the socket for both).
    pub async fn post(&self, frame: ClientFrame) -> ApiResult<PostAnswer> {
        let visitor = sessions::authenticate(&self.db, &frame.token, self.clock.now()).await?;
        let reply = match frames::read(&frame.json) {
            Read::NotAnObject(reason) => return Err(ApiError::field("frame", reason)),
            Read::Unknown(reason) => Some(frames::error("invalid_frame", &reason, None, None)),
            Read::Frame(frames::ClientFrame::Ping) => Some(Bytes::from_static(br#"{"type":"pong"}"#)),
            Read::Frame(frames::ClientFrame::Typing) => {
                self.presence.seen(&visitor.session.id);
                None
            }
            Read::Frame(frames::ClientFrame::Seen { message_id }) => self.seen(&visitor, &message_id).await?,
            Read::Frame(frames::ClientFrame::Message {
                text,
                client_message_id,
            }) => {
                let id = client_message_id.clone();
                match self.visitor_message(&visitor, text, client_message_id).await {
                    // The message comes back on every socket of the session, this one included.
                    Ok(_) => None,
                    Err(Refusal::Limited(limited, what)) => {
                        let error = limited.error(what);
                        Some(frames::error(
                            error.reason,
                            &error.message,
                            Some(limited.retry_after),
                            Some(&id),
                        ))
                    }
                    Err(Refusal::Api(error)) if error.code == Code::InvalidArgument => {
                        Some(frames::error(error.reason, &error.message, None, Some(&id)))
                    }
                    Err(refusal) => return Err(refusal.into_api_error()),
                }
            }
        };
        Ok(PostAnswer {
            frames: reply.into_iter().map(Vec::from).collect(),
            ..PostAnswer::default()
        })
    }

    /// The visitor saw the thread up to `message_id`: the business's messages up to it are read, and every
    /// socket of the session is told.
    async fn seen(&self, visitor: &Visitor, message_id: &str) -> ApiResult<Option<Bytes>> {
        let session = &visitor.session;
        self.presence.seen(&session.id);
        let upto = match sessions::message_in_thread(&self.db, session, message_id, "message_id").await {
            Ok(message) => message,
            Err(error) => return Ok(Some(frames::error(error.reason, &error.message, None, None))),
        };
        for read in receipts::seen(&self.db, session, &upto, self.clock.now()).await? {
            let frame = frames::message(Change::Status, &read, None);
            if let Err(err) = self.live.publish(&session.id, Push::Frame(frame)).await {
                tracing::warn!(error = %err, "a read receipt was stored but not shown on the visitor's sockets");
            }
        }
        Ok(None)
    }
}
