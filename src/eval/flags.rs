//! How well the rule checks of an answer ([`crate::agent::plausibility`]) tell wrong
//! answers from right ones, from a run's records and without the model: of the answers
//! graded wrong, how many were shown with a warning, and of the answers graded right,
//! how many were wrongly warned about. Also how often the checks fired at all (a suspect
//! repair or a warning) and how often their repair ended in a right answer.
//!
//! Only records written since the checks exist carry `warnings` (an empty list for an
//! answer that passed); older records are left out rather than counted as unflagged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::agent::failure::FailureKind;
use crate::agent::Decision;
use crate::eval::runner::QuestionRecord;
use crate::linking::cards::TableCard;

/// The figures of one mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagFigures {
    /// Answers (decision `answer`) whose record says what the checks found.
    pub answers_checked: u64,
    /// Of those, graded right / wrong.
    pub right: u64,
    pub wrong: u64,
    /// Shown with a warning: wrong answers caught / right answers wrongly flagged.
    pub flagged_wrong: u64,
    pub flagged_right: u64,
    /// The checks fired at any point (a suspect repair, or a warning), by final grade.
    pub fired_wrong: u64,
    pub fired_right: u64,
    /// Answers that had a suspect repair, and how many of those ended graded right.
    pub suspect_repairs: u64,
    pub suspect_repairs_right: u64,
    /// Warnings shown, by check id (one count per answer and check).
    pub warnings_by_check: BTreeMap<String, u64>,
}

/// The figures of each mode of a run, by mode name; modes with no checked answer are
/// left out.
pub fn figures(records: &[QuestionRecord]) -> BTreeMap<String, FlagFigures> {
    let mut by_mode: BTreeMap<String, FlagFigures> = BTreeMap::new();
    for record in records {
        let Some(warnings) = &record.warnings else {
            continue;
        };
        if record.decision != Decision::Answer {
            continue;
        }
        let figures = by_mode.entry(record.mode.as_str().to_string()).or_default();
        figures.answers_checked += 1;
        let flagged = !warnings.is_empty();
        let repaired = record
            .history
            .iter()
            .any(|attempt| attempt.error_type == FailureKind::Suspect);
        let fired = flagged || repaired;
        let (count, flag, fire) = if record.correct {
            (
                &mut figures.right,
                &mut figures.flagged_right,
                &mut figures.fired_right,
            )
        } else {
            (
                &mut figures.wrong,
                &mut figures.flagged_wrong,
                &mut figures.fired_wrong,
            )
        };
        *count += 1;
        *flag += u64::from(flagged);
        *fire += u64::from(fired);
        if repaired {
            figures.suspect_repairs += 1;
            figures.suspect_repairs_right += u64::from(record.correct);
        }
        let mut checks: Vec<String> = warnings
            .iter()
            .map(|warning| warning.check.as_str().to_string())
            .collect();
        checks.sort();
        checks.dedup();
        for check in checks {
            *figures.warnings_by_check.entry(check).or_insert(0) += 1;
        }
    }
    by_mode
}

/// The figures as a Markdown table, one column per mode; a sentence when none exist.
pub fn render(figures: &BTreeMap<String, FlagFigures>) -> String {
    if figures.is_empty() {
        return "No answer in this run records its rule checks (a run made before them).\n"
            .to_string();
    }
    let mut out = String::from("| answers flagged by the rule checks | ");
    out.push_str(&figures.keys().cloned().collect::<Vec<_>>().join(" | "));
    out.push_str(" |\n|---|");
    out.push_str(&"---|".repeat(figures.len()));
    out.push('\n');
    let row = |label: &str, value: &dyn Fn(&FlagFigures) -> String| {
        let cells: Vec<String> = figures.values().map(value).collect();
        format!("| {label} | {} |\n", cells.join(" | "))
    };
    out.push_str(&row("wrong answers shown with a warning", &|f| {
        format!("{} of {}", f.flagged_wrong, f.wrong)
    }));
    out.push_str(&row("right answers wrongly flagged", &|f| {
        format!("{} of {}", f.flagged_right, f.right)
    }));
    out.push_str(&row("checks fired at any point (wrong / right)", &|f| {
        format!("{} / {}", f.fired_wrong, f.fired_right)
    }));
    out.push_str(&row("suspect repairs (ended right)", &|f| {
        format!("{} ({})", f.suspect_repairs, f.suspect_repairs_right)
    }));
    out.push_str(&row("warnings by check", &|f| {
        if f.warnings_by_check.is_empty() {
            "none".to_string()
        } else {
            f.warnings_by_check
                .iter()
                .map(|(check, count)| format!("{check} {count}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    }));
    out
}

/// A gold answer the checks flag: right by construction, so a false flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoldFlag {
    pub id: String,
    pub question: String,
    pub sql: String,
    pub findings: Vec<crate::agent::plausibility::Finding>,
}

/// The checks run on a set's gold answers, model-free: how many right answers they
/// would wrongly flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoldFlags {
    pub set: String,
    /// Gold answers run and checked.
    pub checked: u64,
    /// Of those, flagged by at least one check.
    pub flagged: u64,
    /// Gold queries that did not run (left out).
    pub not_run: u64,
    pub flagged_answers: Vec<GoldFlag>,
}

/// Runs the first gold query of every answerable item of `set` through a read-only gate
/// and checks its rows against its question.
pub async fn gold_flags(
    set: &str,
    limit: Option<usize>,
) -> Result<GoldFlags, crate::eval::runner::EvalError> {
    use crate::eval::runner::{load_set, open_eval_gate, EVAL_ROW_CAP};
    let items = load_set(set, None, super::runner::Sampling::all(), limit)?;
    let mut gates: BTreeMap<String, (crate::gate::Gate, Vec<TableCard>)> = BTreeMap::new();
    let mut report = GoldFlags {
        set: set.to_string(),
        checked: 0,
        flagged: 0,
        not_run: 0,
        flagged_answers: Vec::new(),
    };
    for item in items {
        let Some(gold) = item.golds.first() else {
            continue;
        };
        if !gates.contains_key(&item.db) {
            let gate = open_eval_gate(&item.db, EVAL_ROW_CAP).await?;
            let cards = crate::linking::cards::build_cards(&gate)
                .await
                .map_err(|error| crate::eval::runner::EvalError::Database {
                    db: item.db.clone(),
                    error: error.to_string(),
                })?;
            gates.insert(item.db.clone(), (gate, cards));
        }
        let Some((gate, cards)) = gates.get(&item.db) else {
            continue;
        };
        let crate::gate::QueryOutcome::Rows(result) = gate.run_query(gold).await else {
            report.not_run += 1;
            continue;
        };
        let findings =
            crate::agent::plausibility::check_result(&crate::agent::plausibility::Answer {
                question: &item.question,
                sql: &result.sql,
                dialect: gate.dialect(),
                columns: &result.columns,
                rows: &result.rows,
                tables: &result.tables,
                notes: gate.notes(),
                schema: gate.schema(),
                cards,
            });
        report.checked += 1;
        if !findings.is_empty() {
            report.flagged += 1;
            report.flagged_answers.push(GoldFlag {
                id: item.id,
                question: item.question,
                sql: gold.clone(),
                findings,
            });
        }
    }
    Ok(report)
}

/// The gold figures as text: the count, then each false flag with its findings.
pub fn render_gold(report: &GoldFlags) -> String {
    let mut out = format!(
        "{}: {} of {} gold answers (right by construction) flagged by the rule checks; {} gold \
         queries did not run\n",
        report.set, report.flagged, report.checked, report.not_run
    );
    for flag in &report.flagged_answers {
        out.push_str(&format!(
            "\n{} {}\n  {}\n",
            flag.id, flag.question, flag.sql
        ));
        for finding in &flag.findings {
            out.push_str(&format!("  - {} ({})\n", finding.message, finding.check));
        }
    }
    out
}
