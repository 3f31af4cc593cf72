//! Live pushes to visitors' sockets, across replicas. Each open socket subscribes to its session here; a
//! change made anywhere (a reply delivered, a correction, a reaction, typing) is published to the session,
//! and every process holding a socket of it passes the frame on. A session is addressed by its account, its
//! channel and its id together (`SessionKey`): a push that names a session under another account's or
//! channel's ids reaches nobody, so one account can never speak to, or learn of, another's visitors.
//!
//! With Redis (`REDIS_URL`), publishing is a `PUBLISH` to `frontdesk:webchat:s:{account}:{channel}:{session}`, and this
//! process holds one subscriber connection that subscribes to the sessions of its own sockets; frames reach
//! local sockets only through Redis, so every socket of a session sees one order: the order Redis published
//! them in. Without Redis, publishing hands frames to this process's sockets directly. When the subscriber
//! connection is lost, frames published meanwhile are lost to this process, so every local socket is closed
//! with 1012 and its widget reconnects and replays what it missed from the database.
//!
//! A socket whose visitor reads more slowly than frames come (its queue of `QUEUE` frames is full) is
//! dropped the same way: it reconnects and replays instead of holding memory for a reader that is gone.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError, Weak},
    time::Duration,
};

use crate::{access::AccountId, resource_id::ChannelId};
use bytes::Bytes;
use futures_util::StreamExt;
use redis::{
    AsyncCommands, Client,
    aio::{ConnectionManager, ConnectionManagerConfig},
};
use tokio::sync::{mpsc, oneshot};

/// Frames waiting for one socket before it counts as stalled.
const QUEUE: usize = 64;
const SESSION_TOPIC: &str = "frontdesk:webchat:s:";
/// Channel revocations, for every process.
const CONTROL_TOPIC: &str = "frontdesk:webchat:control";
const REDIS_TIMEOUT: Duration = Duration::from_secs(2);
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// The address of one session's pushes: its account, channel and id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SessionKey(String);

impl SessionKey {
    /// Ids are letters, digits and `_`, so `:` keeps the three apart.
    pub fn new(account: &AccountId, channel: &ChannelId, session_id: &str) -> Self {
        Self(format!("{account}:{channel}:{session_id}"))
    }

    fn topic(&self) -> String {
        format!("{SESSION_TOPIC}{}", self.0)
    }
}

/// What a socket is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Push {
    /// A frame (a JSON object) to send.
    Frame(Bytes),
    /// Close the socket with this code and reason.
    Close(u16, String),
}

/// Close codes of docs/webchat.md.
pub mod close {
    /// The server restarts, or live updates were interrupted: reconnect and replay.
    pub const RESTART: u16 = 1012;
    /// The session is no longer valid (its token expired, its channel was disconnected, its contact erased).
    pub const REVOKED: u16 = 4401;
}

#[derive(Debug, thiserror::Error)]
#[error("live updates are unavailable: {0}")]
pub struct LiveError(String);

/// The process's hub; cheap to clone.
#[derive(Clone)]
pub struct Live {
    inner: Arc<Inner>,
}

struct Inner {
    sockets: Mutex<Registry>,
    redis: Option<RedisLink>,
}

#[derive(Default)]
struct Registry {
    by_session: HashMap<SessionKey, Vec<Socket>>,
    next_id: u64,
}

struct Socket {
    id: u64,
    channel_id: String,
    tx: mpsc::Sender<Push>,
}

struct RedisLink {
    publisher: ConnectionManager,
    commands: mpsc::UnboundedSender<Command>,
}

/// What the subscriber connection is asked to do, in order.
enum Command {
    Subscribe(SessionKey, oneshot::Sender<Result<(), LiveError>>),
    /// Unsubscribe unless a socket of the session joined again meanwhile.
    Unsubscribe(SessionKey),
}

/// One socket's place on the hub: its frames arrive on `rx`; dropping it leaves.
pub struct Subscription {
    pub rx: mpsc::Receiver<Push>,
    live: Live,
    session: SessionKey,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.live.leave(&self.session, self.id);
    }
}

impl Live {
    /// Frames go to this process's sockets only.
    pub fn in_process() -> Self {
        Self {
            inner: Arc::new(Inner {
                sockets: Mutex::default(),
                redis: None,
            }),
        }
    }

    /// Frames go through Redis at `url`, to every process. Connects in the background (needs a runtime).
    pub fn with_redis(url: &str) -> anyhow::Result<Self> {
        let client = Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT));
        let publisher = ConnectionManager::new_lazy_with_config(client.clone(), config)?;
        let (commands, queue) = mpsc::unbounded_channel();
        let live = Self {
            inner: Arc::new(Inner {
                sockets: Mutex::default(),
                redis: Some(RedisLink { publisher, commands }),
            }),
        };
        tokio::spawn(subscriber(client, Arc::downgrade(&live.inner), queue));
        Ok(live)
    }

    /// Joins the pushes of `session`, a session of the channel `channel_id`. With Redis, returns once this
    /// process is subscribed, so nothing published after the return is missed.
    pub async fn subscribe(&self, session: &SessionKey, channel_id: &str) -> Result<Subscription, LiveError> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (id, first) = {
            let mut registry = self.registry();
            registry.next_id += 1;
            let id = registry.next_id;
            let sockets = registry.by_session.entry(session.clone()).or_default();
            sockets.push(Socket {
                id,
                channel_id: channel_id.to_owned(),
                tx,
            });
            (id, sockets.len() == 1)
        };
        let subscription = Subscription {
            rx,
            live: self.clone(),
            session: session.clone(),
            id,
        };
        if let (Some(redis), true) = (&self.inner.redis, first) {
            let (ack, acked) = oneshot::channel();
            redis
                .commands
                .send(Command::Subscribe(session.clone(), ack))
                .map_err(|_| LiveError("the subscriber stopped".to_owned()))?;
            acked
                .await
                .map_err(|_| LiveError("the subscriber stopped".to_owned()))??;
        }
        Ok(subscription)
    }

    /// Sends `push` to every socket of `session`, on any replica. Returns how many processes hold a
    /// socket of it (with Redis, those subscribed; without, 1 when this process does).
    pub async fn publish(&self, session: &SessionKey, push: Push) -> Result<usize, LiveError> {
        match &self.inner.redis {
            None => Ok(usize::from(self.deliver(session, &push) > 0)),
            Some(redis) => {
                let mut connection = redis.publisher.clone();
                let sent = connection.publish::<_, _, usize>(session.topic(), encode(&push));
                tokio::time::timeout(REDIS_TIMEOUT, sent)
                    .await
                    .map_err(|_| LiveError("redis did not answer in time".to_owned()))?
                    .map_err(|err| LiveError(err.to_string()))
            }
        }
    }

    /// Closes every socket of the channel's sessions (it was disconnected), on every replica.
    pub async fn revoke_channel(&self, channel_id: &str) -> Result<(), LiveError> {
        match &self.inner.redis {
            None => {
                self.close_channel(channel_id);
                Ok(())
            }
            Some(redis) => {
                let mut connection = redis.publisher.clone();
                let sent = connection.publish::<_, _, usize>(CONTROL_TOPIC, channel_id);
                tokio::time::timeout(REDIS_TIMEOUT, sent)
                    .await
                    .map_err(|_| LiveError("redis did not answer in time".to_owned()))?
                    .map(|_| ())
                    .map_err(|err| LiveError(err.to_string()))
            }
        }
    }

    /// Closes every socket of this process (it is shutting down).
    pub fn close_all(&self, code: u16, reason: &str) {
        let sessions: Vec<SessionKey> = self.registry().by_session.keys().cloned().collect();
        for session in sessions {
            self.deliver(&session, &Push::Close(code, reason.to_owned()));
        }
    }

    /// Hands `push` to this process's sockets of `session`; how many took it. A socket whose queue is
    /// full is dropped (its stream ends, and its widget reconnects and replays).
    fn deliver(&self, session: &SessionKey, push: &Push) -> usize {
        let mut registry = self.registry();
        let Some(sockets) = registry.by_session.get_mut(session) else {
            return 0;
        };
        sockets.retain(|socket| match socket.tx.try_send(push.clone()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                metrics::counter!("frontdesk_webchat_sockets_stalled_total").increment(1);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        });
        sockets.len()
    }

    fn close_channel(&self, channel_id: &str) {
        let sessions: Vec<SessionKey> = self
            .registry()
            .by_session
            .iter()
            .filter(|(_, sockets)| sockets.iter().any(|s| s.channel_id == channel_id))
            .map(|(session, _)| session.clone())
            .collect();
        let push = Push::Close(close::REVOKED, "the web chat channel was disconnected".to_owned());
        for session in sessions {
            self.deliver(&session, &push);
        }
    }

    fn leave(&self, session: &SessionKey, id: u64) {
        let emptied = {
            let mut registry = self.registry();
            match registry.by_session.get_mut(session) {
                Some(sockets) => {
                    sockets.retain(|socket| socket.id != id);
                    let empty = sockets.is_empty();
                    if empty {
                        registry.by_session.remove(session);
                    }
                    empty
                }
                None => false,
            }
        };
        if let (Some(redis), true) = (&self.inner.redis, emptied) {
            let _ = redis.commands.send(Command::Unsubscribe(session.clone()));
        }
    }

    /// Sockets of this process now.
    pub fn local_sockets(&self) -> usize {
        self.registry().by_session.values().map(Vec::len).sum()
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.inner.sockets.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A push on the wire: `f` + the frame, or `c` + the close code (two bytes, big-endian) + the reason.
fn encode(push: &Push) -> Vec<u8> {
    match push {
        Push::Frame(frame) => [b"f".as_slice(), frame].concat(),
        Push::Close(code, reason) => [b"c".as_slice(), &code.to_be_bytes(), reason.as_bytes()].concat(),
    }
}

fn decode(payload: &[u8]) -> Option<Push> {
    match payload.split_first()? {
        (b'f', frame) => Some(Push::Frame(Bytes::copy_from_slice(frame))),
        (b'c', rest) if rest.len() >= 2 => {
            let code = u16::from_be_bytes([rest[0], rest[1]]);
            Some(Push::Close(code, String::from_utf8_lossy(&rest[2..]).into_owned()))
        }
        _ => None,
    }
}

/// The subscriber connection's task: (re)connects, keeps this process's sessions subscribed, and passes what
/// Redis sends to the local sockets. It holds the hub weakly, and ends with it.
async fn subscriber(client: Client, hub: Weak<Inner>, mut commands: mpsc::UnboundedReceiver<Command>) {
    let mut warned = false;
    loop {
        match tokio::time::timeout(REDIS_TIMEOUT, client.get_async_pubsub()).await {
            Ok(Ok(pubsub)) => {
                if warned {
                    tracing::info!("web chat live updates: redis subscriber reconnected");
                    warned = false;
                }
                let (sink, stream) = pubsub.split();
                let ended = serve(&hub, sink, stream, &mut commands).await;
                let Some(live) = upgrade(&hub) else { return };
                // Whatever was published while the connection was down is lost to this process: its
                // sockets reconnect and replay from the database.
                live.close_all(close::RESTART, "live updates were interrupted; reconnect");
                if ended {
                    return;
                }
            }
            Ok(Err(err)) if !warned => {
                tracing::warn!(error = %err, "web chat live updates: cannot subscribe on redis; retrying");
                warned = true;
            }
            _ => {}
        }
        // Nobody can subscribe while there is no connection: their sockets are refused (503) and retry.
        let pause = tokio::time::sleep(RECONNECT_AFTER);
        tokio::pin!(pause);
        loop {
            tokio::select! {
                () = &mut pause => break,
                command = commands.recv() => match command {
                    Some(Command::Subscribe(_, ack)) => {
                        let _ = ack.send(Err(LiveError("redis is unreachable".to_owned())));
                    }
                    Some(Command::Unsubscribe(_)) => {}
                    None => return,
                },
            }
        }
    }
}

fn upgrade(hub: &Weak<Inner>) -> Option<Live> {
    hub.upgrade().map(|inner| Live { inner })
}

/// Runs one subscriber connection until it breaks (false) or the hub is gone (true).
async fn serve(
    hub: &Weak<Inner>,
    mut sink: redis::aio::PubSubSink,
    mut stream: redis::aio::PubSubStream,
    commands: &mut mpsc::UnboundedReceiver<Command>,
) -> bool {
    let Some(sessions) = upgrade(hub).map(|live| live.registry().by_session.keys().cloned().collect::<Vec<_>>()) else {
        return true;
    };
    let topics = std::iter::once(CONTROL_TOPIC.to_owned()).chain(sessions.iter().map(SessionKey::topic));
    for topic in topics {
        if sink.subscribe(&topic).await.is_err() {
            return false;
        }
    }
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                None => return true,
                Some(Command::Subscribe(session, ack)) => {
                    let subscribed = sink.subscribe(session.topic()).await;
                    let failed = subscribed.is_err();
                    let _ = ack.send(subscribed.map_err(|err| LiveError(err.to_string())));
                    if failed {
                        return false;
                    }
                }
                Some(Command::Unsubscribe(session)) => {
                    let Some(live) = upgrade(hub) else { return true };
                    let rejoined = live.registry().by_session.contains_key(&session);
                    if !rejoined && sink.unsubscribe(session.topic()).await.is_err() {
                        return false;
                    }
                }
            },
            message = stream.next() => {
                let Some(message) = message else { return false };
                let Some(live) = upgrade(hub) else { return true };
                let topic = message.get_channel_name();
                let payload = message.get_payload_bytes();
                if topic == CONTROL_TOPIC {
                    live.close_channel(&String::from_utf8_lossy(payload));
                } else if let (Some(session), Some(push)) = (topic.strip_prefix(SESSION_TOPIC), decode(payload)) {
                    live.deliver(&SessionKey(session.to_owned()), &push);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_cross_the_wire_unchanged() {
        for push in [
            Push::Frame(Bytes::from_static(br#"{"type":"typing","on":true}"#)),
            Push::Close(4401, "revoked".to_owned()),
        ] {
            assert_eq!(decode(&encode(&push)), Some(push));
        }
        assert_eq!(decode(b""), None);
        assert_eq!(decode(b"c\x01"), None);
    }

    #[tokio::test]
    async fn in_process_frames_reach_every_socket_of_the_session_and_no_other() {
        let live = Live::in_process();
        let session_a = SessionKey::new(&AccountId::of_row("acc_1"), &ChannelId::new("ch_1"), "cs_a");
        let session_b = SessionKey::new(&AccountId::of_row("acc_2"), &ChannelId::new("ch_2"), "cs_b");
        let mut a = live.subscribe(&session_a, "ch_1").await.unwrap();
        let mut a2 = live.subscribe(&session_a, "ch_1").await.unwrap();
        let mut b = live.subscribe(&session_b, "ch_2").await.unwrap();
        let frame = Push::Frame(Bytes::from_static(b"{}"));
        assert_eq!(live.publish(&session_a, frame.clone()).await.unwrap(), 1);
        assert_eq!(a.rx.recv().await, Some(frame.clone()));
        assert_eq!(a2.rx.recv().await, Some(frame.clone()));
        // The same session id under another account's channel is another address.
        let forged = SessionKey::new(&AccountId::of_row("acc_1"), &ChannelId::new("ch_1"), "cs_b");
        assert_eq!(live.publish(&forged, frame).await.unwrap(), 0);
        assert!(b.rx.try_recv().is_err());
        live.revoke_channel("ch_2").await.unwrap();
        assert!(matches!(b.rx.recv().await, Some(Push::Close(close::REVOKED, _))));
        drop(a);
        drop(a2);
        assert_eq!(live.local_sockets(), 1);
        assert_eq!(live.publish(&session_a, Push::Frame(Bytes::new())).await.unwrap(), 0);
    }
}
