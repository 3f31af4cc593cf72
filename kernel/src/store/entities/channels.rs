//! A connected channel. `config` holds the provider credentials, sealed; `configured_keys` is a JSON array of their names.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "channels")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: crate::resource_id::ChannelId,
    pub account_id: crate::tenant::AccountId,
    pub name: String,
    #[sea_orm(column_name = "type")]
    pub kind: ChannelKind,
    pub provider: ChannelProvider,
    pub config: String,
    pub configured_keys: String,
    /// What the business types into Meta's console to verify the callback URL; "" for other providers.
    pub verify_token: String,
    /// The public key a web chat widget names its channel by (`wk_` + 24 base62); `None` for other channels.
    pub widget_key: Option<String>,
    pub created_at: DateTimeUtc,
}

/// What a channel carries messages over (its `type` in the API).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum ChannelKind {
    #[sea_orm(string_value = "webchat")]
    Webchat,
    #[sea_orm(string_value = "sms")]
    Sms,
    #[sea_orm(string_value = "whatsapp")]
    Whatsapp,
    #[sea_orm(string_value = "instagram")]
    Instagram,
    #[sea_orm(string_value = "messenger")]
    Messenger,
}

impl ChannelKind {
    /// The provider that carries a channel of this kind.
    pub fn provider(self) -> ChannelProvider {
        match self {
            Self::Webchat => ChannelProvider::Builtin,
            Self::Sms => ChannelProvider::Twilio,
            Self::Whatsapp => ChannelProvider::WhatsappCloud,
            Self::Instagram | Self::Messenger => ChannelProvider::Meta,
        }
    }
}

/// The API's word for it, as stored.
impl std::fmt::Display for ChannelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_value())
    }
}

/// Who carries a channel's messages: this service (web chat), Twilio, WhatsApp's Cloud API, or Meta's
/// Send API (Messenger and Instagram).
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum ChannelProvider {
    #[sea_orm(string_value = "builtin")]
    Builtin,
    #[sea_orm(string_value = "twilio")]
    Twilio,
    #[sea_orm(string_value = "whatsapp_cloud")]
    WhatsappCloud,
    #[sea_orm(string_value = "meta")]
    Meta,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
