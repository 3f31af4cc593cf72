//! Evaluations: a business's questions run through an agent as its replies would be decided (the passages
//! found, then the agent's provider, with no tools: a tool would act), nothing sent and no conversation made.
//! `service` takes and answers them (`POST/GET /v1/agents/{agentId}/evaluations`); `run` is the job that
//! decides the cases one by one, storing each result as it goes, so a run that dies resumes after the last.

pub mod run;
pub mod service;

use frontdesk_api::v1::{Evaluation, EvaluationResult, EvaluationSummary};
use sea_orm::ActiveEnum;
use serde::{Deserialize, Serialize};

use crate::{store::entities::evaluations, timestamps};

/// Cases one evaluation may hold.
pub const MAX_CASES: usize = 500;

/// A case as stored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Case {
    pub question: String,
    /// `answer` or `handoff`.
    pub expect: String,
    pub answer_contains: Vec<String>,
}

/// A case's result as stored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// `answered` or `handed_off`.
    pub outcome: String,
    pub reply: String,
    pub faq_id: String,
    pub score: f64,
}

impl Outcome {
    /// Whether it is what the case expects: the outcome, and for an answer every string it must contain.
    pub fn passes(&self, case: &Case) -> bool {
        let expected = if case.expect == "answer" {
            "answered"
        } else {
            "handed_off"
        };
        let reply = self.reply.to_lowercase();
        self.outcome == expected
            && (self.outcome != "answered" || case.answer_contains.iter().all(|s| reply.contains(&s.to_lowercase())))
    }
}

/// The evaluation as the API shows it.
pub fn message(row: &evaluations::Model) -> Evaluation {
    let cases: Vec<Case> = crate::store::from_json_text(&row.cases);
    let outcomes: Vec<Outcome> = crate::store::from_json_text(&row.results);
    let results: Vec<EvaluationResult> = cases
        .iter()
        .zip(&outcomes)
        .map(|(case, outcome)| EvaluationResult {
            question: case.question.clone(),
            expect: case.expect.clone(),
            outcome: outcome.outcome.clone(),
            reply: outcome.reply.clone(),
            faq_id: outcome.faq_id.clone(),
            score: outcome.score,
            pass: outcome.passes(case),
        })
        .collect();
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let passed = results.iter().filter(|r| r.pass).count();
    let answered = results.iter().filter(|r| r.outcome == "answered").count();
    Evaluation {
        id: row.id.clone(),
        agent_id: row.agent_id.to_string(),
        status: row.status.to_value(),
        summary: Some(EvaluationSummary {
            cases: count(cases.len()),
            passed: count(passed),
            failed: count(results.len() - passed),
            answered: count(answered),
            handed_off: count(results.len() - answered),
        }),
        cases: results,
        error: row.error.clone(),
        created_at: Some(timestamps::to_proto(row.created_at)),
        completed_at: row.completed_at.map(timestamps::to_proto),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_passes_on_its_outcome_and_the_strings_an_answer_holds() {
        let case = Case {
            question: "When do you open?".into(),
            expect: "answer".into(),
            answer_contains: vec!["NINE".into()],
        };
        let answered = |reply: &str| Outcome {
            outcome: "answered".into(),
            reply: reply.into(),
            ..Outcome::default()
        };
        assert!(answered("From nine to five.").passes(&case));
        assert!(!answered("From ten to six.").passes(&case));
        let handed = Outcome {
            outcome: "handed_off".into(),
            ..Outcome::default()
        };
        assert!(!handed.passes(&case));
        let handoff = Case {
            expect: "handoff".into(),
            ..case
        };
        assert!(handed.passes(&handoff));
    }
}
