//! The work-queue tables the engine claims from (`jobs`, `webhook_deliveries`) and the queues within them.
//!
//! A queue is the pending rows that share a key: a class, an account, a lane and a kind (a table without a
//! class or a kind has one of each). Each table has an index over its pending rows by key, then due time, so
//! the claim can hop from one queue to the next and read each queue's oldest due rows without reading any
//! other queue's backlog.

/// The condition "the row is still pending (and claimed)" for statements that find their rows by id or
/// claim token. Written as `(...) IS TRUE` so that the planner cannot match it to the partial indexes of
/// pending rows: with statistics taken while none was pending (a quiet table before a broadcast's enqueue)
/// those indexes look empty, and a plain `status = 'pending'` made it walk all of one (100,000 rows for a
/// batch of ten) instead of reading the batch's rows by key.
pub const STILL_PENDING: &str = "(status = 'pending') IS TRUE";
/// The same condition for a row that must also still be claimed.
pub const STILL_CLAIMED: &str = "(status = 'pending' AND claim_token IS NOT NULL) IS TRUE";

/// A table of claimable rows: `id`, `account_id`, `status` (`pending` while waiting or running),
/// `claim_token`, a due-time column in Unix milliseconds, and the key columns below.
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    /// When a pending row is due (and, while claimed, when its lease ends).
    pub due: &'static str,
    /// The class column (0 interactive, 1 bulk), when the table has one.
    pub class: Option<&'static str>,
    /// What shares a concurrency cap: a channel's sends, a subscription's deliveries.
    pub lane: &'static str,
    /// The kind column, when the table has one.
    pub kind: Option<&'static str>,
    /// The columns a claim returns of each row it took, after `id` and `claim_token` (the work's own).
    pub returning: &'static str,
    /// The column counting runs claimed and not recorded, when the table has one: each claim adds one, a
    /// release takes it back, and the work's outcomes clear it.
    pub unfinished_runs: Option<&'static str>,
}

impl Table {
    /// The key columns in the order of the queues' index.
    pub fn key_columns(&self) -> Vec<&'static str> {
        let mut columns = Vec::with_capacity(4);
        columns.extend(self.class);
        columns.push("account_id");
        columns.push(self.lane);
        columns.extend(self.kind);
        columns
    }

    /// The key's values for `key_columns`, as statement values.
    pub fn key_values(&self, key: &QueueKey) -> Vec<sea_orm::Value> {
        let mut values: Vec<sea_orm::Value> = Vec::with_capacity(4);
        if self.class.is_some() {
            values.push(key.class.into());
        }
        values.push(key.account.clone().into());
        values.push(key.lane.clone().into());
        if self.kind.is_some() {
            values.push(key.kind.clone().into());
        }
        values
    }

    /// The key of a row whose first columns are `key_columns`.
    pub fn key_of(&self, row: &sea_orm::QueryResult) -> Result<QueueKey, sea_orm::DbErr> {
        let mut at = 0;
        let mut next = || {
            at += 1;
            at - 1
        };
        let class = match self.class {
            Some(_) => row.try_get_by_index(next())?,
            None => 0,
        };
        let account = row.try_get_by_index(next())?;
        let lane = row.try_get_by_index(next())?;
        let kind = match self.kind {
            Some(_) => row.try_get_by_index(next())?,
            None => String::new(),
        };
        Ok(QueueKey {
            class,
            account,
            lane,
            kind,
        })
    }
}

/// One queue: the pending rows of one class, account, lane and kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueKey {
    pub class: i32,
    pub account: String,
    pub lane: String,
    pub kind: String,
}

impl QueueKey {
    /// What the lane cap counts: lanes belong to one account (a channel's id), and each account's jobs
    /// without a lane share one.
    pub fn lane_key(&self) -> (String, String) {
        (self.account.clone(), self.lane.clone())
    }

    /// What the account cap counts: an account's interactive and bulk work are capped apart, so its own
    /// bulk work never holds back its interactive work.
    pub fn account_key(&self) -> (i32, String) {
        (self.class, self.account.clone())
    }
}
