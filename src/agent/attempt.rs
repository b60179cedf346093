//! One generation round: the request asked of the model, its replies read, every
//! candidate run through the gate and voted on, and the rows inspected (the rule checks,
//! the empty-result diagnostic, a doubt's second look); a failure leaves with the schema
//! facts its repair is told.

use super::events::AgentEvent;
use super::failure::{self, Failure, FailureKind, NextStep, Outcome};
use super::prompts::compact_system_prompt;
use super::reply::{normalise_sql, Reply};
use super::state::{Node, Round, State, Tried};
use super::*;
use crate::gate::{ErrorType, QueryError, QueryOutcome, QueryResult};
use crate::llm::{CallLog, ModelReply, ModelRequest};

impl Agent {
    pub(super) fn request(&self, state: &State, round: Round) -> Option<ModelRequest> {
        if state.mode == Mode::Plain {
            return Some(prompts::plain_request_in_context(
                self.gate.dialect(),
                &self.plain_schema,
                &state.context.earlier_questions(),
                &state.question,
            ));
        }
        let selection = state.selection.as_ref()?;
        let strategy = self.round_strategy(state, round);
        let system = if state.compact {
            compact_system_prompt(
                &self.gate,
                &self.cards,
                &strategy,
                selection,
                &state.linking_text(),
            )
        } else {
            prompts::system_prompt_for(&self.gate, &self.cards, &strategy, selection)
        };
        let request = prompts::generation_request(
            &strategy,
            &state.question,
            system,
            prompts::conversation_messages(&self.strategy, &state.context),
            prompts::Asking {
                examples: prompts::example_exchanges(
                    &strategy,
                    &state.worked_examples,
                    state.context.is_follow_up(),
                ),
                question: self.question_text(state),
            },
            &state.repairs,
            state.understood_as.is_some(),
        );
        Some(match round {
            Round::Greedy if self.strategy.confidence_floor.is_some() => request.with_logprobs(),
            Round::Greedy => request,
            Round::Sampled => request
                .with_candidates(self.strategy.candidates)
                .with_temperature(self.strategy.temperature),
        })
    }

    /// The strategy a round is asked with: the agent's, except a first question's first
    /// greedy round under `first=` (the form its later rounds are not asked in).
    fn round_strategy(&self, state: &State, round: Round) -> Strategy {
        let first_round = round == Round::Greedy
            && state.attempts == 0
            && state.repairs.is_empty()
            && !state.context.is_follow_up();
        if first_round {
            self.strategy.for_first_round()
        } else {
            self.strategy
        }
    }

    /// The question's user message: a first question's, or a follow-up's after the
    /// conversation, with the verified examples like it first where they are a block.
    fn question_text(&self, state: &State) -> String {
        let asked = if state.context.is_follow_up() {
            prompts::follow_up_message(
                &self.strategy,
                &state.context,
                &state.question,
                &state.assumptions,
            )
        } else {
            prompts::question_message(&state.question, &state.assumptions)
        };
        prompts::question_turn(
            &self.strategy,
            asked,
            &state.worked_examples,
            state.context.is_follow_up(),
        )
    }

    pub(super) async fn call(
        &self,
        state: &State<'_>,
        request: &ModelRequest,
        log: &CallLog,
    ) -> Result<ModelReply, AgentError> {
        let started_ms = state.ms();
        let reply = self.client.call(request, log).await?;
        let truncated = u32::from(reply.truncated)
            + reply
                .alternatives
                .iter()
                .map(|alternative| u32::from(alternative.truncated))
                .sum::<u32>();
        state.emit(AgentEvent::ModelCall {
            started_ms,
            elapsed_ms: state.ms() - started_ms,
            purpose: request.purpose,
            model: reply.model.clone(),
            input_tokens: reply.input_tokens,
            output_tokens: reply.output_tokens,
            cost_usd: reply.cost_usd,
            candidates: request.candidates,
            truncated,
            prompt: request
                .messages
                .iter()
                .map(|message| message.content.clone())
                .collect(),
            replies: std::iter::once(reply.text.clone())
                .chain(
                    reply
                        .alternatives
                        .iter()
                        .map(|alternative| alternative.text.clone()),
                )
                .collect(),
        });
        Ok(reply)
    }

    pub(super) async fn generate(
        &self,
        state: &mut State<'_>,
        round: Round,
        log: &CallLog,
    ) -> Result<Node, AgentError> {
        let Some(request) = self.request(state, round) else {
            return Ok(Node::SelectSchema);
        };
        // A reply in another form than the loop's (`first=`) is kept in the loop's form,
        // as the repairs after it show the model its failed reply.
        let asked_in = self.round_strategy(state, round).reply;
        let reshaped = asked_in != self.strategy.reply && state.mode != Mode::Plain;
        state.round_started_ms = state.ms();
        if state.asked.is_none() && state.mode != Mode::Plain {
            state.asked = Some(self.question_text(state));
        }
        let reply = self.call(state, &request, log).await?;
        if state.attempts == 0 && round == Round::Greedy {
            state.first_confidence = reply.confidence;
        }
        state.attempts += 1;
        let replies: Vec<(String, bool)> = std::iter::once((reply.text.clone(), reply.truncated))
            .chain(
                reply
                    .alternatives
                    .iter()
                    .map(|alternative| (alternative.text.clone(), alternative.truncated)),
            )
            .collect();
        let mut sqls: Vec<String> = Vec::new();
        let mut declines = Vec::new();
        let mut repeats = 0;
        let mut unreadable = None;
        for (index, (text, truncated)) in replies.iter().enumerate() {
            match reply::parse_reply(text) {
                // A cut-off reply's SQL is incomplete however it parses.
                _ if *truncated => {
                    unreadable.get_or_insert((FailureKind::CutOff, text.clone()));
                }
                Reply::Sql {
                    sql,
                    assumptions,
                    understood_as,
                } => {
                    let (sql, readings) = mysql_readings::as_mysql_reads(
                        sql,
                        self.gate.dialect(),
                        self.gate.schema(),
                    );
                    for reading in readings {
                        state.note("generate", reading);
                    }
                    if reshaped {
                        let kept = prompts::sql_in_reply_form(
                            &self.strategy,
                            understood_as.as_deref(),
                            &sql,
                        );
                        state.wrote(&sql, &kept, understood_as);
                    } else {
                        state.wrote(&sql, text, understood_as);
                    }
                    for assumption in assumptions {
                        if !state.assumptions.contains(&assumption) {
                            state.assumptions.push(assumption);
                        }
                    }
                    let normal = normalise_sql(&sql);
                    if state.failed_sql.contains(&normal) {
                        repeats += 1;
                    } else if !sqls.iter().any(|seen| normalise_sql(seen) == normal) {
                        sqls.push(sql);
                    }
                }
                Reply::Clarify(request) if index == 0 && round == Round::Greedy => {
                    state.note("generate", "the model asks for clarification");
                    self.finish(state, Decision::Clarify, None, Some(request));
                    return Ok(Node::Done);
                }
                Reply::Clarify(_) => {}
                Reply::Decline(reason) => declines.push(reason),
                Reply::Malformed(message) => {
                    unreadable.get_or_insert((FailureKind::MalformedReply, message));
                }
            }
        }
        state.note(
            "generate",
            format!(
                "{}: {} candidate(s), {} new SQL",
                request.purpose,
                replies.len(),
                sqls.len()
            ),
        );
        if !sqls.is_empty() {
            return Ok(Node::Try(sqls, round));
        }
        // No new SQL: the most telling reason, in this order.
        if declines.len() * 2 > replies.len() || (round == Round::Greedy && !declines.is_empty()) {
            state.note("generate", "the model declines");
            let reason = declines.swap_remove(0);
            return Ok(self.decline(state, reason));
        }
        let (kind, message, text) = if repeats > 0 {
            (
                FailureKind::IdenticalToFailed,
                prompts::REPEATED_QUERY.to_string(),
                reply.text.clone(),
            )
        } else {
            let (kind, detail) =
                unreadable.unwrap_or((FailureKind::MalformedReply, prompts::NO_SQL.to_string()));
            let message = if kind == FailureKind::CutOff {
                prompts::CUT_OFF.to_string()
            } else {
                detail
            };
            (kind, message, reply.text.clone())
        };
        state.first_round(false, &text);
        Ok(Node::Failed(
            Failure {
                kind,
                refusal: None,
                message,
                sql: text,
                repairable: true,
                fix: None,
            },
            None,
        ))
    }

    /// Runs every candidate of a round through the gate and keeps the one the vote
    /// chooses (the only one, when there is one).
    pub(super) async fn try_candidates(
        &self,
        state: &mut State<'_>,
        sqls: Vec<String>,
        round: Round,
    ) -> Node {
        let mut tried = Vec::new();
        for (index, sql) in sqls.into_iter().enumerate() {
            state.candidates_tried += 1;
            let candidate = self.try_one(state, index, sql).await;
            if candidate.outcome.is_err() {
                // As written, so a later reply of the same text is known for a repeat.
                state.failed_sql.push(normalise_sql(&candidate.sql));
            }
            tried.push(candidate);
        }
        // The answer kept from the greedy round (an empty result under doubt) votes too.
        let kept = state.kept.take();
        let mut results: Vec<&QueryResult> = kept.iter().collect();
        let mut origin: Vec<Option<usize>> = kept.iter().map(|_| None).collect();
        for (index, candidate) in tried.iter().enumerate() {
            if let Ok(result) = &candidate.outcome {
                results.push(result);
                origin.push(Some(index));
            }
        }
        let voters: Vec<candidates::Voter<'_>> = results
            .iter()
            .enumerate()
            .map(|(index, result)| candidates::Voter { index, result })
            .collect();
        if let Some(vote) = candidates::choose(&voters) {
            if round == Round::Sampled || voters.len() > 1 {
                state.note(
                    "vote",
                    format!(
                        "{} of {} candidate(s) agree (groups {:?})",
                        vote.agreeing, vote.voters, vote.groups
                    ),
                );
                state.emit(AgentEvent::Vote {
                    started_ms: state.ms(),
                    chosen: vote.chosen,
                    agreeing: vote.agreeing,
                    voters: vote.voters,
                    groups: vote.groups.clone(),
                });
            }
            let chosen = results[vote.chosen].clone();
            if let Some(Some(index)) = origin.get(vote.chosen) {
                state.first_round(true, &tried[*index].sql);
                state.chosen(&tried[*index].sql);
            }
            if round == Round::Sampled {
                // A vote already took a second look: its answer is not doubted again.
                state.spent.diagnostic |= kept.is_some();
            }
            return Node::Inspect(chosen);
        }
        // Nothing ran: the first candidate's failure speaks for the round.
        let Some(first) = tried.into_iter().next() else {
            return Node::Failed(
                Failure {
                    kind: FailureKind::MalformedReply,
                    refusal: None,
                    message: prompts::NO_CANDIDATE.to_string(),
                    sql: String::new(),
                    repairable: true,
                    fix: None,
                },
                None,
            );
        };
        let Err(mut failure) = first.outcome else {
            return Node::Done;
        };
        state.first_round(false, &first.sql);
        let facts = self.repair_facts(state, &failure);
        if failure.kind == FailureKind::Database(ErrorType::UnknownColumn) {
            // A join on a column one of its tables lacks, where one foreign key links the
            // two: the rules write the join on that key; next_step decides if it runs.
            failure.fix = repair_facts::join_on_foreign_key(
                &failure.sql,
                self.gate.dialect(),
                self.gate.schema(),
            )
            .map(|sql| plausibility::RuleFix {
                sql,
                change: "the join on the foreign key that links its tables".to_string(),
            });
        }
        Node::Failed(failure, facts)
    }

    pub(super) async fn try_one(&self, state: &mut State<'_>, index: usize, sql: String) -> Tried {
        let started_ms = state.ms();
        let checked = self.gate.check(&sql);
        state.emit(AgentEvent::Guard {
            started_ms,
            elapsed_ms: state.ms() - started_ms,
            candidate: index,
            sql: sql.clone(),
            accepted: checked.is_ok(),
            detail: match &checked {
                Ok(checked) => checked.sql().to_string(),
                Err(refusal) => refusal.to_string(),
            },
        });
        let checked = match checked {
            Ok(checked) => checked,
            Err(refusal) => {
                state.note("guard", format!("refused: {refusal}"));
                let error = QueryError::from_refusal(refusal, &sql);
                return Tried {
                    outcome: Err(failure_of(&error)),
                    sql,
                };
            }
        };
        state.note("guard", format!("accepted: {}", checked.sql()));
        state.ran_as(&sql, checked.sql());
        let started_ms = state.ms();
        let outcome = self.gate.run(&checked).await;
        let (rows, error_type, error, sqlstate, hint) = match &outcome {
            QueryOutcome::Rows(rows) => (Some(rows.row_count), None, None, None, None),
            QueryOutcome::Failed(error) => (
                None,
                Some(error.error_type),
                Some(error.message.clone()),
                error.sqlstate.clone(),
                error.hint.clone(),
            ),
        };
        state.emit(AgentEvent::Executed {
            started_ms,
            elapsed_ms: state.ms() - started_ms,
            candidate: index,
            sql: checked.sql().to_string(),
            rows,
            error_type,
            error,
            sqlstate,
            hint,
        });
        match outcome {
            QueryOutcome::Rows(result) => {
                state.note("execute", format!("{} row(s)", result.row_count));
                Tried {
                    sql,
                    outcome: Ok(result),
                }
            }
            QueryOutcome::Failed(error) => {
                state.note(
                    "execute",
                    format!("{}: {}", error.error_type, error.message),
                );
                Tried {
                    sql,
                    outcome: Err(failure_of(&error)),
                }
            }
        }
    }

    /// Rows came back: an answer, unless a rule check finds them suspect (one repair
    /// naming the fact) or they look empty, where the one diagnostic (and under a
    /// doubting strategy, one sampled second look) decides.
    pub(super) async fn inspect(&self, state: &mut State<'_>, result: QueryResult) -> Node {
        let empty = empty::looks_empty(&result.rows);
        // The checks come first: an empty sum over another year is suspect for its
        // filter, before the empty-result diagnostic looks at its text filters.
        if state.mode != Mode::Plain {
            let answer = plausibility::Answer {
                question: state.question_in_context(),
                sql: &result.sql,
                dialect: self.gate.dialect(),
                columns: &result.columns,
                rows: &result.rows,
                tables: &result.tables,
                notes: self.gate.notes(),
                schema: self.gate.schema(),
                cards: &self.cards,
            };
            let findings = plausibility::check_result(&answer);
            if !findings.is_empty() {
                // Repeated rows and years read as dates have a fix the rules write
                // themselves; any other finding needs the model's repair, which is told
                // every fact at once.
                let fix = plausibility::rule_fix(&answer, &findings);
                return self.suspect(state, result, findings, fix);
            }
        }
        if !empty {
            let hesitant = self.hesitant(state)
                && failure::next_step(&Outcome::Hesitant, &state.progress()).step
                    == NextStep::Resample;
            state.spent.confidence_judged = true;
            if hesitant {
                // Rows, but the model hesitated while writing them: one sampled second
                // look, in which this answer votes too.
                state.note(
                    "inspect",
                    "the reply's least likely token is under the confidence floor; sampling a second look",
                );
                state.kept = Some(result);
                return Node::Generate(Round::Sampled);
            }
        }
        let diagnose = empty
            && failure::next_step(&Outcome::Empty, &state.progress()).step == NextStep::Diagnose;
        if !diagnose {
            state.note(
                "inspect",
                if empty { "empty: answered as is" } else { "ok" },
            );
            return Node::Answer(result);
        }
        state.spent.diagnostic = true;
        let started_ms = state.ms();
        let index = &self.index;
        let lookup = self.strategy.value_lookup;
        let holders = move |value: &str| {
            if lookup {
                index.columns_holding(value)
            } else {
                Vec::new()
            }
        };
        let (diagnosis, probe_sql) = empty::diagnose(&self.gate, &result, &holders).await;
        let finding = match &diagnosis {
            empty::Diagnosis::Explained(why) | empty::Diagnosis::Stands(why) => why.clone(),
            empty::Diagnosis::CaseMismatch { findings, .. } => {
                format!("case-insensitive probe matches: {}", findings.join(" "))
            }
            empty::Diagnosis::ValueElsewhere { findings } => {
                format!(
                    "the filtered values are stored elsewhere: {}",
                    findings.join(" ")
                )
            }
        };
        state.emit(AgentEvent::EmptyProbe {
            started_ms,
            elapsed_ms: state.ms() - started_ms,
            sql: probe_sql,
            finding: finding.clone(),
        });
        // Either finding is a fact the probe read from the data: one repair, told it.
        let (kind, message, findings) = match diagnosis {
            empty::Diagnosis::CaseMismatch { findings, .. } => {
                (FailureKind::CaseMismatch, prompts::CASE_MISMATCH, findings)
            }
            empty::Diagnosis::ValueElsewhere { findings } => (
                FailureKind::ValueElsewhere,
                prompts::VALUE_ELSEWHERE,
                findings,
            ),
            empty::Diagnosis::Explained(why) => {
                state.note("inspect", format!("empty: {why}"));
                return Node::Answer(result);
            }
            empty::Diagnosis::Stands(why) => {
                let doubt = failure::next_step(&Outcome::EmptyStands, &state.progress()).step
                    == NextStep::Resample;
                if doubt {
                    // An empty answer is doubtful: one sampled second look, in which the
                    // empty answer votes too.
                    state.note("inspect", format!("empty ({why}); sampling a second look"));
                    state.kept = Some(result);
                    return Node::Generate(Round::Sampled);
                }
                state.note("inspect", format!("empty: {why}"));
                return Node::Answer(result);
            }
        };
        state.note("inspect", format!("empty; {finding}"));
        Node::Failed(
            Failure {
                kind,
                refusal: None,
                message: message.to_string(),
                sql: result.sql.clone(),
                repairable: true,
                fix: None,
            },
            Some(prompts::empty_probe_facts(&findings)),
        )
    }

    /// Whether the question's first greedy reply was written with a token less likely
    /// than the strategy's confidence floor (whether that earns a second look is
    /// [`failure::next_step`]'s to say).
    pub(super) fn hesitant(&self, state: &State<'_>) -> bool {
        match (self.strategy.confidence_floor, state.first_confidence) {
            (Some(floor), Some(confidence)) => confidence.min_logprob < floor,
            _ => false,
        }
    }

    /// Rows that fail a rule check: a `suspect` failure naming each fact, with the
    /// periods the notes give the tables as schema facts.
    pub(super) fn suspect(
        &self,
        state: &mut State<'_>,
        result: QueryResult,
        findings: Vec<plausibility::Finding>,
        fix: Option<plausibility::RuleFix>,
    ) -> Node {
        let message = prompts::suspect_message(&findings);
        state.note("inspect", format!("suspect: {message}"));
        let periods: Vec<(String, Option<String>, Option<String>)> = self
            .gate
            .notes()
            .tables
            .iter()
            .filter_map(|(table, note)| {
                let holds = note.holds.as_ref()?;
                Some((table.clone(), holds.from.clone(), holds.to.clone()))
            })
            .collect();
        let failure = Failure {
            kind: FailureKind::Suspect,
            refusal: None,
            message,
            sql: result.sql.clone(),
            repairable: true,
            fix,
        };
        let checks: Vec<plausibility::Check> =
            findings.iter().map(|finding| finding.check).collect();
        state.suspect = Some((result, findings));
        Node::Failed(failure, prompts::suspect_facts(&checks, &periods))
    }

    /// Looks for the concept of a column no table has under another name: the names
    /// and descriptions of the selected tables' columns, then one small model call.
    /// Found with an attempt left: a repair told the column. Otherwise a decline that
    /// says what was looked for and where (or, found too late, a give-up naming it).
    pub(super) async fn search_concept(
        &self,
        state: &mut State<'_>,
        failure: Failure,
        log: &CallLog,
    ) -> Result<Node, AgentError> {
        let concept = state.absent_columns.last().cloned().unwrap_or_default();
        let mut names: BTreeSet<String> = state
            .selection
            .as_ref()
            .map(|selection| {
                selection
                    .tables
                    .iter()
                    .map(|table| table.table.to_lowercase())
                    .collect()
            })
            .unwrap_or_default();
        names.extend(state.forced_tables.iter().map(|table| table.to_lowercase()));
        let tables: Vec<&crate::schema::TableSchema> = self
            .gate
            .schema()
            .iter()
            .filter(|table| names.contains(&table.name.to_lowercase()))
            .collect();
        let notes = self.gate.notes();
        let mut found = concept::in_names_and_descriptions(&concept, &tables, notes)
            .map(|column| (column, concept::FoundBy::NamesAndDescriptions));
        if found.is_none() && !tables.is_empty() {
            let columns = concept::readable_columns(&tables, notes);
            let request = prompts::concept_column_request(&state.question, &concept, &columns);
            let reply = self.call(state, &request, log).await?;
            found = concept::from_reply(&reply.text, &tables, notes)
                .map(|column| (column, concept::FoundBy::Model));
        }
        let table_names: Vec<&str> = tables.iter().map(|table| table.name.as_str()).collect();
        let Some((column, found_by)) = found else {
            state.note(
                "search_concept",
                format!(
                    "\"{concept}\" is held by no column of {}",
                    table_names.join(", ")
                ),
            );
            return Ok(self.decline(
                state,
                prompts::concept_not_found_reason(&concept, &table_names),
            ));
        };
        let qualified = column.qualified();
        state.note(
            "search_concept",
            format!(
                "\"{concept}\" is held in {qualified} ({})",
                found_by.as_str()
            ),
        );
        if !state.progress().may_start_round() {
            self.finish(
                state,
                Decision::GiveUp,
                Some(format!(
                    "the question's \"{concept}\" may be held in {qualified}, but no attempt is left to use it"
                )),
                None,
            );
            return Ok(Node::Done);
        }
        state.forced_tables.insert(column.table.clone());
        state.repairs.push(RepairTurn {
            reply: state.failed_reply(failure.kind, &failure.sql),
            feedback: prompts::feedback_message(
                failure.kind,
                &failure.message,
                Some(&prompts::concept_column_fact(
                    &concept,
                    &qualified,
                    found_by.as_str(),
                )),
            ),
        });
        Ok(Node::Generate(self.repair_round()))
    }

    /// Schema facts for the repair of a failure (who owns an unknown column, how to
    /// join it; the cards of the tables in a type mismatch), and the retrieval changes
    /// the failure asks for.
    pub(super) fn repair_facts(&self, state: &mut State, failure: &Failure) -> Option<String> {
        match failure.kind {
            FailureKind::Database(ErrorType::UnknownColumn) => {
                // Every column the error names gets its facts, so one repair can mend
                // them all instead of meeting them one attempt at a time.
                let mut texts = Vec::new();
                let mut absent_here = false;
                for column in repair_facts::unknown_columns(&failure.message) {
                    let fact = repair_facts::column_fact(
                        &column,
                        &failure.sql,
                        self.gate.dialect(),
                        &self.index,
                    );
                    for table in fact.owner_tables() {
                        state.forced_tables.insert(table.to_string());
                    }
                    // Absent columns are counted per failure (the decline rule counts
                    // failures that invent columns), so only the first is recorded.
                    if fact.is_absent() && !absent_here {
                        absent_here = true;
                        state.absent_columns.push(column.column.clone());
                        state.widen += 2;
                    }
                    texts.push(prompts::column_fact_text(&fact));
                }
                (!texts.is_empty()).then(|| texts.join("\n"))
            }
            FailureKind::Database(ErrorType::UnknownTable) => {
                state.widen += 3;
                let names: Vec<&str> = self.cards.iter().map(|card| card.table.as_str()).collect();
                Some(prompts::table_names_fact(&names))
            }
            FailureKind::Database(ErrorType::TypeMismatch) => {
                let used: Vec<String> = self
                    .gate
                    .check(&failure.sql)
                    .map(|checked| checked.tables().to_vec())
                    .unwrap_or_default();
                let cards: Vec<&str> = self
                    .cards
                    .iter()
                    .filter(|card| used.contains(&card.table.to_lowercase()))
                    .map(|card| card.text.as_str())
                    .collect();
                (!cards.is_empty()).then(|| cards.join("\n"))
            }
            _ => None,
        }
    }
}

/// A gate failure as the agent's typed failure.
pub(super) fn failure_of(error: &QueryError) -> Failure {
    Failure {
        kind: FailureKind::Database(error.error_type),
        refusal: error.reason,
        message: error.message.clone(),
        sql: error.sql.clone(),
        repairable: error.repairable,
        fix: None,
    }
}
