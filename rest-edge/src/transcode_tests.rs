//! The transcoder on a fixture service (`tests/fixtures/transcode_fixture.proto`) that uses what the site API
//! does not: path variables (nested too), `body: "field"`, query strings with repeated, nested, boolean,
//! numeric and timestamp fields, additional bindings, and snake_case output with null for unset optionals.

use prost_reflect::{DescriptorPool, DynamicMessage, Value};

use crate::{
    bindings::{self, Binding, Naming},
    request, response,
};

/// The fixture service's descriptors (the response writer's tests use them too).
pub(crate) fn pool() -> DescriptorPool {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut compiler =
        protox::Compiler::new([format!("{root}/tests/fixtures"), format!("{root}/../proto")]).expect("compiler");
    compiler.include_imports(true);
    compiler.open_file("transcode_fixture.proto").expect("fixture compiles");
    DescriptorPool::decode(compiler.encode_file_descriptor_set().as_slice()).expect("pool")
}

fn binding(method: &str, template: &str) -> Binding {
    bindings::load(&pool())
        .expect("bindings")
        .into_iter()
        .find(|b| b.http_method.as_str() == method && b.template.template == template)
        .unwrap_or_else(|| panic!("no binding {method} {template}"))
}

fn string(message: &DynamicMessage, path: &[&str]) -> String {
    let (last, parents) = path.split_last().unwrap();
    let mut current = message.clone();
    for name in parents {
        current = current.get_field_by_name(name).unwrap().as_message().unwrap().clone();
    }
    match &*current.get_field_by_name(last).unwrap() {
        Value::String(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

#[test]
fn every_rule_and_additional_binding_becomes_a_route_with_platform_naming() {
    let all = bindings::load(&pool()).unwrap();
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|b| b.naming == Naming::Snake));
    let shelf = binding("GET", "/v1/shelves/{filter.shelf}/things");
    assert_eq!(shelf.template.axum_path, "/v1/shelves/{p0}/things");
    assert_eq!(shelf.grpc_path.as_str(), "/frontdesk.v1fixture.Things/ListThings");
}

#[test]
fn path_variables_fill_fields_including_nested_ones() {
    let get = binding("GET", "/v1/things/{thing_id}");
    let message = request::build(&get, &[("p0".into(), "thing 1/é".into())], None, b"")
        .unwrap()
        .0;
    assert_eq!(string(&message, &["thing_id"]), "thing 1/é");

    let shelf = binding("GET", "/v1/shelves/{filter.shelf}/things");
    let message = request::build(
        &shelf,
        &[("p0".into(), "top".into())],
        Some("filter.archived=true"),
        b"",
    )
    .unwrap()
    .0;
    assert_eq!(string(&message, &["filter", "shelf"]), "top");
    assert_eq!(string(&message, &["filter", "archived"]), "Bool(true)");
}

#[test]
fn query_parameters_fill_typed_repeated_and_nested_fields_in_either_spelling() {
    let list = binding("GET", "/v1/things");
    let query = "tag=a&tag=b%20c&limit=5&includeArchived=true&created_after=2026-01-02T03:04:05Z&filter.shelf=x";
    let message = request::build(&list, &[], Some(query), b"").unwrap().0;
    let tags = message.get_field_by_name("tag").unwrap();
    assert_eq!(
        tags.as_list().unwrap(),
        [Value::String("a".into()), Value::String("b c".into())]
    );
    assert_eq!(*message.get_field_by_name("limit").unwrap(), Value::I32(5));
    assert_eq!(
        *message.get_field_by_name("include_archived").unwrap(),
        Value::Bool(true)
    );
    assert_eq!(string(&message, &["filter", "shelf"]), "x");
    let created = message.get_field_by_name("created_after").unwrap();
    let seconds = created.as_message().unwrap().get_field_by_name("seconds").unwrap();
    assert_eq!(*seconds, Value::I64(1_767_323_045));
}

#[test]
fn bad_query_parameters_are_400_naming_the_parameter() {
    let list = binding("GET", "/v1/things");
    for (query, field, needle) in [
        ("color=red", "color", "unknown query parameter"),
        ("limit=many", "limit", ""),
        ("limit=1&limit=2", "limit", "more than once"),
        ("created_after=yesterday", "created_after", ""),
        ("filter=x", "filter", "unknown query parameter"),
    ] {
        let err = request::build(&list, &[], Some(query), b"").unwrap_err();
        assert_eq!(err.status.as_u16(), 400, "{query}");
        assert_eq!(err.fields[0].0, field, "{query}: {err:?}");
        assert!(err.fields[0].1.contains(needle), "{query}: {err:?}");
    }
    let err = request::build(&list, &[], None, b"{\"tag\": [\"a\"]}").unwrap_err();
    assert_eq!(err.fields[0].0, "body");
    assert!(err.message.contains("takes no request body"));
    assert!(
        request::build(&list, &[], None, b" {} ").is_ok(),
        "an empty object is no body"
    );
}

#[test]
fn a_body_field_rule_takes_the_body_as_that_field() {
    let update = binding("PATCH", "/v1/things/{thing_id}");
    let body = br#"{"display_name": "Lamp", "tags": ["x"], "thingId": "ignored-by-path"}"#;
    let message = request::build(&update, &[("p0".into(), "t9".into())], None, body)
        .unwrap()
        .0;
    assert_eq!(string(&message, &["thing_id"]), "t9");
    assert_eq!(string(&message, &["thing", "display_name"]), "Lamp");
    assert_eq!(string(&message, &["thing", "thing_id"]), "ignored-by-path");

    let err = request::build(&update, &[("p0".into(), "t9".into())], None, br#"{"nope": 1}"#).unwrap_err();
    assert_eq!(err.fields[0], ("thing.nope".to_owned(), "unknown field".to_owned()));
    let err = request::build(&update, &[("p0".into(), "t9".into())], None, br#"{"tags": "x"}"#).unwrap_err();
    assert_eq!(err.fields[0].0, "thing.tags");
}

#[tokio::test]
async fn responses_use_snake_case_numbers_and_null_for_unset_optionals() {
    let get = binding("GET", "/v1/things/{thing_id}");
    let mut thing = DynamicMessage::new(get.method.output());
    thing.set_field_by_name("display_name", Value::String("Lamp".into()));
    thing.set_field_by_name("big", Value::I64(1 << 40));
    thing.set_field_by_name("color", Value::EnumNumber(1));
    let mut seen_at = DynamicMessage::new(
        get.method
            .parent_pool()
            .get_message_by_name("google.protobuf.Timestamp")
            .unwrap(),
    );
    seen_at.set_field_by_name("seconds", Value::I64(1_767_323_045));
    thing.set_field_by_name("seen_at", Value::Message(seen_at));
    let mut counts = std::collections::HashMap::new();
    counts.insert(prost_reflect::MapKey::String("views".into()), Value::I64(3));
    thing.set_field_by_name("counts", Value::Map(counts));
    let mut plans = crate::wire_json::Plans::default();
    let plan = plans.plan(&get.method.output());
    let encoded = prost::Message::encode_to_vec(&thing);
    let answer = response::success(
        &plans,
        plan,
        get.naming,
        get.success_status,
        tonic::Response::new(encoded.into()),
    )
    .unwrap();
    assert_eq!(answer.status(), 200);
    let bytes = axum::body::to_bytes(answer.into_body(), 1 << 20).await.unwrap();
    let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"thing_id": "", "display_name": "Lamp", "big": 1_099_511_627_776_i64,
                           "maybe": null, "tags": [], "filter": null, "seen_at": "2026-01-02T03:04:05Z",
                           "color": "RED", "counts": {"views": 3}})
    );
}

#[test]
fn api_key_and_sub_account_travel_as_metadata_on_the_platform_surface() {
    let list = binding("GET", "/v1/things");
    let (_, lifted) = request::build(
        &list,
        &[],
        Some("apiKey=k1&apiKey=k2&sub_account_id=acc_1&limit=2"),
        b"",
    )
    .unwrap();
    assert_eq!(lifted.api_keys, ["k1", "k2"]);
    assert_eq!(lifted.sub_account_id.as_deref(), Some("acc_1"));

    let update = binding("PATCH", "/v1/things/{thing_id}");
    let err = request::build(
        &update,
        &[("p0".into(), "t".into())],
        Some("sub_account_id=a&sub_account_id=b"),
        b"",
    )
    .unwrap_err();
    assert_eq!(err.fields[0].0, "sub_account_id");
}

#[test]
fn nul_characters_are_refused_wherever_they_come_from() {
    let update = binding("PATCH", "/v1/things/{thing_id}");
    let field_of = |params: &[(String, String)], body: &[u8]| {
        request::build(&update, params, None, body)
            .unwrap_err()
            .fields
            .first()
            .map(|(field, _)| field.clone())
    };
    let path = [("p0".to_owned(), "t".to_owned())];
    assert_eq!(
        field_of(&path, br#"{"display_name": "a\u0000b"}"#),
        Some("thing.display_name".to_owned())
    );
    assert_eq!(
        field_of(&path, br#"{"tags": ["ok", "\u0000"]}"#),
        Some("thing.tags".to_owned())
    );
    assert_eq!(
        field_of(&[("p0".to_owned(), "t\0".to_owned())], b"{}"),
        Some("thing_id".to_owned())
    );
    let list = binding("GET", "/v1/things");
    let error = request::build(&list, &[], Some("tag=%00"), b"").unwrap_err();
    assert_eq!(error.fields[0].0, "tag");
}

#[test]
fn schema_free_json_nested_too_deep_is_refused_naming_its_field() {
    let pool = DescriptorPool::decode(frontdesk_api::FILE_DESCRIPTOR_SET).unwrap();
    let create = bindings::load(&pool)
        .unwrap()
        .into_iter()
        .find(|b| b.grpc_path.as_str() == "/frontdesk.v1.Agents/CreateCustomFunction")
        .expect("the custom-function route");
    // `parameters` (a Struct) nesting `levels` objects, itself included.
    let body = |levels: usize| {
        let mut inner = serde_json::json!({"leaf": [1]});
        for _ in 3..levels {
            inner = serde_json::json!({"a": inner});
        }
        serde_json::json!({"name": "f", "parameters": {"x": inner}}).to_string()
    };
    let params = [("p0".to_owned(), "agt_1".to_owned())];
    assert!(request::build(&create, &params, None, body(request::MAX_DYNAMIC_DEPTH).as_bytes()).is_ok());
    let err = request::build(&create, &params, None, body(request::MAX_DYNAMIC_DEPTH + 1).as_bytes()).unwrap_err();
    assert_eq!(err.status, http::StatusCode::BAD_REQUEST);
    assert_eq!(err.fields.len(), 1);
    assert_eq!(err.fields[0].0, "parameters");
}
