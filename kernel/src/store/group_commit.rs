//! Group commit: calls that each want a short write transaction hand their work to a few writer tasks, which
//! take whatever has queued while they were busy and write it as one batch: one transaction and a few
//! multi-row statements for many calls, where each call alone pays its own round trips and commit (on this
//! project's machines the statements, not the disk flush, are what limits PostgreSQL; see BENCHMARKS.md).
//! No call waits for a batch to fill: a free writer takes what is there at once, so a lone call is written
//! straight away and batches grow only with the load.

use std::sync::Arc;

use tokio::sync::{Mutex, mpsc, oneshot};

use crate::error::ApiError;

/// Writes batches of one kind of work.
#[async_trait::async_trait]
pub trait BatchWriter: Send + Sync + 'static {
    type Item: Send + 'static;
    type Answer: Send + 'static;

    /// The work's name in the metrics (`frontdesk_write_batches_total{kind}`).
    const KIND: &'static str;

    /// Writes `batch`: one answer per item, in the items' order.
    async fn write(&self, batch: Vec<Self::Item>) -> Vec<Self::Answer>;

    /// When `answer` says the database is unavailable, the same answer for another call. After a batch that
    /// got only such answers, the calls queued meanwhile get it at once instead of each batch in turn waiting
    /// for the database again (a call would otherwise wait for every batch ahead of it).
    fn unavailable(_answer: &Self::Answer) -> Option<Self::Answer> {
        None
    }
}

/// `answer` again for another call when it is an error saying the database is unavailable.
pub fn unavailable_again<T>(answer: &Result<T, ApiError>) -> Option<Result<T, ApiError>> {
    match answer {
        Err(err) if err.code == tonic::Code::Unavailable => Some(Err(err.clone())),
        _ => None,
    }
}

/// How the writers of one kind of work gather batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batching {
    /// Writer tasks, so that one batch's round trips overlap the next one's.
    pub writers: usize,
    /// The most items one batch takes.
    pub max_batch: usize,
}

/// Writes `items` with one call of `write`; when that fails, with one call per item, so that an item that
/// breaks the batch's transaction fails alone and the others are written. One answer per item, in order.
/// A database that is unavailable (unreachable, or a lock not obtained in time) fails every item at once:
/// no item is to blame, and writing them one by one would make each caller wait as long again per item.
pub async fn together_or_alone<'a, T, A, F, Fut>(items: &'a [T], write: F) -> Vec<Result<A, ApiError>>
where
    F: Fn(&'a [T]) -> Fut,
    Fut: Future<Output = Result<Vec<A>, ApiError>>,
{
    match write(items).await {
        Ok(answers) => return answers.into_iter().map(Ok).collect(),
        Err(err) if items.len() <= 1 || err.code == tonic::Code::Unavailable => {
            return items.iter().map(|_| Err(err.clone())).collect();
        }
        Err(err) => tracing::warn!(error = %err, items = items.len(), "a batch failed; writing each item alone"),
    }
    let mut answers = Vec::with_capacity(items.len());
    for item in items.chunks(1) {
        answers.push(match write(item).await {
            Ok(mut one) => one.pop().ok_or_else(|| ApiError::internal("a write answered nothing")),
            Err(err) => Err(err),
        });
    }
    answers
}

type Queued<W> = (<W as BatchWriter>::Item, oneshot::Sender<<W as BatchWriter>::Answer>);

/// The queue in front of a writer's tasks.
pub struct GroupCommit<W: BatchWriter> {
    queue: mpsc::Sender<Queued<W>>,
}

impl<W: BatchWriter> Clone for GroupCommit<W> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
        }
    }
}

impl<W: BatchWriter> GroupCommit<W> {
    /// Starts the writer tasks; they end when the last handle is dropped.
    pub fn start(writer: W, batching: Batching) -> Self {
        let max_batch = batching.max_batch.max(1);
        let writers = batching.writers.max(1);
        // Room for every writer's next batch: a call queues without waiting unless the writers fall behind.
        let (queue, receiver) = mpsc::channel(max_batch * writers * 2);
        let receiver = Arc::new(Mutex::new(receiver));
        let writer = Arc::new(writer);
        for _ in 0..writers {
            tokio::spawn(take_batches(writer.clone(), receiver.clone(), max_batch));
        }
        Self { queue }
    }

    /// Hands `item` to the writers and waits for its answer: `None` when no writer could answer it (the
    /// process is stopping, or the batch's writer panicked, which its log says).
    pub async fn submit(&self, item: W::Item) -> Option<W::Answer> {
        let (reply, answer) = oneshot::channel();
        self.queue.send((item, reply)).await.ok()?;
        answer.await.ok()
    }
}

async fn take_batches<W: BatchWriter>(writer: Arc<W>, receiver: Arc<Mutex<mpsc::Receiver<Queued<W>>>>, max: usize) {
    loop {
        let mut batch = Vec::new();
        {
            let mut receiver = receiver.lock().await;
            match receiver.recv().await {
                Some(first) => batch.push(first),
                None => return,
            }
            while batch.len() < max {
                match receiver.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
        }
        // Items per batch (the two counters' ratio) says how much the batching saves under the load.
        metrics::counter!("frontdesk_write_batches_total", "kind" => W::KIND).increment(1);
        metrics::counter!("frontdesk_write_batch_items_total", "kind" => W::KIND).increment(batch.len() as u64);
        let (items, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
        // A task of its own, so that a panic while writing ends that batch (its callers get `None`) and not
        // this writer.
        let written = tokio::spawn({
            let writer = writer.clone();
            async move { writer.write(items).await }
        });
        match written.await {
            Ok(answers) => {
                // Only when the database refused the whole batch.
                let refusal = answers
                    .iter()
                    .all(|a| W::unavailable(a).is_some())
                    .then(|| answers.first().and_then(W::unavailable))
                    .flatten();
                for (reply, answer) in replies.into_iter().zip(answers) {
                    // The caller may have gone (its request was cancelled); what it asked for is written.
                    let _ = reply.send(answer);
                }
                if let Some(again) = refusal {
                    refuse_queued::<W>(&receiver, again);
                }
            }
            Err(err) => tracing::error!(error = %err, "a batch writer failed; its callers get an error"),
        }
    }
}

/// Answers the calls queued now with `refusal`, unless another writer is waiting for calls (then none are).
fn refuse_queued<W: BatchWriter>(receiver: &Mutex<mpsc::Receiver<Queued<W>>>, refusal: W::Answer) {
    let Ok(mut receiver) = receiver.try_lock() else {
        return;
    };
    while let Ok((_, reply)) = receiver.try_recv() {
        if let Some(refused) = W::unavailable(&refusal) {
            let _ = reply.send(refused);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Doubles numbers, counting batches; panics on a negative one.
    struct Doubler {
        batches: Arc<AtomicUsize>,
    }

    #[async_trait::async_trait]
    impl BatchWriter for Doubler {
        type Item = i64;
        type Answer = i64;

        const KIND: &'static str = "doubling";

        async fn write(&self, batch: Vec<i64>) -> Vec<i64> {
            self.batches.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            assert!(batch.iter().all(|n| *n >= 0), "negative");
            batch.into_iter().map(|n| n * 2).collect()
        }
    }

    fn start(writers: usize, max_batch: usize) -> (GroupCommit<Doubler>, Arc<AtomicUsize>) {
        let batches = Arc::new(AtomicUsize::new(0));
        let writer = Doubler {
            batches: batches.clone(),
        };
        (GroupCommit::start(writer, Batching { writers, max_batch }), batches)
    }

    #[tokio::test]
    async fn each_caller_gets_its_own_answer_and_concurrent_calls_share_batches() {
        let (commits, batches) = start(1, 16);
        let calls: Vec<_> = (0..64)
            .map(|n| {
                let commits = commits.clone();
                tokio::spawn(async move { (n, commits.submit(n).await) })
            })
            .collect();
        for call in calls {
            let (n, answer) = call.await.unwrap();
            assert_eq!(answer, Some(n * 2));
        }
        let batches = batches.load(Ordering::SeqCst);
        assert!(
            (4..64).contains(&batches),
            "64 calls in {batches} batches of at most 16"
        );
    }

    #[tokio::test]
    async fn a_lone_call_is_written_at_once() {
        let (commits, batches) = start(2, 64);
        let started = std::time::Instant::now();
        assert_eq!(commits.submit(21).await, Some(42));
        assert!(started.elapsed() < std::time::Duration::from_millis(500));
        assert_eq!(batches.load(Ordering::SeqCst), 1);
    }

    /// A write of `items` that fails on a negative number with `error`, counting its calls.
    async fn write_some(calls: &AtomicUsize, items: &[i64], error: &ApiError) -> Result<Vec<i64>, ApiError> {
        calls.fetch_add(1, Ordering::SeqCst);
        if items.iter().any(|n| *n < 0) {
            return Err(error.clone());
        }
        Ok(items.to_vec())
    }

    #[tokio::test]
    async fn an_item_that_breaks_its_batch_fails_alone() {
        let calls = AtomicUsize::new(0);
        let broken = ApiError::field("n", "negative");
        let answers = together_or_alone(&[1, -1, 2], |items| write_some(&calls, items, &broken)).await;
        let answers: Vec<bool> = answers.iter().map(Result::is_ok).collect();
        assert_eq!(answers, [true, false, true]);
        assert_eq!(calls.load(Ordering::SeqCst), 4, "the batch, then each item");
    }

    #[tokio::test]
    async fn an_unavailable_database_fails_the_batch_at_once() {
        let calls = AtomicUsize::new(0);
        let down = ApiError::new(
            tonic::Code::Unavailable,
            crate::error::Reason::Unavailable,
            "the database is unavailable",
        );
        let answers = together_or_alone(&[1, -1, 2], |items| write_some(&calls, items, &down)).await;
        assert!(answers.iter().all(|a| a.as_ref().is_err_and(|e| e.code == down.code)));
        assert_eq!(calls.load(Ordering::SeqCst), 1, "no write item by item");
    }

    /// Answers every call after 50 ms that the database is unavailable, counting batches.
    struct Unreachable {
        batches: Arc<AtomicUsize>,
    }

    #[async_trait::async_trait]
    impl BatchWriter for Unreachable {
        type Item = i64;
        type Answer = Result<i64, ApiError>;

        const KIND: &'static str = "unreachable";

        async fn write(&self, batch: Vec<i64>) -> Vec<Self::Answer> {
            self.batches.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let down = ApiError::new(tonic::Code::Unavailable, crate::error::Reason::Unavailable, "down");
            batch.iter().map(|_| Err(down.clone())).collect()
        }

        fn unavailable(answer: &Self::Answer) -> Option<Self::Answer> {
            unavailable_again(answer)
        }
    }

    #[tokio::test]
    async fn calls_queued_behind_a_batch_the_database_refused_are_refused_at_once() {
        let batches = Arc::new(AtomicUsize::new(0));
        let writer = Unreachable {
            batches: batches.clone(),
        };
        let commits = GroupCommit::start(
            writer,
            Batching {
                writers: 1,
                max_batch: 16,
            },
        );
        let submit = |n: i64| {
            let commits = commits.clone();
            tokio::spawn(async move { commits.submit(n).await })
        };
        // The first call's batch is waiting for the database when the others come.
        let mut calls = vec![submit(0)];
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        calls.extend((1..20).map(submit));
        for call in calls {
            let answer = call.await.unwrap().expect("an answer");
            assert_eq!(answer.unwrap_err().code, tonic::Code::Unavailable);
        }
        // Without the refusal they would be written in two more batches, each waiting as long.
        assert_eq!(batches.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_panicking_batch_fails_its_callers_and_the_writer_goes_on() {
        let (commits, _) = start(1, 1);
        assert_eq!(commits.submit(-1).await, None);
        assert_eq!(commits.submit(2).await, Some(4));
    }
}
