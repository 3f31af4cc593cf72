//! The Cloud API's `messages` webhook as Meta sends it: only the fields read here, the rest ignored.

use serde::Deserialize;

#[derive(Deserialize)]
pub(super) struct Payload {
    pub(super) object: String,
    #[serde(default)]
    pub(super) entry: Vec<Entry>,
}

#[derive(Deserialize)]
pub(super) struct Entry {
    #[serde(default)]
    pub(super) changes: Vec<Change>,
}

#[derive(Deserialize)]
pub(super) struct Change {
    #[serde(default)]
    pub(super) field: String,
    pub(super) value: Option<ChangeValue>,
}

/// A change's value.
#[derive(Deserialize)]
pub(super) struct ChangeValue {
    pub(super) metadata: Metadata,
    #[serde(default)]
    pub(super) contacts: Vec<WaContact>,
    #[serde(default)]
    pub(super) messages: Vec<WaMessage>,
    #[serde(default)]
    pub(super) statuses: Vec<WaStatus>,
}

#[derive(Deserialize)]
pub(super) struct Metadata {
    pub(super) phone_number_id: String,
}

#[derive(Deserialize)]
pub(super) struct WaContact {
    pub(super) wa_id: String,
    pub(super) profile: Option<Profile>,
}

#[derive(Deserialize)]
pub(super) struct Profile {
    #[serde(default)]
    pub(super) name: String,
}

#[derive(Deserialize)]
pub(super) struct WaMessage {
    pub(super) from: String,
    pub(super) id: String,
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) text: Option<Text>,
    pub(super) image: Option<Media>,
    pub(super) video: Option<Media>,
    pub(super) audio: Option<Media>,
    pub(super) document: Option<Media>,
    pub(super) sticker: Option<Media>,
    pub(super) location: Option<Location>,
    pub(super) reaction: Option<Reaction>,
    pub(super) button: Option<Button>,
    pub(super) interactive: Option<Interactive>,
    pub(super) referral: Option<AdReferral>,
}

#[derive(Deserialize)]
pub(super) struct Text {
    pub(super) body: String,
}

#[derive(Deserialize)]
pub(super) struct Media {
    pub(super) id: String,
    #[serde(default)]
    pub(super) mime_type: String,
    pub(super) caption: Option<String>,
    #[serde(default)]
    pub(super) filename: String,
}

#[derive(Deserialize)]
pub(super) struct Location {
    pub(super) latitude: f64,
    pub(super) longitude: f64,
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) address: String,
}

impl Location {
    pub(super) fn describe(&self) -> String {
        let place = [self.name.as_str(), self.address.as_str()]
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join(", ");
        format!("{},{} {place}", self.latitude, self.longitude)
            .trim_end()
            .to_owned()
    }
}

#[derive(Deserialize)]
pub(super) struct Reaction {
    pub(super) message_id: String,
    /// Absent when the contact took the reaction back.
    #[serde(default)]
    pub(super) emoji: String,
}

#[derive(Deserialize)]
pub(super) struct Button {
    #[serde(default)]
    pub(super) text: String,
}

#[derive(Deserialize)]
pub(super) struct Interactive {
    pub(super) button_reply: Option<Choice>,
    pub(super) list_reply: Option<Choice>,
}

#[derive(Deserialize)]
pub(super) struct Choice {
    #[serde(default)]
    pub(super) title: String,
}

/// The ad a Click-to-WhatsApp conversation started from.
#[derive(Deserialize)]
pub(super) struct AdReferral {
    #[serde(default)]
    pub(super) source_id: String,
}

#[derive(Deserialize)]
pub(super) struct WaStatus {
    pub(super) id: String,
    pub(super) status: String,
    #[serde(default)]
    pub(super) errors: Vec<WaError>,
}

#[derive(Deserialize)]
pub(super) struct WaError {
    #[serde(default)]
    pub(super) code: i64,
    #[serde(default)]
    pub(super) title: String,
    #[serde(default)]
    pub(super) message: String,
    pub(super) error_data: Option<WaErrorData>,
}

#[derive(Deserialize)]
pub(super) struct WaErrorData {
    #[serde(default)]
    pub(super) details: String,
}

impl WaError {
    pub(super) fn text(&self) -> String {
        let head = if self.message.is_empty() {
            &self.title
        } else {
            &self.message
        };
        match self
            .error_data
            .as_ref()
            .map(|d| d.details.as_str())
            .filter(|d| !d.is_empty())
        {
            Some(details) => format!("{head}: {details}"),
            None => head.clone(),
        }
    }
}
