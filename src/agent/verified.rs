//! The verified-examples node, between the rules and the schema selection: the
//! database's examples in use (each checked again against today's gate and schema by
//! `examples::usable`), ranked for the question by `examples::retrieval::rank`. The same
//! question confirmed before is answered by running its verified SQL again through the
//! gate, with no model call; like questions go to the model with their examples as
//! worked examples after the schema. A store that cannot be read costs the question its
//! examples, never its answer.

use super::events::{AgentEvent, ExampleRole, UsedExample};
use super::state::{Node, State};
use super::{Agent, Mode};
use crate::examples::retrieval::{self, Ranked, MIN_PROMPT_SCORE};
use crate::gate::QueryOutcome;

fn used(ranked: &Ranked<'_>, role: ExampleRole) -> UsedExample {
    UsedExample {
        id: ranked.example.id,
        question: ranked.example.question.clone(),
        score: ranked.score,
        role,
    }
}

impl Agent {
    pub(super) async fn find_examples(&self, state: &mut State<'_>) -> Node {
        let Some(store) = &self.examples else {
            return Node::SelectSchema;
        };
        // The reference prompt has nothing of askdb's own, examples included.
        if state.mode == Mode::Plain {
            return Node::SelectSchema;
        }
        let started_ms = state.ms();
        let usable = match crate::examples::usable(&self.gate, store.as_ref()).await {
            Ok(usable) => usable,
            Err(error) => {
                state.note("examples", format!("no verified examples: {error}"));
                return Node::SelectSchema;
            }
        };
        // A database no one has verified an example of has no step to show.
        if usable.is_empty() {
            return Node::SelectSchema;
        }
        let ranked = retrieval::rank(
            &state.question,
            self.gate.schema(),
            &usable,
            self.strategy.examples_shown,
        );
        // A follow-up's words mean what its conversation makes them mean ("and in
        // 2024?"): the same words confirmed in another context are not the same question.
        let rerun = ranked
            .first()
            .filter(|best| best.same_question && !state.context.is_follow_up())
            .cloned();
        if let Some(best) = rerun {
            let outcome = self.gate.run_query(&best.example.sql).await;
            state.emit(AgentEvent::Examples {
                started_ms,
                elapsed_ms: state.ms() - started_ms,
                available: usable.len(),
                used: vec![used(&best, ExampleRole::Rerun)],
            });
            match outcome {
                QueryOutcome::Rows(result) => {
                    state.note(
                        "examples",
                        format!(
                            "the same question was verified as example {} by {}: its SQL ran again",
                            best.example.id, best.example.verified_by
                        ),
                    );
                    state.emit(AgentEvent::Executed {
                        started_ms,
                        elapsed_ms: result.elapsed_ms,
                        candidate: 0,
                        sql: result.sql.clone(),
                        rows: Some(result.row_count),
                        error_type: None,
                        error: None,
                        sqlstate: None,
                        hint: None,
                    });
                    state.used_examples = vec![used(&best, ExampleRole::Rerun)];
                    state.answered_from_example = Some(best.example.id);
                    return Node::Answer(result);
                }
                QueryOutcome::Failed(error) => {
                    // Checked a moment ago, so this is the data or the database today:
                    // the model answers, with the example to follow.
                    state.note(
                        "examples",
                        format!(
                            "example {}'s SQL failed on today's data ({}): asking the model",
                            best.example.id, error.message
                        ),
                    );
                }
            }
        }
        let shown: Vec<&Ranked<'_>> = ranked
            .iter()
            .filter(|ranked| ranked.score >= MIN_PROMPT_SCORE)
            .collect();
        state.used_examples = shown
            .iter()
            .map(|ranked| used(ranked, ExampleRole::Prompt))
            .collect();
        state.worked_examples = shown.iter().map(|ranked| ranked.example.clone()).collect();
        state.note(
            "examples",
            format!(
                "{} of {} verified example(s) shown to the model",
                shown.len(),
                usable.len()
            ),
        );
        state.emit(AgentEvent::Examples {
            started_ms,
            elapsed_ms: state.ms() - started_ms,
            available: usable.len(),
            used: state.used_examples.clone(),
        });
        Node::SelectSchema
    }
}

#[cfg(test)]
#[path = "verified_tests.rs"]
mod tests;
