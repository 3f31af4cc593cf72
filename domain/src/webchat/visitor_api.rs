//! The visitor API's plain HTTP calls (docs/webchat.md), as the edge forwards them: the widget's look,
//! starting or resuming a session, sending a message, reading the thread, and CORS. Every answer to a page
//! from an origin the channel allows carries the grant; a page from any other origin is refused (403) before
//! anything changes, and its answer carries none.

use std::sync::Arc;

use frontdesk_api::raw::v1::{HttpRequest, HttpResponse};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::{Value, json};
use tonic::Code;

use super::{
    Refusal, WebChat, client, receipts,
    sessions::{self, NewVisitor, THREAD_LIMIT, Visitor},
};
use crate::channels::widget::{Here, Widget};
use crate::error::Reason;
use crate::{
    contacts::Email,
    conversations::render,
    error::{ApiError, ApiResult},
    forwarded_answers,
    store::entities::messages,
};

const MAX_NAME_CHARS: usize = 200;
const MAX_PAGE_URL_CHARS: usize = 2_048;
/// How long a browser may keep a preflight's grant.
const PREFLIGHT_MAX_AGE: &str = "600";

/// One visitor API call.
struct Call<'a> {
    chat: &'a WebChat,
    request: &'a HttpRequest,
    /// The `Origin` header; "" when the caller is no browser page.
    origin: String,
    /// The widget of the channel the call turned out to be about, once known: whose origins CORS grants.
    widget: Option<Arc<Widget>>,
}

type Answered = Result<(u16, Value), Refusal>;

pub async fn handle(chat: &WebChat, request: &HttpRequest, request_id: &str) -> HttpResponse {
    let mut call = Call {
        chat,
        request,
        origin: header(request, "origin").to_owned(),
        widget: None,
    };
    let route = request.path.trim_end_matches('/');
    let answered = match (request.method.as_str(), route) {
        ("OPTIONS", _) => return call.preflight().await,
        ("GET", "/webchat/v1/widget") => call.look().await,
        ("POST", "/webchat/v1/sessions") => call.start_or_resume().await,
        ("POST", "/webchat/v1/messages") => call.send().await,
        ("GET", "/webchat/v1/messages") => call.thread().await,
        (_, "/webchat/v1/widget" | "/webchat/v1/sessions" | "/webchat/v1/messages") => {
            let refused = forwarded_answers::error(
                405,
                Reason::MethodNotAllowed,
                "this route takes another method",
                request_id,
            );
            return call.grant(refused).await;
        }
        _ => Err(Refusal::Api(ApiError::not_found("web chat route"))),
    };
    let response = match answered {
        Ok((status, body)) => forwarded_answers::json(status, &body),
        Err(Refusal::Api(error)) => forwarded_answers::refusal(error, request_id),
        Err(Refusal::Limited(limited, what)) => forwarded_answers::with_header(
            forwarded_answers::refusal(limited.error(what), request_id),
            "retry-after",
            limited.retry_after.to_string(),
        ),
    };
    call.grant(response).await
}

impl Call<'_> {
    /// The grant for this answer: the origin, when the channel the call is about allows it. A call that
    /// failed before its channel was known (a bad token) is about the channel its `key` names.
    async fn grant(mut self, response: HttpResponse) -> HttpResponse {
        if self.origin.is_empty() {
            return response;
        }
        if self.widget.is_none() {
            self.widget = self.keyed_widget().await;
        }
        let response = forwarded_answers::with_header(response, "vary", "Origin");
        match &self.widget {
            Some(widget) if widget.origins.allow(&self.origin, &self.here()) => {
                let granted =
                    forwarded_answers::with_header(response, "access-control-allow-origin", self.origin.clone());
                // A page's script may read when to retry a refused call.
                forwarded_answers::with_header(granted, "access-control-expose-headers", "Retry-After")
            }
            _ => response,
        }
    }

    /// A preflight: granted when the channel named by `key` allows the origin.
    async fn preflight(self) -> HttpResponse {
        let allowed = match self.keyed_widget().await {
            Some(widget) => !self.origin.is_empty() && widget.origins.allow(&self.origin, &self.here()),
            None => false,
        };
        if !allowed {
            return forwarded_answers::error(
                403,
                Reason::OriginNotAllowed,
                "this page's origin may not use this web chat channel (or no channel was named by ?key=)",
                "",
            );
        }
        let mut response = forwarded_answers::empty(204);
        for (name, value) in [
            ("access-control-allow-origin", self.origin.as_str()),
            ("access-control-allow-methods", "GET, POST, OPTIONS"),
            ("access-control-allow-headers", "authorization, content-type"),
            ("access-control-max-age", PREFLIGHT_MAX_AGE),
            ("vary", "Origin"),
        ] {
            response = forwarded_answers::with_header(response, name, value);
        }
        response
    }

    /// This server, as this request reached it.
    fn here(&self) -> Here<'_> {
        self.chat.here(header(self.request, "host"))
    }

    /// The widget of the channel named by the `key` query parameter, if any.
    async fn keyed_widget(&self) -> Option<Arc<Widget>> {
        let key = query_value(self.request, "key")?;
        let channel = sessions::channel_by_key(&self.chat.db, &key).await.ok()?;
        self.chat.widget_of(&channel).ok()
    }

    /// Notes the channel's widget and refuses an origin it does not allow.
    fn admit(&mut self, widget: Arc<Widget>) -> ApiResult<()> {
        let allowed = widget.origins.allow(&self.origin, &self.here());
        self.widget = Some(widget);
        if allowed { Ok(()) } else { Err(origin_not_allowed()) }
    }

    /// `GET /webchat/v1/widget?key=`.
    async fn look(&mut self) -> Answered {
        let key = query_value(self.request, "key").unwrap_or_default();
        let channel = sessions::channel_by_key(&self.chat.db, &key).await?;
        let widget = self.chat.widget_of(&channel)?;
        self.admit(widget.clone())?;
        Ok((200, json!({"success": true, "widget": widget.look})))
    }

    /// `POST /webchat/v1/sessions`.
    async fn start_or_resume(&mut self) -> Answered {
        let body: StartSession = read_body(self.request)?;
        let page_url = checked_page_url(body.page_url)?;
        let channel = sessions::channel_by_key(&self.chat.db, &body.widget_key).await?;
        let widget = self.chat.widget_of(&channel)?;
        self.admit(widget.clone())?;
        let chat = self.chat;
        let now = chat.clock.now();
        let (visitor, token, status) = if body.token.is_empty() {
            let new = NewVisitor {
                page_url,
                ..checked_visitor(body.visitor.unwrap_or_default())?
            };
            let address = client::address_group(&self.request.peer);
            chat.limits.new_session(&address, &channel).await?;
            let (visitor, token) = sessions::start(&chat.db, &channel, new, chat.session_ttl, now).await?;
            (visitor, token, 201)
        } else {
            let known = sessions::authenticate(&chat.db, &body.token, now).await?;
            if known.channel.id != channel.id {
                return Err(sessions::unauthenticated().into());
            }
            chat.limits.read(&known.session.id).await?;
            let visitor = sessions::resume(&chat.db, known, page_url, chat.session_ttl, now).await?;
            (visitor, body.token, 200)
        };
        let conversation = sessions::current_conversation(&chat.db, &visitor.session).await?;
        let messages = sessions::latest(&chat.db, &visitor.session, THREAD_LIMIT).await?;
        receipts::reached(&chat.db, &messages, now).await?;
        let session = &visitor.session;
        Ok((
            status,
            json!({
                "success": true,
                "session_id": session.id,
                "token": token,
                "expires_at": session.expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                "contact_id": session.contact_id,
                "conversation_id": conversation.map(|c| String::from(c.id)).unwrap_or_default(),
                "widget": widget.look,
                "messages": rendered(&messages),
            }),
        ))
    }

    /// The visitor whose token the call carries (`Authorization: Bearer`), from an allowed origin.
    async fn visitor(&mut self) -> Result<Visitor, Refusal> {
        let token = header(self.request, "authorization")
            .strip_prefix("Bearer ")
            .map(str::trim)
            .unwrap_or_default();
        let visitor = sessions::authenticate(&self.chat.db, token, self.chat.clock.now()).await?;
        let widget = self.chat.widget_of(&visitor.channel)?;
        self.admit(widget)?;
        Ok(visitor)
    }

    /// `POST /webchat/v1/messages`.
    async fn send(&mut self) -> Answered {
        let visitor = self.visitor().await?;
        let body: PostMessage = read_body(self.request)?;
        let client_message_id = body.client_message_id.clone();
        let (message, new) = self
            .chat
            .visitor_message(&visitor, body.text, body.client_message_id)
            .await?;
        let status = if new { 201 } else { 200 };
        Ok((
            status,
            json!({"success": true, "message": render::message_data(&message), "client_message_id": client_message_id}),
        ))
    }

    /// `GET /webchat/v1/messages?after=&limit=`.
    async fn thread(&mut self) -> Answered {
        let visitor = self.visitor().await?;
        self.chat.limits.read(&visitor.session.id).await?;
        let limit = match query_value(self.request, "limit") {
            None => THREAD_LIMIT,
            Some(text) => text
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=THREAD_LIMIT).contains(n))
                .ok_or_else(|| ApiError::field("limit", format!("must be a number from 1 to {THREAD_LIMIT}")))?,
        };
        let db = &self.chat.db;
        let (messages, has_more) = match query_value(self.request, "after").filter(|a| !a.is_empty()) {
            None => (sessions::latest(db, &visitor.session, limit).await?, false),
            Some(after) => {
                let after = sessions::message_in_thread(db, &visitor.session, &after, "after").await?;
                let mut messages = sessions::after(db, &visitor.session, after.seq, limit + 1).await?;
                let more = messages.len() as u64 > limit;
                messages.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
                (messages, more)
            }
        };
        receipts::reached(db, &messages, self.chat.clock.now()).await?;
        Ok((
            200,
            json!({"success": true, "messages": rendered(&messages), "has_more": has_more}),
        ))
    }
}

pub fn origin_not_allowed() -> ApiError {
    ApiError::new(
        Code::PermissionDenied,
        Reason::OriginNotAllowed,
        "this page's origin may not use this web chat channel (its allowed_origins)",
    )
}

fn rendered(messages: &[messages::Model]) -> Vec<Value> {
    messages.iter().map(render::message_data).collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartSession {
    widget_key: String,
    #[serde(default)]
    token: String,
    #[serde(default)]
    visitor: Option<VisitorFields>,
    #[serde(default)]
    page_url: String,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct VisitorFields {
    #[serde(default)]
    name: String,
    #[serde(default)]
    email: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PostMessage {
    text: String,
    #[serde(default)]
    client_message_id: String,
}

/// The JSON body as `T`; a 400 naming the field that does not fit.
fn read_body<T: DeserializeOwned>(request: &HttpRequest) -> ApiResult<T> {
    let mut reader = serde_json::Deserializer::from_slice(&request.body);
    serde_path_to_error::deserialize(&mut reader).map_err(|err| {
        let path = err.path().to_string();
        let field = if path == "." { "body".to_owned() } else { path };
        ApiError::field(&field, err.inner().to_string())
    })
}

fn checked_visitor(fields: VisitorFields) -> ApiResult<NewVisitor> {
    let name = fields.name.trim().to_owned();
    if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(ApiError::field(
            "visitor.name",
            format!("must be at most {MAX_NAME_CHARS} characters, none of them control characters"),
        ));
    }
    let email = match fields.email.trim() {
        "" => None,
        text => Some(Email::parse(text).ok_or_else(|| ApiError::field("visitor.email", "is not an e-mail address"))?),
    };
    Ok(NewVisitor {
        name,
        email,
        page_url: String::new(),
    })
}

/// An http(s) URL of at most `MAX_PAGE_URL_CHARS`, or "".
fn checked_page_url(page_url: String) -> ApiResult<String> {
    if page_url.is_empty() {
        return Ok(page_url);
    }
    let web = url::Url::parse(&page_url).is_ok_and(|url| matches!(url.scheme(), "http" | "https"));
    if !web || page_url.chars().count() > MAX_PAGE_URL_CHARS {
        return Err(ApiError::field(
            "page_url",
            format!("must be an http(s) URL of at most {MAX_PAGE_URL_CHARS} characters"),
        ));
    }
    Ok(page_url)
}

fn header<'a>(request: &'a HttpRequest, name: &str) -> &'a str {
    request
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map_or("", |h| h.value.as_str())
}

fn query_value(request: &HttpRequest, name: &str) -> Option<String> {
    url::form_urlencoded::parse(request.query.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}
