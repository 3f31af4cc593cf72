//! Contacts over REST and gRPC against the real binary, on SQLite and on PostgreSQL with Redis: every
//! operation, search, tag filter and paging, each bad input named, uniqueness of phone, e-mail and identity
//! (409), tenant isolation and scopes, signed `contact.created` / `contact.updated` deliveries, and erasure.

use std::time::Duration;

use frontdesk_api::v1::{
    ContactIdentity, CreateContactRequest, DeleteContactRequest, GetContactRequest, ListContactsRequest,
    UpdateContactRequest, contacts_client::ContactsClient,
};
use frontdesk_tests::{
    Db, Server, admin, call_with, join_all, on_both_databases,
    platform::{Platform, assert_id, assert_insufficient_scope, assert_invalid, assert_not_found, assert_timestamp},
    redis_server, violated_fields,
    webhook_receiver::Receiver,
};
use serde_json::{Value, json};
use tonic::Code;
use tonic_types::StatusExt;

/// A new contact; its JSON.
async fn create(api: &Platform<'_>, body: Value) -> Value {
    api.ok("POST", "/v1/contacts", Some(body)).await["contact"].clone()
}

/// A new contact; its id.
async fn contact(api: &Platform<'_>, body: Value) -> String {
    create(api, body).await["id"].as_str().unwrap().to_owned()
}

async fn patch(api: &Platform<'_>, id: &str, body: Value) -> Value {
    api.ok("PATCH", &format!("/v1/contacts/{id}"), Some(body)).await["contact"].clone()
}

/// The ids the list at `/v1/contacts?query` answers.
async fn listed(api: &Platform<'_>, query: &str) -> Vec<String> {
    api.ids(&format!("/v1/contacts?{query}"), "contacts", "id").await
}

/// Asserts that the list at `/v1/contacts?query` answers `expected`, in order.
async fn lists(api: &Platform<'_>, query: &str, expected: &[&String]) {
    let expected: Vec<String> = expected.iter().map(|id| (*id).clone()).collect();
    assert_eq!(listed(api, query).await, expected, "{query}");
}

/// Webhooks may reach the loopback receiver, retried quickly; PostgreSQL runs with Redis as in production.
async fn start(db: &Db) -> Server {
    let redis = redis_server::shared_url();
    let mut env = vec![
        ("FRONTDESK_ALLOW_PRIVATE_URLS", "true"),
        ("FRONTDESK_WEBHOOK_RETRY_SCHEDULE", "1s,1s,1s"),
        ("FRONTDESK_WEBHOOK_POLL_INTERVAL", "20ms"),
    ];
    if db.is_postgres() {
        env.push(("REDIS_URL", redis.as_str()));
    }
    Server::start(db, &env).await
}

on_both_databases!(contacts_are_created_read_patched_and_erased, |db: Db| async move {
    let server = start(&db).await;
    let api = Platform::new(&server).await;
    let asha = create(
        &api,
        json!({
            "name": "  Asha Rao ",
            "phone": "+919812345678",
            "email": "Asha.Rao@Example.com",
            "identities": [{"type": "whatsapp", "external_id": "919812345678"}],
            "tags": ["vip", "lead", "vip"],
            "attributes": {"city": "Pune", "plan": "growth"},
        }),
    )
    .await;
    assert_id(&asha["id"], "ct_");
    assert_eq!(asha["name"], "Asha Rao");
    assert_eq!(asha["phone"], "+919812345678");
    assert_eq!(
        asha["email"], "asha.rao@example.com",
        "e-mail addresses are kept in lower case"
    );
    assert_eq!(
        asha["identities"],
        json!([{"channel": "", "type": "whatsapp", "external_id": "919812345678"}])
    );
    assert_eq!(asha["tags"], json!(["vip", "lead"]), "a repeated tag counts once");
    assert_eq!(asha["attributes"], json!({"city": "Pune", "plan": "growth"}));
    assert_eq!(
        (
            asha["opted_out"].clone(),
            asha["recap"].clone(),
            asha["recap_at"].clone()
        ),
        (json!(false), json!(""), Value::Null)
    );
    assert_timestamp(&asha["created_at"], "created_at");
    assert_eq!(asha["updated_at"], asha["created_at"]);
    let id = asha["id"].as_str().unwrap();
    assert_eq!(
        api.ok("GET", &format!("/v1/contacts/{id}"), None).await["contact"],
        asha
    );

    // Every field is present on a contact created with nothing but a name.
    let bare = create(&api, json!({"name": "Walk-in"})).await;
    for (field, empty) in [
        ("phone", json!("")),
        ("email", json!("")),
        ("identities", json!([])),
        ("tags", json!([])),
        ("attributes", json!({})),
    ] {
        assert_eq!(bare[field], empty, "{field}: {bare}");
    }

    // PATCH changes only what the body names; lists and maps are replaced whole.
    let renamed = patch(&api, id, json!({"name": "Asha R."})).await;
    assert_eq!(renamed["name"], "Asha R.");
    for unchanged in ["phone", "email", "identities", "tags", "attributes", "created_at"] {
        assert_eq!(renamed[unchanged], asha[unchanged], "{unchanged}");
    }
    let replaced = patch(
        &api,
        id,
        json!({"tags": ["customer"], "attributes": {"city": "Mumbai"}, "opted_out": true,
                   "identities": [{"type": "whatsapp", "external_id": "919812345678"},
                                  {"type": "webchat", "external_id": "visitor-42"}]}),
    )
    .await;
    assert_eq!(replaced["tags"], json!(["customer"]));
    assert_eq!(replaced["attributes"], json!({"city": "Mumbai"}));
    assert_eq!(replaced["opted_out"], true);
    let kinds: Vec<&str> = replaced["identities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["whatsapp", "webchat"]);
    let cleared = patch(
        &api,
        id,
        json!({"phone": "", "email": "", "identities": [], "attributes": {}}),
    )
    .await;
    assert_eq!(
        (
            &cleared["phone"],
            &cleared["email"],
            &cleared["identities"],
            &cleared["attributes"]
        ),
        (&json!(""), &json!(""), &json!([]), &json!({}))
    );
    assert_eq!(cleared["name"], "Asha R.");
    // The recap is the service's to write, not the caller's.
    let recap = api
        .send("PATCH", &format!("/v1/contacts/{id}"), Some(json!({"recap": "hi"})))
        .await;
    assert_invalid(&recap, "recap", "recap is not writable");

    // DELETE erases: the contact is gone and its phone is free for a new contact.
    let phoned = contact(
        &api,
        json!({"phone": "+14155550123", "identities": [{"type": "messenger", "external_id": "psid-1"}]}),
    )
    .await;
    let deleted = api.ok("DELETE", &format!("/v1/contacts/{phoned}"), None).await;
    assert_eq!(deleted["id"], phoned.as_str());
    for method in ["GET", "DELETE"] {
        let gone = api.send(method, &format!("/v1/contacts/{phoned}"), None).await;
        assert_not_found(&gone, &format!("{method} after delete"));
    }
    let again = create(
        &api,
        json!({"phone": "+14155550123", "identities": [{"type": "messenger", "external_id": "psid-1"}]}),
    )
    .await;
    assert_ne!(again["id"], phoned.as_str());
});

on_both_databases!(the_list_searches_filters_and_pages, |db: Db| async move {
    let server = start(&db).await;
    let api = Platform::new(&server).await;
    let asha = contact(
        &api,
        json!({"name": "Asha Rao", "phone": "+919812345678", "tags": ["vip"]}),
    )
    .await;
    let ben = contact(
        &api,
        json!({"name": "Ben Okafor", "email": "ben@okafor.io", "tags": ["VIP", "lead"]}),
    )
    .await;
    let cara = contact(
        &api,
        json!({"name": "Cara 100% Real", "phone": "+14155550123", "tags": ["lead"]}),
    )
    .await;
    let dev = contact(&api, json!({"name": "Dev", "email": "dev_rao@mail.example.com"})).await;
    let other = Platform::new(&server).await;
    contact(&other, json!({"name": "Asha Rao elsewhere"})).await;

    lists(&api, "", &[&dev, &cara, &ben, &asha]).await;
    for (query, expected) in [
        ("q=asha", vec![&asha]),
        ("q=RAO", vec![&dev, &asha]),
        ("q=98123", vec![&asha]),
        ("q=%2B1415", vec![&cara]),
        ("q=OKAFOR.IO", vec![&ben]),
        ("q=100%25", vec![&cara]),
        ("q=v_rao", vec![&dev]),
        ("q=a_rao", vec![]),
        ("q=nobody", vec![]),
        ("tag=vip", vec![&asha]),
        ("tag=VIP", vec![&ben]),
        ("tag=lead", vec![&cara, &ben]),
        ("tag=vi", vec![]),
        ("tag=lead&q=ben", vec![&ben]),
    ] {
        lists(&api, query, &expected).await;
    }

    let mut seen = Vec::new();
    let mut path = "/v1/contacts?limit=3".to_owned();
    loop {
        let page = api.ok("GET", &path, None).await;
        let contacts = page["contacts"].as_array().unwrap();
        assert!(contacts.len() <= 3);
        seen.extend(contacts.iter().map(|c| c["id"].as_str().unwrap().to_owned()));
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/contacts?limit=3&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(
        seen,
        [dev.clone(), cara.clone(), ben.clone(), asha.clone()],
        "newest first"
    );
    assert_eq!(
        api.ok("GET", "/v1/contacts?limit=4", None).await["next_cursor"],
        Value::Null
    );
    assert_invalid(&api.send("GET", "/v1/contacts?limit=0", None).await, "limit", "limit 0");
    assert_invalid(
        &api.send("GET", "/v1/contacts?limit=201", None).await,
        "limit",
        "limit 201",
    );
    assert_invalid(
        &api.send("GET", "/v1/contacts?cursor=xyz", None).await,
        "cursor",
        "garbage cursor",
    );
    let long = "a".repeat(201);
    for q in ["ab", "%2B1", "a.b.c", "-_-", "rao%0Aokafor", long.as_str()] {
        assert_invalid(&api.send("GET", &format!("/v1/contacts?q={q}"), None).await, "q", q);
    }
});

/// Seeded contacts, `n` in 1..=SEEDED, the n-th created n minutes before the test: "Person n", or
/// "Zephyrine n" for every 2,500th; phone +1555 and n in seven digits; e-mail pn@seed.example; tagged "third"
/// when n is a multiple of 3.
const SEEDED: u32 = 12_000;

fn seed_contacts(db: &Db, account_id: &str) -> String {
    let columns = "id, account_id, name, phone, email, tags, attributes, opted_out, recap, recap_at, created_at, \
                   updated_at";
    if db.is_postgres() {
        format!(
            "INSERT INTO contacts ({columns}) SELECT 'ct_seed' || lpad(n::text, 9, '0'), '{account_id}', \
             CASE WHEN n % 2500 = 1234 THEN 'Zephyrine ' ELSE 'Person ' END || n, '+1555' || lpad(n::text, 7, '0'), \
             'p' || n || '@seed.example', CASE WHEN n % 3 = 0 THEN '[\"third\"]' ELSE '[]' END, '{{}}', false, '', \
             NULL, now() - make_interval(mins => n), now() FROM generate_series(1, {SEEDED}) AS n"
        )
    } else {
        format!(
            "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {SEEDED}) \
             INSERT INTO contacts ({columns}) SELECT 'ct_seed' || printf('%09d', n), '{account_id}', \
             CASE WHEN n % 2500 = 1234 THEN 'Zephyrine ' ELSE 'Person ' END || n, '+1555' || printf('%07d', n), \
             'p' || n || '@seed.example', CASE WHEN n % 3 = 0 THEN '[\"third\"]' ELSE '[]' END, '{{}}', 0, '', \
             NULL, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '-' || n || ' minutes'), \
             strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now') FROM g"
        )
    }
}

fn seeded(n: u32) -> String {
    format!("ct_seed{n:09}")
}

// A search walks the newest contacts first and goes to the trigram index only for what that window did not
// find: fragments rare and common, on either side of the window, in every column, with a tag, paged across
// the window's end, and kept current as contacts change and go.
on_both_databases!(search_finds_matches_beyond_the_newest_contacts, |db: Db| async move {
    use sea_orm::ConnectionTrait;
    let server = start(&db).await;
    let api = Platform::new(&server).await;
    let newest = contact(&api, json!({"name": "Newest Customer"})).await;
    let account_id = db
        .scalar("SELECT account_id FROM contacts WHERE id = $1", &newest)
        .await
        .unwrap();
    let conn = db.connect().await;
    conn.execute_unprepared(&seed_contacts(&db, &account_id)).await.unwrap();
    conn.close().await.unwrap();
    let ids = |ns: &[u32]| ns.iter().map(|n| seeded(*n)).collect::<Vec<_>>();

    let zephyrs = [1234, 3734, 6234, 8734, 11234];
    assert_eq!(listed(&api, "q=zephyr").await, ids(&zephyrs), "across the window");
    assert_eq!(
        listed(&api, "q=ZEPHYRINE+1").await,
        ids(&[1234, 11234]),
        "ignoring case"
    );
    assert_eq!(
        listed(&api, "q=person&limit=3").await,
        ids(&[1, 2, 3]),
        "a common fragment"
    );
    assert_eq!(listed(&api, "q=0011999").await, ids(&[11999]), "a phone fragment");
    assert_eq!(listed(&api, "q=p7777%40seed").await, ids(&[7777]), "an e-mail fragment");
    assert_eq!(listed(&api, "q=zephyr&tag=third").await, ids(&[6234]), "with a tag");
    assert_eq!(listed(&api, "q=customer").await, vec![newest.clone()]);
    assert!(listed(&api, "q=nobody").await.is_empty());

    let mut pages = Vec::new();
    let mut path = "/v1/contacts?q=zephyr&limit=2".to_owned();
    loop {
        let page = api.ok("GET", &path, None).await;
        pages.push(
            page["contacts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>(),
        );
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/contacts?q=zephyr&limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(pages, [ids(&[1234, 3734]), ids(&[6234, 8734]), ids(&[11234])], "paged");

    patch(&api, &seeded(8734), json!({"name": "Somebody Else"})).await;
    api.ok("DELETE", &format!("/v1/contacts/{}", seeded(6234)), None).await;
    assert_eq!(
        listed(&api, "q=zephyr").await,
        ids(&[1234, 3734, 11234]),
        "changed and erased"
    );
    assert_eq!(listed(&api, "q=somebody").await, ids(&[8734]), "renamed");
    let other = Platform::new(&server).await;
    assert!(listed(&other, "q=zephyr").await.is_empty(), "another account");
});

on_both_databases!(bad_input_is_a_400_naming_the_field, |db: Db| async move {
    let server = start(&db).await;
    let api = Platform::new(&server).await;
    let many_tags: Vec<String> = (0..51).map(|i| format!("t{i}")).collect();
    let many_attributes: serde_json::Map<String, Value> = (0..51).map(|i| (format!("k{i}"), json!("v"))).collect();
    let cases = [
        (json!({"phone": "98123"}), "phone"),
        (json!({"phone": "+0123456789"}), "phone"),
        (json!({"phone": "+1234567"}), "phone"),
        (json!({"phone": "+1234567890123456"}), "phone"),
        (json!({"phone": "+91 98123 45678"}), "phone"),
        (json!({"email": "x@"}), "email"),
        (json!({"email": "asha@example"}), "email"),
        (json!({"name": "n".repeat(201)}), "name"),
        (json!({"tags": many_tags}), "tags"),
        (json!({"tags": ["t".repeat(65)]}), "tags"),
        (json!({"tags": [" "]}), "tags"),
        (json!({"attributes": many_attributes}), "attributes"),
        (json!({"attributes": {"k".repeat(65): "v"}}), "attributes"),
        (json!({"attributes": {"note": "v".repeat(1_001)}}), "attributes.note"),
        (
            json!({"identities": [{"type": "sms", "external_id": "1"}]}),
            "identities[0].type",
        ),
        (
            json!({"identities": [{"type": "webchat", "external_id": "v1"}, {"type": "telegram", "external_id": "2"}]}),
            "identities[1].type",
        ),
        (
            json!({"identities": [{"type": "webchat", "external_id": ""}]}),
            "identities[0].external_id",
        ),
        (
            json!({"identities": [{"type": "webchat", "external_id": "v1"}, {"type": "webchat", "external_id": "v1"}]}),
            "identities[1]",
        ),
        (json!({"nickname": "Ash"}), "nickname"),
    ];
    let target = contact(&api, json!({"name": "Target"})).await;
    for (body, field) in &cases {
        let created = api.send("POST", "/v1/contacts", Some(body.clone())).await;
        assert_invalid(&created, field, &format!("POST {body}"));
        let patched = api
            .send("PATCH", &format!("/v1/contacts/{target}"), Some(body.clone()))
            .await;
        assert_invalid(&patched, field, &format!("PATCH {body}"));
    }
    let message = api.send("POST", "/v1/contacts", Some(json!({"phone": "98123"}))).await;
    assert_eq!(
        message.body["error"]["message"],
        "phone: must be in E.164 format, e.g. +919812345678"
    );
    lists(&api, "", &[&target]).await;
    let untouched = api.ok("GET", &format!("/v1/contacts/{target}"), None).await["contact"].clone();
    assert_eq!(untouched["created_at"], untouched["updated_at"]);
});

on_both_databases!(a_taken_phone_email_or_identity_is_a_409, |db: Db| async move {
    let server = start(&db).await;
    let api = Platform::new(&server).await;
    let asha = contact(
        &api,
        json!({"name": "Asha", "phone": "+919812345678", "email": "asha@example.com",
                        "identities": [{"type": "instagram", "external_id": "ig-7"}]}),
    )
    .await;
    let ben = contact(&api, json!({"name": "Ben", "phone": "+14155550123"})).await;
    for body in [
        json!({"phone": "+919812345678"}),
        json!({"email": "ASHA@example.com"}),
        json!({"phone": "+919800000000", "identities": [{"type": "instagram", "external_id": "ig-7"}]}),
    ] {
        let taken = api.send("POST", "/v1/contacts", Some(body.clone())).await;
        assert_eq!(
            (taken.status, taken.code()),
            (409, "already_exists"),
            "{body}: {}",
            taken.body
        );
        let message = taken.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&asha),
            "{body}: the message names the holder: {message}"
        );
        let moved = api
            .send("PATCH", &format!("/v1/contacts/{ben}"), Some(body.clone()))
            .await;
        assert_eq!(
            (moved.status, moved.code()),
            (409, "already_exists"),
            "PATCH {body}: {}",
            moved.body
        );
    }
    // A refused create leaves nothing behind.
    lists(&api, "", &[&ben, &asha]).await;
    lists(&api, "q=%2B91980", &[]).await;
    let ben_now = api.ok("GET", &format!("/v1/contacts/{ben}"), None).await["contact"].clone();
    assert_eq!(ben_now["phone"], "+14155550123", "a refused PATCH changes nothing");
    // A contact keeps its own keys when patched with them, and another account may hold the same ones.
    patch(
        &api,
        &asha,
        json!({"phone": "+919812345678", "email": "Asha@Example.com"}),
    )
    .await;
    let other = Platform::new(&server).await;
    create(
        &other,
        json!({"phone": "+919812345678", "email": "asha@example.com",
                       "identities": [{"type": "instagram", "external_id": "ig-7"}]}),
    )
    .await;
});

on_both_databases!(concurrent_creates_of_one_phone_make_one_contact, |db: Db| async move {
    let server = start(&db).await;
    let api = Platform::new(&server).await;
    let body = json!({"name": "Asha", "phone": "+919812345678"}).to_string();
    let (url, key) = (server.url("/v1/contacts"), api.key.clone());
    let attempts = (0..8).map(|_| {
        let (url, key, body) = (url.clone(), key.clone(), body.clone());
        async move { call_with("POST", &url, &[("x-api-key", &key)], Some(&body)).await }
    });
    let answers = join_all(attempts).await;
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 7, "{statuses:?}");
    let winner = answers.iter().find(|a| a.status == 200).unwrap().body["contact"]["id"].clone();
    for refused in answers.iter().filter(|a| a.status == 409) {
        let message = refused.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(winner.as_str().unwrap()), "{message}");
    }
    assert_eq!(listed(&api, "").await, [winner.as_str().unwrap()]);
});

on_both_databases!(another_accounts_contacts_are_invisible, |db: Db| async move {
    let server = start(&db).await;
    let alice = Platform::new(&server).await;
    let bob = Platform::new(&server).await;
    let id = contact(&alice, json!({"name": "Alice's", "phone": "+919812345678"})).await;
    for (method, body) in [
        ("GET", None),
        ("PATCH", Some(json!({"name": "mine now"}))),
        ("DELETE", None),
    ] {
        let answer = bob.send(method, &format!("/v1/contacts/{id}"), body).await;
        assert_not_found(&answer, &format!("{method} another account's contact"));
    }
    assert!(listed(&bob, "").await.is_empty());
    assert!(listed(&bob, "q=98123").await.is_empty());
    let still = alice.ok("GET", &format!("/v1/contacts/{id}"), None).await;
    assert_eq!(still["contact"]["name"], "Alice's");

    let scoped = admin::issue_key(&server, &alice.account_id, &["deals"]).await;
    for (method, path, body) in [
        ("GET", "/v1/contacts".to_owned(), None),
        ("POST", "/v1/contacts".to_owned(), Some(r#"{"phone": "bad"}"#)),
        ("GET", format!("/v1/contacts/{id}"), None),
        ("DELETE", format!("/v1/contacts/{id}"), None),
    ] {
        let refused = call_with(method, &server.url(&path), &[("x-api-key", &scoped)], body).await;
        assert_insufficient_scope(&refused, &format!("{method} {path} without the contacts section"));
    }
    let allowed = admin::issue_key(&server, &alice.account_id, &["contacts"]).await;
    let listed = call_with("GET", &server.url("/v1/contacts"), &[("x-api-key", &allowed)], None).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
});

on_both_databases!(contacts_over_grpc, |db: Db| async move {
    let server = start(&db).await;
    let api = Platform::new(&server).await;
    let mut contacts = ContactsClient::connect(server.grpc.clone()).await.unwrap();
    let created = contacts
        .create_contact(api.grpc(CreateContactRequest {
            name: "gRPC contact".into(),
            phone: "+919812345678".into(),
            identities: vec![ContactIdentity {
                channel: String::new(),
                r#type: "webchat".into(),
                external_id: "visitor-1".into(),
            }],
            tags: vec!["vip".into()],
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .contact
        .unwrap();
    assert!(created.id.starts_with("ct_"));
    let fetched = contacts
        .get_contact(api.grpc(GetContactRequest {
            contact_id: created.id.clone(),
        }))
        .await
        .unwrap()
        .into_inner()
        .contact
        .unwrap();
    assert_eq!(fetched, created);
    let update = UpdateContactRequest {
        contact_id: created.id.clone(),
        name: "ignored: not in the mask".into(),
        email: "grpc@example.com".into(),
        update_mask: Some(prost_types::FieldMask {
            paths: vec!["email".into()],
        }),
        ..Default::default()
    };
    let updated = contacts
        .update_contact(api.grpc(update))
        .await
        .unwrap()
        .into_inner()
        .contact
        .unwrap();
    assert_eq!(
        (updated.name.as_str(), updated.email.as_str(), updated.tags.clone()),
        ("gRPC contact", "grpc@example.com", vec!["vip".to_owned()])
    );
    let listed = contacts
        .list_contacts(api.grpc(ListContactsRequest {
            q: "GRPC@".into(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.contacts, [updated]);
    assert_eq!(listed.next_cursor, None);

    let bad = contacts
        .create_contact(api.grpc(CreateContactRequest {
            phone: "98123".into(),
            email: "x@".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert_eq!(violated_fields(&bad), ["phone", "email"]);
    let taken = contacts
        .create_contact(api.grpc(CreateContactRequest {
            phone: "+919812345678".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(taken.code(), Code::AlreadyExists);
    assert_eq!(taken.get_error_details().error_info().unwrap().reason, "ALREADY_EXISTS");

    let deleted = contacts
        .delete_contact(api.grpc(DeleteContactRequest {
            contact_id: created.id.clone(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.id, created.id);
    let gone = contacts
        .get_contact(api.grpc(GetContactRequest { contact_id: created.id }))
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
});

on_both_databases!(contact_events_are_delivered_signed, |db: Db| async move {
    let server = start(&db).await;
    let receiver = Receiver::start().await;
    let api = Platform::new(&server).await;
    let subscribed = api
        .ok(
            "POST",
            "/v1/webhooks",
            Some(json!({"name": "crm", "url": receiver.url, "events": ["contact.created", "contact.updated"]})),
        )
        .await;
    let secret = subscribed["secret"].as_str().unwrap().to_owned();
    let created = create(&api, json!({"name": "Asha", "phone": "+919812345678", "tags": ["vip"]})).await;
    let id = created["id"].as_str().unwrap();
    // A PATCH that changes nothing is no update.
    let same = patch(&api, id, json!({"name": "Asha", "tags": ["vip"]})).await;
    assert_eq!(same, created);
    let updated = patch(&api, id, json!({"opted_out": true})).await;
    assert_eq!(updated["opted_out"], true);
    // Another account's contacts are not this subscription's business.
    create(&Platform::new(&server).await, json!({"name": "Elsewhere"})).await;

    receiver.wait_for(2, Duration::from_secs(30)).await;
    frontdesk_tests::admin::quiesce(&server).await;
    // Attempts run concurrently, so two events may arrive in either order.
    let mut deliveries = receiver.deliveries();
    deliveries.sort_by_key(|d| d.json["type"].as_str().unwrap().to_owned());
    let types: Vec<&str> = deliveries.iter().map(|d| d.json["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["contact.created", "contact.updated"], "{deliveries:?}");
    for delivery in &deliveries {
        assert!(delivery.verifies(&secret), "signature: {delivery:?}");
        assert!(delivery.header("webhook-id").starts_with("evt_"));
    }
    assert_eq!(deliveries[0].json["data"], created, "the contact as the API answers it");
    assert_eq!(deliveries[1].json["data"], updated);
});
