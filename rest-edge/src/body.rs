//! Request bodies in memory. A body must arrive whole within `read_timeout` (a client that sends slowly
//! cannot hold memory for long: 408), and every byte read counts against the process's budget of body bytes
//! until the request is answered: a body that would pass it is refused at once with 503 and `Retry-After`,
//! so many large or slow bodies at once cannot exhaust the edge's memory. Which bodies are read only after
//! the caller's credentials passed is the caller's to decide (`transcode`, `is_small`).

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use axum::body::{Body, HttpBody as _};
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt, stream::BoxStream};
use http::StatusCode;
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};

use crate::HttpError;

/// A body of at most this many bytes is read before anything else: reading it costs no more than asking
/// whether the caller may send it.
const SMALL_BODY_BYTES: u64 = 64 * 1024;

/// Whether the request's body is known to be small (`SMALL_BODY_BYTES`): declared so, or empty.
pub fn is_small(body: &Body) -> bool {
    body.size_hint().upper().is_some_and(|upper| upper <= SMALL_BODY_BYTES)
}

/// The process's budget of body bytes and the time a body may take; cheap to clone.
#[derive(Clone)]
pub struct Bodies {
    budget: Arc<Semaphore>,
    read_timeout: Duration,
}

/// The body bytes one request holds, given back to the budget when it is dropped (once the request is
/// answered).
#[derive(Clone, Default)]
pub struct Hold(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the request body did not arrive within {} s", .0.as_secs())]
    TimedOut(Duration),
    #[error("too many request bodies are being received at once; retry")]
    OverBudget,
    #[error("the request body is larger than {0} bytes")]
    TooLarge(usize),
    #[error("the request body could not be read")]
    Broken,
}

impl BodyError {
    pub fn http(&self) -> HttpError {
        let status = match self {
            Self::TimedOut(_) => StatusCode::REQUEST_TIMEOUT,
            Self::OverBudget => StatusCode::SERVICE_UNAVAILABLE,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Broken => StatusCode::BAD_REQUEST,
        };
        let code = match self {
            Self::TimedOut(_) => "request_timeout",
            Self::OverBudget => "unavailable",
            Self::TooLarge(_) => "payload_too_large",
            Self::Broken => "invalid_argument",
        };
        HttpError {
            // Memory is freed as bodies are answered: soon.
            retry_after: matches!(self, Self::OverBudget).then_some(1),
            ..HttpError::new(status, code, self.to_string())
        }
    }
}

impl Bodies {
    pub fn new(budget_bytes: usize, read_timeout: Duration) -> Self {
        Self {
            budget: Arc::new(Semaphore::new(budget_bytes.min(Semaphore::MAX_PERMITS))),
            read_timeout,
        }
    }

    /// The body's bytes as they come, each counted in `hold`; ends with an error past the time limit or
    /// the budget.
    pub fn stream(&self, body: Body, hold: &Hold) -> BoxStream<'static, Result<Bytes, BodyError>> {
        let deadline = Instant::now() + self.read_timeout;
        let (timeout, budget, hold) = (self.read_timeout, self.budget.clone(), hold.clone());
        let data = body.into_data_stream();
        futures_util::stream::unfold(Some(data), move |state| {
            let (budget, hold) = (budget.clone(), hold.clone());
            async move {
                let mut data = state?;
                let item = match tokio::time::timeout_at(deadline, data.next()).await {
                    Err(_) => Err(BodyError::TimedOut(timeout)),
                    Ok(None) => return None,
                    Ok(Some(Err(_))) => Err(BodyError::Broken),
                    Ok(Some(Ok(chunk))) => hold.take(&budget, chunk.len()).map(|()| chunk),
                };
                let more = item.is_ok().then_some(data);
                Some((item, more))
            }
        })
        .boxed()
    }

    /// The whole body, refused with 413 past `max_bytes` (before any of it is read, when it says its size).
    pub async fn read(&self, body: Body, max_bytes: usize, hold: &Hold) -> Result<Bytes, BodyError> {
        if body.size_hint().lower() > max_bytes as u64 {
            return Err(BodyError::TooLarge(max_bytes));
        }
        collect(self.stream(body, hold), max_bytes).await
    }
}

async fn collect(
    mut chunks: impl Stream<Item = Result<Bytes, BodyError>> + Unpin,
    max_bytes: usize,
) -> Result<Bytes, BodyError> {
    let mut whole = BytesMut::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if whole.len() + chunk.len() > max_bytes {
            return Err(BodyError::TooLarge(max_bytes));
        }
        whole.extend_from_slice(&chunk);
    }
    Ok(whole.freeze())
}

impl Hold {
    /// Counts `bytes` more of this request's body in the budget.
    fn take(&self, budget: &Arc<Semaphore>, bytes: usize) -> Result<(), BodyError> {
        let Ok(bytes) = u32::try_from(bytes) else {
            return Err(BodyError::OverBudget);
        };
        if bytes == 0 {
            return Ok(());
        }
        let permit = budget
            .clone()
            .try_acquire_many_owned(bytes)
            .map_err(|_| BodyError::OverBudget)?;
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match held.as_mut() {
            Some(held) => held.merge(permit),
            None => *held = Some(permit),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bodies_count_against_the_budget_until_their_requests_end() {
        let bodies = Bodies::new(10, Duration::from_secs(5));
        let first = Hold::default();
        let read = bodies.read(Body::from("123456"), 100, &first).await.unwrap();
        assert_eq!(read.as_ref(), b"123456");
        let second = Hold::default();
        let refused = bodies.read(Body::from("123456"), 100, &second).await.unwrap_err();
        assert!(matches!(refused, BodyError::OverBudget), "{refused:?}");
        drop(first);
        drop(second);
        assert!(bodies.read(Body::from("123456"), 100, &Hold::default()).await.is_ok());
        let large = bodies
            .read(Body::from("123456"), 5, &Hold::default())
            .await
            .unwrap_err();
        assert!(matches!(large, BodyError::TooLarge(5)), "{large:?}");
    }

    #[tokio::test]
    async fn a_body_that_does_not_come_in_time_is_refused() {
        let bodies = Bodies::new(1024, Duration::from_millis(100));
        let never = futures_util::stream::pending::<Result<Bytes, std::io::Error>>();
        let refused = bodies
            .read(Body::from_stream(never), 100, &Hold::default())
            .await
            .unwrap_err();
        assert!(matches!(refused, BodyError::TimedOut(_)), "{refused:?}");
        assert_eq!(refused.http().status, StatusCode::REQUEST_TIMEOUT);
    }

    #[test]
    fn only_bodies_known_to_be_small_are_small() {
        assert!(is_small(&Body::empty()));
        assert!(is_small(&Body::from(vec![0; 1024])));
        assert!(!is_small(&Body::from(vec![0; 100 * 1024])));
        let unknown = futures_util::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"x"))]);
        assert!(!is_small(&Body::from_stream(unknown)));
    }
}
