use serde_json::json;

use super::*;
use crate::{
    channels::meta::test_graph::{TestGraph, config, http, posted},
    store::entities::messages,
};

const PAGE: &str = "1234567890";
const PSID: &str = "6543210987654321";

fn adapter(kind: ChannelKind, page: &str, api: &GraphApi) -> MessengerAdapter {
    let settings = config(&[
        ("page_id", page),
        ("access_token", "EAAG-page"),
        ("app_secret", "secret"),
    ]);
    MessengerAdapter::new(kind, &settings, "verify", api, http()).unwrap()
}

fn offline(kind: ChannelKind, page: &str) -> MessengerAdapter {
    let api = GraphApi {
        base_url: "http://127.0.0.1:9".to_owned(),
        version: "v21.0".to_owned(),
    };
    adapter(kind, page, &api)
}

fn messenger(fixture: &str) -> Inbound {
    offline(ChannelKind::Messenger, PAGE).parse(&posted(fixture)).unwrap()
}

fn contact() -> Sender {
    Sender::Identity {
        kind: "messenger",
        external_id: PSID.to_owned(),
    }
}

#[test]
fn reads_documented_messages() {
    let text = &messenger(include_str!(
        "../../../../../tests/fixtures/meta/messenger_message.json"
    ))
    .messages[0];
    assert_eq!(
        (
            text.provider_message_id.as_str(),
            text.text.as_str(),
            &text.sender,
            text.answerable
        ),
        (
            "mid.1457764197618:41d102a3e1ae206a38",
            "hello, world!",
            &contact(),
            true
        )
    );
    let image = &messenger(include_str!(
        "../../../../../tests/fixtures/meta/messenger_attachment.json"
    ))
    .messages[0];
    assert_eq!(image.text, "[image]");
    assert_eq!(image.attachments.len(), 1);
    assert!(image.attachments[0].url.starts_with("https://scontent.xx.fbcdn.net/"));

    let instagram = offline(ChannelKind::Instagram, "17841405822304914")
        .parse(&posted(include_str!(
            "../../../../../tests/fixtures/meta/instagram_message.json"
        )))
        .unwrap();
    assert_eq!(
        instagram.messages[0].sender,
        Sender::Identity {
            kind: "instagram",
            external_id: "7654321098765432".to_owned()
        }
    );
    assert_eq!(instagram.messages[0].text, "Hi, are you open on Saturday?");
}

#[test]
fn reads_delivery_and_read_reports_by_watermark() {
    let delivery = messenger(include_str!(
        "../../../../../tests/fixtures/meta/messenger_delivery.json"
    ));
    assert_eq!(
        delivery.statuses,
        [StatusUpdate {
            provider_message_id: "mid.1458668856218:ed81099e15d3f4f233".to_owned(),
            status: ProviderStatus::Delivered
        }]
    );
    assert_eq!(
        delivery.watermarks,
        [Watermark {
            recipient: contact(),
            up_to: DateTime::<Utc>::from_timestamp_millis(1_458_668_856_253).unwrap(),
            status: ProviderStatus::Delivered,
        }]
    );
    let read = messenger(include_str!("../../../../../tests/fixtures/meta/messenger_read.json"));
    assert_eq!(read.watermarks[0].status, ProviderStatus::Read);
    assert!(read.statuses.is_empty() && read.messages.is_empty());
}

#[test]
fn reads_reactions_referrals_and_postbacks() {
    let reaction = messenger(include_str!(
        "../../../../../tests/fixtures/meta/messenger_reaction.json"
    ));
    assert_eq!(
        reaction.reactions,
        [InboundReaction {
            provider_message_id: "mid.1458668856218:ed81099e15d3f4f233".to_owned(),
            emoji: "\u{2764}\u{FE0F}".to_owned(),
        }]
    );
    let unreact =
        include_str!("../../../../../tests/fixtures/meta/messenger_reaction.json").replace("\"react\"", "\"unreact\"");
    assert_eq!(messenger(&unreact).reactions[0].emoji, "");

    let referral = &messenger(include_str!(
        "../../../../../tests/fixtures/meta/messenger_referral.json"
    ))
    .messages[0];
    assert_eq!(
        (referral.referral.as_str(), referral.text.as_str(), referral.answerable),
        ("spring_promo", "[referral: spring_promo]", false)
    );
    assert_eq!(referral.provider_message_id, format!("referral:{PSID}:1458692752478"));
    let postback = &messenger(include_str!(
        "../../../../../tests/fixtures/meta/messenger_postback.json"
    ))
    .messages[0];
    assert_eq!(
        (postback.text.as_str(), postback.referral.as_str(), postback.answerable),
        ("Get Started", "spring_promo", true)
    );
}

#[test]
fn echoes_are_skipped_and_other_pages_are_not_this_channel() {
    let echo = json!({"object": "page", "entry": [{"id": PAGE, "time": 1, "messaging": [
        {"sender": {"id": PAGE}, "recipient": {"id": PSID}, "timestamp": 1, "message": {"mid": "m_1", "text": "from the page", "is_echo": true}}
    ]}]});
    assert!(messenger(&echo.to_string()).messages.is_empty());
    let fixture = include_str!("../../../../../tests/fixtures/meta/messenger_message.json");
    let other = offline(ChannelKind::Messenger, "42").parse(&posted(fixture));
    assert!(matches!(other, Err(ParseError::OtherChannel(_))), "{other:?}");
    let instagram_on_messenger = offline(ChannelKind::Messenger, PAGE).parse(&posted(include_str!(
        "../../../../../tests/fixtures/meta/instagram_message.json"
    )));
    assert!(matches!(instagram_on_messenger, Err(ParseError::OtherChannel(_))));
    let opt_in = json!({"object": "page", "entry": [{"id": PAGE, "messaging": [
        {"recipient": {"id": PAGE}, "timestamp": 1, "optin": {"ref": "plugin", "user_ref": "u1"}}
    ]}]});
    assert_eq!(
        messenger(&opt_in.to_string()),
        Inbound::default(),
        "an event not read here needs no sender"
    );
    let missing_sender =
        json!({"object": "page", "entry": [{"id": PAGE, "messaging": [{"message": {"mid": "m", "text": "x"}}]}]});
    assert!(matches!(
        offline(ChannelKind::Messenger, PAGE).parse(&posted(&missing_sender.to_string())),
        Err(ParseError::MissingField(_))
    ));
}

#[tokio::test]
async fn sends_replies_seen_marks_and_reactions_to_me_messages() {
    let (graph, api) =
        TestGraph::start(&[(200, r#"{"recipient_id": "6543210987654321", "message_id": "m_OUT1"}"#)]).await;
    let page = adapter(ChannelKind::Messenger, PAGE, &api);
    let stored = messages::sample(messages::Author::Agent, "We open at 9");
    let media = [Attachment {
        url: "https://cdn.example/menu.pdf".to_owned(),
        content_type: "application/pdf".to_owned(),
        filename: "menu.pdf".to_owned(),
    }];
    let outcome = page
        .send(&Outbound {
            message: &stored,
            to: PSID,
            text: "We open at 9",
            attachments: &media,
            status_callback: "",
            template: None,
        })
        .await;
    assert_eq!(
        outcome,
        SendOutcome::Accepted {
            provider_message_id: "m_OUT1".to_owned()
        }
    );
    page.signal(&Signal::Read {
        to: PSID,
        provider_message_id: "m_IN",
    })
    .await;
    page.signal(&Signal::React {
        to: PSID,
        provider_message_id: "m_IN",
        emoji: "\u{1F44D}",
    })
    .await;
    page.signal(&Signal::React {
        to: PSID,
        provider_message_id: "m_IN",
        emoji: "",
    })
    .await;
    let calls = graph.calls();
    assert!(
        calls
            .iter()
            .all(|c| c.path == "/v21.0/me/messages" && c.authorization == "Bearer EAAG-page")
    );
    let bodies: Vec<Value> = calls.into_iter().map(|c| c.body).collect();
    assert_eq!(
        bodies,
        [
            json!({"recipient": {"id": PSID}, "messaging_type": "RESPONSE", "message": {"text": "We open at 9"}}),
            json!({"recipient": {"id": PSID}, "messaging_type": "RESPONSE", "message": {"attachment": {"type": "file", "payload": {"url": "https://cdn.example/menu.pdf", "is_reusable": false}}}}),
            json!({"recipient": {"id": PSID}, "sender_action": "mark_seen"}),
            json!({"recipient": {"id": PSID}, "sender_action": "react", "payload": {"message_id": "m_IN", "reaction": "\u{1F44D}"}}),
            json!({"recipient": {"id": PSID}, "sender_action": "unreact", "payload": {"message_id": "m_IN"}}),
        ]
    );
}
