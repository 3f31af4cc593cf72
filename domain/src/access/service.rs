//! `/v1/api-keys/...`: the calling key's metadata, rotation and revocation.

use std::sync::Arc;

use frontdesk_api::v1::{
    CurrentApiKey, GetCurrentApiKeyRequest, RateLimitUsage, RevokeApiKeyRequest, RevokedApiKey, RotateApiKeyRequest,
    RotatedApiKey, api_keys_server::ApiKeys,
};
use sea_orm::DatabaseConnection;
use tonic::{Request, Response, Status};

use super::{caller::Caller, credentials::unauthenticated, key_store, scopes::Scopes, verified_keys::VerifiedKeys};
use crate::{clock::Clock, error::ApiError, timestamps};

#[derive(Clone)]
pub struct ApiKeysService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    keys: Arc<VerifiedKeys>,
    window_seconds: u32,
}

impl ApiKeysService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, keys: Arc<VerifiedKeys>, window_seconds: u32) -> Self {
        Self {
            db,
            clock,
            keys,
            window_seconds,
        }
    }
}

#[tonic::async_trait]
impl ApiKeys for ApiKeysService {
    async fn get_current_api_key(
        &self,
        request: Request<GetCurrentApiKeyRequest>,
    ) -> Result<Response<CurrentApiKey>, Status> {
        let caller = Caller::of(&request)?;
        let rate = caller.rate;
        Ok(Response::new(CurrentApiKey {
            success: true,
            api_key_masked: caller.key.masked.clone(),
            created_at: Some(timestamps::to_proto(caller.key.created_at)),
            scopes: Scopes::from_stored(&caller.key.scopes).names(),
            rate_limit: Some(RateLimitUsage {
                limit: clamp(rate.limit),
                remaining: clamp(rate.remaining()),
                used: clamp(rate.used),
                window_seconds: clamp(self.window_seconds),
                reset_seconds: clamp(rate.reset_seconds),
            }),
        }))
    }

    async fn rotate_api_key(&self, request: Request<RotateApiKeyRequest>) -> Result<Response<RotatedApiKey>, Status> {
        let caller = Caller::of(&request)?;
        let (key, row) = key_store::rotate(&self.db, &caller.key, self.clock.now())
            .await
            .map_err(ApiError::from)?
            .ok_or_else(|| unauthenticated("this API key was rotated or revoked meanwhile"))?;
        self.keys.changed(caller.key.account_id.as_str()).await;
        tracing::info!(
            account_id = %caller.key.account_id,
            old_key = caller.key.id,
            new_key = row.id,
            "api key rotated"
        );
        Ok(Response::new(RotatedApiKey {
            success: true,
            api_key: key.reveal().to_owned(),
            api_key_masked: key.masked(),
            created_at: Some(timestamps::to_proto(row.created_at)),
        }))
    }

    async fn revoke_api_key(&self, request: Request<RevokeApiKeyRequest>) -> Result<Response<RevokedApiKey>, Status> {
        let caller = Caller::of(&request)?;
        let revoked = key_store::revoke(&self.db, &caller.key.id, self.clock.now())
            .await
            .map_err(ApiError::from)?;
        if !revoked {
            return Err(unauthenticated("this API key was rotated or revoked meanwhile").into());
        }
        self.keys.changed(caller.key.account_id.as_str()).await;
        tracing::info!(
            account_id = %caller.key.account_id,
            key = caller.key.id,
            "api key revoked"
        );
        Ok(Response::new(RevokedApiKey {
            success: true,
            revoked: true,
        }))
    }
}

fn clamp(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}
