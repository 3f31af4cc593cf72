//! How many times an owner's knowledge changed: `a:<agent id>` for an agent's own FAQs and their vectors,
//! `s:<source id>` for a knowledge source's. Written only by database triggers (migration
//! m20261124_000021), read by the retrieval index to know whether what it holds in memory is current.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "knowledge_versions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub owner: String,
    pub version: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
