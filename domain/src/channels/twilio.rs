//! Twilio Programmable Messaging (SMS and MMS) on Twilio's own wire protocol. Sending is
//! `POST {base}/2010-04-01/Accounts/{AccountSid}/Messages.json`, a form with HTTP Basic `AccountSid:AuthToken`,
//! answered with the Message resource (`sid`) or Twilio's error body (`{"code": 21211, "message": ...}`).
//! Twilio calls the channel's hook with a signed form for each inbound message, and its `status` sub-path with
//! each delivery change of a message we sent.

mod signature;

use std::{borrow::Cow, collections::BTreeMap, time::Duration};

use http::{StatusCode, header};
use ring::hmac;
use serde::Deserialize;
use url::form_urlencoded;

use super::{
    Attachment, Callbacks, ChannelAdapter, ConfigError, Inbound, InboundMessage, Outbound, ParseError, ProviderStatus,
    RawRequest, Reply, SendOutcome, Sender, SignatureError, StatusUpdate,
    provider_http::{refused, transport_failure},
};

/// Empty TwiML: the message is taken and Twilio should send no reply of its own.
const ACKNOWLEDGEMENT: &str = r#"<?xml version="1.0" encoding="UTF-8"?><Response/>"#;

pub struct TwilioAdapter {
    http: reqwest::Client,
    messages_url: String,
    account_sid: String,
    auth_token: String,
    signing_key: hmac::Key,
    /// The sending parameter and its value: `MessagingServiceSid` when the channel has one, else `From`.
    sender: (&'static str, String),
}

/// Shows where and as whom it sends, never the auth token.
impl std::fmt::Debug for TwilioAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwilioAdapter")
            .field("messages_url", &self.messages_url)
            .field("sender", &self.sender)
            .finish_non_exhaustive()
    }
}

impl TwilioAdapter {
    /// Builds the adapter from the channel's decrypted config: `account_sid`, `auth_token`, and
    /// `messaging_service_sid` or `from_number` (the service wins when both are set). `base_url` is Twilio's API
    /// root (`https://api.twilio.com`).
    pub fn new(config: &BTreeMap<String, String>, base_url: &str, http: reqwest::Client) -> Result<Self, ConfigError> {
        let setting = |key: &str| config.get(key).map(String::as_str).filter(|v| !v.is_empty());
        let account_sid = setting("account_sid").ok_or(ConfigError::Missing("account_sid"))?;
        if !account_sid.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(ConfigError::Invalid {
                key: "account_sid",
                reason: "not alphanumeric",
            });
        }
        let auth_token = setting("auth_token").ok_or(ConfigError::Missing("auth_token"))?;
        let sender = match (setting("messaging_service_sid"), setting("from_number")) {
            (Some(service), _) => ("MessagingServiceSid", service.to_owned()),
            (None, Some(number)) => ("From", number.to_owned()),
            (None, None) => return Err(ConfigError::Missing("from_number or messaging_service_sid")),
        };
        Ok(Self {
            http,
            messages_url: format!(
                "{}/2010-04-01/Accounts/{account_sid}/Messages.json",
                base_url.trim_end_matches('/')
            ),
            account_sid: account_sid.to_owned(),
            auth_token: auth_token.to_owned(),
            signing_key: hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, auth_token.as_bytes()),
            sender,
        })
    }

    /// The Messages API form for one message.
    fn message_form(&self, message: &Outbound<'_>) -> String {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("To", message.to);
        form.append_pair(self.sender.0, &self.sender.1);
        if !message.text.is_empty() {
            form.append_pair("Body", message.text);
        }
        for attachment in message.attachments {
            form.append_pair("MediaUrl", &attachment.url);
        }
        if !message.status_callback.is_empty() {
            form.append_pair("StatusCallback", message.status_callback);
        }
        form.finish()
    }
}

impl Callbacks for TwilioAdapter {
    fn verify(&self, request: &RawRequest) -> Result<(), SignatureError> {
        let header = request.header("x-twilio-signature").ok_or(SignatureError::Missing)?;
        let params = Form::read(&request.body);
        if signature::verify(&self.signing_key, &request.public_url, &params.0, header) {
            Ok(())
        } else {
            Err(SignatureError::Mismatch)
        }
    }

    fn parse(&self, request: &RawRequest) -> Result<Inbound, ParseError> {
        let form = Form::read(&request.body);
        match request.path_suffix.as_str() {
            "" => Ok(Inbound {
                messages: vec![inbound_message(&form)?],
                ..Inbound::default()
            }),
            "status" => Ok(Inbound {
                statuses: status_update(&form)?.into_iter().collect(),
                ..Inbound::default()
            }),
            other => Err(ParseError::UnknownPath(other.to_owned())),
        }
    }

    fn acknowledge(&self) -> Reply {
        Reply {
            status: 200,
            content_type: "text/xml",
            body: ACKNOWLEDGEMENT.to_owned(),
        }
    }
}

#[async_trait::async_trait]
impl ChannelAdapter for TwilioAdapter {
    fn callbacks(&self) -> Option<&dyn Callbacks> {
        Some(self)
    }

    async fn send(&self, message: &Outbound<'_>) -> SendOutcome {
        let sent = self
            .http
            .post(&self.messages_url)
            .basic_auth(&self.account_sid, Some(&self.auth_token))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .body(self.message_form(message))
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(error) => return transport_failure(error),
        };
        let status = response.status();
        let retry_after = crate::retry::retry_after(response.headers());
        match response.bytes().await {
            Ok(body) => classify(status, retry_after, &body),
            Err(error) => transport_failure(error),
        }
    }
}

/// A form body's parameters in arrival order, repeated names kept.
struct Form<'a>(Vec<(Cow<'a, str>, Cow<'a, str>)>);

impl<'a> Form<'a> {
    fn read(body: &'a [u8]) -> Self {
        Self(form_urlencoded::parse(body).collect())
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_ref())
    }

    fn require(&self, name: &str) -> Result<&str, ParseError> {
        self.get(name).ok_or_else(|| ParseError::MissingField(name.to_owned()))
    }

    /// Field `name`, or its older name (`SmsSid` for `MessageSid`) when only that is sent.
    fn require_either(&self, name: &str, older_name: &str) -> Result<&str, ParseError> {
        self.get(name)
            .or_else(|| self.get(older_name))
            .ok_or_else(|| ParseError::MissingField(name.to_owned()))
    }
}

/// An inbound SMS or MMS: `From`, `To`, `Body`, `MessageSid`, and `NumMedia` pairs of `MediaUrl{i}` and
/// `MediaContentType{i}`.
fn inbound_message(form: &Form<'_>) -> Result<InboundMessage, ParseError> {
    let media_count = match form.get("NumMedia") {
        None | Some("") => 0,
        Some(count) => count.parse::<usize>().map_err(|_| ParseError::InvalidField {
            field: "NumMedia".to_owned(),
            reason: "not a count",
        })?,
    };
    let attachments = (0..media_count)
        .map(|i| {
            Ok(Attachment {
                url: form.require(&format!("MediaUrl{i}"))?.to_owned(),
                content_type: form.get(&format!("MediaContentType{i}")).unwrap_or_default().to_owned(),
                filename: String::new(),
            })
        })
        .collect::<Result<_, ParseError>>()?;
    Ok(InboundMessage {
        provider_message_id: form.require_either("MessageSid", "SmsSid")?.to_owned(),
        sender: Sender::Phone(form.require("From")?.to_owned()),
        recipient: form.require("To")?.to_owned(),
        // A picture-only MMS may come without a body.
        text: form.get("Body").unwrap_or_default().to_owned(),
        attachments,
        sender_name: String::new(),
        referral: String::new(),
        page_url: String::new(),
        answerable: true,
    })
}

/// A status callback: `MessageSid`, `MessageStatus`, and `ErrorCode` (with `ErrorMessage` when Twilio has one).
fn status_update(form: &Form<'_>) -> Result<Option<StatusUpdate>, ParseError> {
    let provider_message_id = form.require_either("MessageSid", "SmsSid")?;
    let status = form.require_either("MessageStatus", "SmsStatus")?;
    Ok(
        provider_status(status, form.get("ErrorCode"), form.get("ErrorMessage")).map(|status| StatusUpdate {
            provider_message_id: provider_message_id.to_owned(),
            status,
        }),
    )
}

/// Twilio's message status as a delivery change; `None` for the states before sending (`queued`, `accepted`,
/// `sending`, `scheduled`), those of inbound messages (`receiving`, `received`), and any state added later.
fn provider_status(status: &str, error_code: Option<&str>, error_message: Option<&str>) -> Option<ProviderStatus> {
    match status {
        "sent" => Some(ProviderStatus::Sent),
        "delivered" => Some(ProviderStatus::Delivered),
        "read" => Some(ProviderStatus::Read),
        "undelivered" | "failed" => {
            let given = |value: Option<&str>| value.filter(|v| !v.is_empty()).unwrap_or(status).to_owned();
            Some(ProviderStatus::Failed {
                code: given(error_code),
                message: given(error_message),
            })
        }
        _ => None,
    }
}

/// The Message resource Twilio answers a create with; only its sid matters here.
#[derive(Deserialize)]
struct CreatedMessage {
    sid: String,
}

/// Twilio's error body: `{"code": 21211, "message": "...", "more_info": "...", "status": 400}`.
#[derive(Deserialize)]
struct ErrorAnswer {
    code: Option<serde_json::Value>,
    message: Option<String>,
}

impl ErrorAnswer {
    fn read(body: &[u8]) -> Option<Self> {
        serde_json::from_slice(body).ok()
    }

    fn code(&self) -> Option<String> {
        match self.code.as_ref()? {
            serde_json::Value::Number(number) => Some(number.to_string()),
            serde_json::Value::String(text) if !text.is_empty() => Some(text.clone()),
            _ => None,
        }
    }
}

/// Sorts Twilio's answer to a send: a 2xx with a sid is accepted; any other 4xx than 429 is the message's own
/// fault and final; everything else (429, 5xx, a 2xx without a readable sid) may pass on a retry.
fn classify(status: StatusCode, retry_after: Option<Duration>, body: &[u8]) -> SendOutcome {
    if status.is_success() {
        return match serde_json::from_slice::<CreatedMessage>(body) {
            Ok(created) if !created.sid.is_empty() => SendOutcome::Accepted {
                provider_message_id: created.sid,
            },
            _ => SendOutcome::Unavailable {
                reason: format!("{status} without a message sid"),
                retry_after: None,
            },
        };
    }
    let error = ErrorAnswer::read(body);
    let code = error.as_ref().and_then(ErrorAnswer::code);
    let message = error.and_then(|e| e.message).filter(|m| !m.is_empty());
    let final_ = status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS;
    refused(status, code, message, retry_after, final_)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::{Router, body::Bytes, extract::State, routing::post};
    use base64::{Engine, engine::general_purpose::STANDARD};
    use http::HeaderMap;

    use super::*;
    use crate::store::entities::messages;

    const SID: &str = "AC0123456789abcdef0123456789abcdef";
    const TOKEN: &str = "12345";

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn adapter_at(base_url: &str, timeout: Duration) -> TwilioAdapter {
        let settings = config(&[
            ("account_sid", SID),
            ("auth_token", TOKEN),
            ("from_number", "+15005550006"),
        ]);
        TwilioAdapter::new(&settings, base_url, crate::integrations::http::client(timeout).unwrap()).unwrap()
    }

    fn adapter() -> TwilioAdapter {
        adapter_at("http://127.0.0.1:9", Duration::from_secs(1))
    }

    fn form(pairs: &[(&str, &str)]) -> Bytes {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.extend_pairs(pairs);
        form.finish().into()
    }

    fn request(path_suffix: &str, signature: Option<&str>, pairs: &[(&str, &str)]) -> RawRequest {
        RawRequest {
            method: "POST".to_owned(),
            public_url: "https://mycompany.com/myapp.php?foo=1&bar=2".to_owned(),
            path_suffix: path_suffix.to_owned(),
            headers: signature
                .map(|s| ("x-twilio-signature".to_owned(), s.to_owned()))
                .into_iter()
                .collect(),
            body: form(pairs),
        }
    }

    #[test]
    fn config_needs_credentials_and_a_sender() {
        let client = || crate::integrations::http::client(Duration::from_secs(1)).unwrap();
        let build = |pairs: &[(&str, &str)]| TwilioAdapter::new(&config(pairs), "http://127.0.0.1:9/", client());
        assert_eq!(
            build(&[("auth_token", TOKEN), ("from_number", "+1")]).unwrap_err(),
            ConfigError::Missing("account_sid")
        );
        assert_eq!(
            build(&[("account_sid", SID), ("auth_token", ""), ("from_number", "+1")]).unwrap_err(),
            ConfigError::Missing("auth_token")
        );
        assert_eq!(
            build(&[("account_sid", SID), ("auth_token", TOKEN)]).unwrap_err(),
            ConfigError::Missing("from_number or messaging_service_sid")
        );
        assert!(matches!(
            build(&[("account_sid", "AC/../x"), ("auth_token", TOKEN), ("from_number", "+1")]),
            Err(ConfigError::Invalid { key: "account_sid", .. })
        ));
        let service = build(&[
            ("account_sid", SID),
            ("auth_token", "secret-token-value"),
            ("from_number", "+1"),
            ("messaging_service_sid", "MG1"),
        ])
        .unwrap();
        assert_eq!(service.sender, ("MessagingServiceSid", "MG1".to_owned()));
        assert_eq!(
            service.messages_url,
            format!("http://127.0.0.1:9/2010-04-01/Accounts/{SID}/Messages.json")
        );
        assert!(!format!("{service:?}").contains("secret-token-value"));
    }

    /// The documented vector (see `signature`), arriving as a form body.
    #[test]
    fn verifies_the_signed_form() {
        let params = [
            ("CallSid", "CA1234567890ABCDE"),
            ("Digits", "1234"),
            ("From", "+14158675309"),
            ("To", "+18005551212"),
            ("Caller", "+14158675309"),
        ];
        let signed = "RSOYDt4T1cUTdK1PDd93/VVr8B8=";
        assert_eq!(adapter().verify(&request("", Some(signed), &params)), Ok(()));

        let mut tampered = params;
        tampered[3].1 = "+18005551213";
        assert_eq!(
            adapter().verify(&request("", Some(signed), &tampered)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            adapter().verify(&request("", None, &params)),
            Err(SignatureError::Missing)
        );
        let other_token = TwilioAdapter::new(
            &config(&[("account_sid", SID), ("auth_token", "54321"), ("from_number", "+1")]),
            "http://127.0.0.1:9",
            crate::integrations::http::client(Duration::from_secs(1)).unwrap(),
        )
        .unwrap();
        assert_eq!(
            other_token.verify(&request("", Some(signed), &params)),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn parses_an_mms_with_media() {
        let inbound = adapter()
            .parse(&request(
                "",
                None,
                &[
                    ("ToCountry", "US"),
                    ("NumMedia", "2"),
                    ("MediaContentType0", "image/jpeg"),
                    (
                        "MediaUrl0",
                        "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME0",
                    ),
                    ("MediaContentType1", "application/pdf"),
                    (
                        "MediaUrl1",
                        "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1",
                    ),
                    ("SmsMessageSid", "MM1"),
                    ("Body", "Here you go & thanks"),
                    ("To", "+15005550006"),
                    ("MessageSid", "MM1"),
                    ("SmsSid", "MM1"),
                    ("From", "+14155550100"),
                    ("AccountSid", "AC1"),
                ],
            ))
            .unwrap();
        assert!(inbound.statuses.is_empty());
        assert_eq!(
            inbound.messages,
            vec![InboundMessage {
                provider_message_id: "MM1".to_owned(),
                sender: Sender::Phone("+14155550100".to_owned()),
                recipient: "+15005550006".to_owned(),
                text: "Here you go & thanks".to_owned(),
                attachments: vec![
                    Attachment {
                        url: "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME0".to_owned(),
                        content_type: "image/jpeg".to_owned(),
                        filename: String::new(),
                    },
                    Attachment {
                        url: "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1".to_owned(),
                        content_type: "application/pdf".to_owned(),
                        filename: String::new(),
                    },
                ],
                sender_name: String::new(),
                referral: String::new(),
                page_url: String::new(),
                answerable: true,
            }]
        );
    }

    #[test]
    fn inbound_without_required_fields_names_them() {
        let parse = |pairs: &[(&str, &str)]| adapter().parse(&request("", None, pairs));
        let missing = |field: &str| Err(ParseError::MissingField(field.to_owned()));
        assert_eq!(
            parse(&[("To", "+1"), ("MessageSid", "SM1"), ("Body", "hi")]),
            missing("From")
        );
        assert_eq!(parse(&[("From", "+2"), ("MessageSid", "SM1")]), missing("To"));
        assert_eq!(parse(&[("From", "+2"), ("To", "+1")]), missing("MessageSid"));
        assert_eq!(
            parse(&[
                ("From", "+2"),
                ("To", "+1"),
                ("SmsSid", "SM1"),
                ("NumMedia", "2"),
                ("MediaUrl0", "u")
            ]),
            missing("MediaUrl1")
        );
        assert!(matches!(
            parse(&[("From", "+2"), ("To", "+1"), ("SmsSid", "SM1"), ("NumMedia", "-1")]),
            Err(ParseError::InvalidField { field, .. }) if field == "NumMedia"
        ));
        let plain = parse(&[("From", "+2"), ("To", "+1"), ("SmsSid", "SM1"), ("Body", "hi")]).unwrap();
        assert_eq!(plain.messages[0].provider_message_id, "SM1");
        assert!(plain.messages[0].attachments.is_empty());
    }

    #[test]
    fn status_table() {
        let failed = |code: &str, message: &str| {
            Some(ProviderStatus::Failed {
                code: code.to_owned(),
                message: message.to_owned(),
            })
        };
        let cases = [
            ("sent", None, None, Some(ProviderStatus::Sent)),
            ("delivered", None, None, Some(ProviderStatus::Delivered)),
            ("read", None, None, Some(ProviderStatus::Read)),
            ("undelivered", Some("30003"), None, failed("30003", "undelivered")),
            (
                "failed",
                Some("30008"),
                Some("Unknown error"),
                failed("30008", "Unknown error"),
            ),
            ("failed", None, None, failed("failed", "failed")),
            ("queued", None, None, None),
            ("accepted", None, None, None),
            ("sending", None, None, None),
            ("scheduled", None, None, None),
            ("receiving", None, None, None),
            ("received", None, None, None),
            ("canceled", None, None, None),
        ];
        for (status, code, message, expected) in cases {
            assert_eq!(provider_status(status, code, message), expected, "{status}");
        }
    }

    #[test]
    fn parses_status_callbacks() {
        let parse = |pairs: &[(&str, &str)]| adapter().parse(&request("status", None, pairs));
        let undelivered = parse(&[
            ("MessageStatus", "undelivered"),
            ("ErrorCode", "30005"),
            ("MessageSid", "SM1"),
            ("SmsSid", "SM1"),
            ("SmsStatus", "undelivered"),
        ])
        .unwrap();
        assert!(undelivered.messages.is_empty());
        assert_eq!(
            undelivered.statuses,
            vec![StatusUpdate {
                provider_message_id: "SM1".to_owned(),
                status: ProviderStatus::Failed {
                    code: "30005".to_owned(),
                    message: "undelivered".to_owned(),
                },
            }]
        );
        assert_eq!(
            parse(&[("MessageSid", "SM1"), ("MessageStatus", "sending")]).unwrap(),
            Inbound::default()
        );
        assert_eq!(
            parse(&[("MessageSid", "SM1")]),
            Err(ParseError::MissingField("MessageStatus".to_owned()))
        );
        assert_eq!(
            adapter().parse(&request("other", None, &[])),
            Err(ParseError::UnknownPath("other".to_owned()))
        );
    }

    #[test]
    fn acknowledges_with_empty_twiml() {
        let reply = adapter().acknowledge();
        assert_eq!((reply.status, reply.content_type), (200, "text/xml"));
        assert_eq!(reply.body, r#"<?xml version="1.0" encoding="UTF-8"?><Response/>"#);
    }

    #[test]
    fn classifies_answers() {
        let unavailable = |reason: &str, retry_after: Option<Duration>| SendOutcome::Unavailable {
            reason: reason.to_owned(),
            retry_after,
        };
        let rejected = |code: &str, message: &str| SendOutcome::Rejected {
            code: code.to_owned(),
            message: message.to_owned(),
        };
        let cases: [(u16, Option<Duration>, &str, SendOutcome); 10] = [
            (
                201,
                None,
                r#"{"sid": "SM1", "status": "queued"}"#,
                SendOutcome::Accepted {
                    provider_message_id: "SM1".to_owned(),
                },
            ),
            (
                200,
                None,
                "<html>hi</html>",
                unavailable("200 OK without a message sid", None),
            ),
            (
                201,
                None,
                r#"{"sid": ""}"#,
                unavailable("201 Created without a message sid", None),
            ),
            (
                400,
                Some(Duration::from_secs(3)),
                r#"{"code": 21211, "message": "Invalid 'To' Phone Number", "more_info": "https://www.twilio.com/docs/errors/21211", "status": 400}"#,
                rejected("21211", "Invalid 'To' Phone Number"),
            ),
            (
                401,
                None,
                r#"{"code": 20003, "message": "Authenticate", "status": 401}"#,
                rejected("20003", "Authenticate"),
            ),
            (400, None, "", rejected("400", "Bad Request")),
            (404, None, r#"{"code": "20404"}"#, rejected("20404", "Not Found")),
            (
                429,
                Some(Duration::from_secs(7)),
                r#"{"code": 20429, "message": "Too Many Requests", "status": 429}"#,
                unavailable(
                    "429 Too Many Requests: 20429 Too Many Requests",
                    Some(Duration::from_secs(7)),
                ),
            ),
            (500, None, "oops", unavailable("500 Internal Server Error", None)),
            (
                503,
                Some(Duration::from_secs(1)),
                r#"{"message": "down"}"#,
                unavailable("503 Service Unavailable: down", Some(Duration::from_secs(1))),
            ),
        ];
        for (status, retry, body, expected) in cases {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(classify(status, retry, body.as_bytes()), expected, "{status} {body}");
        }
    }

    /// What the test server saw of one request.
    #[derive(Clone, Debug, Default)]
    struct Seen {
        path: String,
        authorization: String,
        content_type: String,
        form: Vec<(String, String)>,
    }

    async fn serve(app: Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        base_url
    }

    #[tokio::test]
    async fn sends_the_messages_api_form() {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let app = Router::new()
            .route(
                "/2010-04-01/Accounts/{sid}/Messages.json",
                post(
                    |State(seen): State<Arc<Mutex<Seen>>>, uri: http::Uri, headers: HeaderMap, body: Bytes| async move {
                        let header = |name| {
                            headers
                                .get(name)
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or_default()
                                .to_owned()
                        };
                        *seen.lock().unwrap() = Seen {
                            path: uri.path().to_owned(),
                            authorization: header(header::AUTHORIZATION),
                            content_type: header(header::CONTENT_TYPE),
                            form: form_urlencoded::parse(&body).into_owned().collect(),
                        };
                        (
                            StatusCode::CREATED,
                            r#"{"sid": "SM0123456789abcdef0123456789abcdef", "status": "queued"}"#,
                        )
                    },
                ),
            )
            .with_state(seen.clone());
        let base_url = serve(app).await;
        let attachments = [
            Attachment {
                url: "https://cdn.example/a.jpg".to_owned(),
                content_type: "image/jpeg".to_owned(),
                filename: "a.jpg".to_owned(),
            },
            Attachment {
                url: "https://cdn.example/b.png?x=1&y=2".to_owned(),
                content_type: "image/png".to_owned(),
                filename: String::new(),
            },
        ];
        let outcome = adapter_at(&base_url, Duration::from_secs(5))
            .send(&Outbound {
                message: &messages::sample(messages::Author::Api, "Your table is ready & waiting"),
                to: "+14155550100",
                text: "Your table is ready & waiting",
                attachments: &attachments,
                status_callback: "https://frontdesk.example/hooks/twilio/ch_1/status",
                template: None,
            })
            .await;
        assert_eq!(
            outcome,
            SendOutcome::Accepted {
                provider_message_id: "SM0123456789abcdef0123456789abcdef".to_owned()
            }
        );
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.path, format!("/2010-04-01/Accounts/{SID}/Messages.json"));
        assert_eq!(
            seen.authorization,
            format!("Basic {}", STANDARD.encode(format!("{SID}:{TOKEN}")))
        );
        assert_eq!(seen.content_type, "application/x-www-form-urlencoded");
        let pairs: Vec<(&str, &str)> = seen.form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            pairs,
            [
                ("To", "+14155550100"),
                ("From", "+15005550006"),
                ("Body", "Your table is ready & waiting"),
                ("MediaUrl", "https://cdn.example/a.jpg"),
                ("MediaUrl", "https://cdn.example/b.png?x=1&y=2"),
                ("StatusCallback", "https://frontdesk.example/hooks/twilio/ch_1/status"),
            ]
        );
    }

    #[tokio::test]
    async fn a_hang_or_a_refusal_is_unavailable() {
        let app = Router::new().route(
            "/2010-04-01/Accounts/{sid}/Messages.json",
            post(std::future::pending::<StatusCode>),
        );
        let stored = messages::sample(messages::Author::Api, "hi");
        let message = Outbound {
            message: &stored,
            to: "+14155550100",
            text: "hi",
            attachments: &[],
            status_callback: "",
            template: None,
        };
        let hanging = adapter_at(&serve(app).await, Duration::from_millis(300));
        assert_eq!(
            hanging.send(&message).await,
            SendOutcome::Unavailable {
                reason: "timed out".to_owned(),
                retry_after: None
            }
        );

        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closed_url = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let refused = adapter_at(&closed_url, Duration::from_secs(2)).send(&message).await;
        assert!(
            matches!(&refused, SendOutcome::Unavailable { retry_after: None, .. }),
            "{refused:?}"
        );
    }
}
