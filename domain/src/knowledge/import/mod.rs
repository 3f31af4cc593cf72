//! The `kb_import` job: reads a knowledge source's pages one by one (a sitemap's pages are listed first),
//! checks each against `robots.txt`, fetches it through the guarded fetcher, extracts its sections and
//! records them as FAQs with their charge (`progress`). An uploaded document is the one page of its source,
//! read from the stored upload (`documents`). One job per source; a run that dies is taken over by the job
//! engine and resumes at the first page not yet recorded.

pub mod decode;
pub mod documents;
pub mod extract;
pub mod fetch;
pub mod pairs;
pub mod progress;
pub mod robots;
pub mod sitemap;

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use reqwest::Url;
use sea_orm::{ColumnTrait, DatabaseConnection, DbErr, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use self::{
    documents::Format,
    extract::Extracted,
    fetch::{Fetcher, PageError},
    pairs::PairWriter,
    progress::Recorded,
    robots::RobotsRules,
};
use crate::{
    access::AccountId,
    accounts::holds,
    clock::Clock,
    jobs::{Handler, Job, NewJob, Outcome},
    knowledge::{
        embeddings::Embedder,
        retrieval::{
            Owner,
            vectors::{self, Take},
        },
        sources,
    },
    store::entities::{
        kb_source_files, kb_source_pages,
        kb_sources::{self, SourceKind},
    },
};

pub const KIND: &str = "kb_import";
/// Pages of a bulk import, and of a sitemap's import.
pub const MAX_PAGES: usize = 100;
/// A sitemap is read up to this size.
const MAX_SITEMAP_BYTES: usize = 5 * 1024 * 1024;

#[derive(Serialize, Deserialize)]
pub struct ImportArgs {
    source_id: String,
}

impl crate::jobs::JobArgs for ImportArgs {
    const KIND: &'static str = KIND;
    const CLASS: crate::jobs::Class = crate::jobs::Class::Bulk;
    /// Runs of an import that keep failing on the database before it is given up.
    const MAX_ATTEMPTS: i32 = 10;
}

pub fn job(account_id: &AccountId, source_id: &str, now: DateTime<Utc>) -> NewJob {
    let args = ImportArgs {
        source_id: source_id.to_owned(),
    };
    NewJob {
        run_at_ms: now.timestamp_millis(),
        unique_key: Some(format!("{KIND}:{source_id}")),
        ..NewJob::new(account_id, &args)
    }
}

pub struct Import {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    pages: PageReader,
    /// Makes the source's FAQ vectors before it is `ready` (none: lexical retrieval only).
    embedder: Option<Arc<dyn Embedder>>,
    /// Writes question-answer pairs from sections when the account has a model provider.
    pairs: Arc<dyn PairWriter>,
}

impl Import {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        fetcher: Arc<Fetcher>,
        embedder: Option<Arc<dyn Embedder>>,
        pairs: Arc<dyn PairWriter>,
    ) -> Self {
        Self {
            db,
            clock,
            pages: PageReader { fetcher },
            embedder,
            pairs,
        }
    }

    /// Reads what is left of the source and makes its FAQs' vectors: those of the pages recorded so far
    /// while the next pages are read (the embedding runs on blocking threads, the reading waits mostly on
    /// the network and the database), the rest once all are read. The error the import failed with, if
    /// it did.
    async fn read_and_embed(&self, source: &kb_sources::Model) -> Result<Option<String>, DbErr> {
        let (recorded, pages) = watch::channel(());
        let read = async move {
            let read = self.import(source, &recorded).await;
            drop(recorded);
            read
        };
        let (read, ()) = tokio::join!(read, self.embed(source, pages));
        read
    }

    /// The vectors of the source's FAQs (those it lacks: a resumed run embeds only the rest), whole
    /// batches at a time as pages are recorded, then all that are left when the reading ends (`pages`
    /// closes). A failure leaves them to the searches (retrieval::vectors) rather than failing the import.
    async fn embed(&self, source: &kb_sources::Model, mut pages: watch::Receiver<()>) {
        let Some(embedder) = &self.embedder else { return };
        let owner = Owner::Source(source.id.to_string());
        let account_id = source.account_id.clone();
        loop {
            let all_read = pages.changed().await.is_err();
            let take = if all_read { Take::All } else { Take::WholeBatches };
            if let Err(err) = vectors::embed_owner(&self.db, embedder, &account_id, &owner, take).await {
                tracing::warn!(source = %source.id, error = %err, "the source's FAQ vectors could not be made");
                return;
            }
            if all_read {
                return;
            }
        }
    }

    /// Reads what is left of the source, telling `recorded` of every page it records; the error it failed
    /// with, if it did.
    async fn import(&self, source: &kb_sources::Model, recorded: &watch::Sender<()>) -> Result<Option<String>, DbErr> {
        let now = self.clock.now();
        if let Some(error) = self.list_sitemap_pages(source, now).await? {
            return Ok(Some(error));
        }
        let pending = kb_source_pages::Entity::find()
            .filter(kb_source_pages::Column::SourceId.eq(&source.id))
            .order_by_asc(kb_source_pages::Column::Position)
            .all(&self.db)
            .await?;
        let total = i32::try_from(pending.len()).unwrap_or(i32::MAX);
        progress::started(&self.db, &source.id, total, now).await?;
        let mut robots = RobotsRules::default();
        for page in pending
            .iter()
            .filter(|p| p.status == kb_source_pages::PageStatus::Pending)
        {
            let read = if source.kind == SourceKind::File {
                self.document(&source.id).await?
            } else {
                self.pages.read(&mut robots, &page.url).await
            };
            let read = match read {
                Ok(extracted) => {
                    let account_id = source.account_id.clone();
                    let now = self.clock.now();
                    Ok(pairs::rewrite(self.pairs.as_ref(), &self.db, &account_id, &page.id, extracted, now).await)
                }
                Err(error) => Err(error),
            };
            let now = self.clock.now();
            match read {
                Ok(extracted) => {
                    if progress::page_read(&self.db, source, page, extracted, now).await? == Recorded::OutOfCredits {
                        holds::release(&self.db, &pairs::hold_key(&page.id)).await?;
                        let error = PageError::new("insufficient_credits", "the credit balance is used up");
                        progress::fail_pending(&self.db, &source.id, &error, now).await?;
                        return Ok(Some(error.reason.to_owned()));
                    }
                    recorded.send_replace(());
                }
                Err(error) => progress::page_failed(&self.db, &source.id, page, &error, now).await?,
            }
        }
        self.verdict(source).await
    }

    /// For a sitemap import whose pages are not listed yet, lists them; the source's error when the sitemap
    /// cannot be read.
    async fn list_sitemap_pages(
        &self,
        source: &kb_sources::Model,
        now: DateTime<Utc>,
    ) -> Result<Option<String>, DbErr> {
        let (Some(sitemap), SourceKind::Bulk) = (&source.origin_url, source.kind) else {
            return Ok(None);
        };
        let listed = kb_source_pages::Entity::find()
            .filter(kb_source_pages::Column::SourceId.eq(&source.id))
            .one(&self.db)
            .await?;
        if listed.is_some() {
            return Ok(None);
        }
        let pages = match self.pages.sitemap(sitemap).await {
            Ok(pages) if !pages.is_empty() => pages,
            Ok(_) => return Ok(Some("sitemap_empty".to_owned())),
            Err(error) => {
                tracing::info!(source_id = %source.id, reason = error.reason, message = %error.message, "sitemap unreadable");
                return Ok(Some("sitemap_unreadable".to_owned()));
            }
        };
        sources::add_pages(&self.db, &source.id, &pages, now).await?;
        Ok(None)
    }

    /// The stored document's sections, or why it was not read.
    async fn document(&self, source_id: &str) -> Result<Result<Extracted, PageError>, DbErr> {
        let Some(file) = kb_source_files::Entity::find_by_id(source_id).one(&self.db).await? else {
            return Ok(Err(PageError::new(
                "unreadable",
                "the uploaded document is no longer stored",
            )));
        };
        let Some(format) = Format::parse(&file.format) else {
            return Ok(Err(PageError::new("unsupported_content_type", file.format)));
        };
        Ok(documents::extract(format, file.data, file.file_name).await)
    }

    /// The error a source that read all its pages ends with: a single page's reason, or none imported.
    async fn verdict(&self, source: &kb_sources::Model) -> Result<Option<String>, DbErr> {
        let failed = sources::page_errors(&self.db, vec![source.id.to_string()]).await?;
        let pages = kb_source_pages::Entity::find()
            .filter(kb_source_pages::Column::SourceId.eq(&source.id))
            .count(&self.db)
            .await?;
        Ok(match (source.kind, failed.first()) {
            (SourceKind::Url | SourceKind::File, Some(page)) => page.error_code.clone(),
            (_, Some(_)) if failed.len() as u64 == pages => Some("no_page_imported".to_owned()),
            _ => None,
        })
    }
}

/// Reads web pages through the guarded fetcher, for imports and estimates.
#[derive(Clone)]
pub struct PageReader {
    pub fetcher: Arc<Fetcher>,
}

impl PageReader {
    /// The http(s) pages a sitemap lists, its first `MAX_PAGES`.
    pub async fn sitemap(&self, sitemap: &str) -> Result<Vec<String>, PageError> {
        let url = Url::parse(sitemap).map_err(|e| PageError::new("http_error", e.to_string()))?;
        let fetched = self.fetcher.get(&url, MAX_SITEMAP_BYTES).await?;
        let xml = decode::text(&fetched.body, &fetched.content_type);
        let pages = sitemap::pages(&xml, MAX_PAGES).map_err(|e| PageError::new("unsupported_content_type", e))?;
        // Only http(s) pages; the guard checks their addresses when they are read.
        Ok(pages
            .into_iter()
            .filter(|p| Url::parse(p).is_ok_and(|u| matches!(u.scheme(), "http" | "https")))
            .collect())
    }

    /// One page's sections, or why it was not read.
    pub async fn read(&self, robots: &mut RobotsRules, page: &str) -> Result<Extracted, PageError> {
        let url = self.allowed(robots, page).await?;
        self.fetch(&url).await
    }

    /// The page's URL when robots.txt allows reading it.
    pub async fn allowed(&self, robots: &mut RobotsRules, page: &str) -> Result<Url, PageError> {
        let url = Url::parse(page).map_err(|e| PageError::new("http_error", format!("not a URL: {e}")))?;
        if !robots.allows(&self.fetcher, &url).await {
            return Err(PageError::new(
                "robots_disallowed",
                format!("robots.txt does not allow {} to read this page", fetch::BOT_NAME),
            ));
        }
        Ok(url)
    }

    /// A page robots.txt allows: its sections, or why it was not read.
    pub async fn fetch(&self, url: &Url) -> Result<Extracted, PageError> {
        let fetched = self.fetcher.get(url, usize::MAX).await?;
        let text = decode::text(&fetched.body, &fetched.content_type);
        let extracted = if decode::is_html(&fetched.content_type) {
            extract::html(&text, fetched.url.as_str())
        } else if fetched.content_type.to_ascii_lowercase().starts_with("text/plain") {
            extract::plain(&text, fetched.url.as_str())
        } else {
            return Err(PageError::new(
                "unsupported_content_type",
                format!("{} is not a web page", fetched.content_type),
            ));
        };
        if extracted.sections.is_empty() {
            return Err(PageError::new("no_text", "the page has no text to import"));
        }
        Ok(extracted)
    }
}

#[async_trait::async_trait]
impl Handler for Import {
    /// A site of many pages, each within FRONTDESK_IMPORT_TIMEOUT, takes long.
    fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(3600)
    }

    async fn run(&self, job: &Job) -> Outcome {
        let payload: ImportArgs = match job.args() {
            Ok(payload) => payload,
            Err(unreadable) => return unreadable,
        };
        let result = async {
            let Some(source) = kb_sources::Entity::find_by_id(payload.source_id.as_str())
                .one(&self.db)
                .await?
            else {
                return Ok(());
            };
            if !kb_sources::SourceStatus::UNFINISHED.contains(&source.status) {
                return Ok(());
            }
            let error = self.read_and_embed(&source).await?;
            progress::finished(&self.db, &source.id, error, self.clock.now()).await
        }
        .await;
        match result {
            Ok(()) => Outcome::Done(None),
            Err(err) if job.is_last_attempt() => {
                // Out of tries: the source ends `failed` instead of showing `processing` for ever (the job
                // is kept, with its last error, for operators).
                if let Err(also) = progress::finished(
                    &self.db,
                    &payload.source_id,
                    Some("internal".to_owned()),
                    self.clock.now(),
                )
                .await
                {
                    tracing::error!(source = payload.source_id, error = %also, "an import that used up its tries could not be marked failed");
                }
                Outcome::Fail {
                    error: format!("database: {err}"),
                    effect: None,
                }
            }
            Err(err) => Outcome::Retry {
                error: format!("database: {err}"),
                after: Duration::from_secs(5),
            },
        }
    }
}
