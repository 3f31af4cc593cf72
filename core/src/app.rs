//! Assembles the core from its configuration: database (migrated), payment provider, services, gRPC routes.

use std::sync::Arc;

use anyhow::Context;
use sea_orm::DatabaseConnection;
use tonic::service::Routes;

use crate::{
    clock::SystemClock,
    config::{CoreConfig, PaymentConfig, PaymentProviderKind},
    grpc::{self, Services},
    ids,
    integrations::{
        http,
        payments::{LocalProvider, PaymentProvider, RazorpayProvider},
    },
    site::{health::HealthService, payments::PaymentsService},
    store,
};

/// Key id the `local` provider hands to the checkout unless `RAZORPAY_KEY_ID` says otherwise.
const LOCAL_KEY_ID: &str = "rzp_test_local";
/// Settings key of the `local` provider's generated key secret.
const LOCAL_SECRET_SETTING: &str = "local_payment_key_secret";

/// Connects and migrates the database, then builds every service into one set of gRPC routes.
pub async fn build_core(config: &CoreConfig) -> anyhow::Result<Routes> {
    let db = store::connect(&config.database_url, config.db_max_connections).await?;
    store::migrate(&db).await?;
    let provider = payment_provider(&config.payments, &db).await?;
    let clock = Arc::new(SystemClock);
    let services = Services {
        health: HealthService::new(db.clone()),
        payments: PaymentsService::new(
            db,
            provider,
            config.payments.prices.clone(),
            clock,
            config.payments.timeout(),
        ),
    };
    grpc::routes(services).await
}

async fn payment_provider(config: &PaymentConfig, db: &DatabaseConnection) -> anyhow::Result<Arc<dyn PaymentProvider>> {
    let key_id = config.key_id.clone().filter(|k| !k.is_empty());
    let key_secret = config.key_secret.clone().filter(|k| !k.is_empty());
    Ok(match config.provider {
        PaymentProviderKind::Local => {
            let key_secret = match key_secret {
                Some(secret) => secret,
                None => store::settings::get_or_create(db, LOCAL_SECRET_SETTING, || ids::base62(24)).await?,
            };
            Arc::new(LocalProvider::new(
                key_id.unwrap_or_else(|| LOCAL_KEY_ID.to_owned()),
                key_secret,
            ))
        }
        PaymentProviderKind::Razorpay => Arc::new(RazorpayProvider::new(
            http::client(config.timeout())?,
            &config.razorpay_base_url,
            key_id.context("FRONTDESK_PAYMENT_PROVIDER=razorpay needs RAZORPAY_KEY_ID")?,
            key_secret.context("FRONTDESK_PAYMENT_PROVIDER=razorpay needs RAZORPAY_KEY_SECRET")?,
        )),
    })
}
