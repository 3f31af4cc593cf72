//! Connected channels. Each has a type and the provider that carries it; the provider's credentials are
//! sealed at rest (`secrets`) and never answered, only the names of the configured keys.

use std::sync::Arc;

use frontdesk_api::v1::{
    Channel, ChannelAnswer, ChannelList, ConnectChannelRequest, Deleted, DisconnectChannelRequest, ListChannelsRequest,
    channels_server::Channels,
};
use sea_orm::{
    ActiveEnum, ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
};
use tonic::{Request, Response, Status};

use crate::{
    access::AccountId,
    accounts,
    channels::{live_feed::Feed, widget::Widget},
    clock::Clock,
    error::{ApiError, ApiResult},
    paging::{self, Page},
    platform_calls::{account_of, deleted},
    secrets::Sealer,
    store::{
        entities::{
            channel_defaults,
            channels::{self, ChannelKind, ChannelProvider},
        },
        from_json_text, to_json_text,
    },
    timestamps,
    validate::{Violations, check_name},
};

/// The configuration keys a provider cannot work without.
fn required_keys(provider: ChannelProvider) -> &'static [&'static str] {
    match provider {
        ChannelProvider::Builtin => &[],
        ChannelProvider::Twilio => &["account_sid", "auth_token"],
        ChannelProvider::WhatsappCloud => &["phone_number_id", "access_token", "app_secret"],
        ChannelProvider::Meta => &["page_id", "access_token", "app_secret"],
    }
}
const MAX_KEYS: usize = 20;
const MAX_VALUE_CHARS: usize = 4_096;

#[derive(Clone)]
pub struct ChannelsService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    sealer: Sealer,
    /// `FRONTDESK_PUBLIC_URL` without a trailing `/`.
    public_url: Arc<str>,
    feed: Feed,
}

impl ChannelsService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, sealer: Sealer, public_url: &str, feed: Feed) -> Self {
        Self {
            db,
            clock,
            sealer,
            public_url: public_url.trim_end_matches('/').into(),
            feed,
        }
    }
}

/// Where the channel's provider sends its callbacks; "" for channels that have none (webchat).
pub fn webhook_url(public_url: &str, channel: &channels::Model) -> String {
    let Some(route) = callback_route(channel.provider) else {
        return String::new();
    };
    format!("{}/hooks/{route}/{}", public_url.trim_end_matches('/'), channel.id)
}

/// The path segment of a provider's callbacks (`/hooks/<route>/<channel>`); `None` for web chat's.
pub fn callback_route(provider: ChannelProvider) -> Option<&'static str> {
    match provider {
        ChannelProvider::Twilio => Some("twilio"),
        ChannelProvider::WhatsappCloud | ChannelProvider::Meta => Some("meta"),
        ChannelProvider::Builtin => None,
    }
}

/// The account's connected channel of this name.
pub async fn connected(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    name: &str,
) -> ApiResult<Option<channels::Model>> {
    Ok(channels::Entity::find()
        .filter(channels::Column::AccountId.eq(account_id))
        .filter(channels::Column::Name.eq(name))
        .one(db)
        .await?)
}

/// 400 naming `field` unless `name` is a connected channel of the account.
pub async fn require_connected(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    name: &str,
    field: &str,
) -> ApiResult<()> {
    if name.is_empty() {
        return Err(ApiError::field(field, "is required"));
    }
    match connected(db, account_id, name).await? {
        Some(_) => Ok(()),
        None => Err(ApiError::field(field, format!("no connected channel named `{name}`"))),
    }
}

fn channel_message(public_url: &str, m: &channels::Model) -> Channel {
    Channel {
        id: m.id.to_string(),
        webhook_url: webhook_url(public_url, m),
        verify_token: m.verify_token.clone(),
        widget_key: m.widget_key.clone().unwrap_or_default(),
        name: m.name.clone(),
        r#type: m.kind.to_value(),
        provider: m.provider.to_value(),
        configured_keys: from_json_text(&m.configured_keys),
        created_at: Some(timestamps::to_proto(m.created_at)),
    }
}

/// The type and the provider (given or the type's own) after checking type, provider and configuration.
fn check(r: &ConnectChannelRequest) -> ApiResult<(ChannelKind, ChannelProvider)> {
    let mut v = Violations::new();
    if let Err(violation) = check_name(&r.name) {
        v.push(violation);
    }
    let Some(kind) = v.one_of_variants::<ChannelKind>("type", &r.r#type) else {
        return Err(v.into_error());
    };
    let provider = kind.provider();
    let word = provider.to_value();
    v.check(
        r.provider.is_empty() || r.provider == word,
        "provider",
        format!("a {kind} channel is carried by `{word}`"),
    );
    for key in required_keys(provider) {
        v.check(
            r.config.get(*key).is_some_and(|value| !value.trim().is_empty()),
            &format!("config.{key}"),
            format!("is required by {word}"),
        );
    }
    if provider == ChannelProvider::Builtin
        && let Err(problems) = Widget::from_config(&r.config.clone().into_iter().collect())
    {
        for problem in problems {
            v.push(problem);
        }
    }
    let has = |key: &str| r.config.get(key).is_some_and(|value| !value.trim().is_empty());
    v.check(
        provider != ChannelProvider::Twilio || has("from_number") || has("messaging_service_sid"),
        "config.from_number",
        "twilio needs from_number or messaging_service_sid",
    );
    v.check(
        provider != ChannelProvider::WhatsappCloud
            || r.config
                .get("phone_number_id")
                .is_none_or(|id| crate::channels::meta::whatsapp::is_number_id(id)),
        "config.phone_number_id",
        "is the number's id in Meta's console: digits only",
    );
    v.check(
        r.config.len() <= MAX_KEYS,
        "config",
        format!("must hold at most {MAX_KEYS} keys"),
    );
    for (key, value) in &r.config {
        v.check(
            !key.is_empty()
                && key.len() <= 64
                && key
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            &format!("config.{key}"),
            "key names hold only lowercase letters, digits and `_`",
        );
        v.check(
            value.chars().count() <= MAX_VALUE_CHARS,
            &format!("config.{key}"),
            format!("must be at most {MAX_VALUE_CHARS} characters"),
        );
    }
    v.finish()?;
    Ok((kind, provider))
}

impl ChannelsService {
    async fn connect(&self, account_id: &AccountId, r: ConnectChannelRequest) -> ApiResult<channels::Model> {
        let (kind, provider) = check(&r)?;
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        if connected(&txn, account_id, &r.name).await?.is_some() {
            return Err(ApiError::already_exists(format!(
                "a channel named `{}` is connected",
                r.name
            )));
        }
        let id = crate::ids::new_id(crate::ids::Kind::Channel);
        let config: std::collections::BTreeMap<&String, &String> = r.config.iter().collect();
        // Meta verifies a callback URL with a token the business types into its console.
        let verify_token = match provider {
            ChannelProvider::WhatsappCloud | ChannelProvider::Meta => r
                .config
                .get("verify_token")
                .filter(|token| !token.trim().is_empty())
                .cloned()
                .unwrap_or_else(|| crate::ids::base62(24)),
            ChannelProvider::Builtin | ChannelProvider::Twilio => String::new(),
        };
        // The widget's script tag names a web chat channel by a key of its own, public by nature.
        let widget_key =
            (provider == ChannelProvider::Builtin).then(|| crate::ids::new_id(crate::ids::Kind::WidgetKey));
        let row = channels::Model {
            verify_token,
            widget_key,
            config: self.sealer.seal(&id, to_json_text(&config).as_bytes()),
            configured_keys: to_json_text(&config.keys().collect::<Vec<_>>()),
            id: id.into(),
            account_id: account_id.clone(),
            name: r.name.clone(),
            kind,
            provider,
            created_at: self.clock.now(),
        };
        channels::Entity::insert(channels::ActiveModel::from(row.clone()).reset_all())
            .exec_without_returning(&txn)
            .await?;
        txn.commit().await?;
        tracing::info!(%account_id, channel = row.name, kind = %row.kind, "channel connected");
        Ok(row)
    }

    async fn disconnect(&self, account_id: &AccountId, name: &str) -> ApiResult<()> {
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        let channel = connected(&txn, account_id, name)
            .await?
            .ok_or_else(|| ApiError::not_found("channel"))?;
        channel_defaults::Entity::delete_many()
            .filter(channel_defaults::Column::AccountId.eq(account_id))
            .filter(channel_defaults::Column::Channel.eq(&channel.name))
            .exec(&txn)
            .await?;
        // Its web chat sessions go with it (a foreign key); their open sockets are told after the commit.
        channels::Entity::delete_by_id(channel.id.clone()).exec(&txn).await?;
        txn.commit().await?;
        if channel.kind == ChannelKind::Webchat {
            self.feed.channel_disconnected(&channel.id).await;
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl Channels for ChannelsService {
    async fn list_channels(&self, request: Request<ListChannelsRequest>) -> Result<Response<ChannelList>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        // `ch_` ids, and `chn_` ones of channels connected before the ids grew.
        let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::Channel.prefix())?;
        let select = channels::Entity::find().filter(channels::Column::AccountId.eq(&account_id));
        let (rows, more) = paging::fetch(
            &self.db,
            select,
            &page,
            channels::Column::CreatedAt,
            channels::Column::Id,
        )
        .await
        .map_err(ApiError::from)?;
        let (channels, next_cursor) = paging::render(
            &rows,
            more,
            |c| (c.created_at, c.id.as_str()),
            |c| channel_message(&self.public_url, c),
        );
        Ok(Response::new(ChannelList {
            success: true,
            next_cursor,
            channels,
        }))
    }

    async fn connect_channel(
        &self,
        request: Request<ConnectChannelRequest>,
    ) -> Result<Response<ChannelAnswer>, Status> {
        let account_id = account_of(&request)?;
        let channel = self.connect(&account_id, request.into_inner()).await?;
        Ok(Response::new(ChannelAnswer {
            success: true,
            channel: Some(channel_message(&self.public_url, &channel)),
        }))
    }

    async fn disconnect_channel(
        &self,
        request: Request<DisconnectChannelRequest>,
    ) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let name = request.into_inner().name;
        self.disconnect(&account_id, &name).await?;
        Ok(deleted(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kind: &str, config: &[(&str, &str)]) -> ConnectChannelRequest {
        ConnectChannelRequest {
            name: "main".into(),
            r#type: kind.into(),
            provider: String::new(),
            config: config.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        }
    }

    #[test]
    fn providers_and_required_keys() {
        assert_eq!(check(&request("webchat", &[])).unwrap().1, ChannelProvider::Builtin);
        let sms = [
            ("account_sid", "AC1"),
            ("auth_token", "t"),
            ("from_number", "+15550001111"),
        ];
        assert_eq!(
            check(&request("sms", &sms)).unwrap(),
            (ChannelKind::Sms, ChannelProvider::Twilio)
        );
        let error = check(&request("sms", &[("account_sid", "AC1")])).unwrap_err();
        let fields: Vec<&str> = error.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["config.auth_token", "config.from_number"]);
        assert_eq!(check(&request("fax", &[])).unwrap_err().fields[0].field, "type");
        let mut wrong = request("instagram", &[("page_id", "1"), ("access_token", "x")]);
        wrong.provider = "twilio".into();
        assert_eq!(check(&wrong).unwrap_err().fields[0].field, "provider");
    }
}
