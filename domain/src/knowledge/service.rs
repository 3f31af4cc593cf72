//! `/v1/kb-sources`: web page imports (one URL, a list, or a sitemap) and document uploads, answered at once
//! with the queued source; estimates of a web import's cost; polling, listing and deleting sources; a
//! source's FAQs.

use std::sync::Arc;

use frontdesk_api::v1::{
    BulkImportRequest, DeleteKbSourceRequest, Deleted, EstimateImportRequest, FilePart, GetKbSourceRequest,
    ImportAccepted, ImportEstimate, ImportFileRequest, ImportUrlRequest, KbSourceAnswer, KbSourceFaqList, KbSourceList,
    ListKbSourceFaqsRequest, ListKbSourcesRequest, kb_sources_server::KbSources,
};
use reqwest::Url;
use sea_orm::{
    ActiveEnum, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    sea_query::{Expr, ExprTrait},
};
use tonic::{Request, Response, Status};

use super::{
    estimate,
    import::{MAX_PAGES, PageReader, documents::Format},
    source_faqs::faq_message,
    sources::{self, NewFile, NewSource},
};
use crate::error::Reason;
use crate::{
    access::AccountId,
    clock::Clock,
    error::{ApiError, ApiResult},
    integrations::outbound::OutboundPolicy,
    jobs::Wake,
    paging::{self, Page},
    platform_calls::{account_of, deleted},
    store::{
        self,
        entities::{agent_kb_sources, kb_sources, source_faqs},
    },
    validate::Violations,
};

const MAX_URL_CHARS: usize = 2000;
/// The longest file name kept.
const MAX_FILE_NAME_CHARS: usize = 255;

#[derive(Clone)]
pub struct KbSourcesService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    policy: OutboundPolicy,
    wake: Wake,
    pages: PageReader,
    max_upload_bytes: usize,
}

impl KbSourcesService {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        policy: OutboundPolicy,
        wake: Wake,
        pages: PageReader,
        max_upload_bytes: usize,
    ) -> Self {
        Self {
            db,
            clock,
            policy,
            wake,
            pages,
            max_upload_bytes,
        }
    }

    /// The largest request this service reads: an upload at the limit and its other fields.
    pub fn max_request_bytes(&self) -> usize {
        self.max_upload_bytes.saturating_add(1024 * 1024)
    }

    /// The uploaded document, checked: present, not empty, within the limit, of a supported type.
    fn file(&self, part: Option<FilePart>) -> ApiResult<NewFile> {
        let Some(part) = part else {
            return Err(ApiError::field(
                "file",
                "is required: send the document as the multipart part `file`",
            ));
        };
        if part.data.len() > self.max_upload_bytes {
            return Err(ApiError::new(
                tonic::Code::ResourceExhausted,
                Reason::PayloadTooLarge,
                format!(
                    "the file is larger than the upload limit of {} MB (FRONTDESK_MAX_UPLOAD_MB)",
                    self.max_upload_bytes / (1024 * 1024)
                ),
            ));
        }
        if part.data.is_empty() {
            return Err(ApiError::field("file", "is empty"));
        }
        let file_name = file_name(&part.file_name);
        let content_type: String = part
            .content_type
            .chars()
            .filter(|c| !c.is_control())
            .take(255)
            .collect();
        let format = Format::of(&file_name, &content_type).map_err(|message| ApiError::field("file", message))?;
        Ok(NewFile {
            file_name,
            content_type,
            format,
            data: part.data,
        })
    }

    /// `raw` as a URL to import, or the message for its field. Hosts that are names are checked when the page
    /// is read (as every address they resolve to then).
    fn url(&self, raw: &str) -> Result<String, String> {
        if raw.trim().chars().count() > MAX_URL_CHARS {
            return Err(format!("must be at most {MAX_URL_CHARS} characters"));
        }
        let url = Url::parse(raw.trim()).map_err(|_| "must be an absolute http(s) URL".to_owned())?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("must use http or https".to_owned());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("must not contain credentials".to_owned());
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("must name a host".to_owned());
        }
        self.policy
            .refuse_literal(&url)
            .map_err(|refusal| format!("{}: {refusal}", url.host_str().unwrap_or_default()))?;
        Ok(url.to_string())
    }

    async fn accept(&self, account_id: &AccountId, new: NewSource) -> ApiResult<Response<ImportAccepted>> {
        let now = self.clock.now();
        let txn = store::begin_write(&self.db).await?;
        let source_id = sources::create(&txn, account_id, new, now).await?;
        txn.commit().await?;
        self.wake.notify();
        Ok(Response::new(ImportAccepted {
            success: true,
            source_id,
            status: kb_sources::SourceStatus::Queued.to_value(),
        }))
    }

    fn bulk(&self, r: BulkImportRequest) -> ApiResult<NewSource> {
        let mut v = Violations::new();
        let sitemap = !r.sitemap_url.trim().is_empty();
        v.check(
            sitemap == r.urls.is_empty(),
            "urls",
            "give either urls (1..100) or sitemap_url",
        );
        v.check(
            r.urls.len() <= MAX_PAGES,
            "urls",
            format!("must hold at most {MAX_PAGES} URLs"),
        );
        let mut pages = Vec::with_capacity(r.urls.len());
        for (i, raw) in r.urls.iter().enumerate() {
            match self.url(raw) {
                Ok(url) => pages.push(url),
                Err(message) => v.check(false, &format!("urls[{i}]"), message),
            }
        }
        let origin_url = match sitemap.then(|| self.url(&r.sitemap_url)) {
            Some(Err(message)) => {
                v.check(false, "sitemap_url", message);
                None
            }
            Some(Ok(url)) => Some(url),
            None => None,
        };
        v.finish()?;
        Ok(NewSource {
            kind: kb_sources::SourceKind::Bulk,
            origin_url,
            pages,
            agent_id: r.agent_id,
            file: None,
        })
    }
}

/// The name of an uploaded file without any folders, control characters or excess length; `document`
/// for none.
fn file_name(raw: &str) -> String {
    let base = raw.rsplit(['/', '\\']).next().unwrap_or_default();
    let name: String = base
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_FILE_NAME_CHARS)
        .collect::<String>()
        .trim()
        .to_owned();
    if name.is_empty() { "document".to_owned() } else { name }
}

#[tonic::async_trait]
impl KbSources for KbSourcesService {
    async fn import_url(&self, request: Request<ImportUrlRequest>) -> Result<Response<ImportAccepted>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let url = self.url(&r.url).map_err(|message| ApiError::field("url", message))?;
        let new = NewSource {
            kind: kb_sources::SourceKind::Url,
            origin_url: Some(url.clone()),
            pages: vec![url],
            agent_id: r.agent_id,
            file: None,
        };
        Ok(self.accept(&account_id, new).await?)
    }

    async fn import_file(&self, request: Request<ImportFileRequest>) -> Result<Response<ImportAccepted>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let file = self.file(r.file)?;
        let new = NewSource {
            kind: kb_sources::SourceKind::File,
            origin_url: None,
            pages: vec![file.file_name.clone()],
            agent_id: r.agent_id,
            file: Some(file),
        };
        Ok(self.accept(&account_id, new).await?)
    }

    async fn estimate_import(
        &self,
        request: Request<EstimateImportRequest>,
    ) -> Result<Response<ImportEstimate>, Status> {
        account_of(&request)?;
        let r = request.into_inner();
        let new = self.bulk(BulkImportRequest {
            urls: r.urls,
            sitemap_url: r.sitemap_url,
            agent_id: String::new(),
        })?;
        Ok(Response::new(
            estimate::estimate(&self.pages, new.origin_url, new.pages).await,
        ))
    }

    async fn bulk_import(&self, request: Request<BulkImportRequest>) -> Result<Response<ImportAccepted>, Status> {
        let account_id = account_of(&request)?;
        let new = self.bulk(request.into_inner())?;
        Ok(self.accept(&account_id, new).await?)
    }

    async fn list_kb_sources(&self, request: Request<ListKbSourcesRequest>) -> Result<Response<KbSourceList>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::KnowledgeSource.prefix())?;
        let select = kb_sources::Entity::find().filter(kb_sources::Column::AccountId.eq(&account_id));
        let (rows, more) = paging::fetch(
            &self.db,
            select,
            &page,
            kb_sources::Column::CreatedAt,
            kb_sources::Column::Id,
        )
        .await
        .map_err(ApiError::from)?;
        let failed = sources::page_errors(&self.db, rows.iter().map(|s| s.id.to_string()).collect())
            .await
            .map_err(ApiError::from)?;
        let (kb_sources, next_cursor) = paging::render(
            &rows,
            more,
            |s| (s.created_at, s.id.as_str()),
            |s| sources::message(s, &failed),
        );
        Ok(Response::new(KbSourceList {
            success: true,
            kb_sources,
            next_cursor,
        }))
    }

    async fn get_kb_source(&self, request: Request<GetKbSourceRequest>) -> Result<Response<KbSourceAnswer>, Status> {
        let account_id = account_of(&request)?;
        let source = sources::find(&self.db, &account_id, &request.get_ref().source_id).await?;
        let kb_source = sources::render(&self.db, &source).await.map_err(ApiError::from)?;
        Ok(Response::new(KbSourceAnswer {
            success: true,
            kb_source: Some(kb_source),
        }))
    }

    async fn delete_kb_source(&self, request: Request<DeleteKbSourceRequest>) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let txn = store::begin_write(&self.db).await.map_err(ApiError::from)?;
        let source = sources::find(&txn, &account_id, &request.get_ref().source_id).await?;
        agent_kb_sources::Entity::delete_many()
            .filter(agent_kb_sources::Column::SourceId.eq(&source.id))
            .exec(&txn)
            .await
            .map_err(ApiError::from)?;
        // Its pages, FAQs and their index rows go with it (ON DELETE CASCADE); a running import stops.
        kb_sources::Entity::delete_by_id(source.id.clone())
            .exec(&txn)
            .await
            .map_err(ApiError::from)?;
        txn.commit().await.map_err(ApiError::from)?;
        Ok(deleted(source.id.into()))
    }

    async fn list_kb_source_faqs(
        &self,
        request: Request<ListKbSourceFaqsRequest>,
    ) -> Result<Response<KbSourceFaqList>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::Faq.prefix())?;
        let source = sources::find(&self.db, &account_id, &r.source_id).await?;
        // Section order: by (position, id), after the cursor. The list's cursor is the usual one, whose
        // instant carries the last FAQ's position (in microseconds since the epoch).
        let mut select = source_faqs::Entity::find().filter(source_faqs::Column::SourceId.eq(&source.id));
        if let Some(after) = &page.after {
            let position = i32::try_from(after.created_at.timestamp_micros()).unwrap_or(i32::MAX);
            select = select.filter(
                Expr::tuple([
                    Expr::col(source_faqs::Column::Position),
                    Expr::col(source_faqs::Column::Id),
                ])
                .gt(Expr::tuple([Expr::val(position), Expr::val(after.id.as_str())])),
            );
        }
        let rows = select
            .order_by_asc(source_faqs::Column::Position)
            .order_by_asc(source_faqs::Column::Id)
            .limit(page.limit + 1)
            .all(&self.db)
            .await
            .map_err(ApiError::from)?;
        let (rows, more) = page.split(rows);
        let (faqs, next_cursor) = paging::render(
            &rows,
            more,
            |f| {
                let at = chrono::DateTime::from_timestamp_micros(f.position.into()).unwrap_or_default();
                (at, f.id.as_str())
            },
            faq_message,
        );
        Ok(Response::new(KbSourceFaqList {
            success: true,
            faqs,
            next_cursor,
        }))
    }
}
