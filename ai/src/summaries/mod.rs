//! Summaries: the recap of a contact's conversation, for a person who was not in it (`recap`, from the
//! conversation's `facts`), and the account's day for its owner (`daily` counts from indexes, `sections`
//! writes them as markdown, `day` is the date in a time zone). `service` is the API. docs/summaries.md
//! describes the behaviour.

pub mod daily;
pub mod day;
mod facts;
mod recap;
mod sections;
pub mod service;
