use serde_json::json;

use super::*;
use crate::{
    channels::meta::test_graph::{TestGraph, config, http, posted},
    store::entities::messages,
};

const NUMBER_ID: &str = "106540352242922";

fn adapter(api: &GraphApi) -> WhatsAppAdapter {
    let settings = config(&[
        ("phone_number_id", NUMBER_ID),
        ("access_token", "EAAG-token"),
        ("app_secret", "secret"),
    ]);
    WhatsAppAdapter::new(&settings, "verify", api, http()).unwrap()
}

fn offline() -> WhatsAppAdapter {
    adapter(&GraphApi {
        base_url: "http://127.0.0.1:9".to_owned(),
        version: "v21.0".to_owned(),
    })
}

fn parsed(fixture: &str) -> Inbound {
    offline().parse(&posted(fixture)).unwrap()
}

const TEXT: &str = include_str!("../../../../../tests/fixtures/meta/whatsapp_text.json");

#[test]
fn config_needs_the_number_the_token_and_the_app_secret() {
    let api = GraphApi {
        base_url: "http://127.0.0.1:9".to_owned(),
        version: "v21.0".to_owned(),
    };
    let build = |pairs: &[(&str, &str)]| WhatsAppAdapter::new(&config(pairs), "v", &api, http()).err();
    assert_eq!(
        build(&[("phone_number_id", "1"), ("access_token", "t")]),
        Some(ConfigError::Missing("app_secret"))
    );
    assert_eq!(
        build(&[
            ("phone_number_id", "1/../x"),
            ("access_token", "t"),
            ("app_secret", "s")
        ]),
        Some(ConfigError::Invalid {
            key: "phone_number_id",
            reason: "not a number id"
        })
    );
}

#[test]
fn reads_a_documented_text_message() {
    let inbound = parsed(TEXT);
    assert_eq!(
        inbound.messages,
        [InboundMessage {
            provider_message_id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=".to_owned(),
            sender: Sender::Identity {
                kind: "whatsapp",
                external_id: "16505551234".to_owned()
            },
            recipient: NUMBER_ID.to_owned(),
            text: "Does it come in another color?".to_owned(),
            attachments: Vec::new(),
            sender_name: "Sheena Nelson".to_owned(),
            referral: String::new(),
            page_url: String::new(),
            answerable: true,
        }]
    );
    assert!(inbound.statuses.is_empty() && inbound.reactions.is_empty());
}

#[test]
fn reads_documented_statuses() {
    let sent = parsed(include_str!(
        "../../../../../tests/fixtures/meta/whatsapp_status_sent.json"
    ));
    assert_eq!(sent.statuses[0].status, ProviderStatus::Sent);
    let delivered = parsed(include_str!(
        "../../../../../tests/fixtures/meta/whatsapp_status_delivered.json"
    ));
    assert_eq!(
        delivered.statuses,
        [StatusUpdate {
            provider_message_id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3MTE5MjVBOTE3MDk5QUVFM0YA".to_owned(),
            status: ProviderStatus::Delivered
        }]
    );
    let failed = parsed(include_str!(
        "../../../../../tests/fixtures/meta/whatsapp_status_failed.json"
    ));
    match &failed.statuses[0].status {
        ProviderStatus::Failed { code, message } => {
            assert_eq!(code, "131049");
            assert!(message.starts_with("This message was not delivered"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(failed.messages.is_empty());
}

#[test]
fn reactions_are_not_messages() {
    let added = parsed(include_str!(
        "../../../../../tests/fixtures/meta/whatsapp_reaction.json"
    ));
    assert!(added.messages.is_empty());
    assert_eq!(
        added.reactions,
        [InboundReaction {
            provider_message_id: "wamid.HBgLMTQxMjU1NTA4MjkVAgASGBQzQUNCNjk5RDUwNUZGMUZEM0VBRAA=".to_owned(),
            emoji: "\u{1F44D}".to_owned(),
        }]
    );
    let removed = parsed(include_str!(
        "../../../../../tests/fixtures/meta/whatsapp_reaction_removed.json"
    ));
    assert_eq!(removed.reactions[0].emoji, "");
}

#[test]
fn other_kinds_get_readable_text() {
    let image = parsed(include_str!("../../../../../tests/fixtures/meta/whatsapp_image.json"));
    let message = &image.messages[0];
    assert_eq!((message.text.as_str(), message.answerable), ("Taj Mahal", true));
    assert_eq!(
        message.attachments,
        [Attachment {
            url: "http://127.0.0.1:9/v21.0/1003383421387256".to_owned(),
            content_type: "image/jpeg".to_owned(),
            filename: String::new(),
        }]
    );
    let sticker = &parsed(include_str!("../../../../../tests/fixtures/meta/whatsapp_sticker.json")).messages[0];
    assert_eq!((sticker.text.as_str(), sticker.answerable), ("[sticker]", false));
    let location = &parsed(include_str!(
        "../../../../../tests/fixtures/meta/whatsapp_location.json"
    ))
    .messages[0];
    assert_eq!(
        location.text,
        "[location] 37.44221496582,-122.16165924072 Philz Coffee, 101 Forest Ave, Palo Alto, CA 94301"
    );
    let unsupported = &parsed(include_str!(
        "../../../../../tests/fixtures/meta/whatsapp_unsupported.json"
    ))
    .messages[0];
    assert_eq!(
        (unsupported.text.as_str(), unsupported.answerable),
        ("[unsupported]", false)
    );
    let button = &parsed(include_str!(
        "../../../../../tests/fixtures/meta/whatsapp_interactive_button_reply.json"
    ))
    .messages[0];
    assert!(!button.text.is_empty() && button.answerable, "{button:?}");
    let list = &parsed(include_str!(
        "../../../../../tests/fixtures/meta/whatsapp_interactive_list_reply.json"
    ))
    .messages[0];
    assert!(!list.text.is_empty(), "{list:?}");
}

#[test]
fn an_interactive_answer_without_a_title_is_a_stand_in() {
    let mut form: Value = serde_json::from_str(TEXT).unwrap();
    let message = &mut form["entry"][0]["changes"][0]["value"]["messages"][0];
    message["type"] = json!("interactive");
    message["interactive"] = json!({"type": "nfm_reply", "nfm_reply": {"response_json": "{}"}});
    let message = &parsed(&form.to_string()).messages[0];
    assert_eq!((message.text.as_str(), message.answerable), ("[interactive]", false));
}

#[test]
fn an_ad_or_a_prefilled_ref_is_the_referral() {
    let ad = &parsed(include_str!(
        "../../../../../tests/fixtures/meta/whatsapp_ad_referral.json"
    ))
    .messages[0];
    assert_eq!(ad.referral, "120226305854810726");
    let prefilled = TEXT.replace(
        "Does it come in another color?",
        "Hi! I saw your post (ref:spring-sale) today",
    );
    let message = &parsed(&prefilled).messages[0];
    assert_eq!(
        (message.referral.as_str(), message.text.as_str()),
        ("spring-sale", "Hi! I saw your post today")
    );
    let only = &parsed(&TEXT.replace("Does it come in another color?", "(ref:spring-sale)")).messages[0];
    assert_eq!(
        (only.text.as_str(), only.answerable),
        ("[referral: spring-sale]", false)
    );
    assert_eq!(
        prefilled_ref("(ref:summer_2026) please"),
        Some(("summer_2026", "please".to_owned()))
    );
    for plain in [
        "no ref here",
        "my order ref: 12345",
        "(ref:)",
        "(ref:two words)",
        "(ref:open",
    ] {
        assert_eq!(prefilled_ref(plain), None, "{plain}");
    }
}

#[test]
fn a_payload_for_another_number_or_not_whatsapp_is_refused() {
    let other = TEXT.replace(NUMBER_ID, "999");
    assert!(matches!(
        offline().parse(&posted(&other)),
        Err(ParseError::OtherChannel(_))
    ));
    let page = json!({"object": "page", "entry": []}).to_string();
    assert!(matches!(
        offline().parse(&posted(&page)),
        Err(ParseError::InvalidField { .. })
    ));
    for broken in [
        "{",
        "[]",
        r#"{"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages", "value": {"metadata": {}}}]}]}"#,
    ] {
        let error = offline().parse(&posted(broken)).unwrap_err();
        assert!(matches!(error, ParseError::InvalidField { .. }), "{broken}: {error:?}");
        assert!(
            !error.to_string().contains("whatsapp_business_account"),
            "never quotes the body"
        );
    }
}

#[test]
fn a_batch_is_read_whole() {
    let mut payload: Value = serde_json::from_str(TEXT).unwrap();
    let messages: Vec<Value> = (0..50)
        .map(|i| json!({"from": format!("1650555{i:04}"), "id": format!("wamid.{i}"), "timestamp": "1", "type": "text", "text": {"body": format!("question {i}")}}))
        .collect();
    payload["entry"][0]["changes"][0]["value"]["messages"] = messages.into();
    payload["entry"][0]["changes"][0]["value"]["statuses"] =
        json!([{"id": "wamid.out1", "status": "read", "timestamp": "1", "recipient_id": "16505551234"}]);
    let second_entry = payload["entry"][0].clone();
    payload["entry"].as_array_mut().unwrap().push(second_entry);
    let inbound = offline().parse(&posted(&payload.to_string())).unwrap();
    assert_eq!((inbound.messages.len(), inbound.statuses.len()), (100, 2));
}

async fn sent(
    answers: &[(u16, &str)],
    message: Outbound<'_>,
) -> (SendOutcome, Vec<crate::channels::meta::test_graph::Call>) {
    let (graph, api) = TestGraph::start(answers).await;
    let outcome = adapter(&api).send(&message).await;
    (outcome, graph.calls())
}

const ACCEPTED: &str = r#"{"messaging_product": "whatsapp", "contacts": [{"input": "+16505551234", "wa_id": "16505551234"}], "messages": [{"id": "wamid.OUT1"}]}"#;

#[tokio::test]
async fn sends_text_templates_and_media_as_the_cloud_api_takes_them() {
    let stored = messages::sample(messages::Author::Api, "Your order shipped");
    let base = Outbound {
        message: &stored,
        to: "+16505551234",
        text: "Your order shipped",
        attachments: &[],
        status_callback: "",
        template: None,
    };
    let (outcome, calls) = sent(&[(200, ACCEPTED)], base).await;
    assert_eq!(
        outcome,
        SendOutcome::Accepted {
            provider_message_id: "wamid.OUT1".to_owned()
        }
    );
    assert_eq!(calls[0].path, format!("/v21.0/{NUMBER_ID}/messages"));
    assert_eq!(calls[0].authorization, "Bearer EAAG-token");
    assert_eq!(
        calls[0].body,
        json!({"messaging_product": "whatsapp", "recipient_type": "individual", "to": "16505551234", "type": "text", "text": {"preview_url": false, "body": "Your order shipped"}})
    );

    let template = Template {
        name: "order_update".to_owned(),
        language: "en_US".to_owned(),
        parameters: vec!["4417".to_owned(), "Friday".to_owned()],
    };
    let (_, calls) = sent(
        &[(200, ACCEPTED)],
        Outbound {
            template: Some(&template),
            ..base
        },
    )
    .await;
    assert_eq!(
        calls[0].body["template"],
        json!({"name": "order_update", "language": {"code": "en_US"}, "components": [{"type": "body", "parameters": [{"type": "text", "text": "4417"}, {"type": "text", "text": "Friday"}]}]})
    );
    assert_eq!(calls.len(), 1, "a template goes alone");

    let media = [
        Attachment {
            url: "https://cdn.example/receipt.pdf".to_owned(),
            content_type: "application/pdf".to_owned(),
            filename: "receipt.pdf".to_owned(),
        },
        Attachment {
            url: "https://cdn.example/box.jpg".to_owned(),
            content_type: "image/jpeg".to_owned(),
            filename: String::new(),
        },
    ];
    let (outcome, calls) = sent(
        &[(200, ACCEPTED)],
        Outbound {
            attachments: &media,
            ..base
        },
    )
    .await;
    assert!(matches!(outcome, SendOutcome::Accepted { .. }));
    assert_eq!(
        calls.iter().map(|c| c.body["type"].clone()).collect::<Vec<_>>(),
        [json!("document"), json!("image")]
    );
    assert_eq!(
        calls[0].body["document"],
        json!({"link": "https://cdn.example/receipt.pdf", "caption": "Your order shipped", "filename": "receipt.pdf"})
    );
    assert_eq!(calls[1].body["image"], json!({"link": "https://cdn.example/box.jpg"}));
}

#[tokio::test]
async fn refusals_carry_meta_s_code_and_throttling_retries() {
    let stored = messages::sample(messages::Author::Api, "hi");
    let message = Outbound {
        message: &stored,
        to: "+16505551234",
        text: "hi",
        attachments: &[],
        status_callback: "",
        template: None,
    };
    let window = r#"{"error": {"message": "(#131047) Re-engagement message", "type": "OAuthException", "code": 131047, "error_data": {"messaging_product": "whatsapp", "details": "Message failed to send because more than 24 hours have passed since the customer last replied to this number."}, "fbtrace_id": "A"}}"#;
    let (outcome, _) = sent(&[(400, window)], message).await;
    assert!(
        matches!(&outcome, SendOutcome::Rejected { code, .. } if code == "131047"),
        "{outcome:?}"
    );
    let (outcome, _) = sent(
        &[(
            400,
            r#"{"error": {"message": "(#130429) Rate limit hit", "code": 130429}}"#,
        )],
        message,
    )
    .await;
    assert!(matches!(outcome, SendOutcome::Unavailable { .. }), "{outcome:?}");
    let (outcome, _) = sent(&[(200, r#"{"messages": []}"#)], message).await;
    assert!(matches!(outcome, SendOutcome::Unavailable { .. }), "{outcome:?}");
}

#[tokio::test]
async fn marks_read_and_reacts() {
    let (graph, api) = TestGraph::start(&[(200, r#"{"success": true}"#)]).await;
    let whatsapp = adapter(&api);
    let read = Signal::Read {
        to: "+16505551234",
        provider_message_id: "wamid.IN1",
    };
    assert!(matches!(
        whatsapp.signal(&read).await,
        Some(SendOutcome::Accepted { .. })
    ));
    let react = Signal::React {
        to: "+16505551234",
        provider_message_id: "wamid.IN1",
        emoji: "\u{1F600}",
    };
    assert!(matches!(
        whatsapp.signal(&react).await,
        Some(SendOutcome::Accepted { .. })
    ));
    let calls = graph.calls();
    assert_eq!(
        calls[0].body,
        json!({"messaging_product": "whatsapp", "status": "read", "message_id": "wamid.IN1"})
    );
    assert_eq!(
        calls[1].body,
        json!({"messaging_product": "whatsapp", "recipient_type": "individual", "to": "16505551234", "type": "reaction", "reaction": {"message_id": "wamid.IN1", "emoji": "\u{1F600}"}})
    );
}
