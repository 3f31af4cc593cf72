//! `/v1/webhooks`: subscriptions (by position or name), the test event, health, re-enable and the
//! delivery log. Changes to the subscription list take the account's lock, so positions cannot race.

use std::sync::Arc;

use chrono::Duration as ChronoDuration;
use frontdesk_api::v1::{
    CreateWebhookRequest, CreatedWebhook, DeleteWebhookRequest, Deleted, GetWebhookHealthRequest, GetWebhookRequest,
    ListWebhookDeliveriesRequest, ListWebhooksRequest, ReEnableWebhookRequest, ReEnabledWebhook, TestWebhookRequest,
    UpdateWebhookRequest, Webhook, WebhookAnswer, WebhookAttempt, WebhookDelivery, WebhookDeliveryAnswer,
    WebhookDeliveryList, WebhookHealth, WebhookHealthAnswer, WebhookList, webhooks_server::Webhooks,
};
use sea_orm::{ActiveEnum, ActiveModelTrait, ActiveValue::Set, DatabaseConnection, EntityTrait, IntoActiveModel};
use tokio::sync::Notify;
use tonic::{Code, Request, Response, Status};

use super::{signing, store, subscription};
use crate::error::Reason;
use crate::resource_id::DeliveryId;
use crate::{
    access::AccountId,
    accounts,
    clock::Clock,
    error::{ApiError, ApiResult, FieldViolation},
    events::{self, EventType},
    integrations::outbound::OutboundPolicy,
    paging::{self, Page},
    platform_calls::{account_of, apply_mask, deleted},
    secrets::Sealer,
    store::entities::{
        webhook_attempts,
        webhook_deliveries::{self, DeliveryStatus},
        webhooks,
    },
    timestamps,
    validate::{Violations, check_name},
};

#[derive(Clone)]
pub struct WebhooksService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    policy: OutboundPolicy,
    /// Seals signing secrets at rest.
    sealer: Sealer,
    /// Wakes the dispatcher when a delivery is queued here (test, re-enable).
    wake: Arc<Notify>,
}

impl WebhooksService {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        policy: OutboundPolicy,
        sealer: Sealer,
        wake: Arc<Notify>,
    ) -> Self {
        Self {
            db,
            clock,
            policy,
            sealer,
            wake,
        }
    }
}

fn webhook_message(position: usize, m: &webhooks::Model) -> Webhook {
    Webhook {
        id: position.to_string(),
        name: m.name.clone(),
        url: m.url.clone(),
        description: m.description.clone(),
        events: subscription::parse_events(&m.events),
        status: m.status.to_value(),
        disabled_reason: m.disabled_reason.clone(),
        disabled_at: m.disabled_at.map(timestamps::to_proto),
        created_at: Some(timestamps::to_proto(m.created_at)),
        updated_at: Some(timestamps::to_proto(m.updated_at)),
    }
}

fn delivery_message(d: &webhook_deliveries::Model, attempts: &[webhook_attempts::Model]) -> WebhookDelivery {
    WebhookDelivery {
        id: d.id.to_string(),
        event_id: d.event_id.to_string(),
        event_type: d.event_type.clone(),
        status: d.status.to_value(),
        next_attempt_at: d
            .next_attempt_ms
            .filter(|_| d.status == DeliveryStatus::Pending)
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(timestamps::to_proto),
        created_at: Some(timestamps::to_proto(d.created_at)),
        delivered_at: d.delivered_at.map(timestamps::to_proto),
        attempts: attempts
            .iter()
            .map(|a| WebhookAttempt {
                attempt: a.attempt,
                started_at: Some(timestamps::to_proto(a.started_at)),
                status_code: a.status_code,
                duration_ms: a.duration_ms,
                error: a.error.clone(),
                next_attempt_at: a.next_attempt_at.map(timestamps::to_proto),
            })
            .chain(delivered_attempt(d))
            .collect(),
    }
}

/// The attempt that delivered, kept in the delivery's row: always the last.
fn delivered_attempt(d: &webhook_deliveries::Model) -> Option<WebhookAttempt> {
    Some(WebhookAttempt {
        attempt: d.delivered_attempt?,
        started_at: Some(timestamps::to_proto(d.delivered_started_at?)),
        status_code: d.delivered_status_code,
        duration_ms: d.delivered_duration_ms?,
        error: None,
        next_attempt_at: None,
    })
}

fn not_found(reference: &str) -> ApiError {
    ApiError::new(
        Code::NotFound,
        Reason::NotFound,
        format!("no webhook subscription `{reference}` (a 1-based position or a name)"),
    )
}

fn conflict(name: &str) -> ApiError {
    ApiError::already_exists(format!("a webhook subscription named `{name}` already exists"))
}

fn invalid(violation: FieldViolation) -> ApiError {
    ApiError::invalid(vec![violation])
}

/// The subscription's fields after validation (each `None` when not being set).
#[derive(Default)]
struct Fields {
    name: Option<Option<String>>,
    url: Option<String>,
    events: Option<Vec<String>>,
    description: Option<String>,
}

impl WebhooksService {
    async fn check(
        &self,
        name: Option<&str>,
        url: Option<&str>,
        events: Option<&[String]>,
        description: Option<&str>,
    ) -> ApiResult<Fields> {
        let mut fields = Fields::default();
        let mut violations = Vec::new();
        if let Some(name) = name {
            if name.is_empty() {
                fields.name = Some(None);
            } else {
                match check_name(name) {
                    Ok(()) => fields.name = Some(Some(name.to_owned())),
                    Err(v) => violations.push(v),
                }
            }
        }
        if let Some(url) = url {
            match self.policy.check_target(url).await {
                Ok(url) => fields.url = Some(url.to_string()),
                Err(message) => violations.push(FieldViolation::new("url", message)),
            }
        }
        if let Some(events) = events {
            match subscription::check_events(events) {
                Ok(events) => fields.events = Some(events),
                Err(v) => violations.push(v),
            }
        }
        if let Some(description) = description {
            match subscription::check_description(description) {
                Ok(()) => fields.description = Some(description.to_owned()),
                Err(v) => violations.push(v),
            }
        }
        if violations.is_empty() {
            Ok(fields)
        } else {
            Err(ApiError::invalid(violations))
        }
    }

    async fn find(&self, account_id: &AccountId, reference: &str) -> ApiResult<(usize, webhooks::Model)> {
        store::find(&self.db, account_id, reference)
            .await?
            .ok_or_else(|| not_found(reference))
    }

    async fn create(&self, account_id: &AccountId, r: CreateWebhookRequest) -> ApiResult<CreatedWebhook> {
        if r.url.is_empty() {
            return Err(invalid(FieldViolation::new("url", "is required")));
        }
        let fields = self
            .check(Some(&r.name), Some(&r.url), Some(&r.events), Some(&r.description))
            .await?;
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        let existing = store::list(&txn, account_id).await?;
        if existing.len() >= subscription::MAX_PER_ACCOUNT {
            return Err(ApiError::new(
                Code::InvalidArgument,
                Reason::InvalidArgument,
                format!(
                    "an account may have at most {} webhook subscriptions; delete one first",
                    subscription::MAX_PER_ACCOUNT
                ),
            ));
        }
        let name = fields.name.flatten();
        if let Some(name) = &name
            && existing.iter().any(|w| w.name.as_ref() == Some(name))
        {
            return Err(conflict(name));
        }
        let secret = signing::new_secret();
        let id = crate::ids::new_id(crate::ids::Kind::Webhook);
        let row = webhooks::Model {
            secret: super::secret::seal(&self.sealer, &id, &secret),
            id: id.into(),
            account_id: account_id.clone(),
            name,
            url: fields.url.unwrap_or_default(),
            description: fields.description.unwrap_or_default(),
            events: serde_json::to_string(&fields.events.unwrap_or_default()).unwrap_or_else(|_| "[]".into()),
            status: webhooks::WebhookStatus::Active,
            disabled_reason: None,
            disabled_at: None,
            consecutive_failures: 0,
            failing_since: None,
            last_success_at: None,
            last_failure_at: None,
            last_error: None,
            created_at: now,
            updated_at: now,
        };
        webhooks::Entity::insert(webhooks::ActiveModel::from(row.clone()).reset_all())
            .exec_without_returning(&txn)
            .await?;
        txn.commit().await?;
        Ok(CreatedWebhook {
            success: true,
            webhook: Some(webhook_message(existing.len() + 1, &row)),
            secret,
        })
    }

    async fn update(&self, account_id: &AccountId, r: UpdateWebhookRequest) -> ApiResult<WebhookAnswer> {
        let known = ["name", "url", "events", "description", "webhook_id"];
        apply_mask(r.update_mask.as_ref(), "a webhook", |path| known.contains(&path))?;
        let mask = r.update_mask.clone().map(|m| m.paths).unwrap_or_default();
        let has = |field: &str| mask.iter().any(|p| p == field);
        let fields = self
            .check(
                has("name").then_some(r.name.as_str()),
                has("url").then_some(r.url.as_str()),
                has("events").then_some(r.events.as_slice()),
                has("description").then_some(r.description.as_str()),
            )
            .await?;
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        let all = store::list(&txn, account_id).await?;
        let taken = |name: &str, except: &str| all.iter().any(|w| w.id != except && w.name.as_deref() == Some(name));
        let (position, current) = store::locate(&all, &r.webhook_id).ok_or_else(|| not_found(&r.webhook_id))?;
        let mut active = current.clone().into_active_model();
        if let Some(name) = fields.name {
            if let Some(name) = &name
                && taken(name, &current.id)
            {
                return Err(conflict(name));
            }
            active.name = Set(name);
        }
        if let Some(url) = fields.url {
            active.url = Set(url);
        }
        if let Some(events) = fields.events {
            active.events = Set(serde_json::to_string(&events).unwrap_or_else(|_| "[]".into()));
        }
        if let Some(description) = fields.description {
            active.description = Set(description);
        }
        active.updated_at = Set(now);
        let updated = active.update(&txn).await?;
        txn.commit().await?;
        Ok(WebhookAnswer {
            success: true,
            webhook: Some(webhook_message(position, &updated)),
        })
    }

    async fn delete(&self, account_id: &AccountId, reference: &str) -> ApiResult<()> {
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        let (_, webhook) = store::find(&txn, account_id, reference)
            .await?
            .ok_or_else(|| not_found(reference))?;
        store::delete(&txn, &webhook.id).await?;
        txn.commit().await?;
        Ok(())
    }

    async fn test(&self, account_id: &AccountId, reference: &str) -> ApiResult<WebhookDelivery> {
        // Under the account's lock, as delete is: the subscription cannot go between the read and the insert.
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        let (position, webhook) = store::find(&txn, account_id, reference)
            .await?
            .ok_or_else(|| not_found(reference))?;
        if webhook.status != webhooks::WebhookStatus::Active {
            return Err(ApiError::failed_precondition(
                "the subscription is disabled; re-enable it first",
            ));
        }
        let now = self.clock.now();
        let data = serde_json::json!({
            "webhook": {"id": position.to_string(), "name": webhook.name},
            "message": "This is a test event from Front Desk.",
        });
        let event_id = events::record_directed(&txn, account_id, EventType::WebhookTest, data, now).await?;
        let delivery = webhook_deliveries::Model::pending(
            new_delivery_id().into(),
            account_id.clone(),
            webhook.id.clone(),
            event_id.into(),
            EventType::WebhookTest.as_str().to_owned(),
            now,
        );
        webhook_deliveries::Entity::insert(webhook_deliveries::ActiveModel::from(delivery.clone()).reset_all())
            .exec_without_returning(&txn)
            .await?;
        txn.commit().await?;
        self.wake.notify_one();
        Ok(delivery_message(&delivery, &[]))
    }

    async fn health(&self, account_id: &AccountId, reference: &str) -> ApiResult<WebhookHealth> {
        let (_, w) = self.find(account_id, reference).await?;
        let pending = store::pending_count(&self.db, &w.id).await?;
        let since = self.clock.now() - ChronoDuration::hours(24);
        let (attempts, succeeded) = store::attempts_since(&self.db, &w.id, since).await?;
        Ok(WebhookHealth {
            status: w.status.to_value(),
            disabled_reason: w.disabled_reason,
            disabled_at: w.disabled_at.map(timestamps::to_proto),
            consecutive_failures: w.consecutive_failures,
            failing_since: w.failing_since.map(timestamps::to_proto),
            last_success_at: w.last_success_at.map(timestamps::to_proto),
            last_failure_at: w.last_failure_at.map(timestamps::to_proto),
            last_error: w.last_error,
            pending: pending as i64,
            attempts_24h: attempts,
            success_rate_24h: (attempts > 0).then(|| succeeded as f64 / attempts as f64),
        })
    }

    async fn re_enable(&self, account_id: &AccountId, r: ReEnableWebhookRequest) -> ApiResult<ReEnabledWebhook> {
        let since = timestamps::from_proto("since", r.since)?;
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        accounts::store::lock(&txn, account_id).await?;
        let (position, current) = store::find(&txn, account_id, &r.webhook_id)
            .await?
            .ok_or_else(|| not_found(&r.webhook_id))?;
        let since = since.or(current.failing_since).or(current.disabled_at);
        let mut active = current.into_active_model();
        active.status = Set(webhooks::WebhookStatus::Active);
        active.disabled_reason = Set(None);
        active.disabled_at = Set(None);
        active.consecutive_failures = Set(0);
        active.failing_since = Set(None);
        active.updated_at = Set(now);
        let webhook = active.update(&txn).await?;
        let requeued = match since {
            Some(since) => store::requeue_failed(&txn, &webhook.id, since, now).await?,
            None => 0,
        };
        txn.commit().await?;
        self.wake.notify_one();
        Ok(ReEnabledWebhook {
            success: true,
            webhook: Some(webhook_message(position, &webhook)),
            requeued: requeued as i64,
        })
    }

    async fn deliveries(
        &self,
        account_id: &AccountId,
        r: ListWebhookDeliveriesRequest,
    ) -> ApiResult<WebhookDeliveryList> {
        let mut v = Violations::new();
        let status = if r.status.is_empty() {
            None
        } else {
            v.one_of_variants::<DeliveryStatus>("status", &r.status)
        };
        let mut paging = Vec::new();
        let page = Page::parse(
            r.limit,
            &r.cursor,
            crate::ids::Kind::WebhookDelivery.prefix(),
            &mut paging,
        );
        paging.into_iter().for_each(|violation| v.push(violation));
        v.finish()?;
        let (_, webhook) = self.find(account_id, &r.webhook_id).await?;
        let (rows, more) = store::deliveries(&self.db, &webhook.id, status, &page).await?;
        let ids: Vec<DeliveryId> = rows.iter().map(|d| d.id.clone()).collect();
        let attempts = store::attempts_of(&self.db, &ids).await?;
        let (deliveries, next_cursor) = paging::render(
            &rows,
            more,
            |d| (d.created_at, d.id.as_str()),
            |d| delivery_message(d, attempts.get(&d.id).map(Vec::as_slice).unwrap_or_default()),
        );
        Ok(WebhookDeliveryList {
            success: true,
            deliveries,
            next_cursor,
        })
    }
}

pub fn new_delivery_id() -> String {
    crate::ids::new_id(crate::ids::Kind::WebhookDelivery)
}

#[tonic::async_trait]
impl Webhooks for WebhooksService {
    async fn list_webhooks(&self, request: Request<ListWebhooksRequest>) -> Result<Response<WebhookList>, Status> {
        let account_id = &account_of(&request)?;
        let all = store::list(&self.db, account_id).await.map_err(ApiError::from)?;
        Ok(Response::new(WebhookList {
            success: true,
            webhooks: all.iter().enumerate().map(|(i, w)| webhook_message(i + 1, w)).collect(),
        }))
    }

    async fn create_webhook(&self, request: Request<CreateWebhookRequest>) -> Result<Response<CreatedWebhook>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(self.create(&account_id, request.into_inner()).await?))
    }

    async fn get_webhook(&self, request: Request<GetWebhookRequest>) -> Result<Response<WebhookAnswer>, Status> {
        let account_id = &account_of(&request)?;
        let (position, webhook) = self.find(account_id, &request.get_ref().webhook_id).await?;
        Ok(Response::new(WebhookAnswer {
            success: true,
            webhook: Some(webhook_message(position, &webhook)),
        }))
    }

    async fn update_webhook(&self, request: Request<UpdateWebhookRequest>) -> Result<Response<WebhookAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(self.update(&account_id, request.into_inner()).await?))
    }

    async fn delete_webhook(&self, request: Request<DeleteWebhookRequest>) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let reference = request.into_inner().webhook_id;
        self.delete(&account_id, &reference).await?;
        Ok(deleted(reference))
    }

    async fn test_webhook(
        &self,
        request: Request<TestWebhookRequest>,
    ) -> Result<Response<WebhookDeliveryAnswer>, Status> {
        let account_id = account_of(&request)?;
        let delivery = self.test(&account_id, &request.get_ref().webhook_id).await?;
        Ok(Response::new(WebhookDeliveryAnswer {
            success: true,
            delivery: Some(delivery),
        }))
    }

    async fn get_webhook_health(
        &self,
        request: Request<GetWebhookHealthRequest>,
    ) -> Result<Response<WebhookHealthAnswer>, Status> {
        let account_id = account_of(&request)?;
        let health = self.health(&account_id, &request.get_ref().webhook_id).await?;
        Ok(Response::new(WebhookHealthAnswer {
            success: true,
            health: Some(health),
        }))
    }

    async fn re_enable_webhook(
        &self,
        request: Request<ReEnableWebhookRequest>,
    ) -> Result<Response<ReEnabledWebhook>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(self.re_enable(&account_id, request.into_inner()).await?))
    }

    async fn list_webhook_deliveries(
        &self,
        request: Request<ListWebhookDeliveriesRequest>,
    ) -> Result<Response<WebhookDeliveryList>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(self.deliveries(&account_id, request.into_inner()).await?))
    }
}
