//! `frontdesk admin ...`: the operator's command line over the admin gRPC service, authenticated with
//! `FRONTDESK_ADMIN_TOKEN`. Human-readable output by default, one JSON object with `--json`.

use clap::{Args, Subcommand};
use frontdesk_api::admin::v1::{
    Account, CancelJobsRequest, CreateAccountRequest, CreditsRequest, DeleteAccountRequest, GetAccountRequest,
    IssueApiKeyRequest, Job, ListJobsRequest, RetryJobRequest, UpdateAccountRequest, admin_client::AdminClient,
};
use serde_json::{Value, json};
use tonic::{Request, metadata::MetadataValue, transport::Channel};

#[derive(Args)]
pub struct AdminArgs {
    /// gRPC address of the core.
    #[arg(
        long = "core",
        env = "FRONTDESK_CORE_URL",
        default_value = "http://127.0.0.1:50051",
        global = true
    )]
    core_url: String,

    /// Print one JSON object instead of text.
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Create an account; prints its id and its first API key (shown once).
    CreateAccount {
        #[arg(long)]
        name: String,
        /// launch, growth or scale.
        #[arg(long)]
        plan: String,
        /// Opening credit balance, e.g. 100 or 0.15.
        #[arg(long, default_value = "")]
        credits: String,
        /// Requests per minute (default 600).
        #[arg(long, default_value_t = 0)]
        rate_limit: i32,
        /// Agency account that owns the new one.
        #[arg(long = "parent", default_value = "")]
        parent: String,
    },
    /// Show an account.
    GetAccount {
        #[arg(long)]
        account: String,
    },
    /// Issue another API key for an account.
    IssueKey {
        #[arg(long)]
        account: String,
        /// Sections the key may call, comma separated; all when omitted.
        #[arg(long, value_delimiter = ',')]
        scopes: Vec<String>,
    },
    /// Change an account's plan.
    SetPlan {
        #[arg(long)]
        account: String,
        #[arg(long)]
        plan: String,
    },
    /// Change an account's feature flags or rate limit.
    UpdateAccount {
        #[arg(long)]
        account: String,
        #[arg(long)]
        api_access: Option<bool>,
        #[arg(long = "webhooks")]
        webhooks: Option<bool>,
        #[arg(long)]
        rate_limit: Option<i32>,
    },
    /// Add credits (a ledger entry is written).
    GrantCredits(CreditChange),
    /// Remove credits (a ledger entry is written).
    DebitCredits(CreditChange),
    /// Delete an account; its keys stop working at once.
    DeleteAccount {
        #[arg(long)]
        account: String,
    },
    /// The durable job queue's figures and its jobs: waiting and running ones by when they run next, or with
    /// `--failed` those that used up their tries (with `--cancelled` the cancelled ones), latest first, with
    /// their last error. `frontdesk admin jobs cancel` cancels jobs.
    Jobs {
        #[command(subcommand)]
        cancel: Option<JobsCommand>,
        #[arg(long, conflicts_with = "cancelled")]
        failed: bool,
        #[arg(long)]
        cancelled: bool,
        /// Only jobs of this kind (`deliver_message`, ...).
        #[arg(long, default_value = "")]
        kind: String,
        /// Only this account's jobs.
        #[arg(long, default_value = "")]
        account: String,
        /// Only jobs of this lane (a channel's id, ...).
        #[arg(long, default_value = "")]
        lane: String,
        /// Only jobs of this group (a broadcast's id, ...).
        #[arg(long, default_value = "")]
        group: String,
        /// At most this many jobs (1 to 200).
        #[arg(long, default_value_t = 50)]
        limit: i32,
    },
    /// Put a failed or cancelled job back in the queue, due now, its tries counted from 0.
    RetryJob {
        /// The job's id (`job_...`).
        id: String,
    },
}

/// What `frontdesk admin jobs` does besides listing.
#[derive(Subcommand)]
pub enum JobsCommand {
    /// Cancel pending jobs: the one with this id, the one holding this key, or every job of this group.
    /// Waiting jobs never run; running ones are stopped at their worker's next lease renewal.
    Cancel {
        #[arg(long, group = "which")]
        id: Option<String>,
        #[arg(long, group = "which")]
        key: Option<String>,
        #[arg(long, group = "which")]
        group: Option<String>,
        /// Only this account's jobs.
        #[arg(long, default_value = "")]
        account: String,
    },
}

/// Which account, how many credits, and why.
#[derive(Args)]
struct CreditChange {
    #[arg(long)]
    account: String,
    /// A positive decimal with at most three fractional digits, e.g. 100 or 0.15.
    #[arg(long)]
    credits: String,
    /// Kept in the ledger entry.
    #[arg(long, default_value = "")]
    reason: String,
}

impl From<CreditChange> for CreditsRequest {
    fn from(c: CreditChange) -> Self {
        Self {
            account_id: c.account,
            credits: c.credits,
            reason: c.reason,
        }
    }
}

pub async fn run(args: AdminArgs) -> anyhow::Result<()> {
    let token = std::env::var("FRONTDESK_ADMIN_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| anyhow::anyhow!("set FRONTDESK_ADMIN_TOKEN to the core's admin token"))?;
    let bearer: MetadataValue<_> = format!("Bearer {token}")
        .parse()
        .map_err(|_| anyhow::anyhow!("FRONTDESK_ADMIN_TOKEN has characters a header cannot carry"))?;
    let channel = Channel::from_shared(args.core_url.clone())?
        .connect()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach the core at {}: {e}", args.core_url))?;
    let mut client = AdminClient::with_interceptor(channel, BearerToken(bearer));
    let output = call(&mut client, args.command).await.map_err(describe)?;
    if args.json {
        println!("{output}");
    } else {
        print_text(&output);
    }
    Ok(())
}

type Client = AdminClient<tonic::service::interceptor::InterceptedService<Channel, BearerToken>>;

/// Adds `authorization: Bearer <admin token>` to every call.
#[derive(Clone)]
struct BearerToken(MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, tonic::Status> {
        request.metadata_mut().insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// Runs one command; the answer as JSON.
async fn call(client: &mut Client, command: AdminCommand) -> Result<Value, tonic::Status> {
    Ok(match command {
        AdminCommand::CreateAccount {
            name,
            plan,
            credits,
            rate_limit,
            parent,
        } => {
            let created = client
                .create_account(CreateAccountRequest {
                    name,
                    plan,
                    credits,
                    rate_limit,
                    parent_account_id: parent,
                })
                .await?
                .into_inner();
            let mut out = account_json(created.account.unwrap_or_default());
            out["api_key"] = json!(created.api_key);
            out
        }
        AdminCommand::GetAccount { account } => account_json(
            client
                .get_account(GetAccountRequest { account_id: account })
                .await?
                .into_inner(),
        ),
        AdminCommand::IssueKey { account, scopes } => {
            let issued = client
                .issue_api_key(IssueApiKeyRequest {
                    account_id: account,
                    scopes,
                })
                .await?
                .into_inner();
            json!({"api_key": issued.api_key, "api_key_masked": issued.api_key_masked, "scopes": issued.scopes})
        }
        AdminCommand::SetPlan { account, plan } => account_json(
            client
                .update_account(UpdateAccountRequest {
                    account_id: account,
                    plan: Some(plan),
                    ..Default::default()
                })
                .await?
                .into_inner(),
        ),
        AdminCommand::UpdateAccount {
            account,
            api_access,
            webhooks,
            rate_limit,
        } => account_json(
            client
                .update_account(UpdateAccountRequest {
                    account_id: account,
                    plan: None,
                    api_access,
                    webhooks_enabled: webhooks,
                    rate_limit,
                })
                .await?
                .into_inner(),
        ),
        AdminCommand::GrantCredits(change) => credits_json(client.grant_credits(CreditsRequest::from(change)).await?),
        AdminCommand::DebitCredits(change) => credits_json(client.debit_credits(CreditsRequest::from(change)).await?),
        AdminCommand::DeleteAccount { account } => account_json(
            client
                .delete_account(DeleteAccountRequest { account_id: account })
                .await?
                .into_inner(),
        ),
        AdminCommand::Jobs {
            cancel:
                Some(JobsCommand::Cancel {
                    id,
                    key,
                    group,
                    account,
                }),
            ..
        } => {
            let result = client
                .cancel_jobs(CancelJobsRequest {
                    id: id.unwrap_or_default(),
                    key: key.unwrap_or_default(),
                    group: group.unwrap_or_default(),
                    account_id: account,
                })
                .await?
                .into_inner();
            json!({ "cancelled": result.cancelled })
        }
        AdminCommand::Jobs {
            cancel: None,
            failed,
            cancelled,
            kind,
            account,
            lane,
            group,
            limit,
        } => {
            let request = ListJobsRequest {
                failed,
                cancelled,
                kind,
                limit,
                account_id: account,
                lane,
                group,
            };
            let list = client.list_jobs(request).await?.into_inner();
            json!({
                "pending": list.pending,
                "due": list.due,
                "failed": list.failed,
                "cancelled": list.cancelled,
                "oldest_due_age_seconds": list.oldest_due_age_seconds,
                "jobs": list.jobs.into_iter().map(job_json).collect::<Vec<_>>(),
            })
        }
        AdminCommand::RetryJob { id } => job_json(client.retry_job(RetryJobRequest { id }).await?.into_inner()),
    })
}

fn job_json(job: Job) -> Value {
    let time = |t: Option<prost_types::Timestamp>| {
        t.and_then(|t| chrono::DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).unwrap_or(0)))
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    };
    json!({
        "id": job.id,
        "account_id": job.account_id,
        "kind": job.kind,
        "class": job.class,
        "lane": job.lane,
        "group": job.group,
        "key": job.key,
        "status": job.status,
        "runs_again": job.runs_again,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "run_at": time(job.run_at),
        "last_error": job.last_error,
        "created_at": time(job.created_at),
        "updated_at": time(job.updated_at),
    })
}

/// `reason: message` and any field problems, from the status the core answered.
fn describe(status: tonic::Status) -> anyhow::Error {
    use tonic_types::StatusExt;
    let details = status.get_error_details();
    let reason = details.error_info().map_or_else(
        || format!("{:?}", status.code()),
        |info| info.reason.to_ascii_lowercase(),
    );
    let mut text = format!("{reason}: {}", status.message());
    for violation in details
        .bad_request()
        .map(|b| b.field_violations.clone())
        .unwrap_or_default()
    {
        text.push_str(&format!("\n  {}: {}", violation.field, violation.description));
    }
    anyhow::anyhow!(text)
}

fn credits_json(answer: tonic::Response<frontdesk_api::admin::v1::CreditsResult>) -> Value {
    let result = answer.into_inner();
    json!({"credit_balance": result.credit_balance, "ledger_entry_id": result.ledger_entry_id})
}

fn account_json(a: Account) -> Value {
    let seconds = |t: Option<prost_types::Timestamp>| t.map(|t| t.seconds);
    json!({
        "account_id": a.id,
        "name": a.name,
        "plan": a.plan,
        "api_access": a.api_access,
        "webhooks_enabled": a.webhooks_enabled,
        "credit_balance": a.credit_balance,
        "rate_limit": a.rate_limit,
        "parent_account_id": a.parent_account_id,
        "created_at": seconds(a.created_at).and_then(|s| chrono::DateTime::from_timestamp(s, 0)).map(|t| t.to_rfc3339()),
        "deleted": a.deleted_at.is_some(),
    })
}

/// One `name  value` line per field (a list of jobs as a table after them); the API key last, with a reminder
/// that it is shown once.
fn print_text(output: &Value) {
    let Some(fields) = output.as_object() else {
        return;
    };
    for (name, value) in fields
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "api_key" | "jobs"))
    {
        let value = match value {
            Value::String(s) => s.clone(),
            Value::Null => "-".to_owned(),
            other => other.to_string(),
        };
        println!("{:<18} {value}", name.replace('_', " "));
    }
    if let Some(jobs) = output.get("jobs").and_then(Value::as_array) {
        println!();
        for job in jobs {
            let text = |key: &str| job[key].as_str().unwrap_or("-").to_owned();
            println!(
                "{}  {:<16} {:<8} {}/{}  {}  {}",
                text("id"),
                text("kind"),
                text("status"),
                job["attempts"],
                job["max_attempts"],
                text("run_at"),
                text("last_error")
            );
        }
    }
    if let Some(key) = output.get("api_key").and_then(Value::as_str) {
        println!("{:<18} {key}    (shown once: store it now)", "api key");
    }
}
