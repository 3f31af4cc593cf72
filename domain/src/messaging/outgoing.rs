//! A send request parsed into what the engine acts on: who it goes to, what it says, and the checks that do
//! not depend on the channel (those that do come once the channel is chosen: `Outgoing::fits`).

use frontdesk_api::v1::{Attachment, SendMessageRequest, SendToContactRequest, Template as TemplateRequest};
use sha2::{Digest, Sha256};

use crate::{
    channels::Template,
    contacts::{E164Phone, Email},
    conversations::render::StoredAttachment,
    error::{ApiError, ApiResult},
    store::entities::channels::ChannelKind,
    validate::Violations,
};

/// Longest text on any channel, and on sms.
const MAX_TEXT_CHARS: usize = 4_096;
const MAX_SMS_CHARS: usize = 1_600;

/// The longest text one message of a channel of this type carries.
pub fn max_chars(channel_type: ChannelKind) -> usize {
    if channel_type == ChannelKind::Sms {
        MAX_SMS_CHARS
    } else {
        MAX_TEXT_CHARS
    }
}
const MAX_ATTACHMENTS: usize = 10;
const MAX_URL_CHARS: usize = 2_048;
const MAX_IDEMPOTENCY_KEY_CHARS: usize = 255;

/// Who a send goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recipient {
    Contact(String),
    Phone(E164Phone),
    Email(Email),
    /// A social-channel id on the channel named `channel`.
    Identity {
        channel: String,
        external_id: String,
    },
}

/// A checked send.
#[derive(Clone, Debug)]
pub struct Outgoing {
    pub recipient: Recipient,
    /// The name of a contact this send creates.
    pub name: String,
    pub text: String,
    /// A channel the caller named.
    pub channel: Option<String>,
    pub attachments: Vec<StoredAttachment>,
    pub template: Option<Template>,
    pub reply_to: String,
    pub idempotency_key: Option<String>,
    /// Hash of the request without its idempotency key: a repeat under the key must match it.
    pub fingerprint: String,
}

impl Outgoing {
    /// `POST /contacts/{contact_id}/send-message`; `header_key` is the `Idempotency-Key` header.
    pub fn to_contact(r: SendMessageRequest, header_key: Option<String>) -> ApiResult<Self> {
        let mut v = Violations::new();
        v.check(!r.contact_id.is_empty(), "contact_id", "is required");
        let key = idempotency_key(&mut v, &r.idempotency_key, header_key);
        let fingerprint = fingerprint(
            b"send-message",
            &SendMessageRequest {
                idempotency_key: String::new(),
                ..r.clone()
            },
        );
        let common = Common::check(&mut v, r.text, r.channel, &r.attachments, r.template, r.reply_to);
        v.finish()?;
        Ok(common.into_outgoing(Recipient::Contact(r.contact_id), String::new(), key, fingerprint))
    }

    /// `POST /contacts/send`: exactly one of `contact_id`, `phone`, `email`, or `channel` + `external_id`.
    pub fn to_anyone(r: SendToContactRequest, header_key: Option<String>) -> ApiResult<Self> {
        let mut v = Violations::new();
        let key = idempotency_key(&mut v, &r.idempotency_key, header_key);
        let fingerprint = fingerprint(
            b"send",
            &SendToContactRequest {
                idempotency_key: String::new(),
                ..r.clone()
            },
        );
        v.text("name", &r.name, false, 200);
        let named = [
            !r.contact_id.is_empty(),
            !r.phone.is_empty(),
            !r.email.is_empty(),
            !r.external_id.is_empty(),
        ];
        let recipient = match named {
            [true, false, false, false] => Some(Recipient::Contact(r.contact_id.clone())),
            [false, true, false, false] => {
                let phone = E164Phone::parse(&r.phone);
                v.check(phone.is_some(), "phone", "must be in E.164 format, e.g. +919812345678");
                phone.map(Recipient::Phone)
            }
            [false, false, true, false] => {
                let email = Email::parse(&r.email);
                v.check(email.is_some(), "email", "must be a valid e-mail address");
                email.map(Recipient::Email)
            }
            [false, false, false, true] => {
                v.check(!r.channel.is_empty(), "channel", "is required with external_id");
                v.text("external_id", &r.external_id, true, 256);
                Some(Recipient::Identity {
                    channel: r.channel.clone(),
                    external_id: r.external_id.clone(),
                })
            }
            _ => {
                v.check(
                    false,
                    "contact_id",
                    "give exactly one of contact_id, phone, email, or channel with external_id",
                );
                None
            }
        };
        let common = Common::check(&mut v, r.text, r.channel, &r.attachments, r.template, r.reply_to);
        v.finish()?;
        let recipient = recipient.ok_or_else(|| ApiError::field("contact_id", "no recipient"))?;
        Ok(common.into_outgoing(recipient, r.name, key, fingerprint))
    }

    /// The checks that depend on the channel the send goes out on.
    pub fn fits(&self, channel_type: ChannelKind) -> ApiResult<()> {
        let mut v = Violations::new();
        if channel_type == ChannelKind::Sms {
            v.text("text", &self.text, true, max_chars(channel_type));
        }
        v.check(
            self.template.is_none() || channel_type == ChannelKind::Whatsapp,
            "template",
            "templates are sent only on whatsapp channels",
        );
        v.finish()
    }
}

/// The fields both send calls share.
struct Common {
    text: String,
    channel: Option<String>,
    attachments: Vec<StoredAttachment>,
    template: Option<Template>,
    reply_to: String,
}

impl Common {
    fn check(
        v: &mut Violations,
        text: String,
        channel: String,
        attachments: &[Attachment],
        template: Option<TemplateRequest>,
        reply_to: String,
    ) -> Self {
        // A template says what it says: a text beside it is only the record's, and may be left out.
        v.text("text", &text, template.is_none(), MAX_TEXT_CHARS);
        v.check(
            attachments.len() <= MAX_ATTACHMENTS,
            "attachments",
            format!("must hold at most {MAX_ATTACHMENTS} entries"),
        );
        for (i, a) in attachments.iter().enumerate() {
            let field = format!("attachments[{i}].url");
            v.check(is_web_url(&a.url), &field, "must be an http(s) URL");
            v.text(&format!("attachments[{i}].content_type"), &a.content_type, false, 255);
            v.text(&format!("attachments[{i}].filename"), &a.filename, false, 255);
        }
        if let Some(t) = &template {
            v.text("template.name", &t.name, true, 512);
            v.text("template.language", &t.language, true, 16);
            v.list("template.parameters", &t.parameters, 20, 1_024);
        }
        v.check(reply_to.len() <= 64, "reply_to", "is not a message id");
        let template = template.map(|t| Template {
            name: t.name,
            language: t.language,
            parameters: t.parameters,
        });
        let text = match &template {
            Some(t) if text.is_empty() => t.describe(),
            _ => text,
        };
        Self {
            text,
            channel: Some(channel).filter(|c| !c.is_empty()),
            attachments: attachments
                .iter()
                .map(|a| StoredAttachment {
                    url: a.url.clone(),
                    content_type: a.content_type.clone(),
                    filename: a.filename.clone(),
                })
                .collect(),
            template,
            reply_to,
        }
    }

    fn into_outgoing(self, recipient: Recipient, name: String, key: Option<String>, fingerprint: String) -> Outgoing {
        Outgoing {
            recipient,
            name,
            text: self.text,
            channel: self.channel,
            attachments: self.attachments,
            template: self.template,
            reply_to: self.reply_to,
            idempotency_key: key,
            fingerprint,
        }
    }
}

/// The body's key, else the header's; a body key and a different header key are refused.
fn idempotency_key(v: &mut Violations, body: &str, header: Option<String>) -> Option<String> {
    let header = header.filter(|h| !h.is_empty());
    let key = match (body.is_empty(), header) {
        (true, header) => header,
        (false, Some(header)) if header != body => {
            v.check(false, "idempotency_key", "differs from the Idempotency-Key header");
            return None;
        }
        (false, _) => Some(body.to_owned()),
    };
    if let Some(k) = &key {
        v.text("idempotency_key", k, true, MAX_IDEMPOTENCY_KEY_CHARS);
    }
    key
}

fn fingerprint(call: &[u8], request: &impl prost::Message) -> String {
    let mut hash = Sha256::new();
    hash.update(call);
    hash.update(request.encode_to_vec());
    hex::encode(hash.finalize())
}

fn is_web_url(text: &str) -> bool {
    text.len() <= MAX_URL_CHARS
        && url::Url::parse(text).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(text: &str) -> SendMessageRequest {
        SendMessageRequest {
            contact_id: "ct_1".into(),
            text: text.into(),
            ..SendMessageRequest::default()
        }
    }

    fn fields(error: ApiError) -> Vec<String> {
        error.fields.into_iter().map(|f| f.field).collect()
    }

    #[test]
    fn text_and_attachments_are_checked() {
        assert_eq!(fields(Outgoing::to_contact(send(""), None).unwrap_err()), ["text"]);
        assert_eq!(
            fields(Outgoing::to_contact(send(&"x".repeat(4_097)), None).unwrap_err()),
            ["text"]
        );
        let mut r = send("hi");
        r.attachments = vec![Attachment {
            url: "ftp://example.com/a.png".into(),
            ..Attachment::default()
        }];
        assert_eq!(
            fields(Outgoing::to_contact(r, None).unwrap_err()),
            ["attachments[0].url"]
        );
        let long = Outgoing::to_contact(send(&"x".repeat(1_601)), None).unwrap();
        assert_eq!(fields(long.fits(ChannelKind::Sms).unwrap_err()), ["text"]);
        assert!(long.fits(ChannelKind::Webchat).is_ok());
    }

    #[test]
    fn exactly_one_recipient() {
        let both = SendToContactRequest {
            phone: "+15550001111".into(),
            email: "a@example.com".into(),
            text: "hi".into(),
            ..SendToContactRequest::default()
        };
        assert_eq!(fields(Outgoing::to_anyone(both, None).unwrap_err()), ["contact_id"]);
        let neither = SendToContactRequest {
            text: "hi".into(),
            ..SendToContactRequest::default()
        };
        assert_eq!(fields(Outgoing::to_anyone(neither, None).unwrap_err()), ["contact_id"]);
        let bad_phone = SendToContactRequest {
            phone: "5550001111".into(),
            text: "hi".into(),
            ..SendToContactRequest::default()
        };
        assert_eq!(fields(Outgoing::to_anyone(bad_phone, None).unwrap_err()), ["phone"]);
    }

    #[test]
    fn the_key_comes_from_the_body_or_the_header_and_is_not_fingerprinted() {
        let mut r = send("hi");
        r.idempotency_key = "k1".into();
        let a = Outgoing::to_contact(r.clone(), None).unwrap();
        let b = Outgoing::to_contact(send("hi"), Some("k1".into())).unwrap();
        assert_eq!(
            (a.idempotency_key.as_deref(), b.idempotency_key.as_deref()),
            (Some("k1"), Some("k1"))
        );
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_ne!(
            a.fingerprint,
            Outgoing::to_contact(send("other"), None).unwrap().fingerprint
        );
        assert_eq!(
            fields(Outgoing::to_contact(r, Some("k2".into())).unwrap_err()),
            ["idempotency_key"]
        );
    }
}
