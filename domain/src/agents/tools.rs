//! An agent's tools: custom functions (an HTTPS endpoint described by a JSON Schema) and MCP servers. Their
//! headers usually carry credentials, so they are sealed at rest and answered with the values redacted.

use std::collections::{BTreeMap, HashMap};

use frontdesk_api::v1::{
    CreateCustomFunctionRequest, CreateMcpServerRequest, CustomFunction, CustomFunctionAnswer, CustomFunctionList,
    ListCustomFunctionsRequest, ListMcpServersRequest, McpServer, McpServerAnswer, McpServerList,
};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{find, service::AgentsService};
use crate::{
    access::AccountId,
    accounts,
    error::{ApiError, ApiResult},
    paging::{self, Page},
    secrets::Sealer,
    store::{
        entities::{agents, custom_functions, mcp_servers},
        from_json_text, to_json_text,
    },
    timestamps,
    validate::Violations,
};

/// What a stored header value is answered as.
pub const REDACTED: &str = "[redacted]";
const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];
const TRANSPORTS: &[&str] = &["streamable_http"];
const MAX_FUNCTIONS: u64 = 50;
const MAX_SERVERS: u64 = 20;
const MAX_HEADERS: usize = 20;

/// `^[A-Za-z][A-Za-z0-9_-]{0,63}$`: what model providers accept as a tool name.
pub fn is_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn check_headers(v: &mut Violations, headers: &HashMap<String, String>) {
    v.check(
        headers.len() <= MAX_HEADERS,
        "headers",
        format!("must hold at most {MAX_HEADERS} headers"),
    );
    for (name, value) in headers {
        v.check(
            http::HeaderName::from_bytes(name.as_bytes()).is_ok(),
            &format!("headers.{name}"),
            "is not a valid header name",
        );
        v.check(
            http::HeaderValue::from_str(value).is_ok(),
            &format!("headers.{name}"),
            "is not a valid header value",
        );
    }
}

/// Checks an HTTPS tool URL against the outbound policy (no private targets unless allowed).
async fn check_url(v: &mut Violations, service: &AgentsService, url: &str) {
    if !url.trim().starts_with("https://") {
        v.check(false, "url", "must be an https URL");
    } else if let Err(problem) = service.policy.check_target(url).await {
        v.check(false, "url", problem);
    }
}

/// `parameters` must be an object schema that is a valid JSON Schema (checked against its meta-schema and
/// compiled, so bad patterns and unresolvable references are refused too).
fn check_schema(v: &mut Violations, schema: &Value) {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        v.check(
            false,
            "parameters",
            "must be a JSON Schema of an object (\"type\": \"object\")",
        );
        return;
    }
    if let Err(error) = jsonschema::meta::validate(schema) {
        v.check(false, "parameters", format!("is not a valid JSON Schema: {error}"));
    } else if let Err(error) = jsonschema::validator_for(schema) {
        v.check(false, "parameters", format!("is not a usable JSON Schema: {error}"));
    }
}

/// Headers as stored: the names readable (answers list them), the whole set sealed to its row.
#[derive(Default, Serialize, Deserialize)]
#[serde(default)]
struct StoredHeaders {
    names: Vec<String>,
    sealed: String,
}

fn stored_headers(sealer: &Sealer, row_id: &str, headers: &HashMap<String, String>) -> String {
    let sorted: BTreeMap<&String, &String> = headers.iter().collect();
    to_json_text(&StoredHeaders {
        names: sorted.keys().map(|name| (*name).clone()).collect(),
        sealed: sealer.seal(row_id, to_json_text(&sorted).as_bytes()),
    })
}

/// The stored headers opened, for calling the tool; an empty set when none were declared.
pub fn open_headers(
    sealer: &Sealer,
    row_id: &str,
    stored: &str,
) -> Result<BTreeMap<String, String>, crate::secrets::Unsealable> {
    let stored = from_json_text::<StoredHeaders>(stored);
    if stored.sealed.is_empty() {
        return Ok(BTreeMap::new());
    }
    let plain = sealer.open(row_id, &stored.sealed)?;
    Ok(serde_json::from_slice(&plain).unwrap_or_default())
}

/// The stored header names, each answered as `[redacted]` (the values are never opened here).
fn answered_headers(stored: &str) -> HashMap<String, String> {
    from_json_text::<StoredHeaders>(stored)
        .names
        .into_iter()
        .map(|name| (name, REDACTED.to_owned()))
        .collect()
}

/// Under the account lock: the account's agent, when it has room for one more tool of this kind and no
/// tool of this kind named `name` (409).
async fn admit_tool<E: EntityTrait>(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    agent_id: &str,
    [agent_column, name_column]: [E::Column; 2],
    (name, max, what): (&str, u64, &str),
) -> ApiResult<agents::Model>
where
    E::Model: Sync,
{
    accounts::store::lock(db, account_id).await?;
    let agent = find(db, account_id, agent_id).await?;
    let siblings = E::find().filter(agent_column.eq(agent.id.as_str()));
    if siblings.clone().count(db).await? >= max {
        return Err(ApiError::field(
            "agent_id",
            format!("an agent has at most {max} {what}s"),
        ));
    }
    if siblings.filter(name_column.eq(name)).one(db).await?.is_some() {
        return Err(ApiError::already_exists(format!(
            "this agent already has a {what} `{name}`"
        )));
    }
    Ok(agent)
}

fn function_message(m: &custom_functions::Model) -> CustomFunction {
    let parameters: Value = serde_json::from_str(&m.parameters).unwrap_or_default();
    CustomFunction {
        id: m.id.clone(),
        agent_id: m.agent_id.to_string(),
        name: m.name.clone(),
        description: m.description.clone(),
        url: m.url.clone(),
        method: m.method.clone(),
        headers: answered_headers(&m.headers),
        parameters: json_to_struct(&parameters),
        created_at: Some(timestamps::to_proto(m.created_at)),
    }
}

fn server_message(m: &mcp_servers::Model) -> McpServer {
    McpServer {
        id: m.id.clone(),
        agent_id: m.agent_id.to_string(),
        name: m.name.clone(),
        url: m.url.clone(),
        transport: m.transport.clone(),
        headers: answered_headers(&m.headers),
        allowed_tools: from_json_text(&m.allowed_tools),
        created_at: Some(timestamps::to_proto(m.created_at)),
    }
}

pub async fn list_functions(
    service: &AgentsService,
    account_id: &AccountId,
    r: ListCustomFunctionsRequest,
) -> ApiResult<CustomFunctionList> {
    let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::CustomFunction.prefix())?;
    let agent = find(&service.db, account_id, &r.agent_id).await?;
    let select = custom_functions::Entity::find().filter(custom_functions::Column::AgentId.eq(&agent.id));
    let (rows, more) = paging::fetch(
        &service.db,
        select,
        &page,
        custom_functions::Column::CreatedAt,
        custom_functions::Column::Id,
    )
    .await?;
    let (custom_functions, next_cursor) =
        paging::render(&rows, more, |f| (f.created_at, f.id.as_str()), function_message);
    Ok(CustomFunctionList {
        success: true,
        next_cursor,
        custom_functions,
    })
}

pub async fn create_function(
    service: &AgentsService,
    account_id: &AccountId,
    r: CreateCustomFunctionRequest,
) -> ApiResult<CustomFunctionAnswer> {
    let method = if r.method.is_empty() {
        "POST".to_owned()
    } else {
        r.method.to_ascii_uppercase()
    };
    let parameters = r.parameters.as_ref().map_or_else(
        || serde_json::json!({"type": "object", "properties": {}}),
        struct_to_json,
    );
    let mut v = Violations::new();
    v.check(
        is_tool_name(&r.name),
        "name",
        "must start with a letter and hold only letters, digits, `_` and `-` (at most 64)",
    );
    v.text("description", &r.description, true, 2_000);
    v.one_of("method", &method, METHODS);
    check_url(&mut v, service, &r.url).await;
    check_headers(&mut v, &r.headers);
    check_schema(&mut v, &parameters);
    v.finish()?;

    let now = service.clock.now();
    let txn = crate::store::begin_write(&service.db).await?;
    let columns = [custom_functions::Column::AgentId, custom_functions::Column::Name];
    let limits = (r.name.as_str(), MAX_FUNCTIONS, "custom function");
    let agent = admit_tool::<custom_functions::Entity>(&txn, account_id, &r.agent_id, columns, limits).await?;
    let id = crate::ids::new_id(crate::ids::Kind::CustomFunction);
    let row = custom_functions::Model {
        headers: stored_headers(&service.sealer, &id, &r.headers),
        id,
        account_id: account_id.clone(),
        agent_id: agent.id,
        name: r.name,
        description: r.description.trim().to_owned(),
        url: r.url.trim().to_owned(),
        method,
        parameters: parameters.to_string(),
        created_at: now,
    };
    custom_functions::Entity::insert(custom_functions::ActiveModel::from(row.clone()).reset_all())
        .exec_without_returning(&txn)
        .await?;
    txn.commit().await?;
    Ok(CustomFunctionAnswer {
        success: true,
        custom_function: Some(function_message(&row)),
    })
}

pub async fn list_servers(
    service: &AgentsService,
    account_id: &AccountId,
    r: ListMcpServersRequest,
) -> ApiResult<McpServerList> {
    let page = Page::checked(r.limit, &r.cursor, crate::ids::Kind::McpServer.prefix())?;
    let agent = find(&service.db, account_id, &r.agent_id).await?;
    let select = mcp_servers::Entity::find().filter(mcp_servers::Column::AgentId.eq(&agent.id));
    let (rows, more) = paging::fetch(
        &service.db,
        select,
        &page,
        mcp_servers::Column::CreatedAt,
        mcp_servers::Column::Id,
    )
    .await?;
    let (mcp_servers, next_cursor) = paging::render(&rows, more, |s| (s.created_at, s.id.as_str()), server_message);
    Ok(McpServerList {
        success: true,
        next_cursor,
        mcp_servers,
    })
}

pub async fn create_server(
    service: &AgentsService,
    account_id: &AccountId,
    r: CreateMcpServerRequest,
) -> ApiResult<McpServerAnswer> {
    let transport = if r.transport.is_empty() {
        TRANSPORTS[0].to_owned()
    } else {
        r.transport.clone()
    };
    let mut v = Violations::new();
    v.check(
        is_tool_name(&r.name),
        "name",
        "must start with a letter and hold only letters, digits, `_` and `-` (at most 64)",
    );
    v.one_of("transport", &transport, TRANSPORTS);
    check_url(&mut v, service, &r.url).await;
    check_headers(&mut v, &r.headers);
    v.check(
        r.allowed_tools.len() <= 200,
        "allowed_tools",
        "must hold at most 200 tool names",
    );
    if let Some(bad) = r.allowed_tools.iter().find(|t| !is_tool_name(t)) {
        v.check(false, "allowed_tools", format!("`{bad}` is not a tool name"));
    }
    v.finish()?;

    let now = service.clock.now();
    let txn = crate::store::begin_write(&service.db).await?;
    let columns = [mcp_servers::Column::AgentId, mcp_servers::Column::Name];
    let limits = (r.name.as_str(), MAX_SERVERS, "MCP server");
    let agent = admit_tool::<mcp_servers::Entity>(&txn, account_id, &r.agent_id, columns, limits).await?;
    let id = crate::ids::new_id(crate::ids::Kind::McpServer);
    let row = mcp_servers::Model {
        headers: stored_headers(&service.sealer, &id, &r.headers),
        id,
        account_id: account_id.clone(),
        agent_id: agent.id,
        name: r.name,
        url: r.url.trim().to_owned(),
        transport,
        allowed_tools: to_json_text(&r.allowed_tools),
        created_at: now,
    };
    mcp_servers::Entity::insert(mcp_servers::ActiveModel::from(row.clone()).reset_all())
        .exec_without_returning(&txn)
        .await?;
    txn.commit().await?;
    Ok(McpServerAnswer {
        success: true,
        mcp_server: Some(server_message(&row)),
    })
}

/// Deletes the tool row `id` of the account's agent: `columns` are the table's id, account and agent columns.
pub async fn delete<E: EntityTrait>(
    db: &impl ConnectionTrait,
    account_id: &AccountId,
    columns: [E::Column; 3],
    [id, agent_id]: [&str; 2],
    what: &str,
) -> ApiResult<()> {
    let agent = find(db, account_id, agent_id).await?;
    let [id_column, account_column, agent_column] = columns;
    let removed = E::delete_many()
        .filter(id_column.eq(id))
        .filter(account_column.eq(account_id))
        .filter(agent_column.eq(agent.id))
        .exec(db)
        .await?;
    if removed.rows_affected == 0 {
        return Err(ApiError::not_found(what));
    }
    Ok(())
}

/// `google.protobuf.Struct` -> JSON object.
pub fn struct_to_json(s: &prost_types::Struct) -> Value {
    Value::Object(s.fields.iter().map(|(k, v)| (k.clone(), value_to_json(v))).collect())
}

fn value_to_json(v: &prost_types::Value) -> Value {
    use prost_types::value::Kind;
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(*n).map_or(Value::Null, |n| {
            // Whole numbers read back as integers (`"minimum": 1`, not 1.0).
            match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
                _ => Value::Number(n),
            }
        }),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::StructValue(s)) => struct_to_json(s),
        Some(Kind::ListValue(l)) => Value::Array(l.values.iter().map(value_to_json).collect()),
    }
}

/// JSON object -> `google.protobuf.Struct` (`None` for anything else).
pub fn json_to_struct(value: &Value) -> Option<prost_types::Struct> {
    let Value::Object(map) = value else {
        return None;
    };
    Some(prost_types::Struct {
        fields: map.iter().map(|(k, v)| (k.clone(), json_to_value(v))).collect(),
    })
}

fn json_to_value(v: &Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.iter().map(json_to_value).collect(),
        }),
        Value::Object(_) => Kind::StructValue(json_to_struct(v).unwrap_or_default()),
    };
    prost_types::Value { kind: Some(kind) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_checked() {
        let check = |schema: Value| {
            let mut v = Violations::new();
            check_schema(&mut v, &schema);
            v.is_empty()
        };
        assert!(check(
            serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
        ));
        assert!(!check(
            serde_json::json!({"type": "object", "properties": {"x": {"type": "nonsense"}}})
        ));
        assert!(!check(serde_json::json!({"type": 5})));
        assert!(!check(serde_json::json!({"type": "string"})));
        assert!(!check(serde_json::json!({"type": "object", "required": "city"})));
    }

    #[test]
    fn struct_round_trip_keeps_integers() {
        let json = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "x": [true, null, "s", 1.5]});
        assert_eq!(struct_to_json(&json_to_struct(&json).unwrap()), json);
    }

    #[test]
    fn tool_names() {
        assert!(is_tool_name("get_weather") && is_tool_name("A-1"));
        assert!(!is_tool_name("1abc") && !is_tool_name("") && !is_tool_name("has space"));
    }
}
