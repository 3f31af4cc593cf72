//! Signing secrets at rest: sealed with `FRONTDESK_SECRET_KEY` and bound to their subscription's id, as channel
//! credentials are, so a copy of the database alone cannot forge deliveries. Secrets stored in plaintext by
//! an earlier version are sealed at start-up; until then (another replica not yet upgraded) they still read.

use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Statement};

use super::signing::PREFIX;
use crate::secrets::Sealer;

/// The stored form of `secret` for subscription `webhook_id`.
pub fn seal(sealer: &Sealer, webhook_id: &str, secret: &str) -> String {
    sealer.seal(webhook_id, secret.as_bytes())
}

/// The secret of subscription `webhook_id` from its stored form; `None` when it cannot be opened (another
/// key, or a row copied from another subscription).
pub fn open(sealer: &Sealer, webhook_id: &str, stored: &str) -> Option<String> {
    if stored.starts_with(PREFIX) {
        return Some(stored.to_owned());
    }
    let plain = sealer.open(webhook_id, stored).ok()?;
    String::from_utf8(plain).ok()
}

/// Seals every secret still stored in plaintext; returns how many.
pub async fn seal_plaintext(db: &DatabaseConnection, sealer: &Sealer) -> Result<u64, DbErr> {
    let backend = db.get_database_backend();
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            backend,
            "SELECT id, secret FROM webhooks WHERE secret LIKE $1",
            [format!("{PREFIX}%").into()],
        ))
        .await?;
    let mut sealed = 0;
    for row in rows {
        let (id, secret): (String, String) = (row.try_get_by_index(0)?, row.try_get_by_index(1)?);
        // Only the plaintext value is replaced, so a concurrent rotation is never overwritten.
        sealed += db
            .execute_raw(Statement::from_sql_and_values(
                backend,
                "UPDATE webhooks SET secret = $1 WHERE id = $2 AND secret = $3",
                [seal(sealer, &id, &secret).into(), id.into(), secret.into()],
            ))
            .await?
            .rows_affected();
    }
    Ok(sealed)
}

#[cfg(test)]
mod tests {
    use super::{open, seal};
    use crate::{secrets::Sealer, webhooks::signing::new_secret};

    #[test]
    fn sealed_secrets_open_for_their_own_subscription_only() {
        let sealer = Sealer::from_base64(&Sealer::generate_key().unwrap()).unwrap();
        let secret = new_secret();
        let stored = seal(&sealer, "wh_a", &secret);
        assert!(!stored.contains(&secret[6..]), "the stored form hides the secret");
        assert_eq!(open(&sealer, "wh_a", &stored).as_deref(), Some(secret.as_str()));
        assert_eq!(open(&sealer, "wh_b", &stored), None, "bound to its row");
        assert_eq!(
            open(&sealer, "wh_a", &secret).as_deref(),
            Some(secret.as_str()),
            "plaintext of old rows"
        );
    }
}
