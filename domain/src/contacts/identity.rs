//! A contact's ids on the social channels: the kinds there are, and an identity as it is handed to the store.

use crate::store::entities::channels::ChannelKind;

/// The channel families whose ids identify a contact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IdentityKind {
    /// WhatsApp's `wa_id` (the phone number without `+`).
    Whatsapp,
    /// A page-scoped id (PSID).
    Messenger,
    /// An Instagram-scoped id (IGSID).
    Instagram,
    /// The web chat's visitor id.
    Webchat,
}

impl IdentityKind {
    pub const ALL: [Self; 4] = [Self::Whatsapp, Self::Messenger, Self::Instagram, Self::Webchat];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == s)
    }

    /// The kind of id a channel of `kind` names its contacts by (sms: none, a phone number).
    pub fn of_channel(kind: ChannelKind) -> Option<Self> {
        match kind {
            ChannelKind::Whatsapp => Some(Self::Whatsapp),
            ChannelKind::Messenger => Some(Self::Messenger),
            ChannelKind::Instagram => Some(Self::Instagram),
            ChannelKind::Webchat => Some(Self::Webchat),
            ChannelKind::Sms => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Whatsapp => "whatsapp",
            Self::Messenger => "messenger",
            Self::Instagram => "instagram",
            Self::Webchat => "webchat",
        }
    }
}

/// An identity to store with a contact: its key on the account (`kind` + `external_id`) and the name of the
/// channel it was first seen on ("" when it came through the API).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewIdentity {
    pub kind: IdentityKind,
    pub external_id: String,
    pub channel: String,
}

#[cfg(test)]
mod tests {
    use super::IdentityKind;

    #[test]
    fn kinds_parse_back() {
        for kind in IdentityKind::ALL {
            assert_eq!(IdentityKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(IdentityKind::parse("sms"), None);
        assert_eq!(IdentityKind::parse("WhatsApp"), None);
    }
}
