//! The `Conversations` gRPC service: the inbox list, one conversation with its latest messages, older
//! messages page by page, closing, read state, handoff and transcripts. Every lookup is scoped by the
//! caller's account: another account's conversation is as absent as a missing one.

use std::sync::Arc;

use frontdesk_api::{
    google::api::HttpBody,
    v1::{
        ConversationAnswer, ConversationList, ConversationRequest, ConversationThread, GetConversationRequest,
        HandOffRequest, ListConversationMessagesRequest, ListConversationsRequest, MessageList, TranscriptRequest,
        TypingRequest, conversations_server::Conversations,
    },
};
use sea_orm::DatabaseConnection;
use tonic::{Request, Response, Status};

use super::{
    history, list, lookup, render,
    state::{self, Change},
    transcript::{Format, Transcript},
};
use crate::{
    access::AccountId,
    channels::live_feed::Feed,
    clock::Clock,
    error::{ApiError, ApiResult},
    paging,
    platform_calls::account_of,
    store::entities::conversations,
    validate::Violations,
};

/// Messages that come with a conversation.
const THREAD_MESSAGES: u64 = 100;
/// Older messages per page: by default, and at most.
const DEFAULT_PAGE: i32 = 50;
const MAX_PAGE: i32 = 200;
const MAX_REASON_CHARS: usize = 500;
/// Messages read at a time while writing a transcript.
const TRANSCRIPT_BATCH: u64 = 500;
/// The largest transcript answered (well under the largest answer the core sends).
const MAX_TRANSCRIPT_BYTES: usize = 32 * 1024 * 1024;

#[derive(Clone)]
pub struct ConversationsService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    feed: Feed,
}

impl ConversationsService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, feed: Feed) -> Self {
        Self { db, clock, feed }
    }

    /// The account's conversation, or 404.
    async fn conversation(&self, account_id: &AccountId, conversation_id: &str) -> ApiResult<conversations::Model> {
        lookup::conversation(&self.db, account_id, conversation_id)
            .await?
            .ok_or_else(|| ApiError::not_found("conversation"))
    }

    /// Applies `change` to the account's conversation (nothing when it is in that state already).
    async fn change(
        &self,
        account_id: &AccountId,
        conversation_id: &str,
        change: Change,
    ) -> ApiResult<Response<ConversationAnswer>> {
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        let changed = state::apply(&txn, state::one_of(account_id, conversation_id), change, now).await?;
        txn.commit().await?;
        let conversation = match changed.into_iter().next() {
            Some(conversation) => conversation,
            None => self.conversation(account_id, conversation_id).await?,
        };
        Ok(Response::new(ConversationAnswer {
            success: true,
            conversation: Some(render::conversation(&conversation)),
        }))
    }

    /// `change` to the conversation `request` names.
    async fn change_asked(
        &self,
        request: Request<ConversationRequest>,
        change: Change,
    ) -> Result<Response<ConversationAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(self
            .change(&account_id, &request.get_ref().conversation_id, change)
            .await?)
    }

    /// The whole conversation as a document in `format`.
    async fn transcript(&self, account_id: &AccountId, conversation_id: &str, format: Format) -> ApiResult<HttpBody> {
        let conversation = self.conversation(account_id, conversation_id).await?;
        let mut transcript = Transcript::new(format, &conversation);
        let mut after = None;
        loop {
            let batch = history::after(&self.db, account_id, &conversation.id, after, TRANSCRIPT_BATCH).await?;
            for message in &batch {
                transcript.push(message);
            }
            if transcript.bytes() > MAX_TRANSCRIPT_BYTES {
                return Err(ApiError::failed_precondition(
                    "the transcript is larger than 32 MiB; read the conversation page by page from \
                     /v1/conversations/{conversation_id}/messages instead",
                ));
            }
            match batch.last() {
                Some(last) if batch.len() as u64 == TRANSCRIPT_BATCH => after = Some(last.seq),
                _ => return Ok(transcript.finish()),
            }
        }
    }
}

#[tonic::async_trait]
impl Conversations for ConversationsService {
    async fn set_typing(&self, request: Request<TypingRequest>) -> Result<Response<ConversationAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let conversation = self.conversation(&account_id, &r.conversation_id).await?;
        self.feed.typing(&conversation, r.on).await;
        Ok(Response::new(ConversationAnswer {
            success: true,
            conversation: Some(render::conversation(&conversation)),
        }))
    }

    async fn list_conversations(
        &self,
        request: Request<ListConversationsRequest>,
    ) -> Result<Response<ConversationList>, Status> {
        let account_id = account_of(&request)?;
        let (filters, page) = list::Filters::parse(request.get_ref())?;
        let (rows, more) = list::page(&self.db, &account_id, &filters, &page)
            .await
            .map_err(ApiError::from)?;
        let (conversations, next_cursor) = paging::render(
            &rows,
            more,
            |c| (c.last_message_at, c.id.as_str()),
            render::conversation,
        );
        Ok(Response::new(ConversationList {
            success: true,
            conversations,
            next_cursor,
        }))
    }

    async fn get_conversation(
        &self,
        request: Request<GetConversationRequest>,
    ) -> Result<Response<ConversationThread>, Status> {
        let account_id = account_of(&request)?;
        let conversation = self
            .conversation(&account_id, &request.get_ref().conversation_id)
            .await?;
        let (messages, _) = history::latest(&self.db, &account_id, &conversation.id, None, THREAD_MESSAGES)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(ConversationThread {
            success: true,
            conversation: Some(render::conversation(&conversation)),
            messages: messages.iter().map(render::message).collect(),
        }))
    }

    async fn list_conversation_messages(
        &self,
        request: Request<ListConversationMessagesRequest>,
    ) -> Result<Response<MessageList>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let limit = r.limit.unwrap_or(DEFAULT_PAGE);
        let mut v = Violations::new();
        v.check(
            (1..=MAX_PAGE).contains(&limit),
            "limit",
            format!("must be between 1 and {MAX_PAGE}"),
        );
        v.check(r.before.len() <= 64, "before", "is not a message id");
        v.finish()?;
        let conversation = self.conversation(&account_id, &r.conversation_id).await?;
        let before = if r.before.is_empty() {
            None
        } else {
            let message = lookup::message(&self.db, &account_id, &r.before)
                .await
                .map_err(ApiError::from)?
                .filter(|m| m.conversation_id == conversation.id)
                .ok_or_else(|| ApiError::field("before", "is not a message of this conversation"))?;
            Some(message.seq)
        };
        let limit = u64::try_from(limit).unwrap_or(1);
        let (messages, more) = history::latest(&self.db, &account_id, &conversation.id, before, limit)
            .await
            .map_err(ApiError::from)?;
        let next_cursor = messages.first().filter(|_| more).map(|oldest| oldest.id.to_string());
        Ok(Response::new(MessageList {
            success: true,
            messages: messages.iter().map(render::message).collect(),
            next_cursor,
        }))
    }

    async fn close_conversation(
        &self,
        request: Request<ConversationRequest>,
    ) -> Result<Response<ConversationAnswer>, Status> {
        self.change_asked(request, Change::close()).await
    }

    async fn mark_conversation_read(
        &self,
        request: Request<ConversationRequest>,
    ) -> Result<Response<ConversationAnswer>, Status> {
        self.change_asked(request, Change::read()).await
    }

    async fn mark_conversation_unread(
        &self,
        request: Request<ConversationRequest>,
    ) -> Result<Response<ConversationAnswer>, Status> {
        self.change_asked(request, Change::unread()).await
    }

    async fn hand_off_conversation(
        &self,
        request: Request<HandOffRequest>,
    ) -> Result<Response<ConversationAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.get_ref();
        let mut v = Violations::new();
        v.text("reason", &r.reason, false, MAX_REASON_CHARS);
        v.finish()?;
        let change = Change::hand_off(r.reason.trim());
        Ok(self.change(&account_id, &r.conversation_id, change).await?)
    }

    async fn resume_conversation(
        &self,
        request: Request<ConversationRequest>,
    ) -> Result<Response<ConversationAnswer>, Status> {
        self.change_asked(request, Change::resume()).await
    }

    async fn get_transcript(&self, request: Request<TranscriptRequest>) -> Result<Response<HttpBody>, Status> {
        let account_id = account_of(&request)?;
        let r = request.get_ref();
        let format =
            Format::parse(&r.format).ok_or_else(|| ApiError::field("format", "must be one of text, markdown, json"))?;
        Ok(Response::new(
            self.transcript(&account_id, &r.conversation_id, format).await?,
        ))
    }
}
