//! Traces over OTLP, to a local receiver over protobuf-over-HTTP and over gRPC: a customer's message is one
//! trace from its inbound webhook (`hooks.inbound`) through the reply job (`job agent_reply`, with its call
//! to the model, `model openai`, when a model answers) and the delivery job (`job deliver_message`) to the
//! provider (`deliver twilio`), its context carried across each job boundary; every log line written inside
//! that work names the trace. A REST call continues the
//! caller's `traceparent`.

use std::time::Duration;

use frontdesk_tests::{
    Db,
    model_server::{FakeModel, Reply},
    on_both_databases,
    otlp::{OtlpReceiver, ReceivedSpan},
    sms::{self, Desk},
    twilio::{FakeTwilio, new_message_sid},
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const HOURS: &str = "We are open from nine to five, Monday to Friday.";
/// Debug lines of the service's own crates: enough lines inside each span to check that all name the trace.
const LOGS: &str = "info,frontdesk_kernel=debug,frontdesk_domain=debug,frontdesk_ai=debug,frontdesk_server=debug";

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|span| span.name == name).collect()
}

/// An inbound sms answered from an FAQ, or by an OpenAI-compatible `model`, traced to `protocol`'s
/// receiver: the trace and its log lines.
async fn a_message_is_one_trace(db: Db, protocol: &'static str, model: Option<FakeModel>) {
    let receiver = OtlpReceiver::start(protocol).await;
    let twilio = FakeTwilio::start().await;
    let mut env = receiver.env().to_vec();
    env.extend([("FRONTDESK_REPLY_DEBOUNCE_MS", "0"), ("RUST_LOG", LOGS)]);
    let openai = model.as_ref().map(FakeModel::openai_base_url).unwrap_or_default();
    if let Some(model) = &model {
        model.script(|_| (Reply::text(HOURS), Duration::ZERO));
        env.extend([
            ("FRONTDESK_MODEL_PROVIDER", "openai"),
            ("OPENAI_BASE_URL", openai.as_str()),
            ("OPENAI_API_KEY", "sk-openai-server-key"),
            ("FRONTDESK_OPENAI_MODEL", "gpt-test"),
        ]);
    }
    let server = sms::start(&db, &twilio, &env).await;
    let desk = Desk::open(
        &server,
        &twilio,
        json!({"name": "Front desk"}),
        ("What are your opening hours?", HOURS),
    )
    .await;
    desk.channel
        .inbound(&new_message_sid(), "+15557000001", "When are you open?")
        .await;
    assert_eq!(twilio.wait_for_sent("+15557000001", 1).await[0].body(), HOURS);

    let spans = receiver
        .wait_for(WAIT, |spans| !named(spans, "deliver twilio").is_empty())
        .await;
    let inbound = named(&spans, "hooks.inbound");
    assert_eq!(inbound.len(), 1, "one inbound webhook: {spans:#?}");
    let trace = &inbound[0].trace_id;
    let of_trace: Vec<&ReceivedSpan> = spans.iter().filter(|s| &s.trace_id == trace).collect();
    let one = |name: &str| {
        let found: Vec<&&ReceivedSpan> = of_trace.iter().filter(|s| s.name == name).collect();
        assert_eq!(found.len(), 1, "one {name} in the message's trace: {of_trace:#?}");
        *found[0]
    };
    // A job's run stopped on a starved machine (its lease lost) runs again, in the same trace: each run
    // counts, and the provider call is inside one of them.
    let runs = |name: &str| {
        let found: Vec<&ReceivedSpan> = of_trace.iter().copied().filter(|s| s.name == name).collect();
        assert!(
            !found.is_empty(),
            "a run of {name} in the message's trace: {of_trace:#?}"
        );
        found
    };
    let (hook, send) = (one("hooks.inbound"), one("deliver twilio"));
    let replies = runs("job agent_reply");
    let delivery = runs("job deliver_message")
        .into_iter()
        .find(|run| run.span_id == send.parent_span_id)
        .expect("the provider call is inside a run of its job");
    // The webhook's span is a child of the gRPC call that carried it, the root of the trace.
    let call = of_trace
        .iter()
        .find(|s| s.span_id == hook.parent_span_id)
        .expect("the webhook's span has its call as parent");
    assert!(call.parent_span_id.is_empty(), "the call is the trace's root: {call:?}");
    let in_trace = |span: &ReceivedSpan| of_trace.iter().any(|s| s.span_id == span.parent_span_id);
    for reply in replies {
        assert!(
            in_trace(reply),
            "the reply job continues the webhook's trace: {reply:?}"
        );
    }
    assert!(
        in_trace(delivery),
        "the delivery job continues the reply's trace: {delivery:?}"
    );

    // Each log line inside that work (a JSON line listing its spans) names the trace.
    let logs = server.logs();
    let lines: Vec<Value> = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| {
            line["spans"].as_array().is_some_and(|spans| {
                spans
                    .iter()
                    .any(|s| matches!(s["name"].as_str(), Some("job" | "hooks.inbound" | "deliver")))
            })
        })
        .collect();
    let in_message = lines
        .iter()
        .filter(|line| line["spans"][0]["trace_id"].as_str() == Some(trace.as_str()))
        .count();
    assert!(in_message > 0, "log lines of the message's work:\n{logs}");
    for line in &lines {
        assert!(
            line["spans"][0]["trace_id"].as_str().is_some_and(|id| id.len() == 32),
            "a line inside a job or webhook without its trace id: {line}"
        );
    }
}

on_both_databases!(
    a_message_answered_from_an_faq_is_one_trace_over_http,
    |db: Db| async move {
        a_message_is_one_trace(db, "http/protobuf", None).await;
    }
);

on_both_databases!(
    a_message_answered_by_a_model_is_one_trace_over_grpc,
    |db: Db| async move {
        a_message_is_one_trace(db, "grpc", Some(FakeModel::start().await)).await;
    }
);

on_both_databases!(a_rest_call_continues_its_callers_trace, |db: Db| async move {
    let receiver = OtlpReceiver::start("http/protobuf").await;
    let server = frontdesk_tests::Server::start(&db, &receiver.env()).await;
    let platform = frontdesk_tests::platform::Platform::new(&server).await;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller = format!("00-{trace}-00f067aa0ba902b7-01");
    let answer = reqwest::Client::new()
        .get(server.url("/v1/api-keys/current"))
        .header("x-api-key", &platform.key)
        .header("traceparent", &caller)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let spans = receiver
        .wait_for(WAIT, |spans| spans.iter().any(|s| s.trace_id == trace))
        .await;
    let call = spans.iter().find(|s| s.trace_id == trace).unwrap();
    assert_eq!(call.parent_span_id, "00f067aa0ba902b7", "{call:?}");
    assert!(call.name.ends_with("/GetCurrentApiKey"), "{call:?}");
});
