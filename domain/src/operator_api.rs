//! The operator's gRPC service (`frontdesk.admin.v1.Admin`). Every call must carry
//! `authorization: Bearer <FRONTDESK_ADMIN_TOKEN>`; with no token configured, every call is refused.

use std::sync::Arc;

use frontdesk_api::admin::v1::{
    Account, Backlog, CancelJobsRequest, CancelJobsResult, CreateAccountRequest, CreatedAccount, CreditsRequest,
    CreditsResult, DeleteAccountRequest, GetAccountRequest, GetBacklogRequest, IssueApiKeyRequest, IssuedApiKey, Job,
    JobList, ListJobsRequest, RetryJobRequest, SetTestClockRequest, TestClock, UpdateAccountRequest,
    admin_server::Admin,
};
use sea_orm::DatabaseConnection;
use subtle::ConstantTimeEq;
use tonic::{Code, Request, Response, Status};

use crate::error::Reason;
use crate::{
    access::{AccountId, key_store, scopes::Scopes, verified_keys::VerifiedKeys},
    accounts::{
        DEFAULT_RATE_LIMIT, credits,
        store::{self, AccountChanges, NewAccount},
    },
    clock::{Clock, SteerableClock},
    error::{ApiError, ApiResult, FieldViolation},
    jobs,
    plan::Plan,
    store::entities::{accounts, jobs::JobStatus},
    timestamps,
};

/// Checks the admin bearer token in constant time. A tonic interceptor, run before any admin handler.
#[derive(Clone)]
pub struct AdminToken(Option<Arc<str>>);

impl AdminToken {
    pub fn new(token: Option<String>) -> Self {
        Self(token.filter(|t| !t.is_empty()).map(Arc::from))
    }

    pub fn check(&self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(expected) = &self.0 else {
            return Err(ApiError::new(
                Code::PermissionDenied,
                Reason::AdminDisabled,
                "the admin API is disabled: set FRONTDESK_ADMIN_TOKEN",
            )
            .into());
        };
        let presented = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        if bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
            Ok(request)
        } else {
            Err(ApiError::new(
                Code::Unauthenticated,
                Reason::Unauthenticated,
                "wrong or missing admin token",
            )
            .into())
        }
    }
}

#[derive(Clone)]
pub struct AdminService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    /// The clock `SetTestClock` steers; `None` unless FRONTDESK_TEST_CLOCK=true.
    test_clock: Option<Arc<SteerableClock>>,
    /// The job handlers, which settle what cancelled jobs stood for.
    handlers: jobs::Handlers,
    /// The replicas' verified API keys, which an account's change makes stale.
    keys: Arc<VerifiedKeys>,
}

impl AdminService {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        test_clock: Option<Arc<SteerableClock>>,
        handlers: jobs::Handlers,
        keys: Arc<VerifiedKeys>,
    ) -> Self {
        Self {
            db,
            clock,
            test_clock,
            handlers,
            keys,
        }
    }
}

fn parse_plan(plan: &str) -> ApiResult<Plan> {
    Plan::parse(plan).ok_or_else(|| {
        ApiError::invalid(vec![FieldViolation::new(
            "plan",
            "must be one of launch, growth, scale",
        )])
    })
}

fn parse_credits(credits: &str, required: bool) -> ApiResult<i64> {
    if credits.is_empty() && !required {
        return Ok(0);
    }
    credits::parse_milli(credits)
        .filter(|m| !required || *m > 0)
        .ok_or_else(|| {
            ApiError::invalid(vec![FieldViolation::new(
                "credits",
                "must be a positive decimal with at most three fractional digits",
            )])
        })
}

fn rate_limit(value: i32) -> ApiResult<u32> {
    match value {
        0 => Ok(DEFAULT_RATE_LIMIT),
        1..=1_000_000 => Ok(value as u32),
        _ => Err(ApiError::invalid(vec![FieldViolation::new(
            "rate_limit",
            "must be between 1 and 1000000 requests per minute",
        )])),
    }
}

/// Fails the account's pending webhook deliveries with the change that stops its webhooks, so no attempt
/// starts after the call returns (an attempt already claimed is refused by the claim guard).
async fn stop_deliveries(
    txn: &sea_orm::DatabaseTransaction,
    account: &accounts::Model,
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<()> {
    let account_id = AccountId::of_row(&account.id);
    crate::webhooks::store::fail_pending(txn, crate::webhooks::store::Pending::OfAccount(&account_id), now).await?;
    Ok(())
}

pub fn account_message(a: accounts::Model) -> Account {
    Account {
        id: a.id,
        name: a.name,
        plan: a.plan,
        api_access: a.api_access,
        webhooks_enabled: a.webhooks_enabled,
        credit_balance: credits::to_decimal(a.credit_milli),
        rate_limit: a.rate_limit,
        parent_account_id: a.parent_account_id,
        created_at: Some(timestamps::to_proto(a.created_at)),
        updated_at: Some(timestamps::to_proto(a.updated_at)),
        deleted_at: a.deleted_at.map(timestamps::to_proto),
    }
}

#[tonic::async_trait]
impl Admin for AdminService {
    async fn create_account(&self, request: Request<CreateAccountRequest>) -> Result<Response<CreatedAccount>, Status> {
        let r = request.into_inner();
        let name = r.name.trim().to_owned();
        if name.is_empty() || name.chars().count() > 200 {
            return Err(ApiError::invalid(vec![FieldViolation::new("name", "must be 1 to 200 characters")]).into());
        }
        let new = NewAccount {
            name,
            plan: parse_plan(&r.plan)?,
            credit_milli: parse_credits(&r.credits, false)?,
            rate_limit: rate_limit(r.rate_limit)?,
            parent_account_id: Some(r.parent_account_id).filter(|p| !p.is_empty()),
        };
        let (account, key) = crate::onboarding::create(&self.db, new, self.clock.now()).await?;
        tracing::info!(account_id = account.id, plan = account.plan, "account created");
        Ok(Response::new(CreatedAccount {
            account: Some(account_message(account)),
            api_key_masked: key.masked(),
            api_key: key.reveal().to_owned(),
        }))
    }

    async fn get_account(&self, request: Request<GetAccountRequest>) -> Result<Response<Account>, Status> {
        let account = store::find_live(&self.db, &request.into_inner().account_id).await?;
        Ok(Response::new(account_message(account)))
    }

    async fn update_account(&self, request: Request<UpdateAccountRequest>) -> Result<Response<Account>, Status> {
        let r = request.into_inner();
        let changes = AccountChanges {
            plan: r.plan.as_deref().map(parse_plan).transpose()?,
            api_access: r.api_access,
            webhooks_enabled: r.webhooks_enabled,
            rate_limit: r.rate_limit.map(rate_limit).transpose()?,
        };
        let webhooks_off = changes.webhooks_enabled == Some(false);
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        let account = store::update(&txn, &r.account_id, changes, now).await?;
        if webhooks_off {
            stop_deliveries(&txn, &account, now).await?;
        }
        txn.commit().await.map_err(ApiError::from)?;
        self.keys.changed(&account.id).await;
        tracing::info!(account_id = account.id, "account updated");
        Ok(Response::new(account_message(account)))
    }

    async fn delete_account(&self, request: Request<DeleteAccountRequest>) -> Result<Response<Account>, Status> {
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        let account = store::delete(&txn, &request.into_inner().account_id, now).await?;
        stop_deliveries(&txn, &account, now).await?;
        txn.commit().await.map_err(ApiError::from)?;
        self.keys.changed(&account.id).await;
        tracing::info!(account_id = account.id, "account deleted");
        Ok(Response::new(account_message(account)))
    }

    async fn grant_credits(&self, request: Request<CreditsRequest>) -> Result<Response<CreditsResult>, Status> {
        self.adjust(request.into_inner(), 1).await
    }

    async fn debit_credits(&self, request: Request<CreditsRequest>) -> Result<Response<CreditsResult>, Status> {
        self.adjust(request.into_inner(), -1).await
    }

    async fn set_test_clock(&self, request: Request<SetTestClockRequest>) -> Result<Response<TestClock>, Status> {
        let clock = self.test_clock.as_ref().ok_or_else(|| {
            ApiError::new(
                Code::FailedPrecondition,
                Reason::TestClockDisabled,
                "the test clock is off: start the service with FRONTDESK_TEST_CLOCK=true",
            )
        })?;
        clock.set(timestamps::from_proto("now", request.into_inner().now)?);
        tracing::warn!(offset_ms = clock.offset().num_milliseconds(), "test clock moved");
        jobs::recurring::due_now(&self.db, clock.now().timestamp_millis())
            .await
            .map_err(crate::error::ApiError::from)?;
        Ok(Response::new(TestClock {
            now: Some(timestamps::to_proto(clock.now())),
            offset_ms: clock.offset().num_milliseconds(),
        }))
    }

    async fn list_jobs(&self, request: Request<ListJobsRequest>) -> Result<Response<JobList>, Status> {
        let r = request.into_inner();
        if !(0..=200).contains(&r.limit) {
            return Err(ApiError::field("limit", "must be between 1 and 200").into());
        }
        if r.failed && r.cancelled {
            return Err(ApiError::field("cancelled", "cannot be set with failed").into());
        }
        let limit = if r.limit == 0 { 50 } else { r.limit };
        let (now_ms, lease_now_ms) = (
            self.clock.now().timestamp_millis(),
            self.clock.lease_now().timestamp_millis(),
        );
        let status = match (r.failed, r.cancelled) {
            (true, _) => JobStatus::Failed,
            (_, true) => JobStatus::Cancelled,
            _ => JobStatus::Pending,
        };
        let filter = jobs::inspection::Filter {
            status,
            kind: r.kind,
            account_id: r.account_id,
            lane: r.lane,
            group: r.group,
        };
        let rows = jobs::inspection::list(&self.db, &filter, limit.unsigned_abs().into())
            .await
            .map_err(ApiError::from)?;
        let stats = jobs::inspection::stats(&self.db, now_ms)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(JobList {
            jobs: rows
                .iter()
                .map(|job| jobs::inspection::job_message(job, lease_now_ms))
                .collect(),
            pending: stats.pending,
            due: stats.due,
            failed: stats.failed,
            oldest_due_age_seconds: stats.oldest_due_age_seconds,
            cancelled: stats.cancelled,
        }))
    }

    async fn get_backlog(&self, _request: Request<GetBacklogRequest>) -> Result<Response<Backlog>, Status> {
        let (now, lease_now) = (self.clock.now(), self.clock.lease_now());
        let backlog = jobs::inspection::backlog(&self.db, now.timestamp_millis(), lease_now.timestamp_millis())
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(backlog))
    }

    async fn cancel_jobs(&self, request: Request<CancelJobsRequest>) -> Result<Response<CancelJobsResult>, Status> {
        let r = request.into_inner();
        let which = match (r.id.is_empty(), r.key.is_empty(), r.group.is_empty()) {
            (false, true, true) => jobs::cancel::Selector::Id(r.id),
            (true, false, true) => jobs::cancel::Selector::Key(r.key),
            (true, true, false) => jobs::cancel::Selector::Group(r.group),
            _ => return Err(ApiError::field("id", "give exactly one of id, key and group").into()),
        };
        let account = (!r.account_id.is_empty()).then_some(r.account_id.as_str());
        let cancelled = jobs::cancel::cancel(&self.db, &self.handlers, &which, account, self.clock.now())
            .await
            .map_err(ApiError::from)?;
        tracing::info!(?which, cancelled, "jobs cancelled by an operator");
        Ok(Response::new(CancelJobsResult {
            cancelled: i64::try_from(cancelled).unwrap_or(i64::MAX),
        }))
    }

    async fn retry_job(&self, request: Request<RetryJobRequest>) -> Result<Response<Job>, Status> {
        let now = self.clock.now();
        let job = jobs::inspection::retry(&self.db, &request.into_inner().id, now)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| ApiError::not_found("failed or cancelled job"))?;
        tracing::info!(job = job.id, kind = job.kind, "job queued again by an operator");
        Ok(Response::new(jobs::inspection::job_message(
            &job,
            self.clock.lease_now().timestamp_millis(),
        )))
    }

    async fn issue_api_key(&self, request: Request<IssueApiKeyRequest>) -> Result<Response<IssuedApiKey>, Status> {
        let r = request.into_inner();
        let scopes = Scopes::parse(&r.scopes)?;
        let account = store::find_live(&self.db, &r.account_id).await?;
        let account_id = AccountId::checked_by_operator(account.id);
        let (key, _) = key_store::issue(&self.db, &account_id, &scopes, self.clock.now())
            .await
            .map_err(ApiError::from)?;
        tracing::info!(%account_id, "api key issued");
        Ok(Response::new(IssuedApiKey {
            api_key: key.reveal().to_owned(),
            api_key_masked: key.masked(),
            scopes: scopes.names(),
        }))
    }
}

impl AdminService {
    async fn adjust(&self, r: CreditsRequest, sign: i64) -> Result<Response<CreditsResult>, Status> {
        let milli = parse_credits(&r.credits, true)?;
        let reason = if r.reason.is_empty() {
            if sign > 0 { "grant" } else { "debit" }
        } else {
            r.reason.as_str()
        };
        // A missing or deleted account is a 404, as the adjustment's own check would answer.
        let account = store::find_live(&self.db, &r.account_id).await?;
        let account_id = AccountId::checked_by_operator(account.id);
        let (balance, entry) =
            store::adjust_credits(&self.db, &account_id, sign * milli, reason, self.clock.now()).await?;
        Ok(Response::new(CreditsResult {
            credit_balance: credits::to_decimal(balance),
            ledger_entry_id: entry,
        }))
    }
}
