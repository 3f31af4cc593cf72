//! Routes the edge does not read: provider callbacks (`/hooks/...`, Twilio, Meta) and the web chat visitor
//! API (`/webchat/v1/...`). Their credentials (a provider's signature over the raw request, a visitor's
//! session token) and payloads are the core's to check, so each request goes to the core as it arrived
//! (method, path, query, headers, body and the client's address) in one unary call, and the core's answer
//! (status, content type, headers, body) goes back as it is.

use std::time::Duration;

use axum::{
    extract::Request,
    response::{IntoResponse, Response},
};
use frontdesk_api::raw::v1::{Header, HttpRequest, HttpResponse};
use http::{HeaderName, HeaderValue, StatusCode, header, uri::PathAndQuery};
use prost::Message;

use crate::{
    HttpError, Transport,
    body::{Bodies, Hold},
    client_addr::ClientAddr,
    error::ErrorResponse,
    request_id_of,
};

/// The core's method that takes a raw request, e.g. `/frontdesk.hooks.v1.ChannelHooks/Receive`.
pub type RawMethod = &'static str;

/// One raw route: where its requests go, and how large and slow their bodies may be.
#[derive(Clone)]
pub struct Forward {
    pub transport: Transport,
    pub method: RawMethod,
    pub call_timeout: Duration,
    pub bodies: Bodies,
    pub max_body_bytes: usize,
}

impl Forward {
    pub async fn forward(self, request: Request) -> Response {
        let id = request_id_of(&request);
        let peer = request
            .extensions()
            .get::<ClientAddr>()
            .map(|addr| addr.0.to_string())
            .unwrap_or_default();
        let http_method = request.method().to_string();
        let path = request.uri().path().to_owned();
        let query = request.uri().query().unwrap_or_default().to_owned();
        let headers = request
            .headers()
            .iter()
            .filter_map(|(name, value)| {
                Some(Header {
                    name: name.as_str().to_owned(),
                    value: value.to_str().ok()?.to_owned(),
                })
            })
            .collect();
        // Counted in the edge's budget of body bytes until the core has answered.
        let hold = Hold::default();
        let body = match self.bodies.read(request.into_body(), self.max_body_bytes, &hold).await {
            Ok(body) => body,
            Err(error) => return error.http().into_response_with_id(&id),
        };
        let mut call = tonic::Request::new(HttpRequest {
            method: http_method,
            path,
            query,
            headers,
            body: body.to_vec(),
            peer,
        });
        drop(body);
        call.set_timeout(self.call_timeout);
        if let Ok(value) = id.parse() {
            call.metadata_mut().insert(frontdesk_api::wire::REQUEST_ID, value);
        }
        let answer = match self.transport.unary(PathAndQuery::from_static(self.method), call).await {
            Ok(answer) => answer.into_inner(),
            Err(status) => return HttpError::from_status(&status).into_response_with_id(&id),
        };
        drop(hold);
        let Ok(answer) = HttpResponse::decode(answer) else {
            return HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
                .into_response_with_id(&id);
        };
        response_of(answer)
    }
}

/// The HTTP answer the core described.
fn response_of(answer: HttpResponse) -> Response {
    let status = u16::try_from(answer.status)
        .ok()
        .and_then(|code| StatusCode::from_u16(code).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, answer.body).into_response();
    let headers = response.headers_mut();
    if let Ok(content_type) = HeaderValue::from_str(&answer.content_type) {
        headers.insert(header::CONTENT_TYPE, content_type);
    }
    for Header { name, value } in answer.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            headers.append(name, value);
        }
    }
    response
}
