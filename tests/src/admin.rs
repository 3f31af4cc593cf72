//! The admin gRPC service as the tests use it: accounts with a known plan, limit and key.

use frontdesk_api::admin::v1::{
    CreateAccountRequest, CreditsRequest, GetBacklogRequest, IssueApiKeyRequest, ListJobsRequest, SetTestClockRequest,
    UpdateAccountRequest, admin_client::AdminClient,
};
use tonic::{Request, service::interceptor::InterceptedService, transport::Channel};

use crate::Server;

pub const TEST_ADMIN_TOKEN: &str = "test-admin-token";

pub type Admin = AdminClient<InterceptedService<Channel, fn(Request<()>) -> Result<Request<()>, tonic::Status>>>;

fn with_token(mut request: Request<()>) -> Result<Request<()>, tonic::Status> {
    let bearer = format!("Bearer {TEST_ADMIN_TOKEN}").parse().expect("ascii");
    request.metadata_mut().insert("authorization", bearer);
    Ok(request)
}

pub async fn client(server: &Server) -> Admin {
    let channel = Channel::from_shared(server.grpc.clone())
        .unwrap()
        .connect()
        .await
        .expect("admin connects");
    AdminClient::with_interceptor(
        channel,
        with_token as fn(Request<()>) -> Result<Request<()>, tonic::Status>,
    )
}

/// A new account on `plan` with `rate_limit` requests per window (0: default); returns (account id, key).
pub async fn account(server: &Server, plan: &str, rate_limit: i32) -> (String, String) {
    account_under(server, plan, rate_limit, "").await
}

/// Like `account`, as a sub-account of `parent`.
pub async fn account_under(server: &Server, plan: &str, rate_limit: i32, parent: &str) -> (String, String) {
    let created = client(server)
        .await
        .create_account(CreateAccountRequest {
            name: format!("{plan} test account"),
            plan: plan.to_owned(),
            credits: "10".to_owned(),
            rate_limit,
            parent_account_id: parent.to_owned(),
        })
        .await
        .expect("account created")
        .into_inner();
    crate::secrets::remember(&created.api_key);
    (created.account.expect("account").id, created.api_key)
}

pub async fn issue_key(server: &Server, account_id: &str, scopes: &[&str]) -> String {
    let key = client(server)
        .await
        .issue_api_key(IssueApiKeyRequest {
            account_id: account_id.to_owned(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
        })
        .await
        .expect("key issued")
        .into_inner()
        .api_key;
    crate::secrets::remember(&key);
    key
}

/// Adds `credits` (a decimal, e.g. "100") to the account's balance.
pub async fn grant_credits(server: &Server, account_id: &str, credits: &str) {
    client(server)
        .await
        .grant_credits(CreditsRequest {
            account_id: account_id.to_owned(),
            credits: credits.to_owned(),
            reason: "granted by a test".to_owned(),
        })
        .await
        .expect("credits granted");
}

pub async fn set_api_access(server: &Server, account_id: &str, api_access: bool) {
    client(server)
        .await
        .update_account(UpdateAccountRequest {
            account_id: account_id.to_owned(),
            api_access: Some(api_access),
            ..Default::default()
        })
        .await
        .expect("account updated");
}

pub async fn set_webhooks(server: &Server, account_id: &str, enabled: bool) {
    client(server)
        .await
        .update_account(UpdateAccountRequest {
            account_id: account_id.to_owned(),
            webhooks_enabled: Some(enabled),
            ..Default::default()
        })
        .await
        .expect("account updated");
}

/// Moves the service's clock to read `now` (`None`: back to system time); the server must run with
/// `FRONTDESK_TEST_CLOCK=true`.
pub async fn set_test_clock(server: &Server, now: Option<prost_types::Timestamp>) -> Result<(), tonic::Status> {
    client(server)
        .await
        .set_test_clock(SetTestClockRequest { now })
        .await
        .map(|_| ())
}

/// Moves the service's clock (`FRONTDESK_TEST_CLOCK=true`) to read `at`; time runs on from there.
pub async fn clock_at(server: &Server, at: chrono::DateTime<chrono::Utc>) {
    let at = prost_types::Timestamp {
        seconds: at.timestamp(),
        nanos: i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
    };
    set_test_clock(server, Some(at)).await.expect("the clock moves");
}

/// Waits until the service is quiet: no job or webhook delivery due or running, no event waiting for its
/// fan-out (read twice in a row, 50 ms apart; work scheduled for later does not count). A test that asserts
/// that nothing more happens waits for this rather than for a guessed time.
pub async fn quiesce(server: &Server) {
    let mut admin = client(server).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut quiet_reads = 0;
    while quiet_reads < 2 {
        let backlog = admin
            .get_backlog(GetBacklogRequest {})
            .await
            .expect("backlog")
            .into_inner();
        let busy = backlog.jobs_due
            + backlog.jobs_running
            + backlog.deliveries_due
            + backlog.deliveries_running
            + backlog.events_undispatched;
        quiet_reads = if busy == 0 { quiet_reads + 1 } else { 0 };
        assert!(
            std::time::Instant::now() < deadline,
            "the service never got quiet: {backlog:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Which jobs [`until_done`] waits for.
pub enum Jobs<'a> {
    /// The jobs of a lane (a channel's sends).
    Lane(&'a str),
    /// The jobs of a group (a broadcast's).
    Group(&'a str),
}

/// Waits until no job of `jobs` is waiting or running, scheduled later ones included: what was going to
/// happen has happened (where [`quiesce`] waits only for what is due now).
pub async fn until_done(server: &Server, jobs: Jobs<'_>) {
    let mut admin = client(server).await;
    let (lane, group) = match jobs {
        Jobs::Lane(lane) => (lane.to_owned(), String::new()),
        Jobs::Group(group) => (String::new(), group.to_owned()),
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let request = ListJobsRequest {
            lane: lane.clone(),
            group: group.clone(),
            limit: 1,
            ..Default::default()
        };
        let listed = admin.list_jobs(request).await.expect("jobs").into_inner();
        if listed.jobs.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "jobs still waiting: {:?}",
            listed.jobs
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
