//! The tools a model-backed agent may call in a reply: the built-ins (`builtins`), the agent's custom
//! functions (`functions`) and its MCP servers' tools (`mcp`). `ToolKit` is the process's (database, sealer,
//! the outbound client, the MCP servers' tool lists); `ReplyTools` is one reply's, with the conversation the
//! built-ins act on, the headers opened and the MCP sessions it opened. A name is one tool: a built-in
//! first, then a custom function, then the first MCP server that lists it.

mod builtins;
pub(crate) mod functions;
pub(crate) mod mcp;

pub use builtins::prune_effects;

use std::{sync::Arc, time::Duration};

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};
use serde_json::Value;

use self::{
    builtins::Builtins,
    functions::Function,
    mcp::{ListCache, Server},
};
use super::{
    chat::{ToolCall, ToolSpec},
    provider::{ToolOutcome, Toolbox},
};
use crate::{
    agents::{fields::BookingSettings, tools::open_headers},
    clock::Clock,
    error::ApiResult,
    integrations::outbound::OutboundPolicy,
    secrets::Sealer,
    store::{
        entities::{agents, conversations, custom_functions, mcp_servers},
        from_json_text,
    },
};

/// A custom function's time limit.
const FUNCTION_TIMEOUT: Duration = Duration::from_secs(10);

pub struct ToolKit {
    db: DatabaseConnection,
    clock: Arc<dyn Clock>,
    sealer: Sealer,
    policy: OutboundPolicy,
    client: reqwest::Client,
    mcp_client: reqwest::Client,
    mcp_lists: ListCache,
}

impl ToolKit {
    pub fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        sealer: Sealer,
        policy: OutboundPolicy,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            client: policy.client(FUNCTION_TIMEOUT)?,
            mcp_client: policy.client(mcp::MCP_TIMEOUT)?,
            db,
            clock,
            sealer,
            policy,
            mcp_lists: ListCache::default(),
        })
    }

    /// The tools of a reply of `agent` in `conversation`.
    pub async fn for_reply(
        &self,
        conversation: &conversations::Model,
        agent: &agents::Model,
    ) -> ApiResult<ReplyTools<'_>> {
        let rows = custom_functions::Entity::find()
            .filter(custom_functions::Column::AgentId.eq(agent.id.as_str()))
            .order_by_asc(custom_functions::Column::CreatedAt)
            .all(&self.db)
            .await?;
        let functions = rows
            .into_iter()
            .filter(|row| !builtins::NAMES.contains(&row.name.as_str()))
            .filter_map(|row| match open_headers(&self.sealer, &row.id, &row.headers) {
                Ok(headers) => Some(Function { row, headers }),
                Err(_) => {
                    tracing::error!(function = %row.id, "a custom function's headers cannot be opened with this server's key; it is left out");
                    None
                }
            })
            .collect();
        let mcp = self.mcp_servers(agent).await?;
        let booking = from_json_text::<BookingSettings>(&agent.booking);
        Ok(ReplyTools {
            kit: self,
            mcp,
            builtins: Builtins {
                db: self.db.clone(),
                clock: self.clock.clone(),
                conversation: conversation.clone(),
                booking: booking.enabled,
                booking_days: booking.max_days_ahead,
                calls: Default::default(),
            },
            functions,
        })
    }

    /// The agent's MCP servers that answered with their tools (now, or within the list's freshness).
    async fn mcp_servers(&self, agent: &agents::Model) -> ApiResult<Vec<McpTools>> {
        let rows = mcp_servers::Entity::find()
            .filter(mcp_servers::Column::AgentId.eq(agent.id.as_str()))
            .order_by_asc(mcp_servers::Column::CreatedAt)
            .all(&self.db)
            .await?;
        let servers = rows.into_iter().filter_map(|row| {
            let literal = reqwest::Url::parse(&row.url)
                .map_err(|_| "is not a URL".to_owned())
                .and_then(|url| self.policy.refuse_literal(&url));
            if let Err(why) = literal {
                tracing::warn!(server = %row.name, %why, "an MCP server's URL is refused");
                return None;
            }
            match open_headers(&self.sealer, &row.id, &row.headers) {
                Ok(headers) => Some(Server { row, headers }),
                Err(_) => {
                    tracing::error!(server = %row.id, "an MCP server's headers cannot be opened with this server's key; it is left out");
                    None
                }
            }
        });
        let listed = futures_util::future::join_all(servers.map(|server| async move {
            match server.tools(&self.mcp_client, &self.mcp_lists).await {
                Ok((specs, session)) => Some(McpTools {
                    server,
                    specs,
                    session: tokio::sync::Mutex::new(session),
                }),
                Err(why) => {
                    tracing::warn!(server = %server.row.name, %why, "an MCP server's tools are left out of this reply");
                    None
                }
            }
        }))
        .await;
        Ok(listed.into_iter().flatten().collect())
    }
}

/// An MCP server's tools in a reply, with the session the reply uses for it.
struct McpTools {
    server: Server,
    specs: Vec<ToolSpec>,
    session: tokio::sync::Mutex<Option<rmcp::service::RunningService<rmcp::RoleClient, ()>>>,
}

pub struct ReplyTools<'a> {
    kit: &'a ToolKit,
    builtins: Builtins,
    functions: Vec<Function>,
    mcp: Vec<McpTools>,
}

impl ReplyTools<'_> {
    /// The MCP server that answers the tool `name`, unless a built-in or a function has that name.
    fn mcp_server_of(&self, name: &str) -> Option<&McpTools> {
        self.mcp.iter().find(|m| m.specs.iter().any(|s| s.name == name))
    }
}

#[async_trait::async_trait]
impl Toolbox for ReplyTools<'_> {
    fn specs(&self) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = builtins::specs(self.builtins.booking);
        specs.extend(self.functions.iter().map(Function::spec));
        for spec in self.mcp.iter().flat_map(|m| m.specs.iter()) {
            if !specs.iter().any(|s| s.name == spec.name) {
                specs.push(spec.clone());
            }
        }
        specs
    }

    async fn call(&self, call: &ToolCall) -> ToolOutcome {
        let arguments = match arguments(&call.arguments) {
            Ok(arguments) => arguments,
            Err(why) => {
                tracing::info!(tool = %call.name, "a model's tool arguments were not a JSON object");
                return ToolOutcome::Error(why);
            }
        };
        // Every tool acts outside the reply's own transaction: only a run that still holds its claim calls one.
        crate::jobs::guard::before_effect().await;
        if let Some(outcome) = self.builtins.call(&call.name, &arguments).await {
            return outcome;
        }
        if let Some(function) = self.functions.iter().find(|f| f.row.name == call.name) {
            return function.call(&self.kit.policy, &self.kit.client, &arguments).await;
        }
        if let Some(mcp) = self.mcp_server_of(&call.name) {
            return mcp
                .server
                .call(
                    &self.kit.mcp_client,
                    &mcp.session,
                    &call.name,
                    &arguments,
                    functions::ANSWER_BYTES,
                )
                .await;
        }
        tracing::info!(tool = %call.name, "a model called a tool it was not given");
        let known: Vec<String> = self.specs().into_iter().map(|s| s.name).collect();
        ToolOutcome::Error(format!(
            "there is no tool `{}`; the tools are: {}",
            call.name,
            known.join(", ")
        ))
    }
}

/// The model's arguments as a JSON object (none at all is an empty object).
pub(crate) fn arguments(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value) if value.is_object() => Ok(value),
        Ok(_) => Err("the arguments must be a JSON object".into()),
        Err(err) => Err(format!("the arguments are not valid JSON: {err}")),
    }
}
