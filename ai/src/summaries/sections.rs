//! The daily summary's markdown sections, written from what `daily` read: an overview of the counts, what
//! needs a person, the appointments booked and the deals created. Times are the day's zone's.

use std::fmt::Write;

use frontdesk_api::v1::DailyStats;

use super::day::Day;
use crate::{
    broadcasts::stats::Counts,
    store::entities::{appointments, deals, tasks},
};

/// A broadcast that started going out that day (its name), with its counts now.
pub type Broadcast = (String, Counts);

/// `n` and the noun, singular or plural.
fn counted(n: i64, one: &str, many: &str) -> String {
    format!("**{n}** {}", if n == 1 { one } else { many })
}

pub fn overview(s: &DailyStats, broadcasts: &[Broadcast]) -> String {
    let mut out = counts(s);
    if !broadcasts.is_empty() {
        let _ = write!(
            out,
            "\n\n{} went out:",
            counted(broadcasts.len() as i64, "broadcast", "broadcasts")
        );
        for (name, c) in broadcasts {
            let _ = write!(
                out,
                "\n- {name}: {} sent of {}, {} delivered, {} read, {} failed, {} replied",
                c.sent, c.total, c.delivered, c.read, c.failed, c.replied
            );
        }
    }
    out
}

fn counts(s: &DailyStats) -> String {
    format!(
        "{} started, {} closed. {} received, {} sent, {} failed. The AI agents wrote {} and handed {} to a \
         person. {}, {} booked, {} created. {} credits used.",
        counted(s.conversations_started, "conversation", "conversations"),
        s.conversations_closed,
        counted(s.messages_received, "message", "messages"),
        s.messages_sent,
        s.messages_failed,
        counted(s.ai_replies, "reply", "replies"),
        counted(s.handoffs, "conversation", "conversations"),
        counted(s.new_contacts, "new contact", "new contacts"),
        counted(s.appointments_booked, "appointment", "appointments"),
        counted(s.deals_created, "deal", "deals"),
        s.credits_used,
    )
}

/// Conversations waiting for a person (`waiting` in all; `listed`, the newest of their open handoff tasks),
/// overdue tasks, the day's failed messages, and the questions the agents most often could not answer that
/// day (`gaps`: a knowledge gap's question and its count).
pub fn attention(
    s: &DailyStats,
    listed: &[tasks::Model],
    (waiting, overdue): (i64, i64),
    gaps: &[(String, i64)],
    broadcasts: &[Broadcast],
    day: &Day,
) -> String {
    let mut out = String::new();
    let replied: i64 = broadcasts.iter().map(|(_, c)| c.replied).sum();
    if replied > 0 {
        let _ = writeln!(
            out,
            "- {} replied to the day's broadcasts (their agents answered; read the conversations to follow up):",
            counted(replied, "person", "people")
        );
        for (name, c) in broadcasts.iter().filter(|(_, c)| c.replied > 0) {
            let _ = writeln!(out, "  - {name}: {}", c.replied);
        }
    }
    if waiting > 0 {
        let _ = writeln!(
            out,
            "- {} waiting for a person:",
            counted(waiting, "conversation", "conversations")
        );
        for task in listed {
            let since = task.created_at.with_timezone(&day.tz).format("%Y-%m-%d %H:%M");
            let _ = writeln!(out, "  - {} (since {since})", task.title);
        }
        if waiting > listed.len() as i64 {
            let _ = writeln!(out, "  - and {} more", waiting - listed.len() as i64);
        }
    }
    if overdue > 0 {
        let _ = writeln!(out, "- {} past their due time.", counted(overdue, "task", "tasks"));
    }
    if s.messages_failed > 0 {
        let _ = writeln!(
            out,
            "- {} could not be delivered.",
            counted(s.messages_failed, "message", "messages")
        );
    }
    if !gaps.is_empty() {
        let _ = writeln!(out, "- Questions the agents could not answer (knowledge gaps):");
        for (question, count) in gaps {
            let _ = writeln!(out, "  - \"{question}\" ({})", counted(*count, "time", "times"));
        }
    }
    if out.is_empty() {
        out.push_str("Nothing needs attention.");
    }
    out.trim_end().to_owned()
}

/// The appointments booked that day (`booked`, the first of `total`), by when they were booked.
pub fn appointments(booked: &[appointments::Model], total: i64, day: &Day) -> String {
    if booked.is_empty() {
        return "No appointments booked.".to_owned();
    }
    let mut out = String::new();
    for a in booked {
        let at = a.start_time.with_timezone(&day.tz).format("%Y-%m-%d %H:%M");
        let _ = write!(out, "- {at}");
        for extra in [&a.name, &a.email, &a.notes] {
            if !extra.trim().is_empty() {
                let _ = write!(out, ", {}", extra.trim());
            }
        }
        out.push('\n');
    }
    more(&mut out, total, booked.len());
    out.trim_end().to_owned()
}

/// The deals created that day (`created`, the newest of `total`).
pub fn deals(created: &[deals::Model], total: i64) -> String {
    if created.is_empty() {
        return "No deals created.".to_owned();
    }
    let mut out = String::new();
    for d in created {
        let _ = writeln!(out, "- {}: {} ({}, {})", d.title, d.value, d.stage, d.source);
    }
    more(&mut out, total, created.len());
    out.trim_end().to_owned()
}

fn more(out: &mut String, total: i64, listed: usize) {
    if total > listed as i64 {
        let _ = writeln!(out, "- and {} more", total - listed as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overview_reads_every_count() {
        let stats = DailyStats {
            conversations_started: 1,
            conversations_closed: 2,
            messages_received: 3,
            messages_sent: 4,
            new_contacts: 5,
            ai_replies: 6,
            handoffs: 7,
            appointments_booked: 8,
            deals_created: 9,
            messages_failed: 10,
            credits_used: 1.25,
        };
        assert_eq!(
            overview(&stats, &[]),
            "**1** conversation started, 2 closed. **3** messages received, 4 sent, 10 failed. The AI agents \
             wrote **6** replies and handed **7** conversations to a person. **5** new contacts, **8** \
             appointments booked, **9** deals created. 1.25 credits used."
        );
    }

    #[test]
    fn the_days_broadcasts_are_counted_and_their_replies_need_attention() {
        let offer = Counts {
            total: 3,
            sent: 2,
            delivered: 2,
            read: 1,
            failed: 1,
            replied: 2,
        };
        let quiet = Counts {
            total: 1,
            sent: 1,
            ..Counts::default()
        };
        let sent = [("Diwali offer".to_owned(), offer), ("Recall".to_owned(), quiet)];
        let overview = overview(&DailyStats::default(), &sent);
        assert!(
            overview.ends_with(
                "**2** broadcasts went out:\n- Diwali offer: 2 sent of 3, 2 delivered, 1 read, 1 failed, 2 replied\n\
                 - Recall: 1 sent of 1, 0 delivered, 0 read, 0 failed, 0 replied"
            ),
            "{overview}"
        );
        let day = Day::parse("2026-11-20", "UTC", "2026-11-27T00:00:00Z".parse().unwrap()).unwrap();
        let attention = attention(&DailyStats::default(), &[], (0, 0), &[], &sent, &day);
        assert_eq!(
            attention,
            "- **2** people replied to the day's broadcasts (their agents answered; read the conversations to \
             follow up):\n  - Diwali offer: 2"
        );
    }
}
