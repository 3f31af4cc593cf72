//! The gRPC faces of web chat: `WebChat` (internal, for the edge: the visitor API, sockets and their frames)
//! and the platform's `ChatSessions` (the business's view of a session).

use std::sync::Arc;

use frontdesk_api::{
    raw::v1::{HttpRequest, HttpResponse},
    v1::{ChatSession, ChatSessionThread, GetChatSessionRequest, Visitor, chat_sessions_server::ChatSessions},
    webchat::v1::{ClientFrame, OpenRequest, PostAnswer, web_chat_server},
    wire,
};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use tonic::{Request, Response, Status};

use super::{
    Refusal, WebChat,
    sessions::{self, THREAD_LIMIT},
    socket::Feed,
    visitor_api,
};
use crate::{
    access::AccountId,
    conversations::render,
    error::{ApiError, ApiResult},
    platform_calls::account_of,
    store::entities::{channels, chat_sessions},
    timestamps,
};

#[derive(Clone)]
pub struct WebChatService {
    chat: Arc<WebChat>,
}

impl WebChatService {
    pub fn new(chat: Arc<WebChat>) -> Self {
        Self { chat }
    }
}

#[tonic::async_trait]
impl web_chat_server::WebChat for WebChatService {
    async fn handle(&self, request: Request<HttpRequest>) -> Result<Response<HttpResponse>, Status> {
        let request_id = request
            .metadata()
            .get(wire::REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let answer = visitor_api::handle(&self.chat, request.get_ref(), &request_id).await;
        Ok(Response::new(answer))
    }

    type OpenStream = Feed;

    async fn open(&self, request: Request<OpenRequest>) -> Result<Response<Feed>, Status> {
        let feed = self
            .chat
            .open(request.into_inner())
            .await
            .map_err(Refusal::into_api_error)?;
        Ok(Response::new(feed))
    }

    async fn post(&self, request: Request<ClientFrame>) -> Result<Response<PostAnswer>, Status> {
        Ok(Response::new(self.chat.post(request.into_inner()).await?))
    }
}

#[derive(Clone)]
pub struct ChatSessionsService {
    chat: Arc<WebChat>,
}

impl ChatSessionsService {
    pub fn new(chat: Arc<WebChat>) -> Self {
        Self { chat }
    }

    async fn thread(&self, account_id: &AccountId, session_id: &str) -> ApiResult<ChatSessionThread> {
        let db = &self.chat.db;
        let (session, channel) = chat_sessions::Entity::find()
            .filter(chat_sessions::Column::AccountId.eq(account_id))
            .filter(chat_sessions::Column::Id.eq(session_id))
            .find_also_related(channels::Entity)
            .one(db)
            .await?
            .ok_or_else(|| ApiError::not_found("chat session"))?;
        let conversation = sessions::current_conversation(db, &session).await?;
        let messages = sessions::latest(db, &session, THREAD_LIMIT).await?;
        let now = self.chat.clock.now();
        Ok(ChatSessionThread {
            success: true,
            chat_session: Some(ChatSession {
                id: session.id.clone(),
                channel: channel.map(|c| c.name).unwrap_or_default(),
                contact_id: session.contact_id.to_string(),
                conversation_id: conversation.map(|c| c.id.into()).unwrap_or_default(),
                visitor: Some(Visitor {
                    name: session.visitor_name.clone(),
                    email: session.visitor_email.clone(),
                }),
                page_url: session.page_url.clone(),
                online: session.present_until > now,
                started_at: Some(timestamps::to_proto(session.started_at)),
                last_seen_at: Some(timestamps::to_proto(session.last_seen_at)),
            }),
            messages: messages.iter().map(render::message).collect(),
        })
    }
}

#[tonic::async_trait]
impl ChatSessions for ChatSessionsService {
    async fn get_chat_session(
        &self,
        request: Request<GetChatSessionRequest>,
    ) -> Result<Response<ChatSessionThread>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(
            self.thread(&account_id, &request.get_ref().session_id).await?,
        ))
    }
}
