//! The `Messages` gRPC service: the two send calls (202 with the message id), reading one message, and
//! correcting, removing and reacting to one (`edits`).

use std::sync::Arc;

use frontdesk_api::{
    v1::{
        CorrectMessageRequest, GetMessageRequest, MessageAccepted, MessageAnswer, ReactToMessageRequest,
        RemoveMessageRequest, SendMessageRequest, SendToContactRequest, messages_server::Messages,
    },
    wire,
};
use sea_orm::DatabaseConnection;
use tonic::{Request, Response, Status};

use super::{accept::Sender, edits::Edits, idempotency::Answered, outgoing::Outgoing};
use crate::{
    channels::live_feed::Feed,
    clock::Clock,
    conversations::{lookup, render},
    error::ApiError,
    platform_calls::account_of,
    store::entities::messages,
};

#[derive(Clone)]
pub struct MessagesService {
    db: DatabaseConnection,
    sender: Sender,
    edits: Edits,
}

impl MessagesService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, sender: Sender, feed: Feed) -> Self {
        Self {
            edits: Edits::new(db.clone(), clock, sender.clone(), feed),
            db,
            sender,
        }
    }
}

/// The `Idempotency-Key` header (REST) or metadata (gRPC).
fn header_key<T>(request: &Request<T>) -> Option<String> {
    request
        .metadata()
        .get(wire::IDEMPOTENCY_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The accepted message (REST answers it with 202: the methods' `success_status`).
fn accepted(answered: Answered) -> Response<MessageAccepted> {
    Response::new(MessageAccepted {
        success: true,
        message_id: answered.message_id,
        status: "queued".to_owned(),
        contact_id: answered.contact_id,
    })
}

/// The message as the API shows it.
fn answer(message: &messages::Model) -> Response<MessageAnswer> {
    Response::new(MessageAnswer {
        success: true,
        message: Some(render::message(message)),
    })
}

#[tonic::async_trait]
impl Messages for MessagesService {
    async fn send_message(&self, request: Request<SendMessageRequest>) -> Result<Response<MessageAccepted>, Status> {
        let account_id = account_of(&request)?;
        let key = header_key(&request);
        let outgoing = Outgoing::to_contact(request.into_inner(), key)?;
        Ok(accepted(
            self.sender.accept(&account_id, outgoing, messages::Author::Api).await?,
        ))
    }

    async fn send_to_contact(
        &self,
        request: Request<SendToContactRequest>,
    ) -> Result<Response<MessageAccepted>, Status> {
        let account_id = account_of(&request)?;
        let key = header_key(&request);
        let outgoing = Outgoing::to_anyone(request.into_inner(), key)?;
        Ok(accepted(
            self.sender.accept(&account_id, outgoing, messages::Author::Api).await?,
        ))
    }

    async fn get_message(&self, request: Request<GetMessageRequest>) -> Result<Response<MessageAnswer>, Status> {
        let account_id = account_of(&request)?;
        let message = lookup::message(&self.db, &account_id, &request.into_inner().message_id)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| ApiError::not_found("message"))?;
        Ok(answer(&message))
    }

    async fn correct_message(
        &self,
        request: Request<CorrectMessageRequest>,
    ) -> Result<Response<MessageAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(&self.edits.correct(&account_id, request.into_inner()).await?))
    }

    async fn remove_message(&self, request: Request<RemoveMessageRequest>) -> Result<Response<MessageAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(
            &self.edits.remove(&account_id, &request.get_ref().message_id).await?,
        ))
    }

    async fn react_to_message(
        &self,
        request: Request<ReactToMessageRequest>,
    ) -> Result<Response<MessageAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.get_ref();
        Ok(answer(&self.edits.react(&account_id, &r.message_id, &r.emoji).await?))
    }
}
