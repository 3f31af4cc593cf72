//! A conversation as a document (`GET /v1/conversations/{id}/transcript`): one line per message with its
//! time (RFC 3339), author and text, marked `(edited)` or `(message removed)`, as plain text or Markdown; or
//! JSON: the conversation and its messages exactly as the API shows them. Written message by message, so
//! a long conversation is read in batches.

use std::fmt::Write;

use sea_orm::ActiveEnum;

use chrono::SecondsFormat;
use frontdesk_api::google::api::HttpBody;

use super::render::{self, StoredAttachment};
use crate::store::{
    entities::{conversations, messages},
    from_json_text,
};

const EDITED: &str = "(edited)";
const REMOVED: &str = "(message removed)";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Json,
}

impl Format {
    /// The format `format` names; `""` is text.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "" | "text" => Some(Self::Text),
            "markdown" => Some(Self::Markdown),
            "json" => Some(Self::Json),
            _ => None,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Self::Text => "text/plain; charset=utf-8",
            Self::Markdown => "text/markdown; charset=utf-8",
            Self::Json => "application/json",
        }
    }
}

/// A transcript being written.
pub struct Transcript {
    format: Format,
    body: String,
    messages: usize,
}

impl Transcript {
    pub fn new(format: Format, conversation: &conversations::Model) -> Self {
        let body = match format {
            Format::Text => String::new(),
            Format::Markdown => format!(
                "# Conversation {}\n\nContact {} on `{}` ({}), started {}.\n\n",
                conversation.id,
                conversation.contact_id,
                conversation.channel,
                conversation.channel_type,
                conversation.created_at.to_rfc3339_opts(SecondsFormat::Secs, true)
            ),
            Format::Json => format!(
                "{{\"conversation\":{},\"messages\":[",
                render::conversation_data(conversation)
            ),
        };
        Self {
            format,
            body,
            messages: 0,
        }
    }

    /// Adds the next message.
    pub fn push(&mut self, message: &messages::Model) {
        match self.format {
            Format::Text => text_line(&mut self.body, message),
            Format::Markdown => markdown_line(&mut self.body, message),
            Format::Json => {
                if self.messages > 0 {
                    self.body.push(',');
                }
                self.body.push_str(&render::message_data(message).to_string());
            }
        }
        self.messages += 1;
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> usize {
        self.body.len()
    }

    pub fn finish(mut self) -> HttpBody {
        if self.format == Format::Json {
            self.body.push_str("]}");
        }
        HttpBody {
            content_type: self.format.content_type().to_owned(),
            data: self.body.into_bytes(),
            extensions: Vec::new(),
        }
    }
}

fn time(message: &messages::Model) -> String {
    message.created_at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The text on one line: line breaks become spaces.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `2026-11-22T10:15:00Z contact: text [photo.jpg: https://...] (edited)`
fn text_line(out: &mut String, message: &messages::Model) {
    let _ = write!(out, "{} {}: ", time(message), message.author.to_value()); // writing to a String cannot fail
    if message.removed {
        out.push_str(REMOVED);
    } else {
        out.push_str(&one_line(&message.text));
        for attachment in from_json_text::<Vec<StoredAttachment>>(&message.attachments) {
            let _ = match attachment.filename.as_str() {
                "" => write!(out, " [{}]", attachment.url),
                name => write!(out, " [{}: {}]", one_line(name), attachment.url),
            };
        }
        if message.edited {
            let _ = write!(out, " {EDITED}");
        }
    }
    out.push('\n');
}

/// `- **2026-11-22T10:15:00Z** contact: text [photo.jpg](<https://...>) _(edited)_`
fn markdown_line(out: &mut String, message: &messages::Model) {
    let _ = write!(out, "- **{}** {}: ", time(message), message.author.to_value());
    if message.removed {
        let _ = write!(out, "_{REMOVED}_");
    } else {
        out.push_str(&escape(&one_line(&message.text)));
        for attachment in from_json_text::<Vec<StoredAttachment>>(&message.attachments) {
            let label = match attachment.filename.as_str() {
                "" => "attachment".to_owned(),
                name => escape(&one_line(name)),
            };
            let url = attachment.url.replace('<', "%3C").replace('>', "%3E");
            let _ = write!(out, " [{label}](<{url}>)");
        }
        if message.edited {
            let _ = write!(out, " _{EDITED}_");
        }
    }
    out.push('\n');
}

/// What a contact wrote, shown as written: Markdown's inline syntax escaped.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '~' | '|') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation() -> conversations::Model {
        conversations::sample()
    }

    fn message(author: messages::Author, text: &str) -> messages::Model {
        messages::sample(author, text)
    }

    fn written(format: Format, messages: &[messages::Model]) -> (String, String) {
        let mut transcript = Transcript::new(format, &conversation());
        for m in messages {
            transcript.push(m);
        }
        let body = transcript.finish();
        (body.content_type, String::from_utf8(body.data).unwrap())
    }

    fn sample() -> Vec<messages::Model> {
        let asked = message(messages::Author::Contact, "Open *today*?\nAt 6?");
        let mut answered = message(messages::Author::Api, "Yes, until 7");
        answered.edited = true;
        let mut removed = message(messages::Author::Contact, "");
        removed.removed = true;
        let mut photo = message(messages::Author::Contact, "see");
        photo.attachments = r#"[{"url":"https://x.test/a.jpg","content_type":"image/jpeg","filename":"a.jpg"}]"#.into();
        vec![asked, answered, removed, photo]
    }

    #[test]
    fn text_is_one_line_per_message_with_marks() {
        let (content_type, text) = written(Format::Text, &sample());
        assert_eq!(content_type, "text/plain; charset=utf-8");
        assert_eq!(
            text,
            "2027-01-15T08:01:00Z contact: Open *today*? At 6?\n\
             2027-01-15T08:01:00Z api: Yes, until 7 (edited)\n\
             2027-01-15T08:01:00Z contact: (message removed)\n\
             2027-01-15T08:01:00Z contact: see [a.jpg: https://x.test/a.jpg]\n"
        );
    }

    #[test]
    fn markdown_escapes_what_people_wrote() {
        let (content_type, text) = written(Format::Markdown, &sample());
        assert_eq!(content_type, "text/markdown; charset=utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "# Conversation cv_1");
        assert_eq!(lines[4], r"- **2027-01-15T08:01:00Z** contact: Open \*today\*? At 6?");
        assert_eq!(lines[5], "- **2027-01-15T08:01:00Z** api: Yes, until 7 _(edited)_");
        assert_eq!(lines[6], "- **2027-01-15T08:01:00Z** contact: _(message removed)_");
        assert_eq!(
            lines[7],
            "- **2027-01-15T08:01:00Z** contact: see [a.jpg](<https://x.test/a.jpg>)"
        );
    }

    #[test]
    fn json_is_the_conversation_and_its_messages_as_the_api_shows_them() {
        let (content_type, text) = written(Format::Json, &sample());
        assert_eq!(content_type, "application/json");
        let document: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(document["conversation"]["id"], "cv_1");
        assert_eq!(document["messages"].as_array().unwrap().len(), 4);
        assert_eq!(document["messages"][1]["edited"], true);
        assert_eq!(document["messages"][2]["removed"], true);
        let (_, empty) = written(Format::Json, &[]);
        let empty: serde_json::Value = serde_json::from_str(&empty).unwrap();
        assert_eq!(empty["messages"], serde_json::json!([]));
    }

    #[test]
    fn formats() {
        assert_eq!(Format::parse(""), Some(Format::Text));
        assert_eq!(Format::parse("markdown"), Some(Format::Markdown));
        assert_eq!(Format::parse("json"), Some(Format::Json));
        assert_eq!(Format::parse("pdf"), None);
        assert_eq!(Format::parse("JSON"), None);
    }
}
