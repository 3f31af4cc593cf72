//! An agent's MCP servers as tools, over the Streamable HTTP transport of the official SDK (`rmcp`), on the
//! outbound policy's client (the private-address guard at connection time, no redirects) with the server's
//! declared headers. What a server lists is bounded (`MAX_PAGES`, `MAX_TOOLS`, `MAX_SCHEMA_BYTES`, answers of
//! at most a MiB): a server's list goes into every model request of the agent. A server's tool list is kept for `LIST_FRESH` so that a reply that calls none of its
//! tools costs it nothing; a call opens a session for the reply (initialize, then `tools/call`). A server that
//! is down, slow or answers garbage drops its tools from that reply, and nothing else.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::{Duration, Instant},
};

use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult, ContentBlock, PaginatedRequestParams, Tool},
    service::RunningService,
    transport::{StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig},
};
use serde_json::Value;

use super::super::{chat::ToolSpec, provider::ToolOutcome};
use crate::store::{entities::mcp_servers, from_json_text};

/// How long a server's tool list is used before it is asked again.
const LIST_FRESH: Duration = Duration::from_secs(60);
/// The longest a server may take to open a session and list its tools, or to answer a call.
pub const MCP_TIMEOUT: Duration = Duration::from_secs(10);
/// Pages of `tools/list` read from one server; a server that pages on is read no further.
pub const MAX_PAGES: usize = 5;
/// Tools kept of one server.
pub const MAX_TOOLS: usize = 64;
/// Bytes of the kept tools' names, descriptions and schemas (as JSON) of one server: they go into every
/// model request of the agent.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// The largest answer read from a server (a page of its list, a call's result).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

type Session = RunningService<RoleClient, ()>;

/// One MCP server of the agent, its headers opened.
pub struct Server {
    pub row: mcp_servers::Model,
    pub headers: BTreeMap<String, String>,
}

/// A server's tool list: when it was read, and for which version of the server's row.
struct Listed {
    at: Instant,
    version: String,
    specs: Vec<ToolSpec>,
}

/// Tool lists by server id.
#[derive(Default)]
pub struct ListCache(Mutex<HashMap<String, Listed>>);

impl Server {
    /// What makes a cached list stale besides time: the URL, the headers or the allowed tools changed.
    fn version(&self) -> String {
        format!("{}|{}|{}", self.row.url, self.row.headers, self.row.allowed_tools)
    }

    async fn connect(&self, client: &reqwest::Client) -> Result<Session, String> {
        crate::jobs::guard::before_effect().await;
        let headers = self
            .headers
            .iter()
            .filter_map(|(name, value)| {
                Some((
                    http::HeaderName::from_bytes(name.as_bytes()).ok()?,
                    http::HeaderValue::from_str(value).ok()?,
                ))
            })
            .filter(|(name, _)| !matches!(name.as_str(), "accept" | "mcp-session-id" | "last-event-id"))
            .collect();
        let config = StreamableHttpClientTransportConfig::with_uri(self.row.url.as_str())
            .custom_headers(headers)
            .max_json_response_size(MAX_ANSWER_BYTES)
            .max_sse_event_size(MAX_ANSWER_BYTES);
        let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
        match tokio::time::timeout(MCP_TIMEOUT, ().serve(transport)).await {
            Ok(Ok(session)) => Ok(session),
            Ok(Err(err)) => Err(format!("the session could not be opened: {err}")),
            Err(_) => Err("the server did not open a session in time".into()),
        }
    }

    /// The server's tools the agent may call, as declarations: its first `MAX_PAGES` pages of them, at most
    /// `MAX_TOOLS` and `MAX_SCHEMA_BYTES` of declarations (the rest left out, and logged).
    async fn list(&self, session: &Session) -> Result<Vec<ToolSpec>, String> {
        let listed = tokio::time::timeout(MCP_TIMEOUT, async {
            let mut tools = Vec::new();
            let mut cursor = None;
            for _ in 0..MAX_PAGES {
                let params = PaginatedRequestParams::default().with_cursor(cursor);
                let page = session.list_tools(Some(params)).await?;
                tools.extend(page.tools);
                cursor = page.next_cursor;
                if cursor.is_none() || tools.len() > MAX_TOOLS {
                    break;
                }
            }
            Ok::<_, rmcp::ServiceError>((tools, cursor.is_some()))
        })
        .await;
        let (tools, more) = match listed {
            Ok(Ok(listed)) => listed,
            Ok(Err(err)) => return Err(format!("tools/list failed: {err}")),
            Err(_) => return Err("tools/list did not answer in time".into()),
        };
        let allowed: Vec<String> = from_json_text(&self.row.allowed_tools);
        let (specs, left_out) = specs(tools, &allowed, &self.row.name);
        if more || left_out > 0 {
            tracing::warn!(
                server = %self.row.name,
                left_out,
                more_pages = more,
                "an MCP server lists more tools than an agent takes ({MAX_TOOLS} tools, {MAX_SCHEMA_BYTES} bytes of declarations, {MAX_PAGES} pages); the rest are left out"
            );
        }
        Ok(specs)
    }

    /// The tools of this server for a reply: the cached list while fresh, else a new one (and the session
    /// that read it, for the reply's calls). `Err` when the server cannot be used in this reply.
    pub async fn tools(
        &self,
        client: &reqwest::Client,
        cache: &ListCache,
    ) -> Result<(Vec<ToolSpec>, Option<Session>), String> {
        let version = self.version();
        if let Some(listed) = cache.0.lock().unwrap().get(&self.row.id)
            && listed.at.elapsed() < LIST_FRESH
            && listed.version == version
        {
            return Ok((listed.specs.clone(), None));
        }
        let session = self.connect(client).await?;
        let specs = self.list(&session).await?;
        let listed = Listed {
            at: Instant::now(),
            version,
            specs: specs.clone(),
        };
        cache.0.lock().unwrap().insert(self.row.id.clone(), listed);
        Ok((specs, Some(session)))
    }

    /// Calls `name` in `session` (opened first when the reply has none yet).
    pub async fn call(
        &self,
        client: &reqwest::Client,
        session: &tokio::sync::Mutex<Option<Session>>,
        name: &str,
        arguments: &Value,
        answer_bytes: usize,
    ) -> ToolOutcome {
        let mut held = session.lock().await;
        if held.is_none() {
            match self.connect(client).await {
                Ok(opened) => *held = Some(opened),
                Err(why) => {
                    tracing::warn!(server = %self.row.name, %why, "an MCP server could not be reached for a call");
                    return ToolOutcome::Error(format!("the tool's server is unavailable: {why}"));
                }
            }
        }
        let Some(open) = held.as_ref() else {
            return ToolOutcome::Error("the tool's server is unavailable".into());
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments.as_object().cloned();
        let result = match tokio::time::timeout(MCP_TIMEOUT, open.call_tool(params)).await {
            Ok(Ok(result)) => result,
            Ok(Err(err)) => {
                tracing::warn!(server = %self.row.name, tool = name, error = %err, "an MCP tool call failed");
                return ToolOutcome::Error(format!("the tool failed: {err}"));
            }
            Err(_) => return ToolOutcome::Error("the tool did not answer in time".into()),
        };
        outcome(result, answer_bytes)
    }
}

/// A server's listed tools as declarations: those `allowed` (all when empty) whose names a model accepts,
/// within `MAX_TOOLS` and `MAX_SCHEMA_BYTES`; and how many were left out for the bounds.
pub(crate) fn specs(tools: Vec<Tool>, allowed: &[String], server: &str) -> (Vec<ToolSpec>, usize) {
    let usable = tools
        .into_iter()
        .filter(|tool| allowed.is_empty() || allowed.iter().any(|a| a == tool.name.as_ref()))
        // Model providers refuse a whole request for one name outside their rule: such a tool is left out.
        .filter(|tool| {
            let usable = crate::agents::tools::is_tool_name(&tool.name);
            if !usable {
                tracing::warn!(server, tool = %tool.name, "an MCP tool's name is not one a model accepts; it is left out");
            }
            usable
        })
        .map(|tool| ToolSpec {
            name: tool.name.to_string(),
            description: tool.description.as_deref().unwrap_or_default().to_owned(),
            parameters: Value::Object((*tool.input_schema).clone()),
        });
    bounded(usable)
}

/// What a call's result tells the model: its text blocks (else its structured content) cut at
/// `answer_bytes`, as the tool's answer or, when the server flags it, its error.
pub(crate) fn outcome(result: CallToolResult, answer_bytes: usize) -> ToolOutcome {
    let mut text: String = result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    if text.is_empty()
        && let Some(structured) = &result.structured_content
    {
        text = structured.to_string();
    }
    let text = cut_bytes(&text, answer_bytes);
    if result.is_error.unwrap_or(false) {
        ToolOutcome::Error(text)
    } else {
        ToolOutcome::Answer(text)
    }
}

/// The first tools within `MAX_TOOLS` and `MAX_SCHEMA_BYTES`, and how many were left out.
fn bounded(tools: impl Iterator<Item = ToolSpec>) -> (Vec<ToolSpec>, usize) {
    let mut kept = Vec::new();
    let mut bytes = 0;
    let mut left_out = 0;
    for spec in tools {
        let size = spec.size();
        if kept.len() < MAX_TOOLS && bytes + size <= MAX_SCHEMA_BYTES {
            bytes += size;
            kept.push(spec);
        } else {
            left_out += 1;
        }
    }
    (kept, left_out)
}

/// At most `cap` bytes of `text`, cut at a character boundary.
fn cut_bytes(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_owned();
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}
