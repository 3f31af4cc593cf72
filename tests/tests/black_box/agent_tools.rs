//! Agents' tools over REST and gRPC, on SQLite and PostgreSQL: custom functions and MCP servers (header
//! values sealed and never answered, private URLs refused), and their parameter schemas' limits.

use frontdesk_api::v1::{CreateCustomFunctionRequest, agents_client::AgentsClient};
use frontdesk_tests::{
    Db, Server, on_both_databases,
    platform::{Platform, assert_id, assert_invalid, assert_not_found, assert_timestamp, to_struct},
};
use serde_json::{Value, json};
use tonic::Code;

on_both_databases!(
    custom_functions_and_mcp_servers_keep_their_secrets,
    |db: Db| async move {
        let server = Server::start(&db, &[("FRONTDESK_ALLOW_PRIVATE_URLS", "true")]).await;
        let api = Platform::new(&server).await;
        let id = api.agent("Toolful").await;
        let functions = format!("/v1/agents/{id}/custom-functions");
        let mut bodies = Vec::new();

        let parameters = json!({
            "type": "object",
            "properties": {"date": {"type": "string", "description": "YYYY-MM-DD"}, "party": {"type": "integer"}},
            "required": ["date"]
        });
        let created = api
            .send(
                "POST",
                &functions,
                Some(json!({
                    "name": "book_slot",
                    "description": "Books an appointment slot",
                    "url": "https://api.example.com/hook",
                    "headers": {"x-api-token": "sk_FN_SECRET_42"},
                    "parameters": parameters
                })),
            )
            .await;
        assert_eq!(created.status, 200, "{}", created.body);
        bodies.push(created.body.to_string());
        let function = created.body["custom_function"].clone();
        assert_id(&function["id"], "fn_");
        assert_eq!(
            (
                function["agent_id"].clone(),
                function["name"].clone(),
                function["description"].clone(),
                function["url"].clone(),
                function["method"].clone()
            ),
            (
                json!(id),
                json!("book_slot"),
                json!("Books an appointment slot"),
                json!("https://api.example.com/hook"),
                json!("POST")
            ),
            "method defaults to POST"
        );
        assert_eq!(function["headers"], json!({"x-api-token": "[redacted]"}));
        assert_eq!(function["parameters"], parameters);
        assert_timestamp(&function["created_at"], "created_at");
        let function_id = function["id"].as_str().unwrap().to_owned();

        let get = api
            .ok(
                "POST",
                &functions,
                Some(json!({
                    "name": "Lookup-Price_2",
                    "description": "Looks up a price",
                    "url": "https://api.example.com/price",
                    "method": "GET"
                })),
            )
            .await;
        bodies.push(get.to_string());
        assert_eq!(get["custom_function"]["method"], "GET");
        assert_eq!(get["custom_function"]["headers"], json!({}));
        assert_eq!(
            get["custom_function"]["parameters"]["type"], "object",
            "parameters default to an object schema"
        );
        let listed = api.ok("GET", &functions, None).await;
        bodies.push(listed.to_string());
        let names: Vec<&str> = listed["custom_functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Lookup-Price_2", "book_slot"], "newest first");
        assert_eq!(listed["next_cursor"], Value::Null);

        let duplicate = api
            .send(
                "POST",
                &functions,
                Some(json!({"name": "book_slot", "description": "Again", "url": "https://api.example.com/other"})),
            )
            .await;
        bodies.push(duplicate.body.to_string());
        assert_eq!(
            (duplicate.status, duplicate.code()),
            (409, "already_exists"),
            "{}",
            duplicate.body
        );
        let other_agent = api.agent("Other tools").await;
        let same_name_elsewhere = api
            .send(
                "POST",
                &format!("/v1/agents/{other_agent}/custom-functions"),
                Some(json!({"name": "book_slot", "description": "Books", "url": "https://api.example.com/hook"})),
            )
            .await;
        assert_eq!(
            same_name_elsewhere.status, 200,
            "names are unique per agent: {}",
            same_name_elsewhere.body
        );

        let valid = json!({"name": "ok_name", "description": "Does it", "url": "https://api.example.com/x"});
        let with = |key: &str, value: Value| {
            let mut body = valid.clone();
            body[key] = value;
            body
        };
        for (body, field) in [
            (with("name", json!("1abc")), "name"),
            (with("name", json!("has space")), "name"),
            (with("name", json!("")), "name"),
            (with("name", json!(format!("a{}", "b".repeat(64)))), "name"),
            (with("description", json!("")), "description"),
            (with("url", json!("http://api.example.com/x")), "url"),
            (with("url", json!("not a url")), "url"),
            (with("method", json!("FETCH")), "method"),
            (with("parameters", json!({"type": "array"})), "parameters"),
            (with("parameters", json!({"type": 5})), "parameters"),
            (
                with(
                    "parameters",
                    json!({"type": "object", "properties": {"x": {"type": "nonsense"}}}),
                ),
                "parameters",
            ),
        ] {
            let answer = api.send("POST", &functions, Some(body.clone())).await;
            bodies.push(answer.body.to_string());
            assert_invalid(&answer, field, &body.to_string());
        }
        let mut missing_description = valid.clone();
        missing_description.as_object_mut().unwrap().remove("description");
        assert_invalid(
            &api.send("POST", &functions, Some(missing_description)).await,
            "description",
            "no description",
        );
        assert_not_found(
            &api.send(
                "POST",
                "/v1/agents/agt_0000000000000000/custom-functions",
                Some(valid.clone()),
            )
            .await,
            "a function on an unknown agent",
        );

        // MCP servers.
        let servers = format!("/v1/agents/{id}/mcp-servers");
        let mcp = api
            .send(
                "POST",
                &servers,
                Some(json!({
                    "name": "calendar",
                    "url": "https://mcp.example.com/mcp",
                    "headers": {"authorization": "Bearer MCP_SECRET_77"},
                    "allowed_tools": ["list_slots", "book_slot"]
                })),
            )
            .await;
        assert_eq!(mcp.status, 200, "{}", mcp.body);
        bodies.push(mcp.body.to_string());
        let mcp = mcp.body["mcp_server"].clone();
        assert_id(&mcp["id"], "mcp_");
        assert_eq!(
            (
                mcp["agent_id"].clone(),
                mcp["name"].clone(),
                mcp["url"].clone(),
                mcp["transport"].clone()
            ),
            (
                json!(id),
                json!("calendar"),
                json!("https://mcp.example.com/mcp"),
                json!("streamable_http")
            )
        );
        assert_eq!(mcp["headers"], json!({"authorization": "[redacted]"}));
        assert_eq!(mcp["allowed_tools"], json!(["list_slots", "book_slot"]));
        assert_timestamp(&mcp["created_at"], "created_at");
        let explicit = api
            .ok(
                "POST",
                &servers,
                Some(json!({"name": "crm", "url": "https://mcp.example.com/crm", "transport": "streamable_http"})),
            )
            .await;
        assert_eq!(explicit["mcp_server"]["allowed_tools"], json!([]));
        let duplicate = api
            .send(
                "POST",
                &servers,
                Some(json!({"name": "calendar", "url": "https://mcp.example.com/other"})),
            )
            .await;
        assert_eq!(
            (duplicate.status, duplicate.code()),
            (409, "already_exists"),
            "{}",
            duplicate.body
        );
        for (body, field) in [
            (
                json!({"name": "local", "url": "https://mcp.example.com/x", "transport": "stdio"}),
                "transport",
            ),
            (json!({"name": "plain", "url": "http://mcp.example.com/x"}), "url"),
            (json!({"name": "9lives", "url": "https://mcp.example.com/x"}), "name"),
        ] {
            let answer = api.send("POST", &servers, Some(body.clone())).await;
            assert_invalid(&answer, field, &body.to_string());
        }
        let listed = api.ok("GET", &servers, None).await;
        bodies.push(listed.to_string());
        let names: Vec<&str> = listed["mcp_servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["crm", "calendar"]);

        // Header values never come back, and are not stored as written.
        for body in &bodies {
            assert!(
                !body.contains("sk_FN_SECRET_42") && !body.contains("MCP_SECRET_77"),
                "a secret in a response: {body}"
            );
        }
        assert_eq!(
            db.scalar("SELECT COUNT(*) FROM custom_functions WHERE agent_id = $1", &id)
                .await
                .as_deref(),
            Some("2")
        );
        assert_eq!(
            db.scalar(
                "SELECT COUNT(*) FROM custom_functions WHERE headers LIKE $1",
                "%sk_FN_SECRET_42%"
            )
            .await
            .as_deref(),
            Some("0"),
            "tool header values are stored sealed"
        );
        assert_eq!(
            db.scalar(
                "SELECT COUNT(*) FROM mcp_servers WHERE headers LIKE $1",
                "%MCP_SECRET_77%"
            )
            .await
            .as_deref(),
            Some("0"),
            "MCP header values are stored sealed"
        );

        // Deletes.
        let deleted = api.send("DELETE", &format!("{functions}/{function_id}"), None).await;
        assert_eq!(
            (deleted.status, deleted.body.clone()),
            (200, json!({"success": true, "id": function_id}))
        );
        assert_not_found(
            &api.send("DELETE", &format!("{functions}/{function_id}"), None).await,
            "function deleted twice",
        );
        assert_eq!(
            api.ids(&functions, "custom_functions", "name").await,
            vec!["Lookup-Price_2".to_owned()]
        );
        let recreated = api
            .send(
                "POST",
                &functions,
                Some(json!({"name": "book_slot", "description": "Back", "url": "https://api.example.com/hook"})),
            )
            .await;
        assert_eq!(
            recreated.status, 200,
            "a deleted name is free again: {}",
            recreated.body
        );
        let mcp_id = mcp["id"].as_str().unwrap();
        let deleted = api.send("DELETE", &format!("{servers}/{mcp_id}"), None).await;
        assert_eq!(
            (deleted.status, deleted.body.clone()),
            (200, json!({"success": true, "id": mcp_id}))
        );
        assert_eq!(api.ids(&servers, "mcp_servers", "name").await, vec!["crm".to_owned()]);
        assert_not_found(
            &api.send("DELETE", &format!("{servers}/{mcp_id}"), None).await,
            "MCP server deleted twice",
        );
    }
);

/// A custom function's `parameters` whose JSON nests `levels` objects deep (the object itself is level 1).
fn nested_parameters(levels: usize) -> Value {
    let mut inner = json!({"leaf": true});
    for _ in 2..levels {
        inner = json!({"a": inner});
    }
    json!({"type": "object", "x-nested": inner})
}

fn depth(value: &Value) -> usize {
    match value {
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// JSON nested deeper than 32 levels inside a `google.protobuf.Struct` field is a 400 naming the field, over
/// REST and over gRPC, not a 500 from the core's protobuf decoder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_deep_json_in_a_struct_field_is_a_400() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[("FRONTDESK_ALLOW_PRIVATE_URLS", "true")]).await;
    let api = Platform::new(&server).await;
    let id = api.agent("Deep").await;
    let functions = format!("/v1/agents/{id}/custom-functions");
    let body = |name: &str, parameters: Value| json!({"name": name, "description": "Deep", "url": "https://api.example.com/hook", "parameters": parameters});

    let deepest = nested_parameters(32);
    assert_eq!(depth(&deepest), 32);
    let created = api.ok("POST", &functions, Some(body("deepest", deepest.clone()))).await;
    assert_eq!(created["custom_function"]["parameters"], deepest, "32 levels are kept");
    assert_eq!(
        api.ok("GET", &functions, None).await["custom_functions"][0]["parameters"],
        deepest
    );
    for levels in [33, 35, 60] {
        let parameters = nested_parameters(levels);
        assert_eq!(depth(&parameters), levels);
        let answer = api.send("POST", &functions, Some(body("too_deep", parameters))).await;
        assert_invalid(&answer, "parameters", &format!("{levels} levels"));
    }

    let mut agents = AgentsClient::connect(server.grpc.clone()).await.unwrap();
    let request = |levels: usize| {
        api.grpc(CreateCustomFunctionRequest {
            agent_id: id.clone(),
            name: "over_grpc".into(),
            description: "Deep".into(),
            url: "https://api.example.com/hook".into(),
            parameters: Some(to_struct(nested_parameters(levels))),
            ..Default::default()
        })
    };
    let refused = agents.create_custom_function(request(40)).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    use tonic_types::StatusExt;
    assert_eq!(
        refused
            .get_error_details()
            .error_info()
            .map(|info| info.reason.as_str()),
        Some("INVALID_ARGUMENT")
    );
    agents
        .create_custom_function(request(32))
        .await
        .expect("32 levels pass over gRPC too");
}
