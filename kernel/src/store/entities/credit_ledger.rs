//! One change of an account's credit balance: the signed amount, the balance after it, and why.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "credit_ledger")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub account_id: crate::tenant::AccountId,
    pub delta_milli: i64,
    pub balance_after_milli: i64,
    pub reason: String,
    pub created_at: DateTimeUtc,
    /// The conversation an AI reply's charge was for.
    pub conversation_id: Option<crate::resource_id::ConversationId>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
