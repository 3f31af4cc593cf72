//! Which connected channel a send goes out on: the one the caller names; else the channel of the contact's
//! latest conversation; else the first connected channel (oldest first) that can reach the contact: sms and
//! whatsapp need a phone, messenger, instagram and webchat an identity of their type. The choice reads only
//! what the caller loaded, so a batch of sends loads it once for all of them.

use tonic::Code;

use crate::error::Reason;
use crate::{
    contacts::IdentityKind,
    error::{ApiError, ApiResult},
    store::entities::{
        channels::{self, ChannelKind},
        contact_identities, contacts,
    },
};

/// A contact as channel choice sees it.
pub struct Reach<'a> {
    pub contact: &'a contacts::Model,
    pub identities: &'a [contact_identities::Model],
}

impl Reach<'_> {
    pub fn reaches(&self, channel_type: ChannelKind) -> bool {
        match IdentityKind::of_channel(channel_type) {
            Some(IdentityKind::Whatsapp) | None => self.contact.phone.is_some(),
            Some(kind) => self.identities.iter().any(|i| i.kind == kind.as_str()),
        }
    }
}

/// The channel for a send to `reach`, among the account's `connected` channels (oldest first), given the
/// channel the caller `named` and the channel of the contact's `latest` conversation.
pub fn choose(
    connected: &[channels::Model],
    named: Option<&str>,
    latest: Option<&str>,
    reach: &Reach<'_>,
) -> ApiResult<channels::Model> {
    if let Some(name) = named {
        let channel = connected
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| ApiError::field("channel", format!("no connected channel named `{name}`")))?;
        if !reach.reaches(channel.kind) {
            return Err(no_channel(format!(
                "the contact cannot be reached on `{name}`: a {} channel needs {}",
                channel.kind,
                needs(channel.kind)
            )));
        }
        return Ok(channel.clone());
    }
    let usable = |c: &channels::Model| reach.reaches(c.kind);
    if let Some(latest) = latest
        && let Some(channel) = connected.iter().find(|c| c.name == latest && usable(c))
    {
        return Ok(channel.clone());
    }
    connected
        .iter()
        .find(|c| usable(c))
        .cloned()
        .ok_or_else(|| no_channel("no connected channel can reach this contact".to_owned()))
}

fn needs(channel_type: ChannelKind) -> &'static str {
    match channel_type {
        ChannelKind::Sms | ChannelKind::Whatsapp => "a phone number",
        _ => "the contact's id on that channel",
    }
}

fn no_channel(message: String) -> ApiError {
    ApiError::new(Code::InvalidArgument, Reason::NoChannel, message)
}
