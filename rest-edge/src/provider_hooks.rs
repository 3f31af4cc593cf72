//! `/hooks/...`: provider callbacks (Twilio, Meta). The edge does not read them: each request goes to the
//! core as it arrived (method, path, query, headers, body) in one `ChannelHooks.Receive` call, since the
//! provider's signature covers the raw request and only the core holds the channel's secret; the core's
//! answer (status, content type, body) goes back as it is.

use axum::{
    extract::Request,
    response::{IntoResponse, Response},
};
use frontdesk_api::hooks::v1::{Header, ProviderRequest, ProviderResponse};
use http::{HeaderValue, StatusCode, header, uri::PathAndQuery};
use prost::Message;

use crate::{HttpError, Transport, read_body, request_id_of};

const RECEIVE: &str = "/frontdesk.hooks.v1.ChannelHooks/Receive";

pub async fn forward(transport: Transport, call_timeout: std::time::Duration, request: Request) -> Response {
    let id = request_id_of(&request);
    let method = request.method().to_string();
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
    let body = match read_body(request).await {
        Ok(body) => body,
        Err(error) => return error.into_response_with_id(&id),
    };
    let mut call = tonic::Request::new(ProviderRequest {
        method,
        path,
        query,
        headers,
        body: body.to_vec(),
    });
    call.set_timeout(call_timeout);
    if let Ok(value) = id.parse() {
        call.metadata_mut().insert(frontdesk_api::wire::REQUEST_ID, value);
    }
    let answer = match transport.unary(PathAndQuery::from_static(RECEIVE), call).await {
        Ok(answer) => answer.into_inner(),
        Err(status) => return HttpError::from_status(&status).into_response_with_id(&id),
    };
    let Ok(answer) = ProviderResponse::decode(answer) else {
        return HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
            .into_response_with_id(&id);
    };
    let status = u16::try_from(answer.status)
        .ok()
        .and_then(|code| StatusCode::from_u16(code).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, answer.body).into_response();
    if let Ok(content_type) = HeaderValue::from_str(&answer.content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, content_type);
    }
    response
}
