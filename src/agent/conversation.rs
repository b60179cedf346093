//! A question in a conversation: the record of one turn (what was asked, how it was
//! understood, the SQL that answered it, its result's columns and row count, how it
//! ended) and the earlier turns a follow-up is asked with ([`Context`]). What the model
//! reads of them is written in [`super::prompts`]; what the rules read of them in
//! [`super::ambiguity::check_in_context`]. Where conversations are kept between
//! questions is not the agent's concern (`crate::conversation`).
//!
//! The earlier turns a prompt carries are bounded: the latest [`TURNS_IN_FULL`] in full
//! (the message each was asked with and the reply that answered it, as sent and as
//! written; the latest one's columns and row count with the follow-up); up to
//! [`TURNS_IN_PROMPT`] in all, the older ones summarised as their standalone question;
//! anything older is dropped (decision 0011). Rows are never carried: the answer showed
//! them to the user, the model needs only their shape.

use serde::{Deserialize, Serialize};

use super::{AgentResult, Decision};

/// The latest earlier turns a follow-up's prompt shows in full (the message each was
/// asked with and the reply that answered it).
pub const TURNS_IN_FULL: usize = 3;

/// The most earlier turns a follow-up's prompt carries: the ones before the latest
/// [`TURNS_IN_FULL`] as their standalone question alone. A store keeps no more.
pub const TURNS_IN_PROMPT: usize = 6;

/// The longest SQL a turn keeps; longer SQL is cut (a prompt never grows past it).
pub const TURN_SQL_CHARS: usize = 2_000;

/// The longest user message or reply, in bytes, a turn keeps for the next prompt; a
/// longer one is not kept at all (the prompt shows the question, or the SQL, instead),
/// so three turns in full add at most a few thousand tokens to a prompt.
pub const TURN_MESSAGE_BYTES: usize = 4_000;

/// The most result columns a turn keeps by name.
pub const TURN_COLUMNS: usize = 24;

/// How an earlier turn ended, as the conversation remembers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnOutcome {
    /// Rows came back (or honestly none): its SQL answered the question.
    Answered,
    /// Declined (a write, a restricted column, data the tables do not hold): nothing ran.
    Declined,
    /// Every attempt failed: the question stands, no SQL answered it.
    GaveUp,
    /// askdb asked back: the next turn may be the answer to its question.
    Clarification,
}

impl TurnOutcome {
    pub const ALL: [TurnOutcome; 4] = [
        TurnOutcome::Answered,
        TurnOutcome::Declined,
        TurnOutcome::GaveUp,
        TurnOutcome::Clarification,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TurnOutcome::Answered => "answered",
            TurnOutcome::Declined => "declined",
            TurnOutcome::GaveUp => "gave_up",
            TurnOutcome::Clarification => "clarification",
        }
    }

    pub fn of(decision: Decision) -> TurnOutcome {
        match decision {
            Decision::Answer => TurnOutcome::Answered,
            Decision::Decline => TurnOutcome::Declined,
            Decision::GiveUp => TurnOutcome::GaveUp,
            Decision::Clarify => TurnOutcome::Clarification,
        }
    }
}

impl std::fmt::Display for TurnOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One turn as the conversation keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// 1 for the conversation's first question.
    pub number: u32,
    /// The question as the user asked it.
    pub question: String,
    /// The question as one standalone question, when it was a follow-up.
    pub understood_as: Option<String>,
    /// The SQL that answered it (answered turns only).
    pub sql: Option<String>,
    pub columns: Vec<String>,
    pub row_count: usize,
    pub outcome: TurnOutcome,
    /// Why it was declined or given up.
    pub reason: Option<String>,
    /// What askdb asked back, and the options it offered (clarifications only).
    pub clarify: Option<super::ClarifyRequest>,
    /// The user message the question was asked with, as sent (not kept past
    /// [`TURN_MESSAGE_BYTES`]), so the next follow-up's prompt repeats it byte for byte
    /// and a server's prompt cache still holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<String>,
    /// The reply that answered, as the model wrote it (answered turns only; not kept
    /// past [`TURN_MESSAGE_BYTES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
}

impl Turn {
    /// The turn a result makes, bounded: SQL cut to [`TURN_SQL_CHARS`], at most
    /// [`TURN_COLUMNS`] column names, no rows.
    pub fn from_result(number: u32, result: &AgentResult) -> Turn {
        let outcome = TurnOutcome::of(result.decision);
        Turn {
            number,
            question: result.question.clone(),
            understood_as: result.understood_as.clone(),
            sql: match outcome {
                TurnOutcome::Answered => result
                    .sql
                    .as_deref()
                    .map(|sql| crate::text::cut_text(sql, TURN_SQL_CHARS)),
                _ => None,
            },
            columns: result.columns.iter().take(TURN_COLUMNS).cloned().collect(),
            row_count: result.row_count,
            outcome,
            reason: result
                .reason
                .as_deref()
                .map(|reason| crate::text::cut_text(reason, 300)),
            clarify: result.clarify.clone(),
            asked: result
                .asked
                .clone()
                .filter(|text| text.len() <= TURN_MESSAGE_BYTES),
            reply: match outcome {
                TurnOutcome::Answered => result
                    .answered_reply
                    .clone()
                    .filter(|text| text.len() <= TURN_MESSAGE_BYTES),
                _ => None,
            },
        }
    }

    /// A turn whose question came to no decision (the model could not be asked): kept as
    /// not answered, so a conversation can go on past it.
    pub fn unanswered(number: u32, question: &str) -> Turn {
        Turn {
            number,
            question: question.to_string(),
            understood_as: None,
            sql: None,
            columns: Vec::new(),
            row_count: 0,
            outcome: TurnOutcome::GaveUp,
            reason: None,
            clarify: None,
            asked: None,
            reply: None,
        }
    }

    /// The turn as one standalone question: how it was understood, else as asked.
    pub fn standalone(&self) -> &str {
        self.understood_as.as_deref().unwrap_or(&self.question)
    }
}

/// The earlier turns of a conversation a question continues, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Context {
    pub turns: Vec<Turn>,
}

impl Context {
    pub fn new(turns: Vec<Turn>) -> Context {
        Context { turns }
    }

    /// Whether the question is a follow-up (some earlier turn exists).
    pub fn is_follow_up(&self) -> bool {
        !self.turns.is_empty()
    }

    /// The latest earlier turn.
    pub fn previous(&self) -> Option<&Turn> {
        self.turns.last()
    }

    /// The turns a prompt carries, oldest first, each with whether it is shown in full.
    pub fn in_prompt(&self) -> Vec<(&Turn, bool)> {
        let kept = self.turns.len().saturating_sub(TURNS_IN_PROMPT);
        let full_from = self.turns.len().saturating_sub(TURNS_IN_FULL);
        self.turns
            .iter()
            .enumerate()
            .skip(kept)
            .map(|(index, turn)| (turn, index >= full_from))
            .collect()
    }

    /// The standalone questions of the turns a prompt carries, for the rules and schema
    /// linking to read the follow-up in their context.
    pub fn earlier_questions(&self) -> Vec<&str> {
        self.in_prompt()
            .into_iter()
            .map(|(turn, _)| turn.standalone())
            .collect()
    }

    /// How a question reads when it answers the clarification the previous turn asked:
    /// the earlier question with the option chosen, as the page sends a clicked option
    /// (`question (option)`). None when the previous turn asked nothing, or the reply
    /// names none of its options (then it is a question of its own).
    pub fn clarified(&self, reply: &str) -> Option<String> {
        let previous = self.previous()?;
        let request = previous.clarify.as_ref()?;
        let said = reply
            .trim()
            .trim_end_matches(['.', '?', '!'])
            .to_lowercase();
        if said.is_empty() {
            return None;
        }
        let option = request.options.iter().find(|option| {
            let option = option.to_lowercase();
            option == said || option.contains(&said) && said.len() >= 4 || said.contains(&option)
        })?;
        Some(format!("{} ({option})", previous.question))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(number: u32, question: &str, outcome: TurnOutcome) -> Turn {
        Turn {
            number,
            question: question.to_string(),
            understood_as: None,
            sql: None,
            columns: Vec::new(),
            row_count: 0,
            outcome,
            reason: None,
            clarify: None,
            asked: None,
            reply: None,
        }
    }

    #[test]
    fn a_prompt_carries_the_latest_turns_in_full_and_summarises_the_older_ones() {
        let turns: Vec<Turn> = (1..=9)
            .map(|n| turn(n, &format!("q{n}"), TurnOutcome::Answered))
            .collect();
        let context = Context::new(turns);
        let shown = context.in_prompt();
        assert_eq!(shown.len(), TURNS_IN_PROMPT);
        assert_eq!(shown[0].0.number, 4, "turns 1 to 3 are dropped");
        let full: Vec<u32> = shown
            .iter()
            .filter(|(_, full)| *full)
            .map(|(turn, _)| turn.number)
            .collect();
        assert_eq!(full, vec![7, 8, 9]);
    }

    #[test]
    fn a_reply_naming_an_option_answers_the_clarification() {
        let mut asked = turn(1, "Who are our best customers?", TurnOutcome::Clarification);
        asked.clarify = Some(crate::agent::ClarifyRequest {
            question: "What should \"best\" be measured by?".into(),
            options: vec![
                "highest total billed amount".into(),
                "most bills or orders".into(),
            ],
        });
        let context = Context::new(vec![asked]);
        assert_eq!(
            context.clarified("Highest total billed amount.").as_deref(),
            Some("Who are our best customers? (highest total billed amount)")
        );
        assert_eq!(context.clarified("How many bills are there?"), None);
        let answered = Context::new(vec![turn(1, "q", TurnOutcome::Answered)]);
        assert_eq!(answered.clarified("most bills or orders"), None);
    }

    #[test]
    fn a_turn_keeps_no_rows_and_bounded_sql() {
        let mut result = AgentResult::for_tests("How many?", Decision::Answer);
        result.sql = Some("SELECT ".to_string() + &"x, ".repeat(2_000));
        result.columns = (0..40).map(|n| format!("c{n}")).collect();
        let turn = Turn::from_result(2, &result);
        assert!(turn
            .sql
            .as_deref()
            .is_some_and(|sql| sql.chars().count() <= TURN_SQL_CHARS + 1));
        assert_eq!(turn.columns.len(), TURN_COLUMNS);
        assert_eq!(turn.outcome, TurnOutcome::Answered);
        result.decision = Decision::GiveUp;
        assert_eq!(
            Turn::from_result(3, &result).sql,
            None,
            "only an answer's SQL is kept"
        );
    }

    #[test]
    fn a_turn_keeps_its_message_and_reply_only_within_the_bound() {
        let mut result = AgentResult::for_tests("How many?", Decision::Answer);
        result.asked = Some("Question: How many?".to_string());
        result.answered_reply = Some("```sql\nSELECT 1\n```".to_string());
        let turn = Turn::from_result(1, &result);
        assert_eq!(turn.asked.as_deref(), Some("Question: How many?"));
        assert_eq!(turn.reply.as_deref(), Some("```sql\nSELECT 1\n```"));
        result.asked = Some("x".repeat(TURN_MESSAGE_BYTES + 1));
        result.answered_reply = Some("y".repeat(TURN_MESSAGE_BYTES + 1));
        let long = Turn::from_result(1, &result);
        assert_eq!((long.asked, long.reply), (None, None), "too long: not kept");
        result.answered_reply = Some("```sql\nSELECT 1\n```".to_string());
        result.decision = Decision::Decline;
        assert_eq!(
            Turn::from_result(1, &result).reply,
            None,
            "only an answer's reply"
        );
    }

    #[test]
    fn a_turn_stored_before_messages_were_kept_still_loads() {
        let stored = r#"{"number": 1, "question": "How many?", "understood_as": null,
            "sql": "SELECT 1", "columns": ["n"], "row_count": 1, "outcome": "answered",
            "reason": null, "clarify": null}"#;
        let turn: Turn = serde_json::from_str(stored).expect("an older turn loads");
        assert_eq!((turn.asked, turn.reply), (None, None));
        assert_eq!(turn.sql.as_deref(), Some("SELECT 1"));
    }
}
