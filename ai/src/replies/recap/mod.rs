//! A conversation's recap, for a person who was not in it. The summary job reads the conversation once, in
//! pages, into a `Digest` (bounded however long the conversation is: the latest exchanges and the latest
//! part of the transcript), adds what came of it (appointments, deals, handoffs, open tasks) as `Facts`,
//! and asks the provider: the local one writes the facts out (`extractive`, labels in the agent's language,
//! `words`), a model writes prose from the same facts and the transcript (`remote`).

pub mod prose;
mod words;

use std::collections::VecDeque;

use chrono::{DateTime, Utc};

use super::provider::{Speaker, Turn};

/// Exchanges (a question of the contact and the answer it got) a recap lists: the latest ones.
const MAX_EXCHANGES: usize = 8;
/// The most of one question or answer a recap quotes.
const QUOTE_CHARS: usize = 300;
/// The most of the conversation's end a model reads, in characters, and of one message.
pub const TRANSCRIPT_CHARS: usize = 48_000;
const TURN_CHARS: usize = 2_000;

/// What the contact asked, and what the agent or a person answered before the contact wrote again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange {
    pub asked: String,
    pub answered: String,
}

/// The conversation's messages, read oldest first.
#[derive(Debug, Default)]
pub struct Digest {
    pub messages: u64,
    /// The latest exchanges, oldest first.
    pub exchanges: VecDeque<Exchange>,
    /// Exchanges before those.
    pub earlier_exchanges: u64,
    /// The conversation's end, oldest first, at most `TRANSCRIPT_CHARS` in all.
    pub transcript: VecDeque<Turn>,
    transcript_chars: usize,
}

impl Digest {
    pub fn push(&mut self, turn: Turn) {
        self.messages += 1;
        let text = turn.text.trim();
        if text.is_empty() {
            return;
        }
        match turn.speaker {
            Speaker::Contact => {
                let reading = super::intent::read(text);
                if !(reading.greeting_only || reading.thanks_only) {
                    self.asked(text);
                }
            }
            Speaker::Agent | Speaker::Business => self.answered(text),
        }
        let turn = Turn {
            speaker: turn.speaker,
            text: cut(text, TURN_CHARS),
        };
        self.transcript_chars += turn.text.chars().count();
        self.transcript.push_back(turn);
        while self.transcript_chars > TRANSCRIPT_CHARS {
            let Some(dropped) = self.transcript.pop_front() else {
                break;
            };
            self.transcript_chars -= dropped.text.chars().count();
        }
    }

    fn asked(&mut self, text: &str) {
        match self.exchanges.back_mut() {
            // Messages in a row are one question until something answers them.
            Some(last) if last.answered.is_empty() => append(&mut last.asked, text),
            _ => {
                self.exchanges.push_back(Exchange {
                    asked: cut(text, QUOTE_CHARS),
                    answered: String::new(),
                });
                if self.exchanges.len() > MAX_EXCHANGES {
                    self.exchanges.pop_front();
                    self.earlier_exchanges += 1;
                }
            }
        }
    }

    fn answered(&mut self, text: &str) {
        // What the business says before the contact asks anything (a broadcast's opener) answers nothing.
        if let Some(last) = self.exchanges.back_mut() {
            append(&mut last.answered, text);
        }
    }
}

/// `more` after `text`, the whole cut at `QUOTE_CHARS`.
fn append(text: &mut String, more: &str) {
    if text.chars().count() >= QUOTE_CHARS {
        return;
    }
    let joined = if text.is_empty() {
        more.to_owned()
    } else {
        format!("{text} {more}")
    };
    *text = cut(&joined, QUOTE_CHARS);
}

/// At most `max` characters of `text`, with an ellipsis where it was cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}…", text[..at].trim_end()),
    }
}

#[derive(Clone, Debug)]
pub struct Appointment {
    pub start_time: DateTime<Utc>,
    pub name: String,
    pub notes: String,
}

#[derive(Clone, Debug)]
pub struct Deal {
    pub title: String,
    pub value: f64,
    pub stage: String,
    pub status: String,
}

#[derive(Clone, Debug)]
pub struct Handoff {
    pub reason: String,
    pub at: DateTime<Utc>,
    /// A person answered, or the conversation went back to the AI.
    pub done: bool,
}

/// Everything a recap says.
#[derive(Debug)]
pub struct Facts {
    /// The agent's BCP 47 language tag: the recap's language.
    pub language: String,
    pub channel: String,
    pub closed: bool,
    pub started_at: DateTime<Utc>,
    pub last_message_at: DateTime<Utc>,
    pub digest: Digest,
    pub appointments: Vec<Appointment>,
    pub deals: Vec<Deal>,
    pub handoffs: Vec<Handoff>,
    /// Titles of the conversation's open tasks.
    pub open_tasks: Vec<String>,
    /// The contact's latest messages have no answer yet.
    pub awaiting_answer: bool,
}

fn minute(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// The recap the local provider writes: the facts, one line each, under labels in the agent's language.
pub fn extractive(facts: &Facts) -> String {
    let words = words::of(&facts.language);
    let status = if facts.closed { words.closed } else { words.open };
    let mut out = words
        .header
        .replace("{channel}", &facts.channel)
        .replace("{status}", status)
        .replace("{count}", &facts.digest.messages.to_string())
        .replace("{from}", &minute(facts.started_at))
        .replace("{to}", &minute(facts.last_message_at));
    out.push('\n');
    let digest = &facts.digest;
    if !digest.exchanges.is_empty() {
        out.push_str(&format!("\n{}\n", words.asked));
        if digest.earlier_exchanges > 0 {
            let earlier = words.earlier.replace("{count}", &digest.earlier_exchanges.to_string());
            out.push_str(&format!("- ({earlier})\n"));
        }
        for exchange in &digest.exchanges {
            out.push_str(&format!("- \"{}\"\n", exchange.asked));
            if exchange.answered.is_empty() {
                out.push_str(&format!("  {}\n", words.unanswered));
            } else {
                out.push_str(&format!("  {} \"{}\"\n", words.answer, exchange.answered));
            }
        }
    }
    let mut section = |title: &str, lines: Vec<String>| {
        if !lines.is_empty() {
            out.push_str(&format!("\n{title}\n"));
            for line in lines {
                out.push_str(&format!("- {line}\n"));
            }
        }
    };
    section(
        words.appointments,
        facts
            .appointments
            .iter()
            .map(|a| {
                let mut line = minute(a.start_time);
                for extra in [&a.name, &a.notes] {
                    if !extra.trim().is_empty() {
                        line.push_str(&format!(", {}", extra.trim()));
                    }
                }
                line
            })
            .collect(),
    );
    section(
        words.deals,
        facts
            .deals
            .iter()
            .map(|d| format!("{} ({}, {}, {})", d.title, d.value, d.stage, d.status))
            .collect(),
    );
    section(
        words.handoffs,
        facts
            .handoffs
            .iter()
            .map(|h| {
                let state = if h.done { words.done } else { words.waiting };
                format!("{} ({}, {state})", h.reason, minute(h.at))
                    .trim_start()
                    .to_owned()
            })
            .collect(),
    );
    let mut open: Vec<String> = facts.open_tasks.clone();
    if facts.awaiting_answer {
        open.push(words.awaiting.to_owned());
    }
    section(words.still_open, open);
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests;
