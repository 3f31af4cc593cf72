use chrono::{DateTime, Utc};

use super::*;

fn at(minute: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + minute * 60, 0).unwrap_or_default()
}

fn turn(speaker: Speaker, text: &str) -> Turn {
    Turn {
        speaker,
        text: text.to_owned(),
    }
}

fn facts(language: &str, digest: Digest) -> Facts {
    Facts {
        language: language.to_owned(),
        channel: "sms".into(),
        closed: true,
        started_at: at(0),
        last_message_at: at(30),
        digest,
        appointments: Vec::new(),
        deals: Vec::new(),
        handoffs: Vec::new(),
        open_tasks: Vec::new(),
        awaiting_answer: false,
    }
}

#[test]
fn questions_in_a_row_are_one_and_greetings_none() {
    let mut digest = Digest::default();
    for (speaker, text) in [
        (Speaker::Business, "Our spring sale starts today!"),
        (Speaker::Contact, "Hi"),
        (Speaker::Contact, "Do you deliver?"),
        (Speaker::Contact, "To Pune?"),
        (Speaker::Agent, "Yes, across India."),
        (Speaker::Business, "Within 3 days."),
        (Speaker::Contact, "Thanks!"),
        (Speaker::Contact, "How much is shipping?"),
    ] {
        digest.push(turn(speaker, text));
    }
    assert_eq!(digest.messages, 8);
    assert_eq!(
        Vec::from(digest.exchanges.clone()),
        vec![
            Exchange {
                asked: "Do you deliver? To Pune?".into(),
                answered: "Yes, across India. Within 3 days.".into()
            },
            Exchange {
                asked: "How much is shipping?".into(),
                answered: String::new()
            },
        ]
    );
}

#[test]
fn a_long_conversation_keeps_its_latest_exchanges_and_end() {
    let mut digest = Digest::default();
    let long = "x".repeat(5_000);
    for n in 0..1_000 {
        digest.push(turn(Speaker::Contact, &format!("Question {n}? {long}")));
        digest.push(turn(Speaker::Agent, &format!("Answer {n}.")));
    }
    assert_eq!(digest.messages, 2_000);
    assert_eq!(digest.exchanges.len(), MAX_EXCHANGES);
    assert_eq!(digest.earlier_exchanges, 1_000 - MAX_EXCHANGES as u64);
    assert!(digest.exchanges[0].asked.starts_with("Question 992?"));
    assert!(digest.exchanges[0].asked.chars().count() <= QUOTE_CHARS + 1);
    let kept: usize = digest.transcript.iter().map(|t| t.text.chars().count()).sum();
    assert!(kept <= TRANSCRIPT_CHARS, "{kept}");
    assert_eq!(digest.transcript.back().map(|t| t.text.as_str()), Some("Answer 999."));
}

#[test]
fn the_extractive_recap_lists_every_fact_under_its_label() {
    let mut digest = Digest::default();
    digest.push(turn(Speaker::Contact, "Can I book a haircut on Friday?"));
    digest.push(turn(Speaker::Agent, "Booked for Friday at 10."));
    digest.push(turn(Speaker::Contact, "Can I talk to the owner?"));
    let mut facts = facts("en", digest);
    facts.appointments.push(Appointment {
        start_time: at(60 * 24),
        name: "Ana".into(),
        notes: "haircut".into(),
    });
    facts.deals.push(Deal {
        title: "Wedding package".into(),
        value: 450.0,
        stage: "new".into(),
        status: "open".into(),
    });
    facts.handoffs.push(Handoff {
        reason: "asked_for_person".into(),
        at: at(20),
        done: false,
    });
    facts.open_tasks.push("Call Ana back".into());
    facts.awaiting_answer = true;
    let recap = extractive(&facts);
    assert_eq!(
        recap,
        "Conversation on sms (closed): 3 messages, 2027-01-15 08:00 UTC to 2027-01-15 08:30 UTC.\n\n\
         The contact asked:\n\
         - \"Can I book a haircut on Friday?\"\n  Answer: \"Booked for Friday at 10.\"\n\
         - \"Can I talk to the owner?\"\n  No answer.\n\n\
         Appointments:\n- 2027-01-16 08:00 UTC, Ana, haircut\n\n\
         Deals:\n- Wedding package (450, new, open)\n\n\
         Handed to a person:\n- asked_for_person (2027-01-15 08:20 UTC, waiting for a person)\n\n\
         Still open:\n- Call Ana back\n- The contact's last message has no answer yet."
    );
}

#[test]
fn the_labels_follow_the_agents_language() {
    let mut digest = Digest::default();
    digest.push(turn(Speaker::Contact, "¿Abren el domingo?"));
    let recap = extractive(&facts("es-MX", digest));
    assert!(
        recap.starts_with("Conversación en sms (cerrada): 1 mensajes"),
        "{recap}"
    );
    assert!(
        recap.contains("El contacto preguntó:\n- \"¿Abren el domingo?\"\n  Sin respuesta."),
        "{recap}"
    );
    let none = extractive(&facts("ja", Digest::default()));
    assert!(none.starts_with("Conversation on sms (closed): 0 messages"), "{none}");
}
