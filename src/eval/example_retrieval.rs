//! `askdb eval example-retrieval`: verified-example retrieval measured without a model
//! (decision 0060). Every Spider dev question is held out in turn and the other
//! questions of its database, with their gold SQL, stand as its verified examples.
//!
//! - Worked examples: examples whose gold SQL is the held-out one's (after the guard's
//!   rendering) are left out, so a copy is not counted as learning; a method is scored
//!   by how often its best example reads the same tables as the held-out gold, the
//!   nearest a model-free count comes to "an example worth showing".
//! - The direct re-run: with every other question as an example, how often the same
//!   question ([`retrieval::same_question`]) is found, and how often the example's SQL
//!   returns the held-out gold's rows on the database.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use super::external::{load_spiderman, spiderman_db_path};
use super::runner::EvalError;
use crate::compare::{results_match, CompareOptions, ResultSet};
use crate::examples::retrieval::{self, Weights};
use crate::examples::Example;
use crate::gate::{Gate, GateOptions, QueryOutcome};
use crate::schema::TableSchema;

/// The weighings compared, by name.
pub const METHODS: [(&str, Weights); 4] = [
    ("askdb: words 0.6 + schema terms 0.4", Weights::ASKDB),
    (
        "rare words 0.6 + schema terms 0.4",
        Weights::RARE_WORDS_AND_SCHEMA,
    ),
    ("rare words only", Weights::RARE_WORDS),
    ("plain word overlap (Jaccard)", Weights::PLAIN_WORDS),
];

/// Scores at which a looser direct re-run is measured: what firing below the
/// same-question test would cost.
pub const THRESHOLDS: [f64; 4] = [0.6, 0.7, 0.8, 0.9];

/// One method's figures over every held-out question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MethodFigures {
    pub method: String,
    /// Held-out questions with at least one example left once copies are out.
    pub held_out: usize,
    /// Of those, the best example reads exactly the held-out gold's tables.
    pub top1_same_tables: usize,
    /// Held-out questions whose best example scores at least the prompt's floor.
    pub shown: usize,
    /// Of those, the best example reads the same tables.
    pub shown_same_tables: usize,
}

/// How the direct re-run did: fired on the same question, right when its rows match.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RerunFigures {
    pub fired: usize,
    pub right: usize,
}

/// A re-run that would fire whenever the best example scores at least `threshold`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThresholdFigures {
    pub threshold: f64,
    pub fired: usize,
    pub right: usize,
}

/// The whole measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievalReport {
    pub databases: usize,
    pub questions: usize,
    /// Gold queries the guard refused (left out: they could never be examples).
    pub refused_gold: usize,
    pub methods: Vec<MethodFigures>,
    pub rerun: RerunFigures,
    /// Looser re-runs, each example's rows compared with the held-out gold's.
    pub thresholds: Vec<ThresholdFigures>,
}

/// One database's schema and its questions as examples (`sql`: the guard's rendering
/// of the gold, `tables`: what it reads, lower-cased).
pub struct DatabaseExamples {
    pub schema: Vec<TableSchema>,
    pub examples: Vec<Example>,
}

fn same_tables(a: &Example, b: &Example) -> bool {
    let set =
        |e: &Example| -> BTreeSet<String> { e.tables.iter().map(|t| t.to_lowercase()).collect() };
    set(a) == set(b)
}

/// The worked-example figures of one weighing over every database (pure).
pub fn method_figures(
    name: &str,
    weights: Weights,
    databases: &[DatabaseExamples],
) -> MethodFigures {
    let mut figures = MethodFigures {
        method: name.to_string(),
        held_out: 0,
        top1_same_tables: 0,
        shown: 0,
        shown_same_tables: 0,
    };
    for database in databases {
        for held in &database.examples {
            let others: Vec<Example> = database
                .examples
                .iter()
                .filter(|other| other.id != held.id && other.sql != held.sql)
                .cloned()
                .collect();
            if others.is_empty() {
                continue;
            }
            figures.held_out += 1;
            let ranked =
                retrieval::rank_weighted(&held.question, &database.schema, &others, 1, weights);
            let Some(best) = ranked.first() else {
                continue;
            };
            let same = same_tables(best.example, held);
            figures.top1_same_tables += usize::from(same);
            if best.score >= retrieval::MIN_PROMPT_SCORE {
                figures.shown += 1;
                figures.shown_same_tables += usize::from(same);
            }
        }
    }
    figures
}

/// The pairs (held-out, example) on which the direct re-run fires, with every other
/// question as an example (pure).
pub fn rerun_pairs(database: &DatabaseExamples) -> Vec<(&Example, &Example)> {
    let mut pairs = Vec::new();
    for held in &database.examples {
        let others: Vec<Example> = database
            .examples
            .iter()
            .filter(|other| other.id != held.id)
            .cloned()
            .collect();
        let ranked = retrieval::rank(&held.question, &database.schema, &others, 1);
        if let Some(best) = ranked.first().filter(|best| best.same_question) {
            if let Some(example) = database.examples.iter().find(|e| e.id == best.example.id) {
                pairs.push((held, example));
            }
        }
    }
    pairs
}

/// Each held-out question with its best example among all the others (copies
/// included) and the score (pure).
pub fn best_pairs(database: &DatabaseExamples) -> Vec<(&Example, &Example, f64)> {
    let mut pairs = Vec::new();
    for held in &database.examples {
        let others: Vec<Example> = database
            .examples
            .iter()
            .filter(|other| other.id != held.id)
            .cloned()
            .collect();
        let ranked = retrieval::rank(&held.question, &database.schema, &others, 1);
        if let Some(best) = ranked.first() {
            if let Some(example) = database.examples.iter().find(|e| e.id == best.example.id) {
                pairs.push((held, example, best.score));
            }
        }
    }
    pairs
}

fn example(id: i64, question: &str, sql: &str, tables: Vec<String>) -> Example {
    Example {
        id,
        database: String::new(),
        question: question.to_string(),
        sql: sql.to_string(),
        verified_by: "spider".to_string(),
        verified_at: String::new(),
        schema_fingerprint: String::new(),
        tables,
        notes: None,
        set_aside: None,
        verified_against: Vec::new(),
    }
}

async fn rows(gate: &Gate, sql: &str) -> Option<ResultSet> {
    match gate.run_query(sql).await {
        QueryOutcome::Rows(result) => Some(result.into()),
        QueryOutcome::Failed(_) => None,
    }
}

/// Measures on Spider dev (SpiderMan's 1,034 questions and SQLite files).
pub async fn measure(data_dir: &Path) -> Result<RetrievalReport, EvalError> {
    let queries = load_spiderman(data_dir).map_err(|error| EvalError::Data(error.to_string()))?;
    let mut by_database: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for query in queries {
        by_database
            .entry(query.db_name.clone())
            .or_default()
            .push(query);
    }
    let mut report = RetrievalReport {
        databases: by_database.len(),
        questions: 0,
        refused_gold: 0,
        methods: Vec::new(),
        rerun: RerunFigures::default(),
        thresholds: THRESHOLDS
            .iter()
            .map(|threshold| ThresholdFigures {
                threshold: *threshold,
                fired: 0,
                right: 0,
            })
            .collect(),
    };
    let mut databases = Vec::new();
    let mut id = 0;
    for (name, queries) in &by_database {
        let gate = crate::database::open_gate(
            &crate::database::DatabaseUrl::Sqlite(spiderman_db_path(data_dir, name)),
            GateOptions::default(),
        )
        .await
        .map_err(|error| EvalError::Database {
            db: name.clone(),
            error: error.to_string(),
        })?;
        let mut examples = Vec::new();
        for query in queries {
            report.questions += 1;
            let Some(gold) = query.gold.first() else {
                continue;
            };
            match gate.check(gold) {
                Ok(checked) => {
                    id += 1;
                    let tables = checked.tables().iter().map(|t| t.to_lowercase()).collect();
                    examples.push(example(id, &query.question, checked.sql(), tables));
                }
                Err(_) => report.refused_gold += 1,
            }
        }
        let database = DatabaseExamples {
            schema: gate.schema().to_vec(),
            examples,
        };
        let mut cache: BTreeMap<i64, Option<ResultSet>> = BTreeMap::new();
        for (held, best, score) in best_pairs(&database) {
            if score < THRESHOLDS[0] {
                continue;
            }
            let right = held.sql == best.sql || {
                for sql_of in [held, best] {
                    if let std::collections::btree_map::Entry::Vacant(slot) = cache.entry(sql_of.id)
                    {
                        slot.insert(rows(&gate, &sql_of.sql).await);
                    }
                }
                match (cache.get(&held.id), cache.get(&best.id)) {
                    (Some(Some(gold)), Some(Some(rerun))) => {
                        results_match(gold, rerun, &CompareOptions::default()).is_match()
                    }
                    _ => false,
                }
            };
            for figures in report
                .thresholds
                .iter_mut()
                .filter(|f| score >= f.threshold)
            {
                figures.fired += 1;
                figures.right += usize::from(right);
            }
        }
        for (held, example) in rerun_pairs(&database) {
            report.rerun.fired += 1;
            let (Some(gold), Some(rerun)) = (
                rows(&gate, &held.sql).await,
                rows(&gate, &example.sql).await,
            ) else {
                continue;
            };
            report.rerun.right +=
                usize::from(results_match(&gold, &rerun, &CompareOptions::default()).is_match());
        }
        databases.push(database);
    }
    report.methods = METHODS
        .iter()
        .map(|(name, weights)| method_figures(name, *weights, &databases))
        .collect();
    Ok(report)
}

fn percent(part: usize, whole: usize) -> String {
    if whole == 0 {
        return "n/a".to_string();
    }
    format!("{:.1}%", 100.0 * part as f64 / whole as f64)
}

/// The report as a table.
pub fn render(report: &RetrievalReport) -> String {
    let mut text = format!(
        "Spider dev: {} questions over {} databases ({} gold queries the guard refused, left out)\n\n\
         | method | held out | best example reads the same tables | shown (score >= {}) | shown, same tables |\n|---|---|---|---|---|\n",
        report.questions,
        report.databases,
        report.refused_gold,
        retrieval::MIN_PROMPT_SCORE
    );
    for method in &report.methods {
        text.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            method.method,
            method.held_out,
            percent(method.top1_same_tables, method.held_out),
            method.shown,
            percent(method.shown_same_tables, method.shown),
        ));
    }
    text.push_str(&format!(
        "\nDirect re-run (the same question): fired {} times, right {} ({})\n\n\
         | a re-run at score >= | fired | right |\n|---|---|---|\n",
        report.rerun.fired,
        report.rerun.right,
        percent(report.rerun.right, report.rerun.fired)
    ));
    for figures in &report.thresholds {
        text.push_str(&format!(
            "| {:.1} | {} | {} |\n",
            figures.threshold,
            figures.fired,
            percent(figures.right, figures.fired)
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn copies_are_left_out_and_the_same_question_fires_the_rerun() {
        let database = DatabaseExamples {
            schema: Vec::new(),
            examples: vec![
                example(
                    1,
                    "How many singers are there?",
                    "SELECT count(*) FROM singer",
                    tables(&["singer"]),
                ),
                example(
                    2,
                    "Count the singers.",
                    "SELECT count(*) FROM singer",
                    tables(&["singer"]),
                ),
                example(
                    3,
                    "How many concerts are there?",
                    "SELECT count(*) FROM concert",
                    tables(&["concert"]),
                ),
                example(
                    4,
                    "How many singers are there?",
                    "SELECT count(*) AS n FROM singer",
                    tables(&["singer"]),
                ),
                example(
                    5,
                    "Names of stadiums",
                    "SELECT name FROM stadium",
                    tables(&["stadium"]),
                ),
            ],
        };
        let figures = method_figures("askdb", Weights::ASKDB, std::slice::from_ref(&database));
        // Every question has another whose SQL differs.
        assert_eq!(figures.held_out, 5);
        // 1 and 4 find each other (different SQL, same tables); 2's copy (1) is left
        // out, so it finds 4; 3 and 5 share no search term with any other question.
        assert_eq!(figures.top1_same_tables, 3, "{figures:?}");
        let pairs: Vec<(i64, i64)> = rerun_pairs(&database)
            .iter()
            .map(|(held, example)| (held.id, example.id))
            .collect();
        assert_eq!(pairs, vec![(1, 4), (4, 1)]);
        let text = render(&RetrievalReport {
            databases: 1,
            questions: 5,
            refused_gold: 0,
            methods: vec![figures],
            rerun: RerunFigures { fired: 2, right: 2 },
            thresholds: vec![ThresholdFigures {
                threshold: 0.9,
                fired: 4,
                right: 3,
            }],
        });
        assert!(text.contains("| 0.9 | 4 | 75.0% |"), "{text}");
        let best: Vec<(i64, i64)> = best_pairs(&database)
            .iter()
            .map(|(held, best, _)| (held.id, best.id))
            .collect();
        // With copies included, 2 finds its copy 1.
        assert_eq!(best, vec![(1, 4), (2, 1), (4, 1)]);
        assert!(text.contains("| askdb | 5 | 60.0% |"), "{text}");
        assert!(text.contains("fired 2 times, right 2 (100.0%)"), "{text}");
    }
}
