//! `GET /healthz`: `ok` when the database answers, else `degraded` with HTTP 503.

use frontdesk_api::{
    site::v0::{HealthRequest, HealthStatus, site_server::Site},
    wire,
};
use sea_orm::DatabaseConnection;
use tonic::{Request, Response, Status, metadata::MetadataValue};

use super::SITE_API_VERSION;
use crate::store;

#[derive(Clone, Debug)]
pub struct HealthService {
    db: DatabaseConnection,
}

impl HealthService {
    pub fn new(db: DatabaseConnection) -> Self {
        Self { db }
    }
}

#[tonic::async_trait]
impl Site for HealthService {
    async fn health(&self, _request: Request<HealthRequest>) -> Result<Response<HealthStatus>, Status> {
        let healthy = store::is_reachable(&self.db).await;
        let mut response = Response::new(HealthStatus {
            status: if healthy { "ok" } else { "degraded" }.to_owned(),
            version: SITE_API_VERSION.to_owned(),
        });
        if !healthy {
            tracing::warn!("health check: database unreachable");
            response
                .metadata_mut()
                .insert(wire::HTTP_CODE, MetadataValue::from_static("503"));
        }
        Ok(response)
    }
}
