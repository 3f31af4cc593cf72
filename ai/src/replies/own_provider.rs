//! `PUT/GET/DELETE /v1/model-provider`: an account connects its own model provider. The key is sealed at
//! rest with the account id as context and answered masked (its last four characters); the base URL is a
//! customer's URL and passes the outbound policy. With its own key, an account's pro replies cost no credits.

use std::sync::Arc;

use frontdesk_api::v1::{
    ConnectedModel, DeleteModelProviderRequest, Deleted, GetModelProviderRequest, ModelProviderAnswer,
    PutModelProviderRequest, model_providers_server::ModelProviders,
};
use sea_orm::{DatabaseConnection, EntityTrait, sea_query::OnConflict};
use tonic::{Request, Response, Status};

use crate::{
    clock::Clock,
    error::ApiError,
    integrations::outbound::OutboundPolicy,
    platform_calls::{account_of, deleted},
    secrets::Sealer,
    store::entities::model_providers,
    timestamps,
    validate::Violations,
};

const PROVIDERS: &[&str] = &["anthropic", "openai"];
const MAX_KEY_CHARS: usize = 512;
const MAX_MODEL_CHARS: usize = 200;

pub struct ModelProvidersService {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    sealer: Sealer,
    policy: OutboundPolicy,
}

impl ModelProvidersService {
    pub fn new(db: DatabaseConnection, clock: Arc<dyn Clock>, sealer: Sealer, policy: OutboundPolicy) -> Self {
        Self {
            db,
            clock,
            sealer,
            policy,
        }
    }

    async fn check(&self, r: &PutModelProviderRequest) -> Result<(), ApiError> {
        let mut v = Violations::new();
        v.check(
            PROVIDERS.contains(&r.provider.as_str()),
            "provider",
            format!("must be one of: {}", PROVIDERS.join(", ")),
        );
        // A server of the business's own (Ollama, llama.cpp) may want no key; Anthropic always does.
        let key_needed = r.provider == "anthropic" || r.base_url.trim().is_empty();
        v.text("api_key", &r.api_key, key_needed, MAX_KEY_CHARS);
        v.check(
            http::HeaderValue::from_str(&r.api_key).is_ok(),
            "api_key",
            "must be printable ASCII",
        );
        v.text("model", &r.model, false, MAX_MODEL_CHARS);
        if !r.base_url.trim().is_empty()
            && let Err(problem) = self.policy.check_target(&r.base_url).await
        {
            v.check(false, "base_url", problem);
        }
        v.finish()
    }
}

fn masked(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.len() < 12 {
        return "****".to_owned();
    }
    format!("****{}", chars[chars.len() - 4..].iter().collect::<String>())
}

fn answer(row: model_providers::Model, key: &str) -> Response<ModelProviderAnswer> {
    Response::new(ModelProviderAnswer {
        success: true,
        model_provider: Some(ConnectedModel {
            provider: row.provider,
            api_key: masked(key),
            base_url: row.base_url,
            model: row.model,
            created_at: Some(timestamps::to_proto(row.created_at)),
            updated_at: Some(timestamps::to_proto(row.updated_at)),
        }),
    })
}

fn not_connected() -> ApiError {
    ApiError::not_found("no model provider is connected to this account")
}

#[tonic::async_trait]
impl ModelProviders for ModelProvidersService {
    async fn get_model_provider(
        &self,
        request: Request<GetModelProviderRequest>,
    ) -> Result<Response<ModelProviderAnswer>, Status> {
        let account_id = account_of(&request)?;
        let row = model_providers::Entity::find_by_id(account_id.clone())
            .one(&self.db)
            .await
            .map_err(ApiError::from)?
            .ok_or_else(not_connected)?;
        let key = self
            .sealer
            .open(account_id.as_str(), &row.sealed_key)
            .map(|key| String::from_utf8_lossy(&key).into_owned())
            .unwrap_or_default();
        Ok(answer(row, &key))
    }

    async fn put_model_provider(
        &self,
        request: Request<PutModelProviderRequest>,
    ) -> Result<Response<ModelProviderAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        self.check(&r).await?;
        let now = self.clock.now();
        let row = model_providers::Model {
            account_id: account_id.clone(),
            provider: r.provider,
            sealed_key: self.sealer.seal(account_id.as_str(), r.api_key.as_bytes()),
            base_url: r.base_url.trim().trim_end_matches('/').to_owned(),
            model: r.model.trim().to_owned(),
            created_at: now,
            updated_at: now,
        };
        let upsert = OnConflict::column(model_providers::Column::AccountId)
            .update_columns([
                model_providers::Column::Provider,
                model_providers::Column::SealedKey,
                model_providers::Column::BaseUrl,
                model_providers::Column::Model,
                model_providers::Column::UpdatedAt,
            ])
            .to_owned();
        model_providers::Entity::insert(model_providers::ActiveModel::from(row.clone()))
            .on_conflict(upsert)
            .exec_without_returning(&self.db)
            .await
            .map_err(ApiError::from)?;
        let stored = model_providers::Entity::find_by_id(account_id.clone())
            .one(&self.db)
            .await
            .map_err(ApiError::from)?
            .unwrap_or(row);
        Ok(answer(stored, &r.api_key))
    }

    async fn delete_model_provider(
        &self,
        request: Request<DeleteModelProviderRequest>,
    ) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let gone = model_providers::Entity::delete_by_id(account_id.clone())
            .exec(&self.db)
            .await
            .map_err(ApiError::from)?;
        if gone.rows_affected == 0 {
            return Err(not_connected().into());
        }
        Ok(deleted(account_id.to_string()))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_answered_by_their_last_four_characters() {
        assert_eq!(super::masked("sk-ant-api03-abcdefgh1234"), "****1234");
        assert_eq!(super::masked("short"), "****");
    }
}
