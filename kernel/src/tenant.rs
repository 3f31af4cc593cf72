//! The tenant as a type: the account a call, a row or a job belongs to. Functions that scope by account take
//! `&AccountId` beside their `&str` ids, so ids passed in the wrong order do not compile, and a bare string
//! never becomes a tenant by conversion: there is none, and each constructor is named for where the trust
//! comes from, so a reader sees at every call why the account is one. The one other way in is reading a
//! row: every table's `account_id` column is one (the database value type, `DeriveValueType`), as a stored
//! row's account was a tenant when the row was written. It
//! lives among the foundations so that `store`, `accounts`, `events` and `jobs` can take one too; `access`,
//! where a call's tenant comes from, re-exports it.

use std::fmt;

/// An account the service has reason to act for: the caller the guard admitted, an account the operator API
/// found live, or the account of a row the service wrote itself.
///
/// A scoped function takes it beside its other ids:
///
/// ```
/// use frontdesk_kernel::tenant::AccountId;
///
/// fn deal(account: &AccountId, deal_id: &str) -> String {
///     format!("{account}/{deal_id}")
/// }
///
/// fn handler(account: &AccountId, deal_id: &str) -> String {
///     deal(account, deal_id)
/// }
/// ```
///
/// and the ids swapped, or a string where the tenant is wanted, do not compile:
///
/// ```compile_fail,E0308
/// use frontdesk_kernel::tenant::AccountId;
///
/// fn deal(account: &AccountId, deal_id: &str) {}
///
/// fn handler(account: &AccountId, deal_id: &str) {
///     deal(deal_id, account);
/// }
/// ```
///
/// ```compile_fail,E0308
/// use frontdesk_kernel::tenant::AccountId;
///
/// fn deal(account: &AccountId, deal_id: &str) {}
///
/// deal("acc_1", "deal_1");
/// ```
///
/// Nor does a string turn into one by conversion:
///
/// ```compile_fail
/// use frontdesk_kernel::tenant::AccountId;
///
/// let account: AccountId = "acc_1".into();
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, sea_orm::DeriveValueType)]
pub struct AccountId(String);

impl AccountId {
    /// The account the access guard admitted a call for: the key's own, or the sub-account it named and the
    /// guard found to be the key account's child. Handlers get it from `requests::account_of`.
    pub fn authenticated(id: String) -> Self {
        Self(id)
    }

    /// An account the operator API found live (`accounts::store::find_live`) before acting on it.
    pub fn checked_by_operator(id: String) -> Self {
        Self(id)
    }

    /// The account of a row the service wrote itself, read as text (a raw statement's column, a job's
    /// payload): it was a tenant when the row was written. Entities' `account_id` columns arrive typed.
    pub fn of_row(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An account id is text: no primary key holding one is ever made from an auto-increment.
impl sea_orm::TryFromU64 for AccountId {
    fn try_from_u64(_: u64) -> Result<Self, sea_orm::DbErr> {
        Err(sea_orm::DbErr::ConvertFromU64("AccountId"))
    }
}

impl fmt::Display for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// So that a query filters on it as on its string: `Column::AccountId.eq(account)`.
impl From<&AccountId> for sea_orm::Value {
    fn from(account: &AccountId) -> Self {
        account.as_str().into()
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::{ColumnTrait, DbBackend, EntityTrait, QueryFilter, QueryTrait};

    use super::AccountId;
    use crate::store::entities::deals;

    #[test]
    fn a_tenant_filters_a_query_as_its_string_does() {
        let account = AccountId::of_row("acc_1");
        let sql = |select: sea_orm::Select<deals::Entity>| select.build(DbBackend::Postgres).to_string();
        assert_eq!(
            sql(deals::Entity::find().filter(deals::Column::AccountId.eq(&account))),
            sql(deals::Entity::find().filter(deals::Column::AccountId.eq("acc_1")))
        );
        assert_eq!(account.to_string(), "acc_1");
        assert_eq!(account.as_str(), "acc_1");
    }
}
