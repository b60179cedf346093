//! Model-free evaluation of the linker: for questions with known gold tables, how many
//! gold tables forced linking keeps at each k, how often it keeps all of them, and how
//! many prompt tokens it saves against sending the whole schema.
//!
//! Spider/BIRD-format data works as is: `tables.json` schemas become cards (CREATE
//! TABLE text from names, types and keys; no descriptions, no samples, no values) and
//! the gold tables of a question are the relations its gold SQL reads.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sqlparser::ast::{visit_relations, ObjectNamePart};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

use super::{SchemaIndex, SelectOptions};
use crate::linking::cards::TableCard;
use crate::schema::{ColumnSchema, ForeignKey, TableSchema};

/// The k values reported by default (the issue asks for 3..=8).
pub const DEFAULT_KS: [usize; 6] = [3, 4, 5, 6, 7, 8];

#[derive(Debug, thiserror::Error)]
pub enum LinkingEvalError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not the expected JSON: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("question {index} names database {db_id:?}, which {tables} does not describe")]
    UnknownDatabase {
        index: usize,
        db_id: String,
        tables: PathBuf,
    },
    #[error("schema {db_id:?}: column index {index} out of range")]
    BadColumn { db_id: String, index: usize },
}

/// The linker at one k.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkingAtK {
    pub k: usize,
    pub gold_tables: usize,
    pub gold_kept: usize,
    /// gold_kept / gold_tables.
    pub recall: f64,
    /// Questions whose every gold table was kept.
    pub all_linked: usize,
    pub all_linked_rate: f64,
    /// Questions where linking left at least one table out (on a database with few
    /// tables, k may keep them all, and recall there says nothing about the linker).
    pub pruned: usize,
    /// Of those, the questions whose every gold table was kept.
    pub pruned_all_linked: usize,
    pub pruned_all_linked_rate: f64,
    /// Mean tables selected (top k plus bridges).
    pub mean_tables: f64,
    pub mean_prompt_tokens: f64,
    pub mean_whole_tokens: f64,
    /// 1 - mean_prompt_tokens / mean_whole_tokens.
    pub tokens_saved: f64,
}

/// What one linking evaluation measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkingReport {
    pub questions: usize,
    pub databases: usize,
    /// Questions whose gold SQL the parser could not read, so that their gold tables
    /// came from a case-insensitive match of table names in the text.
    pub gold_by_name_match: usize,
    pub by_k: Vec<LinkingAtK>,
}

impl fmt::Display for LinkingReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "linking at forced selection: {} questions over {} databases ({} gold sets by name match)",
            self.questions, self.databases, self.gold_by_name_match
        )?;
        writeln!(
            f,
            "{:>3}  {:>7}  {:>10}  {:>7}  {:>17}  {:>6}  {:>6}  {:>6}  {:>6}",
            "k",
            "recall",
            "all-linked",
            "pruned",
            "all-linked|pruned",
            "tables",
            "prompt",
            "whole",
            "saved"
        )?;
        for row in &self.by_k {
            writeln!(
                f,
                "{:>3}  {:>6.1}%  {:>9.1}%  {:>7}  {:>16.1}%  {:>6.2}  {:>6.0}  {:>6.0}  {:>5.1}%",
                row.k,
                100.0 * row.recall,
                100.0 * row.all_linked_rate,
                row.pruned,
                100.0 * row.pruned_all_linked_rate,
                row.mean_tables,
                row.mean_prompt_tokens,
                row.mean_whole_tokens,
                100.0 * row.tokens_saved
            )?;
        }
        Ok(())
    }
}

/// Running totals for one k.
#[derive(Default)]
struct Tally {
    questions: usize,
    gold_tables: usize,
    gold_kept: usize,
    all_linked: usize,
    pruned: usize,
    pruned_all_linked: usize,
    tables: usize,
    prompt_tokens: usize,
    whole_tokens: usize,
}

impl Tally {
    fn add(&mut self, index: &SchemaIndex, question: &str, gold: &[String], k: usize) {
        let options = SelectOptions {
            k,
            force_linking: true,
            ..SelectOptions::default()
        };
        let selection = index.select(question, &options);
        let kept = gold
            .iter()
            .filter(|table| selection.contains(table))
            .count();
        self.questions += 1;
        self.gold_tables += gold.len();
        self.gold_kept += kept;
        self.all_linked += usize::from(kept == gold.len());
        if selection.tables.len() < index.cards().len() {
            self.pruned += 1;
            self.pruned_all_linked += usize::from(kept == gold.len());
        }
        self.tables += selection.tables.len();
        self.prompt_tokens += selection.prompt_tokens;
        self.whole_tokens += selection.whole_tokens;
    }

    fn finish(&self, k: usize) -> LinkingAtK {
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        LinkingAtK {
            k,
            gold_tables: self.gold_tables,
            gold_kept: self.gold_kept,
            recall: ratio(self.gold_kept, self.gold_tables),
            all_linked: self.all_linked,
            all_linked_rate: ratio(self.all_linked, self.questions),
            pruned: self.pruned,
            pruned_all_linked: self.pruned_all_linked,
            pruned_all_linked_rate: ratio(self.pruned_all_linked, self.pruned),
            mean_tables: ratio(self.tables, self.questions),
            mean_prompt_tokens: ratio(self.prompt_tokens, self.questions),
            mean_whole_tokens: ratio(self.whole_tokens, self.questions),
            tokens_saved: 1.0 - ratio(self.prompt_tokens, self.whole_tokens),
        }
    }
}

/// Evaluates the linker on our own questions over one database.
pub fn evaluate_items(
    index: &SchemaIndex,
    items: &[(String, Vec<String>)],
    ks: &[usize],
) -> LinkingReport {
    let by_k = ks
        .iter()
        .map(|&k| {
            let mut tally = Tally::default();
            for (question, gold) in items {
                tally.add(index, question, gold, k);
            }
            tally.finish(k)
        })
        .collect();
    LinkingReport {
        questions: items.len(),
        databases: 1,
        gold_by_name_match: 0,
        by_k,
    }
}

/// One schema of a Spider/BIRD `tables.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct SpiderSchema {
    pub db_id: String,
    pub table_names_original: Vec<String>,
    /// [table index, column name]; index -1 is the `*` pseudo-column.
    pub column_names_original: Vec<(i64, String)>,
    pub column_types: Vec<String>,
    /// Column indexes; a composite key is a list of them.
    #[serde(default)]
    pub primary_keys: Vec<serde_json::Value>,
    /// [referencing column index, referenced column index].
    #[serde(default)]
    pub foreign_keys: Vec<(usize, usize)>,
}

/// One question of a Spider/BIRD questions file.
#[derive(Debug, Clone, Deserialize)]
pub struct SpiderQuestion {
    pub db_id: String,
    pub question: String,
    /// Spider calls the gold SQL `query`, BIRD `SQL`.
    #[serde(alias = "SQL")]
    pub query: String,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, LinkingEvalError> {
    let text = std::fs::read_to_string(path).map_err(|source| LinkingEvalError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| LinkingEvalError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Cards for a benchmark schema: CREATE TABLE text with keys, nothing else.
pub fn spider_cards(schema: &SpiderSchema) -> Result<Vec<TableCard>, LinkingEvalError> {
    let column = |index: usize| -> Result<(usize, &str), LinkingEvalError> {
        let bad = || LinkingEvalError::BadColumn {
            db_id: schema.db_id.clone(),
            index,
        };
        let (table, name) = schema.column_names_original.get(index).ok_or_else(bad)?;
        let table = usize::try_from(*table).map_err(|_| bad())?;
        Ok((table, name.as_str()))
    };
    let mut primary: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for key in &schema.primary_keys {
        let indexes: Vec<u64> = match key {
            serde_json::Value::Array(items) => items.iter().filter_map(|v| v.as_u64()).collect(),
            other => other.as_u64().into_iter().collect(),
        };
        for index in indexes {
            let (table, name) = column(index as usize)?;
            primary.entry(table).or_default().push(name.to_string());
        }
    }
    let mut foreign: BTreeMap<usize, Vec<ForeignKey>> = BTreeMap::new();
    for &(from, to) in &schema.foreign_keys {
        let (from_table, from_name) = column(from)?;
        let (to_table, to_name) = column(to)?;
        let Some(references_table) = schema.table_names_original.get(to_table) else {
            continue;
        };
        foreign.entry(from_table).or_default().push(ForeignKey {
            columns: vec![from_name.to_string()],
            references_table: references_table.clone(),
            references_columns: vec![to_name.to_string()],
        });
    }
    let mut cards = Vec::new();
    for (table_index, name) in schema.table_names_original.iter().enumerate() {
        // SQLite's own bookkeeping (sqlite_sequence) is listed in some schemas; the
        // gate never shows it and no question is about it.
        if name.to_lowercase().starts_with("sqlite_") {
            continue;
        }
        let columns: Vec<ColumnSchema> = schema
            .column_names_original
            .iter()
            .zip(
                schema
                    .column_types
                    .iter()
                    .chain(std::iter::repeat(&String::new())),
            )
            .filter(|((table, _), _)| *table == table_index as i64)
            .map(|((_, column), data_type)| ColumnSchema {
                name: column.clone(),
                data_type: data_type.clone(),
                nullable: true,
            })
            .collect();
        let foreign_keys = foreign.remove(&table_index).unwrap_or_default();
        let table = TableSchema {
            name: name.clone(),
            primary_key: primary.remove(&table_index).unwrap_or_default(),
            unique: Vec::new(),
            foreign_keys,
            columns,
            row_count: None,
        };
        cards.push(card_from_schema(table));
    }
    Ok(cards)
}

fn card_from_schema(table: TableSchema) -> TableCard {
    let text = format!("-- table {}\n{}\n", table.name, table.create_table_sql());
    TableCard::new(
        &table.name,
        "",
        text,
        table.columns.iter().map(|column| column.name.as_str()),
        &table.foreign_keys,
        BTreeMap::new(),
    )
}

/// The tables of `tables` (any case) that a gold query reads, spelled as `tables`
/// spells them, and whether they came from the parser (true) or, when it could not
/// read the query, from a case-insensitive match of the names in the text (false).
pub fn gold_tables(sql: &str, tables: &[String]) -> (Vec<String>, bool) {
    let known: BTreeMap<String, &String> = tables
        .iter()
        .map(|table| (table.to_lowercase(), table))
        .collect();
    if let Ok(statements) = Parser::parse_sql(&SQLiteDialect {}, sql) {
        let mut found: BTreeSet<&String> = BTreeSet::new();
        let _ = visit_relations(&statements, |relation| {
            if let Some(ObjectNamePart::Identifier(ident)) = relation.0.last() {
                // CTE names are relations too; only real tables count.
                if let Some(table) = known.get(&ident.value.to_lowercase()) {
                    found.insert(table);
                }
            }
            ControlFlow::<()>::Continue(())
        });
        if !found.is_empty() {
            return (found.into_iter().cloned().collect(), true);
        }
    }
    let words: BTreeSet<String> = sql
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map(str::to_lowercase)
        .collect();
    let found = known
        .iter()
        .filter(|(lower, _)| words.contains(*lower))
        .map(|(_, table)| (*table).clone())
        .collect();
    (found, false)
}

/// Evaluates the linker on a Spider/BIRD-format benchmark at forced linking, for each k.
pub fn evaluate_spider(
    tables_json: &Path,
    questions_json: &Path,
    ks: &[usize],
) -> Result<LinkingReport, LinkingEvalError> {
    let schemas: Vec<SpiderSchema> = read_json(tables_json)?;
    let questions: Vec<SpiderQuestion> = read_json(questions_json)?;
    let schemas: BTreeMap<&str, &SpiderSchema> = schemas
        .iter()
        .map(|schema| (schema.db_id.as_str(), schema))
        .collect();
    let mut indexes: BTreeMap<&str, SchemaIndex> = BTreeMap::new();
    let mut tallies: Vec<Tally> = ks.iter().map(|_| Tally::default()).collect();
    let mut by_name_match = 0;
    for (position, question) in questions.iter().enumerate() {
        let Some(schema) = schemas.get(question.db_id.as_str()) else {
            return Err(LinkingEvalError::UnknownDatabase {
                index: position,
                db_id: question.db_id.clone(),
                tables: tables_json.to_path_buf(),
            });
        };
        if !indexes.contains_key(schema.db_id.as_str()) {
            let cards = spider_cards(schema)?;
            indexes.insert(
                schema.db_id.as_str(),
                SchemaIndex::from_parts(&cards, Vec::new()),
            );
        }
        let Some(index) = indexes.get(schema.db_id.as_str()) else {
            continue;
        };
        let (gold, parsed) = gold_tables(&question.query, &schema.table_names_original);
        by_name_match += usize::from(!parsed);
        for (tally, &k) in tallies.iter_mut().zip(ks) {
            tally.add(index, &question.question, &gold, k);
        }
    }
    Ok(LinkingReport {
        questions: questions.len(),
        databases: indexes.len(),
        gold_by_name_match: by_name_match,
        by_k: tallies
            .iter()
            .zip(ks)
            .map(|(tally, &k)| tally.finish(k))
            .collect(),
    })
}

/// The demo questions with known gold tables (`evals/linking/demo_gold_tables.jsonl`).
pub fn demo_gold_items() -> Result<Vec<(String, Vec<String>)>, LinkingEvalError> {
    #[derive(Deserialize)]
    struct GoldLine {
        question: String,
        gold_tables: Vec<String>,
    }
    // Built into the binary, like the golden sets, so `askdb eval linking` runs anywhere.
    let text = include_str!("../../evals/linking/demo_gold_tables.jsonl");
    let path = Path::new("evals/linking/demo_gold_tables.jsonl").to_path_buf();
    let mut items = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let parsed: GoldLine =
            serde_json::from_str(line).map_err(|source| LinkingEvalError::Json {
                path: path.clone(),
                source,
            })?;
        items.push((parsed.question, parsed.gold_tables));
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gold_tables_come_from_the_parse_and_skip_ctes() {
        let tables = vec![
            "Singer".to_string(),
            "concert".to_string(),
            "stadium".to_string(),
        ];
        let (gold, parsed) = gold_tables(
            "WITH c AS (SELECT * FROM concert) SELECT T1.name FROM singer AS T1 JOIN c ON 1=1",
            &tables,
        );
        assert!(parsed);
        assert_eq!(gold, vec!["Singer".to_string(), "concert".to_string()]);
        let (gold, parsed) = gold_tables("SELECT name FROM stadium WHERE @@@", &tables);
        assert!(!parsed);
        assert_eq!(gold, vec!["stadium".to_string()]);
    }
}
