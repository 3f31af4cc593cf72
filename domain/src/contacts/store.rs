//! Contact rows and their identities, always scoped by account. The service answers `/v1/contacts` with
//! these, and the conversation engine calls them inside its own transaction to find, create or opt out the
//! contact of a message. A phone, an e-mail and each identity belong to one contact of an account: unique
//! indexes hold that against concurrent writers, and a create that meets a taken key says which contact
//! holds it without failing the caller's transaction, so a caller that lost a race goes on with the winner.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder,
    QuerySelect, Select,
    sea_query::{IntoCondition, OnConflict},
};

use super::{
    address::{E164Phone, Email},
    identity::{IdentityKind, NewIdentity},
    message::contact_message,
};
use crate::{
    access::AccountId,
    channels::live_feed::ErasedSession,
    events::{self, EventType},
    paging::{self, Page},
    store::{
        self,
        entities::{chat_sessions, contact_identities, contacts, conversations, idempotency_keys, messages},
        search, to_json_text,
    },
};

/// A contact to create.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NewContact {
    pub name: String,
    pub phone: Option<E164Phone>,
    pub email: Option<Email>,
    pub identities: Vec<NewIdentity>,
    pub tags: Vec<String>,
    pub attributes: BTreeMap<String, String>,
}

/// A key that one contact of an account at most may hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UniqueKey {
    Phone(E164Phone),
    Email(Email),
    Identity(IdentityKind, String),
}

impl std::fmt::Display for UniqueKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Phone(phone) => write!(f, "phone {}", phone.as_str()),
            Self::Email(email) => write!(f, "e-mail {}", email.folded().as_str()),
            Self::Identity(kind, external_id) => write!(f, "{} identity {external_id}", kind.as_str()),
        }
    }
}

/// Another contact of the account holds `key`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the {key} belongs to contact {contact_id}")]
pub struct Clash {
    pub key: UniqueKey,
    pub contact_id: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// A key of the new contact is another's; nothing was written and the transaction can go on.
    #[error(transparent)]
    Taken(Clash),
    #[error(transparent)]
    Db(#[from] DbErr),
}

/// How often a create tries again when the row that was in its way is gone by the time it looks.
const CREATE_ATTEMPTS: usize = 3;

/// The account's contacts: where every lookup of contacts here starts, so none can forget the account.
fn of_account(account_id: &AccountId) -> Select<contacts::Entity> {
    contacts::Entity::find().filter(contacts::Column::AccountId.eq(account_id))
}

/// The account's contact that `condition` picks out (it names a unique key).
async fn one(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    condition: impl IntoCondition,
) -> Result<Option<contacts::Model>, DbErr> {
    of_account(account_id).filter(condition).one(db).await
}

/// The contact with this id on the account (another account's contact is as absent as a missing one).
pub async fn find(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    contact_id: &str,
) -> Result<Option<contacts::Model>, DbErr> {
    store::owned::<contacts::Entity>(db, contacts::Column::AccountId, account_id, contact_id).await
}

/// `find`, and on PostgreSQL the row locked until the transaction ends, so that changes to one contact (an
/// update, an erasure, a message written for it) happen one after the other. SQLite's write transactions
/// hold the database's one write lock already.
pub async fn lock(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    contact_id: &str,
) -> Result<Option<contacts::Model>, DbErr> {
    of_account(account_id)
        .filter(contacts::Column::Id.eq(contact_id))
        .lock_exclusive()
        .one(db)
        .await
}

pub async fn find_by_phone(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    phone: &E164Phone,
) -> Result<Option<contacts::Model>, DbErr> {
    one(db, account_id, contacts::Column::Phone.eq(phone.as_str())).await
}

/// The contact with this e-mail address, in any letter case.
pub async fn find_by_email(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    email: &Email,
) -> Result<Option<contacts::Model>, DbErr> {
    one(db, account_id, contacts::Column::Email.eq(email.folded().as_str())).await
}

pub async fn find_by_identity(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    kind: IdentityKind,
    external_id: &str,
) -> Result<Option<contacts::Model>, DbErr> {
    let identity =
        contact_identities::Entity::find_by_id((account_id.clone(), kind.as_str().to_owned(), external_id.to_owned()))
            .one(db)
            .await?;
    match identity {
        Some(identity) => find(db, account_id, &identity.contact_id).await,
        None => Ok(None),
    }
}

/// The identities of these contacts of the account, by contact id, oldest first.
pub async fn identities_of(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    contact_ids: &[&str],
) -> Result<HashMap<String, Vec<contact_identities::Model>>, DbErr> {
    let mut by_contact: HashMap<String, Vec<contact_identities::Model>> = HashMap::new();
    if contact_ids.is_empty() {
        return Ok(by_contact);
    }
    let rows = contact_identities::Entity::find()
        .filter(contact_identities::Column::AccountId.eq(account_id))
        .filter(contact_identities::Column::ContactId.is_in(contact_ids.iter().copied()))
        .order_by_asc(contact_identities::Column::CreatedAt)
        .order_by_asc(contact_identities::Column::Kind)
        .order_by_asc(contact_identities::Column::ExternalId)
        .all(db)
        .await?;
    for row in rows {
        by_contact.entry(row.contact_id.to_string()).or_default().push(row);
    }
    Ok(by_contact)
}

/// The identities of one contact of the account, oldest first.
pub async fn identities(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    contact_id: &str,
) -> Result<Vec<contact_identities::Model>, DbErr> {
    Ok(identities_of(db, account_id, &[contact_id])
        .await?
        .remove(contact_id)
        .unwrap_or_default())
}

/// The `q` and `tag` of a list; empty ones do not filter. A `q` is searched by trigram index (`search`).
#[derive(Clone, Debug, Default)]
pub struct Filters {
    pub q: String,
    pub tag: String,
}

/// One page of the account's contacts, newest first, and whether another follows.
pub async fn list(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    filters: &Filters,
    page: &Page,
) -> Result<(Vec<contacts::Model>, bool), DbErr> {
    if !filters.q.is_empty() {
        return super::search::page(db, account_id, filters, page).await;
    }
    let mut select = of_account(account_id);
    if !filters.tag.is_empty() {
        select = select.filter(search::has_tag(db.get_database_backend(), &filters.tag));
    }
    paging::fetch(db, select, page, contacts::Column::CreatedAt, contacts::Column::Id).await
}

/// Creates the contact with its identities and writes `contact.created`, all on `db` (the caller's
/// transaction). When a phone, e-mail or identity of it is another contact's, nothing is written and the
/// answer is `CreateError::Taken` naming that contact; `db` stays usable (the rows go in with
/// `ON CONFLICT DO NOTHING`, which fails no transaction), so the caller can read the winner of a race.
pub async fn create(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    new: NewContact,
    now: DateTime<Utc>,
) -> Result<contacts::Model, CreateError> {
    let keys = unique_keys(new.phone.as_ref(), new.email.as_ref(), &new.identities);
    for _ in 0..CREATE_ATTEMPTS {
        let contact = contacts::Model {
            id: crate::ids::new_id(crate::ids::Kind::Contact).into(),
            account_id: account_id.clone(),
            name: new.name.clone(),
            phone: new.phone.as_ref().map(|p| p.as_str().to_owned()),
            email: new.email.as_ref().map(|e| e.folded().as_str().to_owned()),
            tags: to_json_text(&new.tags),
            attributes: to_json_text(&new.attributes),
            opted_out: false,
            recap: String::new(),
            recap_at: None,
            created_at: now,
            updated_at: now,
        };
        let identities = identity_rows(&contact, &new.identities, now);
        if insert_new(db, &contact, &identities).await? {
            record(db, EventType::ContactCreated, &contact, &identities, now).await?;
            return Ok(contact);
        }
        if let Some(clash) = holder(db, account_id, &keys, None).await? {
            return Err(CreateError::Taken(clash));
        }
        // What was in the way is gone already (or the new id was taken): try again.
    }
    Err(CreateError::Db(keys_kept_changing_hands()))
}

/// Contacts holding the keys were created and erased under a create's hands, attempt after attempt.
fn keys_kept_changing_hands() -> DbErr {
    DbErr::Custom("the contact's phone, e-mail or identities kept changing hands".to_owned())
}

/// The contact that holds a key of `new` (its phone, else its e-mail, else its identities, in order), or
/// `new` created (`contact.created`); whether it was created. Two requests doing this at once for the same
/// person, on any replica, end with one contact: the one that loses the race reads the winner. A `new` with
/// no phone, e-mail or identity is always created.
pub async fn find_or_create(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    new: NewContact,
    now: DateTime<Utc>,
) -> Result<(contacts::Model, bool), DbErr> {
    let keys = unique_keys(new.phone.as_ref(), new.email.as_ref(), &new.identities);
    for _ in 0..CREATE_ATTEMPTS {
        if let Some((_, contact)) = holding(db, account_id, &keys, None).await? {
            return Ok((contact, false));
        }
        match create(db, account_id, new.clone(), now).await {
            Ok(contact) => return Ok((contact, true)),
            // Lost a race: the next look finds the winner.
            Err(CreateError::Taken(_)) => {}
            Err(CreateError::Db(err)) => return Err(err),
        }
    }
    Err(keys_kept_changing_hands())
}

/// Sets the contact's `opted_out` and writes `contact.updated` when that changes it. The contact as it is
/// now, or `None` when the account has no such contact.
pub async fn set_opted_out(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    contact_id: &str,
    opted_out: bool,
    now: DateTime<Utc>,
) -> Result<Option<contacts::Model>, DbErr> {
    // One statement that changes the row only when the flag differs: of two concurrent STOPs, one changes it.
    let changed = contacts::Entity::update_many()
        .col_expr(contacts::Column::OptedOut, opted_out.into())
        .col_expr(contacts::Column::UpdatedAt, now.into())
        .filter(contacts::Column::AccountId.eq(account_id))
        .filter(contacts::Column::Id.eq(contact_id))
        .filter(contacts::Column::OptedOut.ne(opted_out))
        .exec(db)
        .await?
        .rows_affected
        > 0;
    let contact = find(db, account_id, contact_id).await?;
    if changed && let Some(contact) = &contact {
        let identities = identities(db, account_id, contact_id).await?;
        record(db, EventType::ContactUpdated, contact, &identities, now).await?;
    }
    Ok(contact)
}

/// Which contact other than `except` holds one of `keys`, the first found in their order.
pub async fn holder(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    keys: &[UniqueKey],
    except: Option<&str>,
) -> Result<Option<Clash>, DbErr> {
    Ok(holding(db, account_id, keys, except).await?.map(|(key, holder)| Clash {
        key,
        contact_id: holder.id.into(),
    }))
}

/// The first of `keys` that a contact other than `except` holds, with that contact.
async fn holding(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    keys: &[UniqueKey],
    except: Option<&str>,
) -> Result<Option<(UniqueKey, contacts::Model)>, DbErr> {
    for key in keys {
        let holder = match key {
            UniqueKey::Phone(phone) => find_by_phone(db, account_id, phone).await?,
            UniqueKey::Email(email) => find_by_email(db, account_id, email).await?,
            UniqueKey::Identity(kind, external_id) => find_by_identity(db, account_id, *kind, external_id).await?,
        };
        if let Some(holder) = holder.filter(|h| Some(h.id.as_str()) != except) {
            return Ok(Some((key.clone(), holder)));
        }
    }
    Ok(None)
}

/// The unique keys a contact with these addresses and identities holds.
pub fn unique_keys(phone: Option<&E164Phone>, email: Option<&Email>, identities: &[NewIdentity]) -> Vec<UniqueKey> {
    let phone = phone.map(|p| UniqueKey::Phone(p.clone()));
    let email = email.map(|e| UniqueKey::Email(e.clone()));
    let identities = identities
        .iter()
        .map(|i| UniqueKey::Identity(i.kind, i.external_id.clone()));
    phone.into_iter().chain(email).chain(identities).collect()
}

/// The rows of `identities` for `contact`, first seen `now`.
pub fn identity_rows(
    contact: &contacts::Model,
    identities: &[NewIdentity],
    now: DateTime<Utc>,
) -> Vec<contact_identities::Model> {
    identities
        .iter()
        .map(|i| contact_identities::Model {
            account_id: contact.account_id.clone(),
            kind: i.kind.as_str().to_owned(),
            external_id: i.external_id.clone(),
            contact_id: contact.id.clone(),
            channel: i.channel.clone(),
            created_at: now,
        })
        .collect()
}

/// Inserts the contact and its identities unless a unique key (or the id) is taken, in which case nothing
/// stays behind. Whether it did.
async fn insert_new(
    db: &impl ConnectionTrait,
    contact: &contacts::Model,
    identities: &[contact_identities::Model],
) -> Result<bool, DbErr> {
    let inserted = contacts::Entity::insert(contacts::ActiveModel::from(contact.clone()).reset_all())
        .on_conflict(do_nothing())
        .exec_without_returning(db)
        .await?;
    if inserted == 0 {
        return Ok(false);
    }
    if identities.is_empty() {
        return Ok(true);
    }
    let rows = identities
        .iter()
        .map(|row| contact_identities::ActiveModel::from(row.clone()).reset_all());
    let inserted = contact_identities::Entity::insert_many(rows)
        .on_conflict(do_nothing())
        .exec_without_returning(db)
        .await?;
    if inserted == identities.len() as u64 {
        return Ok(true);
    }
    erase_rows(db, &contact.account_id, &contact.id).await?;
    Ok(false)
}

/// `ON CONFLICT DO NOTHING` for any unique index: a taken key skips the row instead of failing the
/// statement (and with it a PostgreSQL transaction). PostgreSQL first waits for an uncommitted row in the
/// way, so a skipped row's holder is committed and visible to the caller's next statement.
fn do_nothing() -> OnConflict {
    OnConflict::new().do_nothing().to_owned()
}

/// Writes `contact` as it is now (every column).
pub async fn save(db: &impl ConnectionTrait, contact: &contacts::Model) -> Result<(), DbErr> {
    contact.clone().into_active_model().reset_all().update(db).await?;
    Ok(())
}

/// Deletes `dropped` and inserts `added`, identities of one contact. An identity another contact holds fails
/// the insert with a unique violation: callers look with `holder` first, so only a concurrent writer can.
pub async fn change_identities(
    db: &impl ConnectionTrait,
    dropped: &[contact_identities::Model],
    added: &[contact_identities::Model],
) -> Result<(), DbErr> {
    for row in dropped {
        let key = (row.account_id.clone(), row.kind.clone(), row.external_id.clone());
        contact_identities::Entity::delete_by_id(key).exec(db).await?;
    }
    if !added.is_empty() {
        let rows = added
            .iter()
            .map(|row| contact_identities::ActiveModel::from(row.clone()).reset_all());
        contact_identities::Entity::insert_many(rows)
            .exec_without_returning(db)
            .await?;
    }
    Ok(())
}

/// The contact's web chat sessions, which go with it when it is erased (a foreign key).
pub async fn sessions_of(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    contact_id: &str,
) -> Result<Vec<ErasedSession>, DbErr> {
    let rows: Vec<(String, String)> = chat_sessions::Entity::find()
        .select_only()
        .column(chat_sessions::Column::ChannelId)
        .column(chat_sessions::Column::Id)
        .filter(chat_sessions::Column::AccountId.eq(account_id))
        .filter(chat_sessions::Column::ContactId.eq(contact_id))
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(channel_id, session_id)| ErasedSession { channel_id, session_id })
        .collect())
}

/// Erases the contact of the account with its identities, conversations and messages (a right-to-erasure
/// request). Whether there was such a contact.
pub async fn erase(db: &impl ConnectionTrait, account_id: &AccountId, contact_id: &str) -> Result<bool, DbErr> {
    if lock(db, account_id, contact_id).await?.is_none() {
        return Ok(false);
    }
    messages::Entity::delete_many()
        .filter(messages::Column::AccountId.eq(account_id))
        .filter(messages::Column::ContactId.eq(contact_id))
        .exec(db)
        .await?;
    conversations::Entity::delete_many()
        .filter(conversations::Column::AccountId.eq(account_id))
        .filter(conversations::Column::ContactId.eq(contact_id))
        .exec(db)
        .await?;
    // A replayed send must not answer with the erased contact's message.
    idempotency_keys::Entity::delete_many()
        .filter(idempotency_keys::Column::AccountId.eq(account_id))
        .filter(idempotency_keys::Column::ContactId.eq(contact_id))
        .exec(db)
        .await?;
    erase_rows(db, account_id, contact_id).await?;
    Ok(true)
}

/// Deletes the contact's row and its identities.
async fn erase_rows(db: &impl ConnectionTrait, account_id: &AccountId, contact_id: &str) -> Result<(), DbErr> {
    contact_identities::Entity::delete_many()
        .filter(contact_identities::Column::AccountId.eq(account_id))
        .filter(contact_identities::Column::ContactId.eq(contact_id))
        .exec(db)
        .await?;
    contacts::Entity::delete_many()
        .filter(contacts::Column::AccountId.eq(account_id))
        .filter(contacts::Column::Id.eq(contact_id))
        .exec(db)
        .await?;
    Ok(())
}

/// Writes `event` with the contact (and its identities) as `data`.
pub async fn record(
    db: &impl ConnectionTrait,
    event: EventType,
    contact: &contacts::Model,
    identities: &[contact_identities::Model],
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let data = events::payload(&contact_message(contact.clone(), identities), "frontdesk.v1.Contact");
    events::record(db, &contact.account_id, event, data, now).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use sea_orm::{DatabaseConnection, PaginatorTrait};

    use super::*;
    use crate::store::entities::event_outbox;

    async fn db() -> DatabaseConnection {
        let db = crate::store::connect("sqlite::memory:", 1, Default::default())
            .await
            .unwrap();
        crate::store::migrate(&db).await.unwrap();
        db
    }

    fn acc(id: &str) -> AccountId {
        AccountId::of_row(id)
    }

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    fn asha() -> NewContact {
        NewContact {
            name: "Asha".into(),
            phone: E164Phone::parse("+919812345678"),
            email: Email::parse("Asha@Example.com"),
            identities: vec![NewIdentity {
                kind: IdentityKind::Whatsapp,
                external_id: "919812345678".into(),
                channel: "wa-main".into(),
            }],
            ..Default::default()
        }
    }

    async fn events(db: &DatabaseConnection) -> Vec<String> {
        event_outbox::Entity::find()
            .all(db)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.event_type)
            .collect()
    }

    #[tokio::test]
    async fn a_created_contact_is_found_by_each_key() {
        let db = db().await;
        let created = create(&db, &acc("acc_1"), asha(), now()).await.unwrap();
        assert_eq!(created.email.as_deref(), Some("asha@example.com"), "stored folded");
        let phone = E164Phone::parse("+919812345678").unwrap();
        let email = Email::parse("ASHA@example.COM").unwrap();
        for found in [
            find_by_phone(&db, &acc("acc_1"), &phone).await.unwrap(),
            find_by_email(&db, &acc("acc_1"), &email).await.unwrap(),
            find_by_identity(&db, &acc("acc_1"), IdentityKind::Whatsapp, "919812345678")
                .await
                .unwrap(),
            find(&db, &acc("acc_1"), &created.id).await.unwrap(),
        ] {
            assert_eq!(found.as_ref().map(|c| c.id.as_str()), Some(created.id.as_str()));
        }
        assert_eq!(
            find_by_phone(&db, &acc("acc_2"), &phone).await.unwrap(),
            None,
            "scoped by account"
        );
        assert_eq!(find(&db, &acc("acc_2"), &created.id).await.unwrap(), None);
        let held = identities(&db, &acc("acc_1"), &created.id).await.unwrap();
        assert_eq!((held.len(), held[0].channel.as_str()), (1, "wa-main"));
        assert_eq!(events(&db).await, ["contact.created"]);
        let message = contact_message(created, &held);
        assert_eq!(message.identities[0].r#type, "whatsapp");
    }

    #[tokio::test]
    async fn a_taken_key_names_its_holder_and_leaves_the_transaction_usable() {
        let db = db().await;
        let first = create(&db, &acc("acc_1"), asha(), now()).await.unwrap();
        let txn = crate::store::begin_write(&db).await.unwrap();
        // Same identity, new phone and e-mail: nothing of the second contact may stay behind.
        let second = NewContact {
            name: "Someone else".into(),
            phone: E164Phone::parse("+14155550123"),
            email: None,
            ..asha()
        };
        let Err(CreateError::Taken(clash)) = create(&txn, &acc("acc_1"), second, now()).await else {
            panic!("the identity is taken");
        };
        assert_eq!(clash.contact_id, first.id);
        assert_eq!(
            clash.key,
            UniqueKey::Identity(IdentityKind::Whatsapp, "919812345678".into())
        );
        let winner = find(&txn, &acc("acc_1"), &clash.contact_id).await.unwrap();
        assert_eq!(winner.map(|c| c.name), Some("Asha".to_owned()));
        let other = E164Phone::parse("+14155550123").unwrap();
        assert_eq!(find_by_phone(&txn, &acc("acc_1"), &other).await.unwrap(), None);
        txn.commit().await.unwrap();
        let by_email = NewContact {
            email: Email::parse("asha@EXAMPLE.com"),
            phone: None,
            identities: Vec::new(),
            ..asha()
        };
        let Err(CreateError::Taken(clash)) = create(&db, &acc("acc_1"), by_email, now()).await else {
            panic!("the e-mail is taken in any case");
        };
        assert_eq!(
            clash.to_string(),
            format!("the e-mail asha@example.com belongs to contact {}", first.id)
        );
        assert!(
            create(&db, &acc("acc_2"), asha(), now()).await.is_ok(),
            "another account may hold the same keys"
        );
        assert_eq!(contacts::Entity::find().count(&db).await.unwrap(), 2);
        assert_eq!(events(&db).await, ["contact.created", "contact.created"]);
    }

    #[tokio::test]
    async fn find_or_create_creates_once_and_then_finds_by_any_key() {
        let db = db().await;
        let (created, fresh) = find_or_create(&db, &acc("acc_1"), asha(), now()).await.unwrap();
        assert!(fresh);
        let lookups = [
            NewContact {
                phone: E164Phone::parse("+919812345678"),
                ..Default::default()
            },
            NewContact {
                email: Email::parse("ASHA@example.com"),
                ..Default::default()
            },
            NewContact {
                identities: asha().identities,
                ..Default::default()
            },
        ];
        for lookup in lookups {
            let (found, fresh) = find_or_create(&db, &acc("acc_1"), lookup.clone(), now()).await.unwrap();
            assert_eq!((found.id.as_str(), fresh), (created.id.as_str(), false), "{lookup:?}");
        }
        let (elsewhere, fresh) = find_or_create(&db, &acc("acc_2"), asha(), now()).await.unwrap();
        assert!(fresh && elsewhere.id != created.id, "each account has its own contacts");
        assert_eq!(events(&db).await, ["contact.created", "contact.created"]);
    }

    #[tokio::test]
    async fn opting_out_writes_an_event_only_when_it_changes() {
        let db = db().await;
        let contact = create(&db, &acc("acc_1"), asha(), now()).await.unwrap();
        let later = now() + chrono::Duration::minutes(5);
        let out = set_opted_out(&db, &acc("acc_1"), &contact.id, true, later)
            .await
            .unwrap()
            .unwrap();
        assert!(out.opted_out);
        assert_eq!(out.updated_at, later);
        let again = set_opted_out(
            &db,
            &acc("acc_1"),
            &contact.id,
            true,
            later + chrono::Duration::minutes(1),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(again.updated_at, later, "no change, no write");
        assert_eq!(
            set_opted_out(&db, &acc("acc_2"), &contact.id, false, later)
                .await
                .unwrap(),
            None
        );
        assert_eq!(events(&db).await, ["contact.created", "contact.updated"]);
    }

    #[tokio::test]
    async fn erasing_takes_conversations_and_messages_along() {
        let db = db().await;
        let contact = create(&db, &acc("acc_1"), asha(), now()).await.unwrap();
        let kept = create(&db, &acc("acc_1"), NewContact::default(), now()).await.unwrap();
        for owner in [&contact.id, &kept.id] {
            db.execute_unprepared(&format!(
                "INSERT INTO conversations (id, account_id, contact_id, channel, channel_id, channel_type, agent_id, \
                 status, handoff, handoff_reason, unread_count, last_message_at, broadcast_id, created_at) VALUES \
                 ('cv_{owner}', 'acc_1', '{owner}', 'wa', 'ch_1', 'whatsapp', '', 'open', false, '', 0, \
                 '2027-01-15T08:00:00Z', '', '2027-01-15T08:00:00Z')"
            ))
            .await
            .unwrap();
            db.execute_unprepared(&format!(
                "INSERT INTO messages (id, account_id, conversation_id, contact_id, channel_id, direction, author, \
                 text, attachments, status, reactions, edited, edits, removed, reply_to, broadcast_id, created_at) \
                 VALUES ('msg_{owner}', 'acc_1', 'cv_{owner}', '{owner}', 'ch_1', 'inbound', 'contact', 'my card is \
                 4111', '[]', 'received', '[]', false, '[]', false, '', '', '2027-01-15T08:00:00Z')"
            ))
            .await
            .unwrap();
        }
        assert!(
            !erase(&db, &acc("acc_2"), &contact.id).await.unwrap(),
            "another account's contact is not erased"
        );
        assert!(erase(&db, &acc("acc_1"), &contact.id).await.unwrap());
        assert!(!erase(&db, &acc("acc_1"), &contact.id).await.unwrap());
        assert_eq!(find(&db, &acc("acc_1"), &contact.id).await.unwrap(), None);
        assert!(identities(&db, &acc("acc_1"), &contact.id).await.unwrap().is_empty());
        let left: Vec<String> = messages::Entity::find()
            .all(&db)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.contact_id.into())
            .collect();
        assert_eq!(left, [kept.id.as_str()]);
        assert_eq!(conversations::Entity::find().count(&db).await.unwrap(), 1);
        assert!(
            create(&db, &acc("acc_1"), asha(), now()).await.is_ok(),
            "the keys are free again"
        );
    }
}
