//! What an outsider can do to web chat, tried from outside as an attacker would: another account pushing into
//! a visitor's chat, a visitor capturing the business's sends with a typed e-mail, floods of sessions,
//! messages, reads and frames, sockets that pile up or never read, and bodies sent to the edge before any
//! credential, or too slowly; on SQLite and on PostgreSQL + Redis.

use std::time::Duration;

use frontdesk_tests::{
    Db, on_both_databases,
    platform::{Platform, assert_invalid},
    webchat::{Channel, Socket, Visitor, message_when, reply, start},
};
use serde_json::json;

/// How long a socket is watched for a frame that must not come.
const QUIET: Duration = Duration::from_millis(1500);

/// Asserts that nothing reaches `socket` within `QUIET`.
async fn stays_quiet(socket: &mut Socket, case: &str) {
    if let Some(next) = socket.next(QUIET).await {
        panic!("{case}: the visitor's socket got {next:?}");
    }
}

// A session id is no secret (it is in webhooks and identities): knowing one must not let another account, or
// another channel of the same account, speak to that visitor or learn whether they are online.
on_both_databases!(another_account_cannot_reach_a_visitor, |db: Db| async move {
    let server = start(&db, &[]).await;
    let business = Platform::new(&server).await;
    let attacker = Platform::new(&server).await;
    let site = Channel::connect(&business, "site", json!({})).await;
    let other = Channel::connect(&business, "other", json!({})).await;
    Channel::connect(&attacker, "mine", json!({})).await;
    let visitor = Visitor::start(&server, &site, json!({})).await;
    let mut socket = visitor.socket(&server, "", "").await;

    // Addressed by the session id on the attacker's own channel: refused, and nothing is pushed.
    let by_id = json!({"channel": "mine", "external_id": visitor.session_id, "text": "Your card was blocked"});
    let refused = attacker.send("POST", "/v1/contacts/send", Some(by_id)).await;
    assert_invalid(&refused, "external_id", "another account's session");
    // The same through a contact that claims the session as its identity: the message cannot go out.
    let claimed = json!({"name": "x", "identities": [{"type": "webchat", "external_id": visitor.session_id}]});
    let contact = attacker.ok("POST", "/v1/contacts", Some(claimed)).await["contact"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/v1/contacts/{contact}/send-message");
    let sent = attacker
        .send("POST", &path, Some(json!({"text": "Pay here", "channel": "mine"})))
        .await;
    assert_eq!(sent.status, 202, "{}", sent.body);
    let id = sent.body["message_id"].as_str().unwrap().to_owned();
    let failed = message_when(&attacker, &id, |m| m["status"] != "queued").await;
    assert_eq!(
        (failed["status"].as_str(), failed["error"]["code"].as_str()),
        (Some("failed"), Some("cancelled")),
        "whether the visitor is online is not told: {failed}"
    );
    // Another channel of the visitor's own business names it in vain too.
    let elsewhere = json!({"channel": "other", "external_id": visitor.session_id, "text": "hi"});
    let refused = business.send("POST", "/v1/contacts/send", Some(elsewhere)).await;
    assert_invalid(&refused, "external_id", "a session of another channel");
    assert_eq!(other.name, "other");
    stays_quiet(&mut socket, "pushes addressed by a stranger").await;

    // The visitor's own business still reaches it, by contact and by session id on its channel.
    let answer = reply(&business, &visitor, "Hello from the shop").await;
    assert_eq!(socket.frame_of("message").await["message"]["id"], answer.as_str());
    let by_session = json!({"channel": "site", "external_id": visitor.session_id, "text": "And again"});
    let again = business.send("POST", "/v1/contacts/send", Some(by_session)).await;
    assert_eq!(again.status, 202, "{}", again.body);
    assert_eq!(again.body["contact_id"], visitor.contact_id.as_str());
    assert_eq!(socket.frame_of("message").await["message"]["text"], "And again");
});

// A visitor types someone else's e-mail address with only the public widget key: the business's later send
// to that address must not land in the visitor's chat.
on_both_databases!(a_typed_email_is_a_claim_not_an_address, |db: Db| async move {
    let server = start(&db, &[]).await;
    let business = Platform::new(&server).await;
    let site = Channel::connect(&business, "site", json!({})).await;
    let claim = json!({"visitor": {"name": "Mallory", "email": "ceo@victim.example"}});
    let visitor = Visitor::start(&server, &site, claim).await;
    let mut socket = visitor.socket(&server, "", "").await;
    visitor.post(&server, "hello", "c-1").await;
    socket.frame_of("message").await;

    let contact = business
        .ok("GET", &format!("/v1/contacts/{}", visitor.contact_id), None)
        .await["contact"]
        .clone();
    assert_eq!(contact["email"], "", "{contact}");
    // The business sees what the visitor typed, on the session.
    let session = business
        .ok("GET", &format!("/v1/chat-sessions/{}", visitor.session_id), None)
        .await;
    assert_eq!(
        session["chat_session"]["visitor"],
        json!({"name": "Mallory", "email": "ceo@victim.example"})
    );

    for (case, body) in [
        (
            "by e-mail",
            json!({"email": "ceo@victim.example", "text": "Your invoice"}),
        ),
        (
            "by e-mail on the web chat channel",
            json!({"email": "CEO@victim.example", "text": "Your invoice", "channel": "site"}),
        ),
    ] {
        let refused = business.send("POST", "/v1/contacts/send", Some(body)).await;
        assert_eq!(
            (refused.status, refused.code()),
            (400, "no_channel"),
            "{case}: the address is nobody's chat: {}",
            refused.body
        );
    }
    stays_quiet(&mut socket, "a send by e-mail").await;
});
