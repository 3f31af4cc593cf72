//! A visitor's live socket, as the core feeds it. Opening one checks the token, the page's origin, the
//! session's read budget and the socket caps, subscribes to the session's pushes, and only then reads what
//! the visitor missed since `after` (so nothing published meanwhile falls between the two; a frame that comes
//! both ways changes nothing, since frames carry whole messages). The feed sends that replay as the socket
//! takes it (`replay`), then every push, and ends with a close when the session is revoked or expires
//! (`expiry`), or the process stops. Frames the visitor sends come back one by one (`post`).

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use frontdesk_api::webchat::v1::{ClientFrame, OpenRequest, PostAnswer, ServerFrame};
use tonic::Code;

use super::{
    Refusal, WebChat, client,
    expiry::{Checked, Expiry},
    frames::{self, Change, Read},
    live::{Push, Subscription, close},
    presence::Attendance,
    receipts,
    replay::Replay,
    sessions::{self, Visitor},
    socket_caps::Seat,
    token,
    visitor_api::origin_not_allowed,
};
use crate::error::Reason;
use crate::error::{ApiError, ApiResult};

/// What one socket is sent: the replay, then the session's pushes.
pub struct Feed {
    /// What the visitor missed, until it is all sent.
    replay: Option<Replay>,
    subscription: Subscription,
    /// A close was sent: the feed ends.
    closed: bool,
    expiry: Expiry,
    /// A push that came after the token's instant, waiting for the session to be read again.
    held: Option<Push>,
    /// Keeps the visitor online while the socket is open.
    _attendance: Attendance,
    /// Its place under the socket caps.
    _seat: Seat,
}

impl futures_util::Stream for Feed {
    type Item = Result<ServerFrame, tonic::Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.closed {
            return Poll::Ready(None);
        }
        if let Some(replay) = self.replay.as_mut() {
            match std::task::ready!(replay.poll_next(cx)) {
                Some(Ok(json)) => return Poll::Ready(Some(Ok(text_frame(json)))),
                Some(Err(err)) => {
                    self.closed = true;
                    return Poll::Ready(Some(Err(ApiError::from(err).into())));
                }
                None => self.replay = None,
            }
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

/// The frames that answer a visitor's frame.
fn answer(reply: Option<Bytes>) -> ApiResult<PostAnswer> {
    Ok(PostAnswer {
        frames: reply.into_iter().map(Vec::from).collect(),
        ..PostAnswer::default()
    })
}

/// The error frame of a refusal the visitor can act on (a rate limit, a frame it can mend), naming the
/// message `client_message_id` it refuses ("" for none); any other refusal is the call's.
fn refused(refusal: Refusal, client_message_id: &str) -> ApiResult<Bytes> {
    match refusal {
        Refusal::Limited(limited, what) => {
            let error = limited.error(what);
            let id = Some(client_message_id);
            Ok(frames::error(
                error.reason.as_str(),
                &error.message,
                Some(limited.retry_after),
                id,
            ))
        }
        Refusal::Api(error) if error.code == Code::InvalidArgument => Ok(frames::error(
            error.reason.as_str(),
            &error.message,
            None,
            Some(client_message_id),
        )),
        refusal => Err(refusal.into_api_error()),
    }
}

fn text_frame(json: Bytes) -> ServerFrame {
    ServerFrame {
        json: json.into(),
        ..ServerFrame::default()
    }
}

impl WebChat {
    pub async fn open(&self, r: OpenRequest) -> Result<Feed, Refusal> {
        let now = self.clock.now();
        let visitor = sessions::authenticate(&self.db, &r.token, now).await?;
        let here = self.here(&r.host);
        if !self.widget_of(&visitor.channel)?.origins.allow(&r.origin, &here) {
            return Err(origin_not_allowed().into());
        }
        let session = &visitor.session;
        self.limits.read(&session.id).await?;
        let seat = self.sockets.admit(&session.id, &client::address_group(&r.peer))?;
        let subscription = self
            .live
            .subscribe(&sessions::key(session), &visitor.channel.id)
            .await
            .map_err(|err| ApiError::new(Code::Unavailable, Reason::Unavailable, err.to_string()))?;
        let replay = if r.after.is_empty() {
            None
        } else {
            let after = sessions::message_in_thread(&self.db, session, &r.after, "after").await?;
            Some(Replay::since(self.db.clone(), session.clone(), after, now))
        };
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
            _seat: seat,
        })
    }

    /// One frame the visitor sent: a refusal the visitor can act on (too long, too many) is an error frame
    /// on the open socket; a frame that is no JSON object is INVALID_ARGUMENT, and a revoked session
    /// UNAUTHENTICATED (the edge closes the socket for both).
    pub async fn post(&self, frame: ClientFrame) -> ApiResult<PostAnswer> {
        let read = frames::read(&frame.json);
        // Frames other than messages are counted by token, before the session is read: a flood of them
        // costs no more than the budget's checks.
        if !matches!(read, Read::Frame(frames::ClientFrame::Message { .. })) {
            let token = token::hash_of(&frame.token).ok_or_else(sessions::unauthenticated)?;
            if let Err(refusal) = self.limits.signal(&token).await {
                return answer(Some(refused(refusal, "")?));
            }
        }
        let visitor = sessions::authenticate(&self.db, &frame.token, self.clock.now()).await?;
        let reply = match read {
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
                    Err(refusal) => Some(refused(refusal, &id)?),
                }
            }
        };
        answer(reply)
    }

    /// The visitor saw the thread up to `message_id`: the business's messages up to it are read, and every
    /// socket of the session is told.
    async fn seen(&self, visitor: &Visitor, message_id: &str) -> ApiResult<Option<Bytes>> {
        let session = &visitor.session;
        self.presence.seen(&session.id);
        let upto = match sessions::message_in_thread(&self.db, session, message_id, "message_id").await {
            Ok(message) => message,
            Err(error) => return Ok(Some(frames::error(error.reason.as_str(), &error.message, None, None))),
        };
        for read in receipts::seen(&self.db, session, &upto, self.clock.now()).await? {
            let frame = frames::message(Change::Status, &read, None);
            if let Err(err) = self.live.publish(&sessions::key(session), Push::Frame(frame)).await {
                tracing::warn!(error = %err, "a read receipt was stored but not shown on the visitor's sockets");
            }
        }
        Ok(None)
    }
}
