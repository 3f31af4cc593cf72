//! The guard in front of every platform (`frontdesk.v1`) gRPC call, REST or direct: authentication (401),
//! the rate limit (429), then access and scope (403), in that order, then the `Caller` for the handler.
//! Every answer it lets through, or makes, carries the `RateLimit-Policy` and `RateLimit` headers.

use std::{collections::HashMap, sync::Arc};

use axum::{extract::Request, response::Response};
use frontdesk_api::{FILE_DESCRIPTOR_SET, wire};
use http::{HeaderMap, HeaderValue};
use prost_reflect::{DescriptorPool, Value};
use sea_orm::DatabaseConnection;
use tonic::Code;

use super::{
    AccountId,
    api_key::ApiKey,
    caller::Caller,
    credentials::{presented_key, unauthenticated},
    rate_limit::{Counted, Decision, RateLimiter},
    scopes::Scopes,
    verified_keys::{SubAccount, Verified, VerifiedKeys},
};
use crate::error::Reason;
use crate::{error::ApiError, store::entities::accounts};

/// Package prefix of the gRPC paths the guard protects.
const PLATFORM_PREFIX: &str = "/frontdesk.v1.";

pub struct Guard {
    db: DatabaseConnection,
    limiter: RateLimiter,
    keys: Arc<VerifiedKeys>,
    /// Service full name -> the key section it belongs to (`None`: always allowed).
    sections: HashMap<String, Option<String>>,
}

impl Guard {
    pub fn new(db: DatabaseConnection, limiter: RateLimiter, keys: Arc<VerifiedKeys>) -> anyhow::Result<Self> {
        Ok(Self {
            db,
            limiter,
            keys,
            sections: service_sections()?,
        })
    }

    async fn admit(&self, headers: &HeaderMap, service: &str) -> Result<Caller, (ApiError, Option<Decision>)> {
        let key = presented_key(headers).map_err(|e| (e, None))?;
        let sub_account = sub_account(headers);
        let (verified, rate) = self
            .verify_and_count(&key, sub_account.as_deref())
            .await
            .map_err(|e| (e, None))?;
        if !rate.allowed {
            let limited = ApiError::new(
                Code::ResourceExhausted,
                Reason::RateLimited,
                format!(
                    "rate limit of {} requests per {} s reached; retry after {} s",
                    rate.limit,
                    self.limiter.window_seconds(),
                    rate.retry_after
                ),
            );
            return Err((limited, Some(rate)));
        }
        let account_id = self.authorize(service, &verified).map_err(|e| (e, Some(rate)))?;
        Ok(Caller {
            account_id,
            key: verified.key.key.clone(),
            rate,
        })
    }

    /// The call's key verified and the call counted, in one Redis round trip when the key is cached and
    /// Redis finds its stamps current; otherwise from the database (401 when the key is not live).
    async fn verify_and_count(
        &self,
        key: &ApiKey,
        sub_account: Option<&str>,
    ) -> Result<(Verified, Decision), ApiError> {
        if let Some(cached) = self.keys.cached(&key.hash(), sub_account) {
            let account = &cached.key.account;
            match self
                .limiter
                .count(&account.id, limit_of(account), &cached.stamps())
                .await
            {
                Counted::Vouched(rate) => return Ok((cached, rate)),
                // Redis could not vouch for the cache: the database decides (the call is counted already).
                Counted::Unvouched(rate) => {
                    let verified = self.keys.read(&self.db, key, sub_account).await?;
                    return Ok((verified.ok_or_else(unknown_key)?, rate));
                }
                Counted::Stale => self.keys.forget(&cached),
            }
        }
        let verified = self
            .keys
            .load(&self.db, key, sub_account)
            .await?
            .ok_or_else(unknown_key)?;
        // Read for this very call: nothing to compare its stamps with.
        let account = &verified.key.account;
        let rate = self.limiter.check(&account.id, limit_of(account)).await;
        Ok((verified, rate))
    }

    /// The account the call acts on, when the key's account switches and scopes let it call `service`
    /// (on the sub-account it names, if any); 403 otherwise.
    fn authorize(&self, service: &str, verified: &Verified) -> Result<AccountId, ApiError> {
        let section = self.sections.get(service).and_then(Option::as_deref);
        let account = &verified.key.account;
        account_flags(account, section)?;
        if let Some(section) = section
            && !Scopes::from_stored(&verified.key.key.scopes).allows(section)
        {
            return Err(ApiError::new(
                Code::PermissionDenied,
                Reason::InsufficientScope,
                format!("this API key may not call the {section} section"),
            ));
        }
        match &verified.sub_account {
            SubAccount::None => Ok(AccountId::authenticated(account.id.clone())),
            // Not found and not a child both answer 403, so the answer reveals nothing.
            SubAccount::Live(child) if child.account.parent_account_id.as_deref() == Some(account.id.as_str()) => {
                // The agency's flags let the key in; the sub-account's decide what it may do there.
                account_flags(&child.account, section)?;
                Ok(AccountId::authenticated(child.account.id.clone()))
            }
            SubAccount::Live(_) | SubAccount::Unknown => Err(ApiError::new(
                Code::PermissionDenied,
                Reason::InsufficientScope,
                "sub_account_id is not a sub-account of this account",
            )),
        }
    }

    /// The edge's question before it reads a large body: whether the credentials pass, without counting
    /// the call (which comes next, and is counted then). Asked of the database.
    async fn credentials_pass(&self, headers: &HeaderMap, service: &str) -> Result<(), ApiError> {
        let key = presented_key(headers)?;
        let verified = self.keys.read(&self.db, &key, sub_account(headers).as_deref()).await?;
        self.authorize(service, &verified.ok_or_else(unknown_key)?).map(|_| ())
    }
}

fn unknown_key() -> ApiError {
    unauthenticated("unknown, rotated or revoked API key")
}

fn limit_of(account: &accounts::Model) -> u32 {
    u32::try_from(account.rate_limit).unwrap_or(1)
}

/// The account switches a call to `section` needs on `account`: API access on every call, webhooks on the
/// webhook calls. Checked on the key's account and, when an agency acts on one, on the sub-account.
fn account_flags(account: &accounts::Model, section: Option<&str>) -> Result<(), ApiError> {
    if !account.api_access {
        return Err(ApiError::new(
            Code::PermissionDenied,
            Reason::ApiAccessDisabled,
            "API access is not enabled on this account",
        ));
    }
    if section == Some("webhooks") && !account.webhooks_enabled {
        return Err(ApiError::new(
            Code::PermissionDenied,
            Reason::WebhooksDisabled,
            "webhooks are not enabled on this account",
        ));
    }
    Ok(())
}

/// A step of the one middleware over the core's gRPC routes: `next` runs the rest of the call.
pub async fn guard<Fut: Future<Output = Response>>(
    guard: Arc<Guard>,
    mut request: Request,
    next: impl FnOnce(Request) -> Fut,
) -> Response {
    let Some(service) = platform_service(request.uri().path()) else {
        return next(request).await;
    };
    let window = guard.limiter.window_seconds();
    if request.headers().contains_key(wire::CREDENTIALS_ONLY) {
        let error = match guard.credentials_pass(request.headers(), service).await {
            Ok(()) => preflight_passed(),
            Err(error) => error,
        };
        return refusal(error, None, window);
    }
    match guard.admit(request.headers(), service).await {
        // The edge only asks whether these credentials pass; the request itself was not parsable.
        Ok(caller) if request.headers().contains_key(wire::PREFLIGHT) => {
            refusal(preflight_passed(), Some(caller.rate), window)
        }
        Ok(caller) => {
            let rate = caller.rate;
            request.extensions_mut().insert(caller);
            let mut response = next(request).await;
            rate_headers(response.headers_mut(), &rate, window);
            response
        }
        Err((error, rate)) => refusal(error, rate, window),
    }
}

fn preflight_passed() -> ApiError {
    ApiError::new(
        Code::FailedPrecondition,
        Reason::PreflightPassed,
        "credentials accepted",
    )
}

/// The guard's own answer: `error` as a gRPC status, with `WWW-Authenticate` on a 401 and the rate headers
/// when the call was counted.
fn refusal(error: ApiError, rate: Option<Decision>, window: u32) -> Response {
    let unauthenticated = error.code == Code::Unauthenticated;
    let mut response = tonic::Status::from(error).into_http::<axum::body::Body>();
    let headers = response.headers_mut();
    if unauthenticated {
        headers.insert(http::header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    if let Some(rate) = rate {
        rate_headers(headers, &rate, window);
    }
    response
}

/// `frontdesk.v1.Service` of a `/frontdesk.v1.Service/Method` path.
fn platform_service(path: &str) -> Option<&str> {
    path.strip_prefix('/')
        .filter(|_| path.starts_with(PLATFORM_PREFIX))
        .and_then(|p| p.split('/').next())
}

fn sub_account(headers: &HeaderMap) -> Option<String> {
    headers
        .get(wire::SUB_ACCOUNT)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// IETF RateLimit headers (draft 9 style): the policy, and what is left of it.
fn rate_headers(headers: &mut HeaderMap, rate: &Decision, window: u32) {
    let values = [
        ("ratelimit-policy", format!("\"default\";q={};w={window}", rate.limit)),
        (
            "ratelimit",
            format!("\"default\";r={};t={}", rate.remaining(), rate.reset_seconds),
        ),
    ];
    for (name, value) in values {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    if !rate.allowed
        && let Ok(value) = HeaderValue::from_str(&rate.retry_after.to_string())
    {
        headers.insert(http::header::RETRY_AFTER, value);
    }
}

/// Reads the `(frontdesk.v1.scope)` option of every platform service from the descriptor set.
fn service_sections() -> anyhow::Result<HashMap<String, Option<String>>> {
    let pool = DescriptorPool::decode(FILE_DESCRIPTOR_SET)?;
    let scope = pool
        .get_extension_by_name("frontdesk.v1.scope")
        .ok_or_else(|| anyhow::anyhow!("frontdesk.v1.scope option missing from the descriptors"))?;
    Ok(pool
        .services()
        .filter(|s| s.package_name() == "frontdesk.v1")
        .map(|service| {
            let options = service.options();
            let section = match &*options.get_extension(&scope) {
                Value::String(s) if !s.is_empty() => Some(s.clone()),
                _ => None,
            };
            (service.full_name().to_owned(), section)
        })
        .collect())
}

#[cfg(test)]
#[path = "guard_cache_tests.rs"]
mod cache_tests;

#[cfg(test)]
mod tests {
    #[test]
    fn platform_paths() {
        assert_eq!(
            super::platform_service("/frontdesk.v1.ApiKeys/GetCurrentApiKey"),
            Some("frontdesk.v1.ApiKeys")
        );
        assert_eq!(super::platform_service("/frontdesk.site.v0.Payments/CreateOrder"), None);
        assert_eq!(super::platform_service("/frontdesk.admin.v1.Admin/GetAccount"), None);
    }

    use std::{collections::HashMap, sync::Arc, time::Duration};

    use axum::{body::Body, extract::Request};
    use sea_orm::DatabaseConnection;

    use super::{Guard, RateLimiter};
    use crate::{
        access::{
            AccountId, key_store,
            scopes::Scopes,
            verified_keys::{CacheBounds, VerifiedKeys},
        },
        accounts::store::{self, AccountChanges, NewAccount},
        clock::{Clock, SystemClock},
        plan::Plan,
    };

    async fn guard() -> (Guard, DatabaseConnection) {
        let db = crate::store::connect("sqlite::memory:", 1, Default::default())
            .await
            .unwrap();
        crate::store::migrate(&db).await.unwrap();
        let sections = HashMap::from([
            ("frontdesk.v1.Deals".to_owned(), Some("deals".to_owned())),
            ("frontdesk.v1.Agents".to_owned(), Some("agents".to_owned())),
            ("frontdesk.v1.Webhooks".to_owned(), Some("webhooks".to_owned())),
            ("frontdesk.v1.ApiKeys".to_owned(), None),
        ]);
        let limiter = RateLimiter::new(None, Duration::from_secs(60));
        let keys = VerifiedKeys::new(
            None,
            CacheBounds {
                entries: 10,
                ttl: Duration::from_secs(60),
            },
        );
        (
            Guard {
                db: db.clone(),
                limiter,
                keys: Arc::new(keys),
                sections,
            },
            db,
        )
    }

    async fn account(db: &DatabaseConnection, plan: Plan, parent: Option<String>) -> (String, String) {
        let new = NewAccount {
            name: "t".into(),
            plan,
            credit_milli: 0,
            rate_limit: 600,
            parent_account_id: parent,
        };
        let (account, key) = crate::onboarding::create(db, new, SystemClock.now()).await.unwrap();
        (account.id, key.reveal().to_owned())
    }

    fn request(key: &str, sub_account: Option<&str>) -> Request {
        let mut builder = Request::builder().header("x-api-key", key);
        if let Some(id) = sub_account {
            builder = builder.header("x-sub-account-id", id);
        }
        builder.body(Body::empty()).unwrap()
    }

    async fn reason(guard: &Guard, key: &str, service: &str) -> Result<String, &'static str> {
        match guard.admit(request(key, None).headers(), service).await {
            Ok(caller) => Err(if caller.rate.allowed { "admitted" } else { "throttled" }),
            Err((error, _)) => Ok(error.reason.as_str().to_owned()),
        }
    }

    #[tokio::test]
    async fn scoped_keys_reach_only_their_sections() {
        let (guard, db) = guard().await;
        let (account_id, _) = account(&db, Plan::Growth, None).await;
        let scopes = Scopes::parse(&["agents".to_owned()]).unwrap();
        let (key, _) = key_store::issue(&db, &AccountId::of_row(account_id), &scopes, SystemClock.now())
            .await
            .unwrap();
        let key = key.reveal();
        assert_eq!(
            reason(&guard, key, "frontdesk.v1.Deals").await,
            Ok("insufficient_scope".to_owned())
        );
        assert_eq!(reason(&guard, key, "frontdesk.v1.Agents").await, Err("admitted"));
        assert_eq!(
            reason(&guard, key, "frontdesk.v1.ApiKeys").await,
            Err("admitted"),
            "api-keys always allowed"
        );
    }

    #[tokio::test]
    async fn account_flags_are_checked_before_scopes() {
        let (guard, db) = guard().await;
        let (account_id, key) = account(&db, Plan::Growth, None).await;
        assert_eq!(reason(&guard, &key, "frontdesk.v1.Webhooks").await, Err("admitted"));
        let now = SystemClock.now();
        let webhooks_off = AccountChanges {
            webhooks_enabled: Some(false),
            ..Default::default()
        };
        store::update(&db, &account_id, webhooks_off, now).await.unwrap();
        assert_eq!(
            reason(&guard, &key, "frontdesk.v1.Webhooks").await,
            Ok("webhooks_disabled".to_owned())
        );
        assert_eq!(
            reason(&guard, &key, "frontdesk.v1.Deals").await,
            Err("admitted"),
            "only webhook calls"
        );
        let access_off = AccountChanges {
            api_access: Some(false),
            ..Default::default()
        };
        store::update(&db, &account_id, access_off, now).await.unwrap();
        assert_eq!(
            reason(&guard, &key, "frontdesk.v1.Webhooks").await,
            Ok("api_access_disabled".to_owned())
        );
    }

    #[tokio::test]
    async fn an_agency_acts_on_its_own_children_only() {
        let (guard, db) = guard().await;
        let (agency, key) = account(&db, Plan::Scale, None).await;
        let (child, _) = account(&db, Plan::Growth, Some(agency.clone())).await;
        let (stranger, _) = account(&db, Plan::Growth, None).await;
        let caller = guard
            .admit(request(&key, Some(&child)).headers(), "frontdesk.v1.Deals")
            .await
            .unwrap();
        assert_eq!(
            (caller.account_id.as_str(), caller.key.account_id.to_string()),
            (child.as_str(), agency.clone())
        );
        let refused = guard
            .admit(request(&key, Some(&stranger)).headers(), "frontdesk.v1.Deals")
            .await;
        assert_eq!(refused.err().unwrap().0.reason, crate::error::Reason::InsufficientScope);
        let caller = guard
            .admit(request(&key, None).headers(), "frontdesk.v1.Deals")
            .await
            .unwrap();
        assert_eq!(caller.account_id.as_str(), agency);
    }

    #[tokio::test]
    async fn a_sub_accounts_own_flags_hold_when_an_agency_acts_on_it() {
        let (guard, db) = guard().await;
        let (agency, key) = account(&db, Plan::Scale, None).await;
        let (child, _) = account(&db, Plan::Growth, Some(agency)).await;
        let reason = |service: &'static str| {
            let (guard, key, child) = (&guard, key.clone(), child.clone());
            async move {
                match guard.admit(request(&key, Some(&child)).headers(), service).await {
                    Ok(_) => "admitted".to_owned(),
                    Err((error, _)) => error.reason.as_str().to_owned(),
                }
            }
        };
        let now = SystemClock.now();
        let webhooks_off = AccountChanges {
            webhooks_enabled: Some(false),
            ..Default::default()
        };
        store::update(&db, &child, webhooks_off, now).await.unwrap();
        assert_eq!(reason("frontdesk.v1.Webhooks").await, "webhooks_disabled");
        assert_eq!(reason("frontdesk.v1.Deals").await, "admitted");
        let access_off = AccountChanges {
            api_access: Some(false),
            ..Default::default()
        };
        store::update(&db, &child, access_off, now).await.unwrap();
        assert_eq!(reason("frontdesk.v1.Deals").await, "api_access_disabled");
        assert_eq!(reason("frontdesk.v1.ApiKeys").await, "api_access_disabled");
    }

    #[test]
    fn every_platform_service_is_known() {
        let sections = super::service_sections().unwrap();
        assert_eq!(sections.get("frontdesk.v1.ApiKeys"), Some(&None));
    }
}
