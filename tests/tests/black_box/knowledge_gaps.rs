//! Knowledge gaps end to end with the embedding model, on SQLite and PostgreSQL: questions a clinic's agent
//! handed off are grouped by meaning with counts, examples and conversations; another account sees none;
//! resolving a gap adds the FAQ that the next such question is answered from at once, and dismissing one
//! removes it.

use frontdesk_tests::{
    Db, admin, on_both_databases,
    platform::{Platform, assert_invalid, assert_not_found},
    sms::{self, Desk},
    twilio::{FakeTwilio, new_message_sid},
};
use serde_json::json;

const HANDOFF: &str = "Thanks for your message. A member of our team will get back to you shortly.";

on_both_databases!(
    handed_off_questions_become_gaps_that_a_faq_closes,
    |db: Db| async move {
        let twilio = FakeTwilio::start().await;
        let server = sms::start_with_model(&db, &twilio).await;
        let desk = Desk::open(
            &server,
            &twilio,
            json!({"name": "Clinic desk"}),
            (
                "Where is the clinic located?",
                "The clinic is at 12 MG Road, Pune, next to the metro station.",
            ),
        )
        .await;
        let platform = &desk.platform;
        platform
            .faq(
                &desk.agent,
                "What are your opening hours?",
                "We are open 9am to 6pm, Monday to Saturday.",
            )
            .await;
        let asked = [
            ("+15559300001", "Can I bring my dog to the clinic?"),
            ("+15559300002", "Are dogs allowed in the clinic?"),
            ("+15559300003", "Can my dog come with me to the clinic?"),
            ("+15559300004", "Do you accept credit cards?"),
        ];
        for (phone, question) in asked {
            desk.channel.inbound(&new_message_sid(), phone, question).await;
            assert_eq!(twilio.wait_for_sent(phone, 1).await[0].body(), HANDOFF, "{question}");
        }
        admin::quiesce(&server).await;

        let path = format!("/v1/agents/{}/knowledge-gaps", desk.agent);
        let gaps = platform.get(&path).await["gaps"].clone();
        let gaps = gaps.as_array().unwrap();
        assert_eq!(gaps.len(), 2, "{gaps:#?}");
        assert_eq!(
            (gaps[0]["count"].as_i64(), gaps[1]["count"].as_i64()),
            (Some(3), Some(1))
        );
        let dogs = &gaps[0];
        assert!(dogs["id"].as_str().unwrap().starts_with("gap_"));
        assert!(dogs["question"].as_str().unwrap().contains("dog"), "{dogs}");
        let mut examples: Vec<&str> = dogs["examples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        examples.sort_unstable();
        let mut expected: Vec<&str> = asked[..3].iter().map(|(_, q)| *q).collect();
        expected.sort_unstable();
        assert_eq!(examples, expected);
        assert_eq!(dogs["conversation_ids"].as_array().unwrap().len(), 3);
        assert!(dogs["first_asked_at"].is_string() && dogs["last_asked_at"].is_string());
        assert_eq!(gaps[1]["examples"], json!(["Do you accept credit cards?"]));

        // The day's summary names the largest gaps.
        let daily = platform.get("/v1/summaries/daily").await;
        let attention = daily["daily_summary"]["sections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["title"] == "Needs attention")
            .unwrap()["markdown"]
            .as_str()
            .unwrap()
            .to_owned();
        let named = format!("\"{}\" (**3** times)", dogs["question"].as_str().unwrap());
        assert!(attention.contains(&named), "{attention}");

        // Another account sees neither the agent nor its gaps.
        let other = Platform::new(&server).await;
        assert_not_found(&other.send("GET", &path, None).await, "another account's agent");
        let dog_gap = dogs["id"].as_str().unwrap().to_owned();
        let resolve = format!("{path}/{dog_gap}/resolve");
        let answer = json!({"answer": "Yes, well-behaved dogs on a leash are welcome."});
        assert_not_found(
            &other.send("POST", &resolve, Some(answer.clone())).await,
            "another account's gap",
        );
        assert_invalid(
            &platform.send("GET", &format!("{path}?days=91"), None).await,
            "days",
            "91 days",
        );
        assert_invalid(
            &platform.send("POST", &resolve, Some(json!({}))).await,
            "answer",
            "no answer",
        );

        // Resolved: the FAQ is the agent's, the gap leaves the list, and the next such question is answered.
        let faq = platform.ok("POST", &resolve, Some(answer)).await["faq"].clone();
        assert_eq!(faq["agent_id"], desk.agent.as_str());
        assert_eq!(faq["question"], dogs["question"]);
        let left = platform.get(&path).await["gaps"].clone();
        assert_eq!(left.as_array().unwrap().len(), 1);
        assert_not_found(
            &platform.send("POST", &resolve, Some(json!({"answer": "Again"}))).await,
            "resolved twice",
        );
        desk.channel
            .inbound(&new_message_sid(), "+15559300005", "Are dogs welcome at the clinic?")
            .await;
        assert_eq!(
            twilio.wait_for_sent("+15559300005", 1).await[0].body(),
            "Yes, well-behaved dogs on a leash are welcome."
        );

        // Dismissed: gone without a FAQ.
        let cards = left[0]["id"].as_str().unwrap();
        let dismissed = platform
            .ok("POST", &format!("{path}/{cards}/dismiss"), Some(json!({})))
            .await;
        assert_eq!(dismissed["gap"]["id"], cards);
        assert_eq!(platform.get(&path).await["gaps"], json!([]));
    }
);
