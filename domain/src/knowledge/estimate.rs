//! `POST /v1/kb-sources/estimate`: what a web import would cost, found by reading its pages now through the
//! same guarded fetcher and extractor as the import (robots.txt, the private-address rule, time and size
//! limits), without storing or charging anything. A page that cannot be read adds no page and no
//! characters and is listed in `errors` with its reason, as an import would list it. The whole estimate has
//! `BUDGET`: pages not read by then are listed with `timeout`, so the answer comes before the call's own
//! deadline. At most `READS_AT_ONCE` pages are read at once (an estimate may name a hundred), and the
//! fetcher's per-server slots keep it polite to each site.

use std::{sync::Arc, time::Duration};

use frontdesk_api::v1::{ImportEstimate, PageError as PageErrorMessage};
use tokio::{sync::Semaphore, task::JoinSet, time::Instant};

use super::import::{PageReader, extract::Extracted, fetch::PageError, progress::cost_milli, robots::RobotsRules};

/// The longest an estimate reads pages.
pub const BUDGET: Duration = Duration::from_secs(20);
/// Pages one estimate reads at once.
const READS_AT_ONCE: usize = 8;

/// The estimate of importing `urls`, or the pages of `sitemap` when given.
pub async fn estimate(reader: &PageReader, sitemap: Option<String>, urls: Vec<String>) -> ImportEstimate {
    let deadline = Instant::now() + BUDGET;
    let mut errors = Vec::new();
    let urls = match sitemap {
        Some(sitemap) => match within(deadline, reader.sitemap(&sitemap)).await {
            Ok(pages) => pages,
            Err(error) => {
                errors.push(message(&sitemap, &error));
                Vec::new()
            }
        },
        None => urls,
    };
    let mut outcomes: Vec<Option<Result<Extracted, PageError>>> = urls.iter().map(|_| None).collect();
    let mut robots = RobotsRules::default();
    let mut reads = JoinSet::new();
    let slots = Arc::new(Semaphore::new(READS_AT_ONCE));
    for (n, page) in urls.iter().enumerate() {
        match within(deadline, reader.allowed(&mut robots, page)).await {
            Ok(url) => {
                let (reader, slots) = (reader.clone(), slots.clone());
                reads.spawn(async move {
                    let read = async {
                        let _slot = slots.acquire_owned().await;
                        reader.fetch(&url).await
                    };
                    (n, within(deadline, read).await)
                });
            }
            Err(error) => outcomes[n] = Some(Err(error)),
        }
    }
    while let Some(done) = reads.join_next().await {
        if let Ok((n, outcome)) = done {
            outcomes[n] = Some(outcome);
        }
    }
    let (mut pages, mut characters, mut milli) = (0, 0_i64, 0_i64);
    for (url, outcome) in urls.iter().zip(outcomes) {
        match outcome {
            Some(Ok(extracted)) => {
                pages += 1;
                characters += i64::try_from(extracted.characters).unwrap_or(i64::MAX);
                milli += cost_milli(extracted.characters);
            }
            Some(Err(error)) => errors.push(message(url, &error)),
            None => errors.push(message(url, &PageError::new("internal", "the page could not be read"))),
        }
    }
    ImportEstimate {
        success: true,
        pages,
        characters,
        estimated_credits: milli as f64 / 1000.0,
        errors,
    }
}

/// `work`'s outcome, or `timeout` past the deadline.
async fn within<T>(deadline: Instant, work: impl Future<Output = Result<T, PageError>>) -> Result<T, PageError> {
    tokio::time::timeout_at(deadline, work).await.unwrap_or_else(|_| {
        Err(PageError::new(
            "timeout",
            format!("not read within the estimate's {} s", BUDGET.as_secs()),
        ))
    })
}

fn message(url: &str, error: &PageError) -> PageErrorMessage {
    PageErrorMessage {
        url: url.to_owned(),
        reason: error.reason.to_owned(),
        message: error.message.clone(),
    }
}
