//! The deprecation of the campaign calls, in front of the guard so that every answer carries it, refusals
//! included: `Deprecation`, `Sunset` and `Link` headers always, and from the sunset instant on a 410 `gone`
//! that names the replacement call, whoever asks.

use std::sync::Arc;

use axum::{extract::Request, response::Response};
use chrono::{DateTime, Utc};
use http::{HeaderMap, HeaderValue};
use tonic::Code;

use crate::error::Reason;
use crate::{clock::Clock, error::ApiError};

/// gRPC path prefix of the campaign calls.
const PREFIX: &str = "/frontdesk.v1.Campaigns/";

/// Per method: the `Link` to the replacement, and the replacement named in the 410 message.
const REPLACEMENTS: &[(&str, &str, &str)] = &[
    (
        "ListCampaigns",
        "</v1/agents>; rel=\"successor-version\", </v1/broadcasts>; rel=\"successor-version\"",
        "GET /v1/campaigns: use GET /v1/agents and GET /v1/broadcasts",
    ),
    (
        "GetCampaign",
        "</v1/agents>; rel=\"successor-version\", </v1/broadcasts>; rel=\"successor-version\"",
        "GET /v1/campaigns/{campaignId}: use GET /v1/agents/{agentId} or GET /v1/broadcasts/{broadcastId}",
    ),
    (
        "CreateCampaign",
        "</v1/agents>; rel=\"successor-version\", </v1/entry-points/channel-defaults>; rel=\"successor-version\", \
         </v1/broadcasts>; rel=\"successor-version\"",
        "POST /v1/campaigns: use POST /v1/agents then PUT /v1/entry-points/channel-defaults (Incoming, Combined) \
         or POST /v1/broadcasts with the agent that answers replies (Outgoing)",
    ),
    (
        "UpdateCampaign",
        "</v1/agents>; rel=\"successor-version\", </v1/broadcasts>; rel=\"successor-version\"",
        "PUT /v1/campaigns/{campaignId}: use PUT /v1/agents/{agentId} for bot fields and \
         PATCH /v1/broadcasts/{broadcastId} for send fields",
    ),
];

pub struct Sunset {
    at: DateTime<Utc>,
    /// `at` as an HTTP date, the `Sunset` header's format.
    header: HeaderValue,
    clock: Arc<dyn Clock>,
}

impl Sunset {
    pub fn new(at: DateTime<Utc>, clock: Arc<dyn Clock>) -> Self {
        let text = at.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        Self {
            at,
            header: HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("")),
            clock,
        }
    }

    fn headers(&self, headers: &mut HeaderMap, link: &'static str) {
        headers.insert("deprecation", HeaderValue::from_static("true"));
        headers.insert("sunset", self.header.clone());
        headers.insert(http::header::LINK, HeaderValue::from_static(link));
    }
}

/// A step of the one middleware over the core's gRPC routes: `next` runs the rest of the call.
pub async fn sunset<Fut: Future<Output = Response>>(
    sunset: Arc<Sunset>,
    request: Request,
    next: impl FnOnce(Request) -> Fut,
) -> Response {
    let Some(method) = request.uri().path().strip_prefix(PREFIX) else {
        return next(request).await;
    };
    let (link, replacement) = REPLACEMENTS
        .iter()
        .find(|(name, _, _)| *name == method)
        .map_or((REPLACEMENTS[0].1, REPLACEMENTS[0].2), |(_, link, replacement)| {
            (*link, *replacement)
        });
    let mut response = if sunset.clock.now() >= sunset.at {
        let gone = ApiError::new(
            Code::Unimplemented,
            Reason::Gone,
            format!(
                "the campaign calls were retired on {}; {replacement}",
                sunset.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        );
        tonic::Status::from(gone).into_http::<axum::body::Body>()
    } else {
        next(request).await
    };
    sunset.headers(response.headers_mut(), link);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sunset_header_is_an_http_date() {
        let at = DateTime::parse_from_rfc3339("2026-12-31T23:59:59Z").unwrap().to_utc();
        let sunset = Sunset::new(at, Arc::new(crate::clock::SystemClock));
        assert_eq!(sunset.header, "Thu, 31 Dec 2026 23:59:59 GMT");
    }
}
