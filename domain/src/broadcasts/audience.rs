//! Who a broadcast goes to: contacts by id, contacts carrying any of some tags, and phone numbers (which
//! become contacts). Checked against the account when the broadcast is written (every id a contact of the
//! account, every tag carried by someone, at most [`MAX_AUDIENCE`] people), and expanded into recipients
//! when sending starts, one batch per run, so a large audience neither holds one huge transaction nor
//! blocks other work. A contact named twice (by id and by tag, or by two tags) is one recipient; opted-out
//! contacts are left out.

use chrono::{DateTime, Utc};
use frontdesk_api::v1::Audience;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement, Value};
use serde::{Deserialize, Serialize};

use crate::resource_id::ContactId;
use crate::{
    access::AccountId,
    contacts::{
        E164Phone,
        store::{self as contact_store, NewContact},
    },
    error::{ApiError, ApiResult},
    store::sql::one_of_text,
    validate::Violations,
};

/// People a broadcast may reach at most.
pub const MAX_AUDIENCE: i64 = 100_000;
/// Contact ids and phones an audience may list, each.
const MAX_LISTED: usize = 10_000;
const MAX_TAGS: usize = 50;
/// Recipients one expansion run adds at most.
pub const BATCH: usize = 1_000;

/// The audience as stored (JSON).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AudienceSpec {
    pub contact_ids: Vec<String>,
    pub tags: Vec<String>,
    pub phones: Vec<String>,
}

impl From<Audience> for AudienceSpec {
    fn from(a: Audience) -> Self {
        Self {
            contact_ids: a.contact_ids,
            tags: a.tags,
            phones: a.phones,
        }
    }
}

impl AudienceSpec {
    pub fn message(&self) -> Audience {
        Audience {
            contact_ids: self.contact_ids.clone(),
            tags: self.tags.clone(),
            phones: self.phones.clone(),
        }
    }

    fn is_empty(&self) -> bool {
        self.contact_ids.is_empty() && self.tags.is_empty() && self.phones.is_empty()
    }

    /// The checks that need no database.
    pub fn check_shape(&self, v: &mut Violations) {
        v.check(
            !self.is_empty(),
            "audience",
            "must name at least one contact, tag or phone",
        );
        v.list("audience.contact_ids", &self.contact_ids, MAX_LISTED, 64);
        v.list("audience.tags", &self.tags, MAX_TAGS, 64);
        v.check(
            self.phones.len() <= MAX_LISTED,
            "audience.phones",
            format!("must hold at most {MAX_LISTED} entries"),
        );
        if let Some(bad) = self.phones.iter().find(|p| E164Phone::parse(p).is_none()) {
            v.check(
                false,
                "audience.phones",
                format!("`{bad}` is not in E.164 format, e.g. +919812345678"),
            );
        }
    }

    /// The checks against the account's contacts: every id is one of its contacts, every tag is carried by
    /// at least one, and the audience reaches at most [`MAX_AUDIENCE`] people.
    pub async fn check_known(&self, db: &impl ConnectionTrait, account_id: &AccountId) -> ApiResult<()> {
        let backend = db.get_database_backend();
        let ids: Vec<String> = dedup(&self.contact_ids);
        let mut known = std::collections::HashSet::new();
        for chunk in ids.chunks(BATCH) {
            let (among, mut values) = one_of_text(backend, "id", 2, chunk.to_vec());
            values.insert(0, account_id.as_str().into());
            let sql = format!("SELECT id FROM contacts WHERE account_id = $1 AND {among}");
            for row in db
                .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
                .await?
            {
                known.insert(row.try_get_by_index::<String>(0)?);
            }
        }
        if let Some(unknown) = ids.iter().find(|id| !known.contains(*id)) {
            return Err(ApiError::field(
                "audience.contact_ids",
                format!("`{unknown}` is not a contact of this account"),
            ));
        }
        for tag in dedup(&self.tags) {
            let (carries, mut values) = tagged(backend, std::slice::from_ref(&tag), 2);
            values.insert(0, account_id.as_str().into());
            let sql = format!("SELECT 1 FROM contacts WHERE account_id = $1 AND {carries} LIMIT 1");
            if db
                .query_one_raw(Statement::from_sql_and_values(backend, sql, values))
                .await?
                .is_none()
            {
                return Err(ApiError::field(
                    "audience.tags",
                    format!("no contact of this account carries the tag `{tag}`"),
                ));
            }
        }
        let reached = if self.tags.is_empty() {
            ids.len() as i64
        } else {
            // The tagged contacts plus every listed id: one listed and tagged counts twice, so the bound
            // errs on the side of refusing.
            let (carries, tag_values) = tagged(backend, &self.tags, 2);
            let mut values: Vec<Value> = vec![account_id.as_str().into()];
            values.extend(tag_values);
            let sql = format!("SELECT count(*) FROM contacts WHERE account_id = $1 AND ({carries})");
            let tagged_count: i64 = match db
                .query_one_raw(Statement::from_sql_and_values(backend, sql, values))
                .await?
            {
                Some(row) => row.try_get_by_index(0)?,
                None => 0,
            };
            tagged_count + ids.len() as i64
        };
        let reached = reached + dedup(&self.phones).len() as i64;
        if reached > MAX_AUDIENCE {
            return Err(ApiError::field(
                "audience",
                format!("reaches {reached} people; a broadcast reaches at most {MAX_AUDIENCE}"),
            ));
        }
        Ok(())
    }
}

/// `values` without repeats, in their first order.
fn dedup(values: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    values.iter().filter(|v| seen.insert(v.as_str())).cloned().collect()
}

/// Contacts carrying any of `tags` (their `tags` column is a JSON array: the tag's JSON string is looked
/// for, case-sensitively), placeholders from `$first`.
fn tagged(backend: DbBackend, tags: &[String], first: usize) -> (String, Vec<Value>) {
    let find = match backend {
        DbBackend::Postgres => "strpos(tags, ${}) > 0",
        _ => "instr(tags, ${}) > 0",
    };
    let condition = (0..tags.len())
        .map(|n| find.replace("${}", &format!("${}", first + n)))
        .collect::<Vec<_>>()
        .join(" OR ");
    let values = tags
        .iter()
        .map(|tag| Value::from(serde_json::to_string(tag).unwrap_or_default()))
        .collect();
    (condition, values)
}

/// Where the expansion stands: the part of the audience it is in, and how far into it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cursor {
    pub part: Part,
    /// Ids or phones done, in the list's order.
    pub done: usize,
    /// The last tagged contact's id (they are read in id order).
    pub after: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    #[default]
    Ids,
    Tags,
    Phones,
    Done,
}

/// One step of an expansion: the contacts it found (opted-out ones left out; some may be recipients
/// already) and where the next step starts.
pub struct Step {
    pub contacts: Vec<ContactId>,
    pub next: Cursor,
}

/// The next batch of the audience after `cursor`, on `db` (the step's transaction: phones that are no
/// contact yet become contacts in it).
pub async fn step(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    audience: &AudienceSpec,
    cursor: &Cursor,
    now: DateTime<Utc>,
) -> Result<Step, DbErr> {
    let backend = db.get_database_backend();
    let mut next = cursor.clone();
    let contacts = match cursor.part {
        Part::Ids => {
            let ids = &audience.contact_ids;
            let slice: Vec<String> = ids.iter().skip(cursor.done).take(BATCH).cloned().collect();
            next.done += slice.len();
            if next.done >= ids.len() {
                next = Cursor {
                    part: Part::Tags,
                    ..Cursor::default()
                };
            }
            if slice.is_empty() {
                Vec::new()
            } else {
                let (among, mut values) = one_of_text(backend, "id", 2, slice);
                values.insert(0, account_id.as_str().into());
                let sql = format!("SELECT id FROM contacts WHERE account_id = $1 AND {among} AND NOT opted_out");
                ids_of(db, backend, sql, values).await?
            }
        }
        Part::Tags if audience.tags.is_empty() => {
            next = Cursor {
                part: Part::Phones,
                ..Cursor::default()
            };
            Vec::new()
        }
        Part::Tags => {
            let (carries, tag_values) = tagged(backend, &audience.tags, 3);
            let mut values: Vec<Value> = vec![account_id.as_str().into(), cursor.after.clone().into()];
            values.extend(tag_values);
            let sql = format!(
                "SELECT id, opted_out FROM contacts WHERE account_id = $1 AND id > $2 AND ({carries}) \
                 ORDER BY id LIMIT {BATCH}"
            );
            let rows = db
                .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
                .await?;
            let mut found = Vec::with_capacity(rows.len());
            for row in &rows {
                let id: ContactId = row.try_get_by_index(0)?;
                let opted_out: bool = row.try_get_by_index(1)?;
                next.after = id.to_string();
                if !opted_out {
                    found.push(id);
                }
            }
            if rows.len() < BATCH {
                next = Cursor {
                    part: Part::Phones,
                    ..Cursor::default()
                };
            }
            found
        }
        Part::Phones => {
            let phones: Vec<&String> = audience.phones.iter().skip(cursor.done).take(BATCH).collect();
            next.done += phones.len();
            if next.done >= audience.phones.len() {
                next = Cursor {
                    part: Part::Done,
                    ..Cursor::default()
                };
            }
            let mut found = Vec::with_capacity(phones.len());
            for phone in phones {
                // Checked when the broadcast was written.
                let Some(phone) = E164Phone::parse(phone) else {
                    continue;
                };
                let new = NewContact {
                    phone: Some(phone),
                    ..NewContact::default()
                };
                let (contact, _) = contact_store::find_or_create(db, account_id, new, now).await?;
                if !contact.opted_out {
                    found.push(contact.id);
                }
            }
            found
        }
        Part::Done => Vec::new(),
    };
    Ok(Step { contacts, next })
}

async fn ids_of(
    db: &impl ConnectionTrait,
    backend: DbBackend,
    sql: String,
    values: Vec<Value>,
) -> Result<Vec<ContactId>, DbErr> {
    db.query_all_raw(Statement::from_sql_and_values(backend, sql, values))
        .await?
        .iter()
        .map(|row| row.try_get_by_index(0))
        .collect()
}
