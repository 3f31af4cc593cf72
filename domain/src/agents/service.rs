//! The `Agents` gRPC service: agents and their bot configuration here; FAQs, knowledge attachments and
//! tools in their own modules.

use crate::knowledge::{attachments, retrieval::Retrieval};
use crate::resource_id::{AgentId, FaqId, SourceId};
use std::sync::Arc;

use frontdesk_api::v1::{
    AgentAnswer, AgentKbSourceAnswer, AgentKbSourceList, AgentList, AttachKbSourceRequest, BotConfigAnswer,
    CreateAgentRequest, CreateCustomFunctionRequest, CreateFaqRequest, CreateMcpServerRequest, CustomFunctionAnswer,
    CustomFunctionList, DeleteAgentRequest, DeleteCustomFunctionRequest, DeleteFaqRequest, DeleteMcpServerRequest,
    Deleted, DetachKbSourceRequest, FaqAnswer, FaqList, GetAgentRequest, ListAgentKbSourcesRequest, ListAgentsRequest,
    ListCustomFunctionsRequest, ListFaqsRequest, ListMcpServersRequest, McpServerAnswer, McpServerList,
    SearchFaqsAnswer, SearchFaqsRequest, UpdateAgentRequest, UpdateBotConfigRequest, UpdateFaqRequest,
    agents_server::Agents,
};
use sea_orm::{
    ActiveEnum, ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, IntoActiveModel,
    QueryFilter,
};
use tonic::{Request, Response, Status};

use super::{
    faqs,
    fields::{self, AgentFields, agent_message, bot_config_message},
    find, search,
    tier::{self, TierModels},
    tools,
};
use crate::{
    access::AccountId,
    clock::Clock,
    error::{ApiError, ApiResult},
    integrations::outbound::OutboundPolicy,
    paging::{self, Page},
    platform_calls::{account_of, deleted},
    secrets::Sealer,
    store::entities::{
        agent_faqs, agent_kb_sources, agents, broadcasts, campaigns, channel_defaults, custom_functions, entry_points,
        mcp_servers,
    },
};

#[derive(Clone)]
pub struct AgentsService {
    pub(super) db: DatabaseConnection,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) sealer: Sealer,
    pub(super) policy: OutboundPolicy,
    pub(super) retrieval: Arc<Retrieval>,
    /// The models each tier may name on the server's key.
    tiers: TierModels,
}

impl AgentsService {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        sealer: Sealer,
        policy: OutboundPolicy,
        retrieval: Arc<Retrieval>,
        tiers: TierModels,
    ) -> Self {
        Self {
            db,
            clock,
            sealer,
            policy,
            retrieval,
            tiers,
        }
    }
}

/// Creates an agent from checked-or-not fields (they are checked here). Shared with the campaigns facade.
pub async fn create(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    fields: AgentFields,
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<agents::Model> {
    fields.validate(true)?;
    let agent = fields.into_new(crate::ids::new_id(crate::ids::Kind::Agent), account_id, now);
    agents::Entity::insert(agents::ActiveModel::from(agent.clone()).reset_all())
        .exec_without_returning(db)
        .await?;
    Ok(agent)
}

/// Applies `fields` to the account's agent. Shared with the campaigns facade.
pub async fn update(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    agent_id: &str,
    fields: AgentFields,
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<agents::Model> {
    fields.validate(false)?;
    // Under the account lock: concurrent changes of one agent apply one after the other, none lost.
    crate::accounts::store::lock(db, account_id).await?;
    let mut agent = find(db, account_id, agent_id).await?;
    fields.apply(&mut agent);
    agent.updated_at = now;
    agent.clone().into_active_model().reset_all().update(db).await?;
    Ok(agent)
}

impl AgentsService {
    async fn create(&self, account_id: &AccountId, fields: AgentFields) -> ApiResult<agents::Model> {
        let txn = crate::store::begin_write(&self.db).await?;
        let agent = create(&txn, account_id, fields, self.clock.now()).await?;
        tier::check_model(&txn, account_id, &agent, &self.tiers).await?;
        txn.commit().await?;
        Ok(agent)
    }

    async fn update(&self, account_id: &AccountId, agent_id: &str, fields: AgentFields) -> ApiResult<agents::Model> {
        let txn = crate::store::begin_write(&self.db).await?;
        let agent = update(&txn, account_id, agent_id, fields, self.clock.now()).await?;
        tier::check_model(&txn, account_id, &agent, &self.tiers).await?;
        txn.commit().await?;
        Ok(agent)
    }

    /// Deletes the agent and everything that belongs to it, unless a broadcast still needs it.
    async fn delete(&self, account_id: &AccountId, agent_id: &str) -> ApiResult<()> {
        let txn = crate::store::begin_write(&self.db).await?;
        crate::accounts::store::lock(&txn, account_id).await?;
        let agent = find(&txn, account_id, agent_id).await?;
        let busy = broadcasts::Entity::find()
            .filter(broadcasts::Column::AccountId.eq(account_id))
            .filter(broadcasts::Column::AgentId.eq(&agent.id))
            .filter(broadcasts::Column::Status.is_in(broadcasts::BroadcastStatus::UNFINISHED))
            .one(&txn)
            .await?;
        if let Some(broadcast) = busy {
            return Err(ApiError::failed_precondition(format!(
                "broadcast {} ({}) answers replies with this agent; cancel it or give it another agent first",
                broadcast.id,
                broadcast.status.to_value()
            )));
        }
        agent_faqs::Entity::delete_many()
            .filter(agent_faqs::Column::AgentId.eq(&agent.id))
            .exec(&txn)
            .await?;
        agent_kb_sources::Entity::delete_many()
            .filter(agent_kb_sources::Column::AgentId.eq(&agent.id))
            .exec(&txn)
            .await?;
        custom_functions::Entity::delete_many()
            .filter(custom_functions::Column::AgentId.eq(&agent.id))
            .exec(&txn)
            .await?;
        mcp_servers::Entity::delete_many()
            .filter(mcp_servers::Column::AgentId.eq(&agent.id))
            .exec(&txn)
            .await?;
        entry_points::Entity::delete_many()
            .filter(entry_points::Column::AccountId.eq(account_id))
            .filter(entry_points::Column::AgentId.eq(&agent.id))
            .exec(&txn)
            .await?;
        channel_defaults::Entity::delete_many()
            .filter(channel_defaults::Column::AccountId.eq(account_id))
            .filter(channel_defaults::Column::AgentId.eq(&agent.id))
            .exec(&txn)
            .await?;
        campaigns::Entity::delete_many()
            .filter(campaigns::Column::AccountId.eq(account_id))
            .filter(campaigns::Column::AgentId.eq(&agent.id))
            .exec(&txn)
            .await?;
        agents::Entity::delete_by_id(agent.id.clone()).exec(&txn).await?;
        txn.commit().await?;
        Ok(())
    }
}

fn answer(agent: &agents::Model) -> Response<AgentAnswer> {
    Response::new(AgentAnswer {
        success: true,
        agent: Some(agent_message(agent)),
    })
}

#[tonic::async_trait]
impl Agents for AgentsService {
    async fn list_agents(&self, request: Request<ListAgentsRequest>) -> Result<Response<AgentList>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::Agent.prefix())?;
        let select = agents::Entity::find().filter(agents::Column::AccountId.eq(&account_id));
        let (rows, more) = paging::fetch(&self.db, select, &page, agents::Column::CreatedAt, agents::Column::Id)
            .await
            .map_err(ApiError::from)?;
        let (agents, next_cursor) = paging::render(&rows, more, |a| (a.created_at, a.id.as_str()), agent_message);
        Ok(Response::new(AgentList {
            success: true,
            next_cursor,
            agents,
        }))
    }

    async fn create_agent(&self, request: Request<CreateAgentRequest>) -> Result<Response<AgentAnswer>, Status> {
        let account_id = account_of(&request)?;
        let fields = AgentFields::from(request.into_inner());
        Ok(answer(&self.create(&account_id, fields).await?))
    }

    async fn get_agent(&self, request: Request<GetAgentRequest>) -> Result<Response<AgentAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(answer(&find(&self.db, &account_id, &request.get_ref().agent_id).await?))
    }

    async fn update_agent(&self, request: Request<UpdateAgentRequest>) -> Result<Response<AgentAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let agent_id = r.agent_id.clone();
        let fields = fields::update_fields(r)?;
        Ok(answer(&self.update(&account_id, &agent_id, fields).await?))
    }

    async fn delete_agent(&self, request: Request<DeleteAgentRequest>) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let agent_id = request.into_inner().agent_id;
        self.delete(&account_id, &agent_id).await?;
        Ok(deleted(agent_id))
    }

    async fn update_bot_config(
        &self,
        request: Request<UpdateBotConfigRequest>,
    ) -> Result<Response<BotConfigAnswer>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let agent_id = r.agent_id.clone();
        let fields = fields::bot_config_fields(r)?;
        let agent = self.update(&account_id, &agent_id, fields).await?;
        Ok(Response::new(BotConfigAnswer {
            success: true,
            bot_config: Some(bot_config_message(&agent)),
        }))
    }

    async fn list_faqs(&self, request: Request<ListFaqsRequest>) -> Result<Response<FaqList>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(
            faqs::list(&self.db, &account_id, request.into_inner()).await?,
        ))
    }

    async fn create_faq(&self, request: Request<CreateFaqRequest>) -> Result<Response<FaqAnswer>, Status> {
        let account_id = account_of(&request)?;
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        let faq = faqs::create(&txn, &account_id, request.into_inner(), self.clock.now()).await?;
        txn.commit().await.map_err(ApiError::from)?;
        Ok(Response::new(faq))
    }

    async fn update_faq(&self, request: Request<UpdateFaqRequest>) -> Result<Response<FaqAnswer>, Status> {
        let account_id = account_of(&request)?;
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        let faq = faqs::update(&txn, &account_id, request.into_inner(), self.clock.now()).await?;
        txn.commit().await.map_err(ApiError::from)?;
        Ok(Response::new(faq))
    }

    async fn delete_faq(&self, request: Request<DeleteFaqRequest>) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let faq = FaqId::new(r.faq_id);
        faqs::delete(&self.db, &account_id, &AgentId::new(r.agent_id), &faq).await?;
        Ok(deleted(faq.to_string()))
    }

    async fn search_faqs(&self, request: Request<SearchFaqsRequest>) -> Result<Response<SearchFaqsAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(
            search::search(&self.db, &self.retrieval, &account_id, request.into_inner()).await?,
        ))
    }

    async fn list_agent_kb_sources(
        &self,
        request: Request<ListAgentKbSourcesRequest>,
    ) -> Result<Response<AgentKbSourceList>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(
            attachments::list(&self.db, &account_id, request.into_inner()).await?,
        ))
    }

    async fn attach_kb_source(
        &self,
        request: Request<AttachKbSourceRequest>,
    ) -> Result<Response<AgentKbSourceAnswer>, Status> {
        let account_id = account_of(&request)?;
        let txn = crate::store::begin_write(&self.db).await.map_err(ApiError::from)?;
        let attached = attachments::attach(&txn, &account_id, request.into_inner(), self.clock.now()).await?;
        txn.commit().await.map_err(ApiError::from)?;
        Ok(Response::new(attached))
    }

    async fn detach_kb_source(&self, request: Request<DetachKbSourceRequest>) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let source = SourceId::new(r.source_id);
        attachments::detach(&self.db, &account_id, &AgentId::new(r.agent_id), &source).await?;
        Ok(deleted(source.to_string()))
    }

    async fn list_custom_functions(
        &self,
        request: Request<ListCustomFunctionsRequest>,
    ) -> Result<Response<CustomFunctionList>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(
            tools::list_functions(self, &account_id, request.into_inner()).await?,
        ))
    }

    async fn create_custom_function(
        &self,
        request: Request<CreateCustomFunctionRequest>,
    ) -> Result<Response<CustomFunctionAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(
            tools::create_function(self, &account_id, request.into_inner()).await?,
        ))
    }

    async fn delete_custom_function(
        &self,
        request: Request<DeleteCustomFunctionRequest>,
    ) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let columns = [
            custom_functions::Column::Id,
            custom_functions::Column::AccountId,
            custom_functions::Column::AgentId,
        ];
        let ids = [r.function_id.as_str(), &r.agent_id];
        tools::delete::<custom_functions::Entity>(&self.db, &account_id, columns, ids, "custom function").await?;
        Ok(deleted(r.function_id))
    }

    async fn list_mcp_servers(
        &self,
        request: Request<ListMcpServersRequest>,
    ) -> Result<Response<McpServerList>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(
            tools::list_servers(self, &account_id, request.into_inner()).await?,
        ))
    }

    async fn create_mcp_server(
        &self,
        request: Request<CreateMcpServerRequest>,
    ) -> Result<Response<McpServerAnswer>, Status> {
        let account_id = account_of(&request)?;
        Ok(Response::new(
            tools::create_server(self, &account_id, request.into_inner()).await?,
        ))
    }

    async fn delete_mcp_server(&self, request: Request<DeleteMcpServerRequest>) -> Result<Response<Deleted>, Status> {
        let account_id = account_of(&request)?;
        let r = request.into_inner();
        let columns = [
            mcp_servers::Column::Id,
            mcp_servers::Column::AccountId,
            mcp_servers::Column::AgentId,
        ];
        let ids = [r.server_id.as_str(), &r.agent_id];
        tools::delete::<mcp_servers::Entity>(&self.db, &account_id, columns, ids, "MCP server").await?;
        Ok(deleted(r.server_id))
    }
}
