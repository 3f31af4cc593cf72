//! Deals and pipelines over REST and gRPC against the real binary, on SQLite and PostgreSQL: every operation
//! and filter, positions, paging under concurrent inserts, tenant isolation, stage deletion, and the event
//! outbox written with each change (and never by a failed one).

use std::collections::HashSet;

use frontdesk_api::v1::{
    CreateDealRequest, CreatePipelineRequest, CreateStageRequest, DeleteDealRequest, DeletePipelineRequest,
    DeleteStageRequest, GetDealRequest, ListDealsRequest, ListPipelinesRequest, MoveDealRequest, UpdateDealRequest,
    UpdatePipelineRequest, UpdateStageRequest, deals_client::DealsClient, pipelines_client::PipelinesClient,
};
use frontdesk_tests::{Db, Server, admin, call_with, on_both_databases, platform::Platform};
use serde_json::{Value, json};
use tonic::{Code, metadata::MetadataValue};

async fn create(api: &Platform<'_>, body: Value) -> Value {
    let answer = api.send("POST", "/v1/deals", Some(body)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.body["deal"].clone()
}

async fn read_deal(api: &Platform<'_>, id: &str) -> Value {
    api.send("GET", &format!("/v1/deals/{id}"), None).await.body["deal"].clone()
}

async fn deal_ids(api: &Platform<'_>, query: &str) -> Vec<String> {
    let answer = api.send("GET", &format!("/v1/deals?{query}"), None).await;
    assert_eq!(answer.status, 200, "{query}: {}", answer.body);
    answer.body["deals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Every id the list `query` gives, following `next_cursor` page after page, `pause` between pages.
async fn every_page(api: &Platform<'_>, query: &str, pause: std::time::Duration) -> Vec<String> {
    let mut seen = Vec::new();
    let mut path = format!("/v1/deals?{query}");
    loop {
        let page = api.send("GET", &path, None).await;
        assert_eq!(page.status, 200, "{}", page.body);
        seen.extend(
            page.body["deals"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["id"].as_str().unwrap().to_owned()),
        );
        match page.body["next_cursor"].as_str() {
            Some(next) => path = format!("/v1/deals?{query}&cursor={next}"),
            None => return seen,
        }
        tokio::time::sleep(pause).await;
    }
}

async fn positions(api: &Platform<'_>, stage: &str) -> Vec<(String, i64)> {
    let answer = api
        .send("GET", &format!("/v1/deals?stage={stage}&limit=200"), None)
        .await;
    let mut pairs: Vec<(String, i64)> = answer.body["deals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["id"].as_str().unwrap().to_owned(), d["position"].as_i64().unwrap()))
        .collect();
    pairs.sort_by_key(|(_, p)| *p);
    pairs
}

async fn api(server: &Server) -> Platform<'_> {
    let (account_id, key) = admin::account(server, "growth", 0).await;
    Platform::of(server, &account_id, &key)
}

async fn events(db: &Db, account_deal: &str) -> Vec<String> {
    let conn = db.connect().await;
    use sea_orm::{ConnectionTrait, Statement};
    let sql = if db.is_postgres() {
        "SELECT event_type FROM event_outbox WHERE payload LIKE $1 ORDER BY seq"
    } else {
        "SELECT event_type FROM event_outbox WHERE payload LIKE ? ORDER BY seq"
    };
    let rows = conn
        .query_all_raw(Statement::from_sql_and_values(
            conn.get_database_backend(),
            sql,
            [format!("%{account_deal}%").into()],
        ))
        .await
        .unwrap();
    rows.iter().map(|r| r.try_get_by_index::<String>(0).unwrap()).collect()
}

/// A field error's message names the field once, then the problem in its own words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_stage_is_named_once_in_the_message() {
    let db = Db::sqlite();
    let server = Server::start(&db, &[]).await;
    let api = api(&server).await;
    let answer = api
        .send("POST", "/v1/deals", Some(json!({"title": "Lead", "stage": "lead"})))
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (400, "invalid_argument"),
        "{}",
        answer.body
    );
    assert_eq!(
        answer.body["error"]["message"],
        "stage: no stage `lead` on this account"
    );
    assert_eq!(
        answer.body["error"]["fields"],
        json!([{"field": "stage", "message": "no stage `lead` on this account"}])
    );
}

on_both_databases!(deals_are_created_read_patched_moved_and_deleted, |db: Db| async move {
    let server = Server::start(&db, &[("FRONTDESK_TEST_CLOCK", "true")]).await;
    let api = api(&server).await;
    let a = create(
        &api,
        json!({"title": "A", "stage": "new", "value": 100, "tags": ["vip"], "priority": "high"}),
    )
    .await;
    let b = create(&api, json!({"title": "B", "stage": "new", "company": "Rao Dental"})).await;
    let c = create(
        &api,
        json!({"title": "C", "stage": "new", "close_date": "2026-12-31T00:00:00Z"}),
    )
    .await;
    assert_eq!(
        (a["position"].as_i64(), b["position"].as_i64(), c["position"].as_i64()),
        (Some(0), Some(1), Some(2))
    );
    assert_eq!(a["pipeline_id"], "default");
    assert_eq!(
        (a["status"].as_str(), a["source"].as_str(), b["priority"].as_str()),
        (Some("open"), Some("api"), Some("medium"))
    );
    assert_eq!(c["close_date"], "2026-12-31T00:00:00Z");
    assert_eq!(b["close_date"], Value::Null);
    let a_id = a["id"].as_str().unwrap();
    assert_eq!(read_deal(&api, a_id).await, a);

    // PATCH changes only what the body names.
    let patched = api
        .send("PATCH", &format!("/v1/deals/{a_id}"), Some(json!({"probability": 40})))
        .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    let patched = &patched.body["deal"];
    assert_eq!(
        (patched["probability"].as_f64(), patched["value"].as_f64()),
        (Some(40.0), Some(100.0))
    );
    assert_eq!(
        (patched["title"].as_str(), patched["tags"].clone()),
        (Some("A"), json!(["vip"]))
    );
    assert_eq!(patched["stage_entered_at"], a["stage_entered_at"]);
    // Over REST the body's keys are the mask: one that names a mask of its own (null included) is refused,
    // rather than changing, or checking, nothing.
    for mask in [json!(null), json!("title")] {
        let body = json!({"title": "B", "probability": 500, "update_mask": mask});
        let refused = api.send("PATCH", &format!("/v1/deals/{a_id}"), Some(body)).await;
        assert_eq!(refused.status, 400, "{}", refused.body);
        assert_eq!(refused.body["error"]["fields"][0]["field"], "update_mask");
    }
    let cleared = api
        .send(
            "PATCH",
            &format!("/v1/deals/{}", c["id"].as_str().unwrap()),
            Some(json!({"close_date": null, "tags": []})),
        )
        .await;
    assert_eq!(
        (
            cleared.body["deal"]["close_date"].clone(),
            cleared.body["deal"]["tags"].clone()
        ),
        (Value::Null, json!([]))
    );

    // Moves keep positions dense and ordered; stage_entered_at changes only with the stage (a minute later
    // on the service's clock, so the new time differs from the first).
    let later = prost_types::Timestamp {
        seconds: chrono::Utc::now().timestamp() + 60,
        nanos: 0,
    };
    admin::set_test_clock(&server, Some(later))
        .await
        .expect("the clock moves");
    let moved = api
        .send(
            "POST",
            &format!("/v1/deals/{a_id}/move"),
            Some(json!({"stage": "qualified"})),
        )
        .await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    assert_ne!(moved.body["deal"]["stage_entered_at"], a["stage_entered_at"]);
    let entered = moved.body["deal"]["stage_entered_at"].clone();
    let ids = |d: &[&Value]| {
        d.iter()
            .map(|v| v["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let new_stage: Vec<String> = positions(&api, "new").await.into_iter().map(|(id, _)| id).collect();
    assert_eq!(new_stage, ids(&[&b, &c]));
    assert_eq!(
        positions(&api, "new").await.iter().map(|(_, p)| *p).collect::<Vec<_>>(),
        [0, 1]
    );
    let c_id = c["id"].as_str().unwrap();
    api.send(
        "POST",
        &format!("/v1/deals/{c_id}/move"),
        Some(json!({"stage": "qualified", "position": 0})),
    )
    .await;
    let qualified = positions(&api, "qualified").await;
    assert_eq!(qualified, vec![(c_id.to_owned(), 0), (a_id.to_owned(), 1)]);
    let within = api
        .send(
            "POST",
            &format!("/v1/deals/{a_id}/move"),
            Some(json!({"stage": "qualified", "position": 0})),
        )
        .await;
    assert_eq!(
        within.body["deal"]["stage_entered_at"], entered,
        "a move within the stage keeps stage_entered_at"
    );
    assert_eq!(
        positions(&api, "qualified").await,
        vec![(a_id.to_owned(), 0), (c_id.to_owned(), 1)]
    );
    let by_patch = api
        .send(
            "PATCH",
            &format!("/v1/deals/{}", b["id"].as_str().unwrap()),
            Some(json!({"stage": "qualified"})),
        )
        .await;
    assert_eq!(
        by_patch.body["deal"]["position"], 2,
        "a new stage by PATCH goes to the end"
    );
    assert_eq!(positions(&api, "new").await.len(), 0);

    let deleted = api.send("DELETE", &format!("/v1/deals/{a_id}"), None).await;
    assert_eq!(
        (deleted.status, &deleted.body),
        (200, &json!({"success": true, "id": a_id}))
    );
    assert_eq!(api.send("GET", &format!("/v1/deals/{a_id}"), None).await.status, 404);
    assert_eq!(
        positions(&api, "qualified")
            .await
            .iter()
            .map(|(_, p)| *p)
            .collect::<Vec<_>>(),
        [0, 1]
    );

    assert_eq!(
        events(&db, a_id).await,
        [
            "deal.created",
            "deal.updated",
            "deal.updated",
            "deal.stage_changed",
            "deal.updated"
        ]
    );
});

on_both_databases!(every_filter_narrows_the_list_and_combines, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = api(&server).await;
    let one = create(
        &api,
        json!({"title": "Implant package", "stage": "new", "status": "open", "priority": "urgent",
        "source": "website", "contact_id": "ct_1", "assigned_to": "tm_1", "tags": ["vip", "50%_off"]}),
    )
    .await;
    let two = create(
        &api,
        json!({"title": "Whitening", "company": "Smile Co", "stage": "proposal", "status": "won",
        "priority": "low", "source": "manual", "contact_id": "ct_2", "tags": ["repeat"]}),
    )
    .await;
    let three = create(
        &api,
        json!({"title": "Checkup", "description": "yearly IMPLANT review", "stage": "proposal",
        "status": "lost", "priority": "urgent", "source": "website", "assigned_to": "tm_1"}),
    )
    .await;
    let id = |d: &Value| d["id"].as_str().unwrap().to_owned();
    let (one, two, three) = (id(&one), id(&two), id(&three));
    for (query, expected) in [
        ("", vec![&three, &two, &one]),
        ("stage=proposal", vec![&three, &two]),
        ("pipeline_id=default", vec![&three, &two, &one]),
        ("status=won", vec![&two]),
        ("priority=urgent", vec![&three, &one]),
        ("source=website", vec![&three, &one]),
        ("contact_id=ct_2", vec![&two]),
        ("assigned_to=tm_1", vec![&three, &one]),
        ("tag=vip", vec![&one]),
        ("tag=50%25_off", vec![&one]),
        ("tag=vi", vec![]),
        ("tag=VIP", vec![]),
        ("q=implant", vec![&three, &one]),
        ("q=smile", vec![&two]),
        ("q=%25", vec![]),
        ("priority=urgent&source=website&stage=proposal", vec![&three]),
        ("assigned_to=tm_1&tag=vip", vec![&one]),
    ] {
        let expected: Vec<String> = expected.into_iter().cloned().collect();
        assert_eq!(deal_ids(&api, query).await, expected, "{query}");
    }
    assert_eq!(deal_ids(&api, "created_after=2000-01-01T00:00:00Z").await.len(), 3);
    assert!(deal_ids(&api, "created_after=2100-01-01T00:00:00Z").await.is_empty());
    assert_eq!(
        deal_ids(&api, "created_before=2100-01-01T00:00:00Z&status=won").await,
        vec![two.clone()]
    );
    assert!(deal_ids(&api, "created_before=2000-01-01T00:00:00Z").await.is_empty());
});

on_both_databases!(paging_is_stable_while_deals_are_created, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = api(&server).await;
    let mut originals = HashSet::new();
    for i in 0..250 {
        originals.insert(
            create(&api, json!({"title": format!("deal {i}"), "stage": "new"})).await["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let writer_key = api.key.clone();
    let url = server.url("/v1/deals");
    let writer = tokio::spawn(async move {
        for i in 0..40 {
            let body = json!({"title": format!("late {i}"), "stage": "qualified"}).to_string();
            call_with("POST", &url, &[("x-api-key", &writer_key)], Some(&body)).await;
        }
    });
    let seen = every_page(&api, "limit=50", std::time::Duration::from_millis(20)).await;
    writer.await.unwrap();
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no duplicates across pages");
    assert!(
        originals.iter().all(|id| unique.contains(id)),
        "no gaps: every deal that existed is listed"
    );
});

on_both_databases!(deals_created_in_the_same_instant_page_by_id, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = api(&server).await;
    for i in 0..7 {
        create(&api, json!({"title": format!("twin {i}"), "stage": "new"})).await;
    }
    {
        use sea_orm::ConnectionTrait;
        db.connect()
            .await
            .execute_unprepared("UPDATE deals SET created_at = (SELECT MIN(created_at) FROM deals)")
            .await
            .unwrap();
    }
    let mut expected = deal_ids(&api, "limit=200").await;
    expected.sort_unstable_by(|a, b| b.cmp(a));
    let seen = every_page(&api, "limit=2", std::time::Duration::ZERO).await;
    assert_eq!(
        seen, expected,
        "a tie on created_at pages on by id, newest id first, none skipped"
    );
});

on_both_databases!(
    bad_deal_input_is_a_precise_400_and_writes_no_event,
    |db: Db| async move {
        let server = Server::start(&db, &[]).await;
        let api = api(&server).await;
        let deal = create(&api, json!({"title": "Keep", "stage": "new"})).await;
        let id = deal["id"].as_str().unwrap().to_owned();
        for (body, field) in [
            (json!({"title": "x", "stage": "nowhere"}), "stage"),
            (json!({"title": "x"}), "stage"),
            (json!({"stage": "new"}), "title"),
            (json!({"title": "x", "stage": "new", "probability": 101}), "probability"),
            (json!({"title": "x", "stage": "new", "value": -5}), "value"),
            (json!({"title": "x", "stage": "new", "priority": "asap"}), "priority"),
            (json!({"title": "x", "stage": "new", "status": "closed"}), "status"),
            (json!({"title": "x", "stage": "new", "source": "fax"}), "source"),
            (
                json!({"title": "x", "stage": "new", "close_date": "31/12/2026"}),
                "close_date",
            ),
            (
                json!({"title": "x", "stage": "new", "tags": (0..51).map(|i| format!("t{i}")).collect::<Vec<_>>()}),
                "tags",
            ),
            (json!({"title": "x", "stage": "new", "tags": ["t".repeat(65)]}), "tags"),
        ] {
            let answer = api.send("POST", "/v1/deals", Some(body.clone())).await;
            assert_eq!(answer.status, 400, "{body} -> {}", answer.body);
            assert!(answer.fields().contains(&field.to_owned()), "{body} -> {}", answer.body);
        }
        for query in ["limit=0", "limit=1000", "cursor=garbage", "status=maybe", "limit=ten"] {
            let answer = api.send("GET", &format!("/v1/deals?{query}"), None).await;
            assert_eq!(answer.status, 400, "{query}: {}", answer.body);
        }
        let before = events(&db, &id).await.len();
        let failed = api
            .send(
                "PATCH",
                &format!("/v1/deals/{id}"),
                Some(json!({"title": "Changed", "stage": "nowhere"})),
            )
            .await;
        assert_eq!((failed.status, failed.fields()), (400, vec!["stage".to_owned()]));
        let failed = api
            .send(
                "POST",
                &format!("/v1/deals/{id}/move"),
                Some(json!({"stage": "nowhere"})),
            )
            .await;
        assert_eq!(failed.status, 400);
        let failed = api
            .send("PATCH", &format!("/v1/deals/{id}"), Some(json!({"probability": 300})))
            .await;
        assert_eq!(failed.status, 400);
        assert_eq!(events(&db, &id).await.len(), before, "a failed change writes no event");
        assert_eq!(read_deal(&api, &id).await["title"], "Keep", "and changes nothing");
    }
);

on_both_databases!(another_accounts_deals_are_invisible, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let alice = api(&server).await;
    let bob = api(&server).await;
    let deal = create(&alice, json!({"title": "Alice's", "stage": "new"})).await;
    let id = deal["id"].as_str().unwrap();
    for (method, path, body) in [
        ("GET", format!("/v1/deals/{id}"), None),
        ("PATCH", format!("/v1/deals/{id}"), Some(json!({"title": "mine now"}))),
        ("POST", format!("/v1/deals/{id}/move"), Some(json!({"stage": "won"}))),
        ("DELETE", format!("/v1/deals/{id}"), None),
    ] {
        let answer = bob.send(method, &path, body).await;
        assert_eq!((answer.status, answer.code()), (404, "not_found"), "{method} {path}");
    }
    assert!(deal_ids(&bob, "").await.is_empty());
    assert_eq!(read_deal(&alice, id).await["title"], "Alice's");
    let scoped = admin::issue_key(&server, &bob.account_id, &["agents"]).await;
    let refused = call_with("GET", &server.url("/v1/deals"), &[("x-api-key", &scoped)], None).await;
    assert_eq!(
        (refused.status, refused.code()),
        (403, "insufficient_scope"),
        "deals need the deals section"
    );
});

on_both_databases!(
    pipelines_and_stages_are_managed_and_stage_deletion_orphans_deals,
    |db: Db| async move {
        let server = Server::start(&db, &[]).await;
        let api = api(&server).await;
        let listed = api.send("GET", "/v1/pipelines", None).await;
        let stages: Vec<&str> = listed.body["pipelines"][0]["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        assert_eq!(stages, ["new", "qualified", "proposal", "negotiation", "won", "lost"]);

        let created = api
            .send(
                "POST",
                "/v1/pipelines",
                Some(json!({"name": "Partners", "stages": [{"name": "Intro"}, {"id": "signed", "name": "Signed"}]})),
            )
            .await;
        assert_eq!(created.status, 200, "{}", created.body);
        assert_eq!(created.body["pipeline"]["id"], "partners");
        assert_eq!(created.body["pipeline"]["stages"][0]["id"], "intro");
        let dup = api
            .send(
                "POST",
                "/v1/pipelines",
                Some(json!({"name": "x", "stages": [{"id": "new", "name": "New again"}]})),
            )
            .await;
        assert_eq!(
            (dup.status, dup.code()),
            (409, "already_exists"),
            "stage ids are unique across pipelines"
        );
        let added = api
            .send(
                "POST",
                "/v1/pipelines/partners/stages",
                Some(json!({"name": "Demo", "position": 1})),
            )
            .await;
        assert_eq!(added.body["stage"]["position"], 1);
        let reordered = api
            .send(
                "PATCH",
                "/v1/stages/signed",
                Some(json!({"position": 0, "name": "Signed!"})),
            )
            .await;
        assert_eq!(
            (
                reordered.body["stage"]["position"].as_i64(),
                reordered.body["stage"]["name"].as_str()
            ),
            (Some(0), Some("Signed!"))
        );
        let partners = api.send("GET", "/v1/pipelines", None).await.body["pipelines"][1].clone();
        let order: Vec<(String, i64)> = partners["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["id"].as_str().unwrap().to_owned(), s["position"].as_i64().unwrap()))
            .collect();
        assert_eq!(
            order,
            vec![("signed".into(), 0), ("intro".into(), 1), ("demo".into(), 2)]
        );
        let renamed = api
            .send(
                "PATCH",
                "/v1/pipelines/partners",
                Some(json!({"name": "Partner deals"})),
            )
            .await;
        assert_eq!(renamed.body["pipeline"]["name"], "Partner deals");

        let deal = create(&api, json!({"title": "Referral", "stage": "demo"})).await;
        assert_eq!(deal["pipeline_id"], "partners");
        let id = deal["id"].as_str().unwrap();
        assert_eq!(api.send("DELETE", "/v1/stages/demo", None).await.status, 200);
        assert_eq!(
            events(&db, id).await,
            ["deal.created", "deal.updated"],
            "the orphaned deal's change is an event"
        );
        let orphan = read_deal(&api, id).await;
        assert_eq!(
            (orphan["stage"].as_str(), orphan["pipeline_id"].clone()),
            (Some("demo"), Value::Null)
        );
        assert_eq!(deal_ids(&api, "pipeline_id=partners").await.len(), 0);
        let stage_order = api.send("GET", "/v1/pipelines", None).await.body["pipelines"][1]["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["position"].as_i64().unwrap())
            .collect::<Vec<_>>();
        assert_eq!(stage_order, [0, 1], "stage positions close up");

        assert_eq!(api.send("DELETE", "/v1/pipelines/default", None).await.status, 400);
        assert_eq!(api.send("DELETE", "/v1/pipelines/partners", None).await.status, 200);
        assert_eq!(
            api.send("GET", "/v1/pipelines", None).await.body["pipelines"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(api.send("DELETE", "/v1/pipelines/partners", None).await.status, 404);
    }
);

on_both_databases!(deals_over_grpc, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let (_, key) = admin::account(&server, "growth", 0).await;
    let key: MetadataValue<_> = key.parse().unwrap();
    let mut deals = DealsClient::connect(server.grpc.clone()).await.unwrap();
    let mut pipelines = PipelinesClient::connect(server.grpc.clone()).await.unwrap();
    let listed = pipelines
        .list_pipelines(authed(&key, ListPipelinesRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.pipelines[0].stages.len(), 6);

    let created = deals
        .create_deal(authed(
            &key,
            CreateDealRequest {
                title: "gRPC deal".into(),
                stage: "new".into(),
                value: 50.0,
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .deal
        .unwrap();
    let update = UpdateDealRequest {
        deal_id: created.id.clone(),
        title: "ignored: not in the mask".into(),
        probability: 75.0,
        update_mask: Some(prost_types::FieldMask {
            paths: vec!["probability".into()],
        }),
        ..Default::default()
    };
    let updated = deals
        .update_deal(authed(&key, update))
        .await
        .unwrap()
        .into_inner()
        .deal
        .unwrap();
    assert_eq!((updated.title.as_str(), updated.probability), ("gRPC deal", 75.0));
    let moved = deals
        .move_deal(authed(
            &key,
            MoveDealRequest {
                deal_id: created.id.clone(),
                stage: "won".into(),
                position: None,
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .deal
        .unwrap();
    assert_eq!(moved.stage, "won");
    let got = deals
        .get_deal(authed(
            &key,
            GetDealRequest {
                deal_id: created.id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.deal.unwrap().stage, "won");
    let list = deals
        .list_deals(authed(
            &key,
            ListDealsRequest {
                stage: "won".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.deals.len(), 1);
    assert_eq!(list.next_cursor, None);
    let bad = deals
        .list_deals(authed(
            &key,
            ListDealsRequest {
                limit: Some(0),
                ..Default::default()
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    // A Timestamp outside its type's range is refused, not read as unset (which would drop the filter).
    let out_of_range = |seconds, nanos| Some(prost_types::Timestamp { seconds, nanos });
    let bad_filter = ListDealsRequest {
        created_after: out_of_range(253_402_300_800, 0),
        ..Default::default()
    };
    let bad = deals.list_deals(authed(&key, bad_filter)).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().starts_with("created_after: "), "{}", bad.message());
    let bad_close = CreateDealRequest {
        title: "Bad close date".into(),
        stage: "new".into(),
        close_date: out_of_range(1_700_000_000, -1),
        ..Default::default()
    };
    let bad = deals.create_deal(authed(&key, bad_close)).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().starts_with("close_date: "), "{}", bad.message());
    let get_error = |deal_id: &str| {
        let request = authed(
            &key,
            GetDealRequest {
                deal_id: deal_id.into(),
            },
        );
        let mut deals = deals.clone();
        async move { deals.get_deal(request).await.unwrap_err() }
    };
    assert_eq!(get_error("deal_nope").await.code(), Code::NotFound);
    // An id holding U+0000 is a client's mistake on either database: PostgreSQL cannot hold the text (400),
    // SQLite can and finds no such deal (404).
    let nul_id = get_error("deal_\0x").await;
    let expected = if db.is_postgres() {
        Code::InvalidArgument
    } else {
        Code::NotFound
    };
    assert_eq!(nul_id.code(), expected, "{}", nul_id.message());
    let unauthenticated = deals
        .get_deal(GetDealRequest {
            deal_id: created.id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(unauthenticated.code(), Code::Unauthenticated);

    // Every filter over gRPC.
    let tagged = CreateDealRequest {
        title: "Tagged implant".into(),
        stage: "proposal".into(),
        status: "lost".into(),
        priority: "urgent".into(),
        source: "website".into(),
        contact_id: "ct_9".into(),
        assigned_to: "tm_9".into(),
        tags: vec!["vip".into()],
        ..Default::default()
    };
    let tagged = deals
        .create_deal(authed(&key, tagged))
        .await
        .unwrap()
        .into_inner()
        .deal
        .unwrap();
    let timestamp = |seconds| Some(prost_types::Timestamp { seconds, nanos: 0 });
    let filters: Vec<ListDealsRequest> = vec![
        ListDealsRequest {
            stage: "proposal".into(),
            ..Default::default()
        },
        ListDealsRequest {
            pipeline_id: "default".into(),
            status: "lost".into(),
            ..Default::default()
        },
        ListDealsRequest {
            priority: "urgent".into(),
            ..Default::default()
        },
        ListDealsRequest {
            source: "website".into(),
            ..Default::default()
        },
        ListDealsRequest {
            contact_id: "ct_9".into(),
            ..Default::default()
        },
        ListDealsRequest {
            assigned_to: "tm_9".into(),
            ..Default::default()
        },
        ListDealsRequest {
            tag: "vip".into(),
            ..Default::default()
        },
        ListDealsRequest {
            q: "IMPLANT".into(),
            ..Default::default()
        },
        ListDealsRequest {
            created_after: timestamp(0),
            source: "website".into(),
            ..Default::default()
        },
        ListDealsRequest {
            created_before: timestamp(4_102_444_800),
            tag: "vip".into(),
            ..Default::default()
        },
    ];
    for filter in filters {
        let found = deals
            .list_deals(authed(&key, filter.clone()))
            .await
            .unwrap()
            .into_inner()
            .deals;
        assert_eq!(
            found.iter().map(|d| d.id.clone()).collect::<Vec<_>>(),
            vec![tagged.id.clone()],
            "{filter:?}"
        );
    }
    let deleted = DeleteDealRequest {
        deal_id: tagged.id.clone(),
    };
    assert!(
        deals
            .delete_deal(authed(&key, deleted))
            .await
            .unwrap()
            .into_inner()
            .success
    );

    // Pipeline and stage management over gRPC.
    let new_pipeline = CreatePipelineRequest {
        id: "ops".into(),
        name: "Ops".into(),
        stages: vec![],
    };
    let pipeline = pipelines
        .create_pipeline(authed(&key, new_pipeline))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(pipeline.pipeline.unwrap().id, "ops");
    let stage = CreateStageRequest {
        pipeline_id: "ops".into(),
        id: "triage".into(),
        name: "Triage".into(),
        position: None,
    };
    assert_eq!(
        pipelines
            .create_stage(authed(&key, stage))
            .await
            .unwrap()
            .into_inner()
            .stage
            .unwrap()
            .position,
        0
    );
    let renamed = UpdateStageRequest {
        stage_id: "triage".into(),
        name: Some("Triage desk".into()),
        position: None,
    };
    assert_eq!(
        pipelines
            .update_stage(authed(&key, renamed))
            .await
            .unwrap()
            .into_inner()
            .stage
            .unwrap()
            .name,
        "Triage desk"
    );
    let renamed = UpdatePipelineRequest {
        pipeline_id: "ops".into(),
        name: "Operations".into(),
    };
    let renamed = pipelines
        .update_pipeline(authed(&key, renamed))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renamed.pipeline.unwrap().name, "Operations");
    pipelines
        .delete_stage(authed(
            &key,
            DeleteStageRequest {
                stage_id: "triage".into(),
            },
        ))
        .await
        .unwrap();
    pipelines
        .delete_pipeline(authed(
            &key,
            DeletePipelineRequest {
                pipeline_id: "ops".into(),
            },
        ))
        .await
        .unwrap();
    let gone = pipelines
        .delete_pipeline(authed(
            &key,
            DeletePipelineRequest {
                pipeline_id: "ops".into(),
            },
        ))
        .await;
    assert_eq!(gone.unwrap_err().code(), Code::NotFound);
});

fn authed<T>(key: &MetadataValue<tonic::metadata::Ascii>, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert("x-api-key", key.clone());
    request
}

on_both_databases!(
    credentials_are_checked_before_the_request_is_parsed,
    |db: Db| async move {
        let server = Server::start(&db, &[]).await;
        let api = api(&server).await;
        let no_key = call_with("POST", &server.url("/v1/deals"), &[], Some("{not json")).await;
        assert_eq!(
            (no_key.status, no_key.code()),
            (401, "unauthenticated"),
            "401 before 400: {}",
            no_key.body
        );
        let unknown_param = call_with("GET", &server.url("/v1/deals?limit=ten"), &[], None).await;
        assert_eq!(unknown_param.status, 401);
        let scoped = admin::issue_key(&server, &api.account_id, &["agents"]).await;
        let forbidden = call_with(
            "GET",
            &server.url("/v1/deals?limit=ten"),
            &[("x-api-key", &scoped)],
            None,
        )
        .await;
        assert_eq!(
            (forbidden.status, forbidden.code()),
            (403, "insufficient_scope"),
            "403 before 400"
        );
        let bad = api.send("GET", "/v1/deals?limit=ten", None).await;
        assert_eq!((bad.status, bad.fields()), (400, vec!["limit".to_owned()]));
        assert!(
            bad.header("ratelimit").is_some(),
            "a 400 on the platform carries the rate-limit headers"
        );
        let query_key = call_with(
            "GET",
            &server.url(&format!("/v1/deals?apiKey={}&limit=ten", api.key)),
            &[],
            None,
        )
        .await;
        assert_eq!(
            query_key.status, 400,
            "an apiKey in the query string counts for the check: {}",
            query_key.body
        );
    }
);

on_both_databases!(an_agency_works_on_its_sub_accounts_deals, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let (agency, agency_key) = admin::account(&server, "scale", 0).await;
    let (child, child_key) = admin::account_under(&server, "growth", 0, &agency).await;
    let agency_api = Platform::of(&server, &agency, &agency_key);
    let child_api = Platform::of(&server, &child, &child_key);
    let made = agency_api
        .send(
            "POST",
            &format!("/v1/deals?sub_account_id={child}"),
            Some(json!({"title": "For the clinic", "stage": "new"})),
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.body);
    let id = made.body["deal"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        deal_ids(&child_api, "").await,
        vec![id.clone()],
        "the deal is the sub-account's"
    );
    assert!(deal_ids(&agency_api, "").await.is_empty(), "not the agency's own");
    let via_body = agency_api
        .send(
            "POST",
            "/v1/deals",
            Some(json!({"title": "Body", "stage": "new", "sub_account_id": child})),
        )
        .await;
    assert_eq!(via_body.status, 200);
    assert_eq!(
        deal_ids(&child_api, "").await.len(),
        2,
        "sub_account_id in the body acts the same"
    );
    assert_eq!(deal_ids(&agency_api, &format!("sub_account_id={child}")).await.len(), 2);
});

on_both_databases!(concurrent_moves_keep_positions_dense, |db: Db| async move {
    let server = Server::start(&db, &[]).await;
    let api = api(&server).await;
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(
            create(&api, json!({"title": format!("d{i}"), "stage": "new"})).await["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let mut tasks = Vec::new();
    for (i, id) in ids.iter().cycle().take(36).enumerate() {
        let (url, key) = (server.url(&format!("/v1/deals/{id}/move")), api.key.clone());
        let stage = if i % 3 == 0 { "new" } else { "qualified" };
        let body = json!({"stage": stage, "position": (i * 7) % 5}).to_string();
        tasks.push(tokio::spawn(async move {
            call_with("POST", &url, &[("x-api-key", &key)], Some(&body)).await
        }));
    }
    for task in tasks {
        let answer = task.await.unwrap();
        assert_eq!(answer.status, 200, "every concurrent move succeeds: {}", answer.body);
    }
    let new = positions(&api, "new").await;
    let qualified = positions(&api, "qualified").await;
    assert_eq!(new.len() + qualified.len(), 12);
    for stage in [new, qualified] {
        let positions: Vec<i64> = stage.iter().map(|(_, p)| *p).collect();
        assert_eq!(
            positions,
            (0..positions.len() as i64).collect::<Vec<_>>(),
            "dense and ordered"
        );
    }
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_whose_event_cannot_be_written_is_not_made() {
    let db = Db::postgres().await;
    let server = Server::start(&db, &[]).await;
    let api = api(&server).await;
    let deal = create(&api, json!({"title": "Original", "stage": "new"})).await;
    let id = deal["id"].as_str().unwrap();
    {
        use sea_orm::ConnectionTrait;
        let conn = db.connect().await;
        conn.execute_unprepared(
            "CREATE FUNCTION refuse_event() RETURNS trigger AS $$ BEGIN \
             IF NEW.payload LIKE '%FAILME%' THEN RAISE EXCEPTION 'outbox refused'; END IF; RETURN NEW; END $$ \
             LANGUAGE plpgsql; \
             CREATE TRIGGER refuse_event BEFORE INSERT ON event_outbox FOR EACH ROW EXECUTE FUNCTION refuse_event();",
        )
        .await
        .unwrap();
    }
    let failed = api
        .send("PATCH", &format!("/v1/deals/{id}"), Some(json!({"title": "FAILME"})))
        .await;
    assert_eq!((failed.status, failed.code()), (500, "internal"), "{}", failed.body);
    assert_eq!(
        read_deal(&api, id).await["title"],
        "Original",
        "the change rolled back with its event"
    );
    let moved = api
        .send("POST", &format!("/v1/deals/{id}/move"), Some(json!({"stage": "won"})))
        .await;
    assert_eq!(moved.status, 200, "an event that can be written goes through");
}

/// A deal's time, and its `deal.created` event's, is read once its account's write lock is held: a creation
/// that waited for the lock is stamped after the wait, so deals made at once take their times in the order
/// they are written, and an event's time is never earlier than the write that made it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deal_that_waited_for_its_accounts_lock_is_stamped_after_the_wait() {
    use sea_orm::{ConnectionTrait, Statement};
    let db = Db::postgres().await;
    let server = Server::start(&db, &[]).await;
    let api = api(&server).await;
    let conn = db.connect().await;
    let holder = frontdesk_tests::db::hold(
        &conn,
        "SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE",
        vec![api.account_id.clone().into()],
    )
    .await;
    let (deal, released_at) = tokio::join!(create(&api, json!({"title": "Waited", "stage": "new"})), async {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let at = chrono::Utc::now();
        holder.commit().await.unwrap();
        at
    });
    // Read from the database: the API shows whole seconds.
    let row = conn
        .query_one_raw(Statement::from_sql_and_values(
            sea_orm::DbBackend::Postgres,
            "SELECT created_at FROM deals WHERE id = $1",
            [deal["id"].as_str().unwrap().into()],
        ))
        .await
        .unwrap()
        .unwrap();
    let created_at: chrono::DateTime<chrono::Utc> = row.try_get_by_index(0).unwrap();
    assert!(
        created_at >= released_at - chrono::Duration::milliseconds(5),
        "stamped {created_at}, the lock was let go at {released_at}"
    );
}
