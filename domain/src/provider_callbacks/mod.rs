//! Provider callbacks (`/hooks/{provider}/{channelId}[/status]`), forwarded by the edge as they arrived. The
//! provider's signature is the only credential: a missing or wrong one is 401 and nothing is stored or logged
//! of the body (Meta's `GET` check of the URL is answered first, by its verify token). A verified callback is
//! read whole before anything is stored (a malformed one is 400 and stores nothing); its messages are then
//! stored together in one transaction, and its status reports and reactions after them, before the answer:
//! a failure answers 5xx, the provider retries, and what was stored the first time is not stored again.
//! Everything after the commit (sends, AI replies, webhooks) runs from jobs and the outbox.

use std::sync::Arc;

use frontdesk_api::{
    hooks::v1::channel_hooks_server::ChannelHooks,
    raw::v1::{HttpRequest, HttpResponse},
    wire,
};
use sea_orm::{DatabaseConnection, EntityTrait};
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::error::Reason;
use crate::{
    channels::{ParseError, RawRequest, Reply, registry::Adapters},
    clock::Clock,
    conversations::{
        inbound::{Arrival, Arrivals},
        receipts::{self, Reports},
    },
    forwarded_answers,
    jobs::Wake,
    routing::channels::callback_route,
    store::entities::channels,
};

#[derive(Clone)]
pub struct ChannelHooksService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    adapters: Arc<Adapters>,
    /// `FRONTDESK_PUBLIC_URL` without a trailing `/`: what providers call, so what they sign.
    public_url: Arc<str>,
    wake: Wake,
    arrivals: Arrivals,
}

impl ChannelHooksService {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        adapters: Arc<Adapters>,
        public_url: &str,
        wake: Wake,
        arrivals: Arrivals,
    ) -> Self {
        Self {
            db,
            clock,
            adapters,
            public_url: public_url.trim_end_matches('/').into(),
            wake,
            arrivals,
        }
    }
}

/// `/hooks/{route}/{channel_id}[/{suffix}]`.
struct HookPath<'a> {
    route: &'a str,
    channel_id: &'a str,
    suffix: &'a str,
}

fn hook_path(path: &str) -> Option<HookPath<'_>> {
    let rest = path.strip_prefix("/hooks/")?;
    let (route, rest) = rest.split_once('/')?;
    let (channel_id, suffix) = rest.split_once('/').unwrap_or((rest, ""));
    (!channel_id.is_empty()).then_some(HookPath {
        route,
        channel_id,
        suffix,
    })
}

/// The hook route of a provider.
impl ChannelHooksService {
    async fn handle(&self, r: HttpRequest, request_id: &str) -> Result<HttpResponse, Status> {
        let not_found = || forwarded_answers::error(404, Reason::NotFound, "no such channel callback", request_id);
        let Some(path) = hook_path(&r.path) else {
            return Ok(not_found());
        };
        let channel = channels::Entity::find_by_id(path.channel_id)
            .one(&self.db)
            .await
            .map_err(crate::error::ApiError::from)?;
        let Some(channel) = channel.filter(|c| callback_route(c.provider) == Some(path.route)) else {
            return Ok(not_found());
        };
        let ready = match self.adapters.for_channel(&channel) {
            Ok(ready) => ready,
            Err(err) => {
                tracing::error!(channel = %channel.id, error = %err, "a channel callback arrived for a channel without an adapter");
                return Ok(forwarded_answers::error(
                    503,
                    Reason::Unavailable,
                    "the channel cannot take callbacks",
                    request_id,
                ));
            }
        };
        let Some(callbacks) = ready.adapter.callbacks() else {
            return Ok(not_found());
        };
        let query = if r.query.is_empty() {
            String::new()
        } else {
            format!("?{}", r.query)
        };
        let raw = RawRequest {
            method: r.method,
            public_url: format!("{}{}{query}", self.public_url, r.path),
            path_suffix: path.suffix.to_owned(),
            headers: r
                .headers
                .into_iter()
                .map(|h| (h.name.to_ascii_lowercase(), h.value))
                .collect(),
            body: r.body.into(),
        };
        if let Some(reply) = callbacks.handshake(&raw) {
            return Ok(answer(reply));
        }
        if let Err(err) = callbacks.verify(&raw) {
            metrics::counter!("frontdesk_channel_callbacks_total", "outcome" => "bad_signature").increment(1);
            tracing::info!(channel = %channel.id, reason = %err, "channel callback refused: bad signature");
            return Ok(forwarded_answers::error(
                401,
                Reason::InvalidSignature,
                "the provider signature is missing or wrong",
                request_id,
            ));
        }
        let parsed = match callbacks.parse(&raw) {
            Ok(parsed) => parsed,
            Err(err @ ParseError::OtherChannel(_)) => {
                tracing::info!(channel = %channel.id, reason = %err, "channel callback for another page or number");
                return Ok(not_found());
            }
            Err(err) => {
                return Ok(forwarded_answers::error(
                    400,
                    Reason::InvalidArgument,
                    &err.to_string(),
                    request_id,
                ));
            }
        };
        let arrivals = parsed
            .messages
            .into_iter()
            .map(|message| Arrival {
                channel: channel.clone(),
                message,
                trace_parent: crate::telemetry::traceparent(),
            })
            .collect();
        self.arrivals.receive_all(arrivals).await?;
        let now = self.clock.now();
        let reports = Reports {
            statuses: &parsed.statuses,
            watermarks: &parsed.watermarks,
            reactions: &parsed.reactions,
        };
        let late = receipts::apply_reports(&self.db, &channel, &reports, now)
            .await
            .map_err(crate::error::ApiError::from)?;
        if late {
            self.wake.notify();
        }
        metrics::counter!("frontdesk_channel_callbacks_total", "outcome" => "accepted").increment(1);
        Ok(answer(callbacks.acknowledge()))
    }
}

fn answer(reply: Reply) -> HttpResponse {
    HttpResponse {
        status: u32::from(reply.status),
        content_type: reply.content_type.to_owned(),
        body: reply.body.into_bytes(),
        headers: Vec::new(),
    }
}

#[tonic::async_trait]
impl ChannelHooks for ChannelHooksService {
    async fn receive(&self, request: Request<HttpRequest>) -> Result<Response<HttpResponse>, Status> {
        let request_id = request
            .metadata()
            .get(wire::REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let request = request.into_inner();
        // When traces are exported, the callback is their first step: the reply and its delivery follow.
        let span = frontdesk_kernel::trace_span!("hooks.inbound", path = %request.path);
        let handled = self.handle(request, &request_id).instrument(span).await?;
        Ok(Response::new(handled))
    }
}
