//! A contact's id on a social channel (`kind`: whatsapp, messenger, instagram, webchat), unique on the account.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "contact_identities")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub account_id: crate::tenant::AccountId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub kind: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub external_id: String,
    pub contact_id: crate::resource_id::ContactId,
    /// The name of the channel it was first seen on.
    pub channel: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::contacts::Entity",
        from = "Column::ContactId",
        to = "super::contacts::Column::Id"
    )]
    Contact,
}

/// What a batch of arrived messages reads with the identities of their senders in one statement.
impl Related<super::contacts::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Contact.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
