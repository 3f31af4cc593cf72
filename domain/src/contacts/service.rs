//! `/v1/contacts`: create, read, partial update, erase and the searchable list. Every change writes its
//! event to the outbox in the same transaction.

use std::sync::Arc;

use frontdesk_api::v1::{
    ContactAnswer, ContactList, CreateContactRequest, DeleteContactRequest, Deleted, GetContactRequest,
    ListContactsRequest, UpdateContactRequest, contacts_server::Contacts,
};
use sea_orm::{DatabaseConnection, DbErr, SqlErr};
use tonic::{Request, Response, Status};

use super::{
    fields::{ContactFields, Input},
    identity::NewIdentity,
    message::contact_message,
    store::{self, Clash, CreateError, Filters},
};
use crate::{
    access::AccountId,
    channels::live_feed::Feed,
    clock::Clock,
    error::{ApiError, ApiResult},
    events::EventType,
    paging::{self, Page},
    platform_calls::{account_of, apply_mask, deleted},
    store::{
        entities::{contact_identities, contacts},
        search, to_json_text,
    },
    validate::Violations,
};

#[derive(Clone)]
pub struct ContactsService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    feed: Feed,
}

impl ContactsService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, feed: Feed) -> Self {
        Self { db, clock, feed }
    }
}

/// A contact with its identities.
type Loaded = (contacts::Model, Vec<contact_identities::Model>);

fn answer((contact, identities): Loaded) -> Response<ContactAnswer> {
    Response::new(ContactAnswer {
        success: true,
        contact: Some(contact_message(contact, &identities)),
    })
}

fn not_found() -> ApiError {
    ApiError::not_found("contact")
}

impl From<Clash> for ApiError {
    fn from(clash: Clash) -> Self {
        ApiError::already_exists(clash.to_string())
    }
}

impl From<CreateError> for ApiError {
    fn from(err: CreateError) -> Self {
        match err {
            CreateError::Taken(clash) => clash.into(),
            CreateError::Db(err) => err.into(),
        }
    }
}

/// A write refused by a unique index: a concurrent request gave the key to another contact after this one
/// looked.
fn write_error(err: DbErr) -> ApiError {
    match err.sql_err() {
        Some(SqlErr::UniqueConstraintViolation(_)) => {
            ApiError::already_exists("the phone, e-mail or an identity was just given to another contact")
        }
        _ => err.into(),
    }
}

impl ContactsService {
    async fn create(&self, account_id: &AccountId, fields: ContactFields) -> ApiResult<Loaded> {
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        let contact = store::create(&txn, account_id, fields.into_new(), now).await?;
        let identities = store::identities(&txn, account_id, &contact.id).await?;
        txn.commit().await?;
        Ok((contact, identities))
    }

    /// Applies `fields`; writes and emits `contact.updated` only when that changes the contact.
    async fn change(&self, account_id: &AccountId, contact_id: &str, fields: ContactFields) -> ApiResult<Loaded> {
        let now = self.clock.now();
        let txn = crate::store::begin_write(&self.db).await?;
        let before = store::lock(&txn, account_id, contact_id).await?.ok_or_else(not_found)?;
        let held = store::identities(&txn, account_id, contact_id).await?;
        let ContactFields {
            name,
            phone,
            email,
            identities,
            tags,
            attributes,
            opted_out,
        } = fields;
        let mut after = before.clone();
        if let Some(name) = name {
            after.name = name;
        }
        if let Some(phone) = &phone {
            after.phone = phone.as_ref().map(|p| p.as_str().to_owned());
        }
        if let Some(email) = &email {
            after.email = email.as_ref().map(|e| e.folded().as_str().to_owned());
        }
        if let Some(tags) = tags {
            after.tags = to_json_text(&tags);
        }
        if let Some(attributes) = attributes {
            after.attributes = to_json_text(&attributes);
        }
        if let Some(opted_out) = opted_out {
            after.opted_out = opted_out;
        }
        let (kept, dropped, added) = match identities {
            Some(wanted) => diff(held, wanted),
            None => (held, Vec::new(), Vec::new()),
        };
        // The keys the contact takes on: another contact holding one is a 409.
        let phone = phone.flatten().filter(|_| after.phone != before.phone);
        let email = email.flatten().filter(|_| after.email != before.email);
        let keys = store::unique_keys(phone.as_ref(), email.as_ref(), &added);
        if let Some(clash) = store::holder(&txn, account_id, &keys, Some(contact_id)).await? {
            return Err(clash.into());
        }
        if after == before && dropped.is_empty() && added.is_empty() {
            return Ok((before, kept));
        }
        after.updated_at = now;
        store::save(&txn, &after).await.map_err(write_error)?;
        let added = store::identity_rows(&after, &added, now);
        store::change_identities(&txn, &dropped, &added)
            .await
            .map_err(write_error)?;
        let identities = [kept, added].concat();
        store::record(&txn, EventType::ContactUpdated, &after, &identities, now).await?;
        txn.commit().await?;
        Ok((after, identities))
    }

    async fn erase(&self, account_id: &AccountId, contact_id: &str) -> ApiResult<()> {
        let txn = crate::store::begin_write(&self.db).await?;
        // Its web chat sessions go with it (a foreign key); their open sockets are told after the commit.
        let sessions = store::sessions_of(&txn, account_id, contact_id).await?;
        if !store::erase(&txn, account_id, contact_id).await? {
            return Err(not_found());
        }
        txn.commit().await?;
        self.feed.sessions_erased(account_id, &sessions).await;
        Ok(())
    }
}

/// The identities `held` split into those `wanted` keeps (with their channel and first-seen time) and those
/// it drops, and the `wanted` ones not held yet.
fn diff(
    held: Vec<contact_identities::Model>,
    wanted: Vec<NewIdentity>,
) -> (
    Vec<contact_identities::Model>,
    Vec<contact_identities::Model>,
    Vec<NewIdentity>,
) {
    let is = |row: &contact_identities::Model, identity: &NewIdentity| {
        row.kind == identity.kind.as_str() && row.external_id == identity.external_id
    };
    let added = wanted
        .iter()
        .filter(|identity| !held.iter().any(|row| is(row, identity)))
        .cloned()
        .collect();
    let (kept, dropped) = held
        .into_iter()
        .partition(|row| wanted.iter().any(|identity| is(row, identity)));
    (kept, dropped, added)
}

fn create_input(r: CreateContactRequest) -> Input {
    Input {
        name: Some(r.name),
        phone: Some(r.phone),
        email: Some(r.email),
        identities: Some(r.identities),
        tags: Some(r.tags),
        attributes: Some(r.attributes),
        opted_out: None,
    }
}

/// The fields an update sets, from its mask (REST fills the mask from the body's keys).
fn update_input(r: UpdateContactRequest) -> ApiResult<Input> {
    let mut input = Input::default();
    // Read only when the mask names it: a field outside the mask is ignored, however it is filled.
    apply_mask(r.update_mask.as_ref(), "a contact", |path| {
        match path {
            "name" => input.name = Some(r.name.clone()),
            "phone" => input.phone = Some(r.phone.clone()),
            "email" => input.email = Some(r.email.clone()),
            "identities" => input.identities = Some(r.identities.clone()),
            "tags" => input.tags = Some(r.tags.clone()),
            "attributes" => input.attributes = Some(r.attributes.clone()),
            "opted_out" => input.opted_out = Some(r.opted_out),
            "contact_id" => {}
            _ => return false,
        }
        true
    })?;
    Ok(input)
}

/// The filters and page a list asks for, or the 400 naming every bad parameter.
fn list_parameters(r: ListContactsRequest) -> ApiResult<(Filters, Page)> {
    let mut v = Violations::new();
    if !r.q.is_empty() {
        v.check(
            r.q.chars().count() <= search::MAX_FRAGMENT,
            "q",
            format!("at most {} characters", search::MAX_FRAGMENT),
        );
        v.check(
            !r.q.chars().any(char::is_control),
            "q",
            "must not hold control characters",
        );
        v.check(
            search::has_indexed_run(&r.q),
            "q",
            format!("needs at least {} letters or digits in a row", search::INDEXED_RUN),
        );
    }
    let mut paging = Vec::new();
    let page = Page::parse(r.limit, &r.cursor, crate::ids::Kind::Contact.prefix(), &mut paging);
    paging.into_iter().for_each(|violation| v.push(violation));
    v.finish()?;
    Ok((Filters { q: r.q, tag: r.tag }, page))
}

#[tonic::async_trait]
impl Contacts for ContactsService {
    async fn list_contacts(&self, request: Request<ListContactsRequest>) -> Result<Response<ContactList>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let (filters, page) = list_parameters(r)?;
        let (rows, more) = store::list(&self.db, &account_id, &filters, &page)
            .await
            .map_err(ApiError::from)?;
        let ids: Vec<&str> = rows.iter().map(|c| c.id.as_str()).collect();
        let mut identities = store::identities_of(&self.db, &account_id, &ids)
            .await
            .map_err(ApiError::from)?;
        let (contacts, next_cursor) = paging::render(
            rows,
            more,
            |c| (c.created_at, c.id.as_str()),
            |c| {
                let held = identities.remove(c.id.as_str()).unwrap_or_default();
                contact_message(c, &held)
            },
        );
        Ok(Response::new(ContactList {
            success: true,
            contacts,
            next_cursor,
        }))
    }

    async fn create_contact(&self, request: Request<CreateContactRequest>) -> Result<Response<ContactAnswer>, Status> {
        let account_id = account_of(&request)?;
        let fields = create_input(request.into_inner()).parse()?;
        Ok(answer(self.create(&account_id, fields).await?))
    }

    async fn get_contact(&self, request: Request<GetContactRequest>) -> Result<Response<ContactAnswer>, Status> {
        let account_id = account_of(&request)?;
        let contact_id = &request.get_ref().contact_id;
        let contact = store::find(&self.db, &account_id, contact_id)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(not_found)?;
        let identities = store::identities(&self.db, &account_id, contact_id)
            .await
            .map_err(ApiError::from)?;
        Ok(answer((contact, identities)))
    }

    async fn update_contact(&self, request: Request<UpdateContactRequest>) -> Result<Response<ContactAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let contact_id = r.contact_id.clone();
        let fields = update_input(r)?.parse()?;
        Ok(answer(self.change(&account_id, &contact_id, fields).await?))
    }

    async fn delete_contact(&self, request: Request<DeleteContactRequest>) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let contact_id = request.into_inner().contact_id;
        self.erase(&account_id, &contact_id).await?;
        Ok(deleted(contact_id))
    }
}
