//! A contact in the API's shape: the answer of every contact call and the `data` of its events.

use frontdesk_api::v1::{Contact, ContactIdentity};

use crate::{
    store::{
        entities::{contact_identities, contacts},
        from_json_text,
    },
    timestamps,
};

/// The contact with its identities (in the order given).
pub fn contact_message(m: contacts::Model, identities: &[contact_identities::Model]) -> Contact {
    Contact {
        identities: identities
            .iter()
            .map(|i| ContactIdentity {
                channel: i.channel.clone(),
                r#type: i.kind.clone(),
                external_id: i.external_id.clone(),
            })
            .collect(),
        tags: from_json_text(&m.tags),
        attributes: from_json_text(&m.attributes),
        recap_at: m.recap_at.map(timestamps::to_proto),
        created_at: Some(timestamps::to_proto(m.created_at)),
        updated_at: Some(timestamps::to_proto(m.updated_at)),
        id: m.id.into(),
        name: m.name,
        phone: m.phone.unwrap_or_default(),
        email: m.email.unwrap_or_default(),
        opted_out: m.opted_out,
        recap: m.recap,
    }
}
