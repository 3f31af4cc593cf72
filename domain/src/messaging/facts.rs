//! What a batch of sends needs to know before it writes: the contacts it names, their identities, their
//! accounts' channels, and each contact's open conversations and latest channel. Each is one statement for
//! the whole batch, in the batch's transaction, with one text whatever the batch's size (`sql::one_of`). A contact that the batch finds or creates on the way (a send
//! by phone, e-mail or identity) is learnt alone.

use std::collections::{BTreeSet, HashMap};

use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    sea_query::{Expr, ExprTrait},
};

use crate::{
    access::AccountId,
    store::{
        entities::{channels, contact_identities, contacts, conversations},
        sql::one_of,
    },
};

#[derive(Default)]
pub struct Facts {
    contacts: HashMap<String, contacts::Model>,
    identities: HashMap<String, Vec<contact_identities::Model>>,
    /// By account, oldest first.
    channels: HashMap<AccountId, Vec<channels::Model>>,
    /// By contact: the channel of its latest conversation.
    latest_channel: HashMap<String, String>,
    /// By contact and channel name.
    open: HashMap<(String, String), conversations::Model>,
}

impl Facts {
    /// Loads what sends by these accounts to these contacts (ids as the callers gave them) need.
    pub async fn load(
        db: &impl ConnectionTrait,
        account_ids: &BTreeSet<&str>,
        contact_ids: &BTreeSet<&str>,
    ) -> Result<Self, DbErr> {
        let mut facts = Self::default();
        for channel in channels::Entity::find()
            .filter(one_of(
                db.get_database_backend(),
                (channels::Entity, channels::Column::AccountId),
                account_ids.iter().copied(),
            ))
            .order_by_asc(channels::Column::CreatedAt)
            .order_by_asc(channels::Column::Id)
            .all(db)
            .await?
        {
            facts
                .channels
                .entry(channel.account_id.clone())
                .or_default()
                .push(channel);
        }
        if !contact_ids.is_empty() {
            let found = contacts::Entity::find()
                .filter(one_of(
                    db.get_database_backend(),
                    (contacts::Entity, contacts::Column::Id),
                    contact_ids.iter().copied(),
                ))
                .all(db)
                .await?;
            let ids: Vec<String> = found.iter().map(|c| c.id.to_string()).collect();
            facts.contacts.extend(found.into_iter().map(|c| (c.id.to_string(), c)));
            facts.load_surroundings(db, &ids).await?;
        }
        Ok(facts)
    }

    /// Adds a contact found or created by the batch, with its identities, and loads its conversations.
    pub async fn learn(
        &mut self,
        db: &impl ConnectionTrait,
        contact: contacts::Model,
        identities: Vec<contact_identities::Model>,
    ) -> Result<(), DbErr> {
        let id = contact.id.to_string();
        self.identities.insert(id.clone(), identities);
        self.contacts.insert(id.clone(), contact);
        self.load_conversations(db, std::slice::from_ref(&id)).await
    }

    /// The account's contact with this id (another account's is as absent as a missing one).
    pub fn contact(&self, account_id: &AccountId, contact_id: &str) -> Option<&contacts::Model> {
        self.contacts.get(contact_id).filter(|c| c.account_id == *account_id)
    }

    pub fn identities(&self, contact_id: &str) -> &[contact_identities::Model] {
        self.identities.get(contact_id).map_or(&[], Vec::as_slice)
    }

    pub fn channels(&self, account_id: &AccountId) -> &[channels::Model] {
        self.channels.get(account_id).map_or(&[], Vec::as_slice)
    }

    pub fn latest_channel(&self, contact_id: &str) -> Option<&str> {
        self.latest_channel.get(contact_id).map(String::as_str)
    }

    pub fn open_conversation(&self, contact_id: &str, channel: &str) -> Option<&conversations::Model> {
        self.open.get(&(contact_id.to_owned(), channel.to_owned()))
    }

    /// Notes a conversation the batch opened (or found opened by a concurrent writer).
    pub fn opened(&mut self, conversation: conversations::Model) {
        self.latest_channel
            .insert(conversation.contact_id.to_string(), conversation.channel.clone());
        self.open.insert(
            (conversation.contact_id.to_string(), conversation.channel.clone()),
            conversation,
        );
    }

    async fn load_surroundings(&mut self, db: &impl ConnectionTrait, contact_ids: &[String]) -> Result<(), DbErr> {
        for identity in contact_identities::Entity::find()
            .filter(one_of(
                db.get_database_backend(),
                (contact_identities::Entity, contact_identities::Column::ContactId),
                contact_ids.iter().cloned(),
            ))
            .order_by_asc(contact_identities::Column::CreatedAt)
            .order_by_asc(contact_identities::Column::Kind)
            .order_by_asc(contact_identities::Column::ExternalId)
            .all(db)
            .await?
        {
            self.identities
                .entry(identity.contact_id.to_string())
                .or_default()
                .push(identity);
        }
        self.load_conversations(db, contact_ids).await
    }

    /// The contacts' open conversations and each one's latest, in one statement (the latest by the
    /// `conversations_contact` index).
    async fn load_conversations(&mut self, db: &impl ConnectionTrait, contact_ids: &[String]) -> Result<(), DbErr> {
        let latest = Expr::cust(
            "conversations.created_at = (SELECT MAX(latest.created_at) FROM conversations latest \
             WHERE latest.contact_id = conversations.contact_id)",
        );
        let rows = conversations::Entity::find()
            .filter(one_of(
                db.get_database_backend(),
                (conversations::Entity, conversations::Column::ContactId),
                contact_ids.iter().cloned(),
            ))
            .filter(
                conversations::Column::Status
                    .eq(conversations::ConversationStatus::Open)
                    .or(latest),
            )
            .order_by_asc(conversations::Column::CreatedAt)
            .order_by_asc(conversations::Column::Id)
            .all(db)
            .await?;
        for row in rows {
            // Oldest first, so the last one noted is the latest.
            self.latest_channel
                .insert(row.contact_id.to_string(), row.channel.clone());
            if row.status == conversations::ConversationStatus::Open {
                self.open.insert((row.contact_id.to_string(), row.channel.clone()), row);
            }
        }
        Ok(())
    }
}
