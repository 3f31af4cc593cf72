//! A write an agent's built-in tool made, by its key (the conversation, the messages the reply answered, the
//! tool and which of its calls in the reply it was): a reply that runs again after a failure finds it and does not write it twice.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "tool_effects")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub key: String,
    pub account_id: crate::tenant::AccountId,
    /// The conversation whose reply wrote it: a conversation's writes of a day are counted.
    pub conversation_id: crate::resource_id::ConversationId,
    /// What the tool answered the model.
    pub result: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
