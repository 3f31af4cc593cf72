//! Generated-once settings: the first process to need one creates it, every replica reads the same value.

use sea_orm::{ConnectionTrait, EntityTrait, Set};

use super::entities::settings;

/// The stored value of `key`, storing `generate()` first if there is none. Safe under concurrent callers:
/// the insert is ignored when another replica won the race, and the winner's value is read back.
pub async fn get_or_create(
    db: &impl ConnectionTrait,
    key: &str,
    generate: impl FnOnce() -> String,
) -> Result<String, sea_orm::DbErr> {
    if let Some(row) = settings::Entity::find_by_id(key).one(db).await? {
        return Ok(row.value);
    }
    let row = settings::ActiveModel {
        key: Set(key.to_owned()),
        value: Set(generate()),
    };
    settings::Entity::insert(row)
        .on_conflict_do_nothing_on([settings::Column::Key])
        .exec(db)
        .await?;
    settings::Entity::find_by_id(key)
        .one(db)
        .await?
        .map(|row| row.value)
        .ok_or_else(|| sea_orm::DbErr::RecordNotFound(format!("setting {key}")))
}
