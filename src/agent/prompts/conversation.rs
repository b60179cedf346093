//! A follow-up's messages (decision 0011): the earlier turns as the conversation they
//! were, each user message as it was sent and the reply that answered it as the model
//! wrote it ([`conversation_messages`]), then the follow-up's own message
//! ([`follow_up_message`]: the latest result's shape, never rows, and the question), and
//! what a follow-up is asked to write wherever the strategy says it.

use super::{closed_reply, question_message, sql_in_reply_form};
use crate::agent::conversation::{Context, Turn, TurnOutcome};
use crate::agent::strategy::{ReplyFormat, Strategy};
use crate::llm::Message;

/// What a follow-up is asked to write, said in the system prompt (`follow=system`):
/// the message's own sentence in [`follow_up_message`] says the same of "the follow-up"
/// the message holds, so this one names what it applies to.
pub(super) const FOLLOW_UP_RULE: &str = "A follow-up question is read in the context of the \
     conversation before it: write one SELECT that answers it on its own, repeating every \
     filter and join of an earlier query it keeps.";

/// What a follow-up's reply opens with, asked of the model.
pub(super) fn restatement_instruction(strategy: &Strategy) -> String {
    match strategy.reply {
        ReplyFormat::Sql => format!(
            "Open the block with `{} <the follow-up as one standalone question>` on its own \
             line, then the query.",
            crate::agent::reply::UNDERSTOOD_MARKER
        ),
        ReplyFormat::Json | ReplyFormat::Field => {
            "Put the follow-up as one standalone question in \
                              \"understood_as\"."
                .to_string()
        }
    }
}

/// How the note of a conversation's older turns begins.
const FOLLOW_UP_OPENING: &str = "Earlier in this conversation";

/// What a turn's user message was, where the turn did not keep it (turns kept before
/// the message was, or that never reached the model): its question.
fn earlier_question_text(turn: &Turn) -> String {
    turn.asked
        .clone()
        .unwrap_or_else(|| question_message(&turn.question, &[]))
}

/// An earlier turn's assistant message: the reply that answered it as written, else
/// its SQL in the reply's form; for a turn no SQL answered, how it ended.
fn earlier_reply_text(strategy: &Strategy, turn: &Turn) -> String {
    match turn.outcome {
        TurnOutcome::Answered => match (&turn.reply, &turn.sql) {
            (Some(reply), _) => closed_reply(reply),
            (None, Some(sql)) => sql_in_reply_form(strategy, turn.understood_as.as_deref(), sql),
            (None, None) => "Answered.".to_string(),
        },
        TurnOutcome::Declined => "Declined; nothing ran.".to_string(),
        TurnOutcome::GaveUp => {
            "Not answered: every query tried failed, so no SQL answered it.".to_string()
        }
        TurnOutcome::Clarification => match &turn.clarify {
            Some(clarify) => format!(
                "Asked back: {} ({})",
                clarify.question,
                clarify.options.join("; ")
            ),
            None => "Asked back.".to_string(),
        },
    }
}

/// The earlier turns a follow-up continues, as the conversation they were: each turn
/// in full ([`Context::in_prompt`]) its user message as it was sent and the reply that
/// answered it as the model wrote it. The prompt of the turn before is then a prefix
/// of this one, so a server that kept it (and the reply it wrote) reads only the new
/// follow-up (decision 0011). Older turns, kept only as their standalone question,
/// open the first message.
pub fn conversation_messages(strategy: &Strategy, context: &Context) -> Vec<Message> {
    let mut older = Vec::new();
    let mut messages = Vec::new();
    for (turn, full) in context.in_prompt() {
        if !full {
            older.push(format!("- {}", turn.standalone()));
            continue;
        }
        let mut asked = earlier_question_text(turn);
        if !older.is_empty() {
            asked = format!(
                "{FOLLOW_UP_OPENING}, before the turns below, oldest first:\n{}\n\n{asked}",
                older.join("\n")
            );
            older.clear();
        }
        messages.push(Message::user(asked));
        messages.push(Message::assistant(earlier_reply_text(strategy, turn)));
    }
    messages
}

/// The user message of a follow-up, after [`conversation_messages`]: what the latest
/// answered turn returned (its columns and row count; never rows), the follow-up with
/// the assumptions the rules resolved, and what to write.
pub fn follow_up_message(
    strategy: &Strategy,
    context: &Context,
    question: &str,
    assumptions: &[String],
) -> String {
    let mut text = String::new();
    if let Some(latest) = context.turns.last() {
        if latest.outcome == TurnOutcome::Answered {
            text.push_str(&format!(
                "That query returned {}; columns: {}.\n\n",
                crate::text::counted(latest.row_count as u64, "row", "rows"),
                latest.columns.join(", ")
            ));
        }
    }
    text.push_str(&format!("Follow-up question: {question}"));
    if !assumptions.is_empty() {
        text.push_str("\nAssume:");
        for assumption in assumptions {
            text.push_str(&format!("\n- {assumption}"));
        }
    }
    if !strategy.follow_up_rule_said_in_system() {
        text.push_str(&format!(
            "\n\nWrite one SELECT that answers the follow-up on its own, read in the context \
             of the conversation above: repeat every filter and join of an earlier query it \
             keeps. {}",
            restatement_instruction(strategy)
        ));
    }
    text
}
