//! One durable job (`crate::jobs`). `run_at_ms` (Unix milliseconds) is when a worker may next claim it; a
//! claim pushes it to the end of the claim's lease, renewed while the worker runs it, so a job whose worker
//! died is claimed again when the lease runs out. Finished jobs are deleted; a job that used up its tries
//! stays as `failed` with its last error, and a cancelled one as `cancelled`, for operators, until the
//! retention deletes them.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "jobs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    /// The account the work belongs to; "" for the engine's own housekeeping.
    pub account_id: crate::tenant::AccountId,
    pub kind: String,
    /// What shares a concurrency cap (a channel's sends); "" for none.
    pub lane: String,
    /// The job's arguments, JSON.
    pub payload: String,
    pub status: JobStatus,
    /// Runs whose outcome was recorded.
    pub attempts: i32,
    pub max_attempts: i32,
    pub run_at_ms: i64,
    /// The token of the claim holding the job (it runs, or its outcome is being written).
    pub claim_token: Option<i64>,
    pub last_error: Option<String>,
    /// At most one pending job per key (a recurring housekeeping job, a conversation's reply).
    pub unique_key: Option<String>,
    /// 0 interactive, 1 bulk (`crate::jobs::Class`).
    pub class: i32,
    /// A group the job is cancelled with (a broadcast's sends).
    pub group_key: Option<String>,
    /// Set while the job runs when it must run once more after this run: when, Unix milliseconds.
    pub rerun_at_ms: Option<i64>,
    /// Runs claimed since the last recorded outcome: each claim adds one, each outcome or release clears
    /// it, so what is left counts runs cut short by a dead or paused worker.
    pub unfinished_runs: i32,
    /// The W3C `traceparent` of the work that enqueued it, when traces are exported.
    pub trace_parent: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

/// Where a job stands (finished jobs are deleted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, EnumIter, DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "Text")]
pub enum JobStatus {
    /// Waiting, or running (claimed, with a lease).
    #[default]
    #[sea_orm(string_value = "pending")]
    Pending,
    /// Used up its tries.
    #[sea_orm(string_value = "failed")]
    Failed,
    #[sea_orm(string_value = "cancelled")]
    Cancelled,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
