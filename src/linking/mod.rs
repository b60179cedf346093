//! Schema selection: which tables' cards go into the prompt for a question.
//!
//! When every card fits the token budget the schema goes whole: forcing a linker on
//! small schemas cost 5.5 points of accuracy where it was measured (seed 001, BIRD), so
//! linking is only for schemas too big to send. Otherwise the tables are ranked by
//! - lexical match ([`lexical`]): BM25 over table names, column names and descriptions,
//!   split, abbreviation-expanded and stemmed;
//! - the value index ([`values`]): a literal the question names ('Teflon Tape') finds
//!   the column holding it;
//! - glossary terms of the notes: "revenue" resolves to the tables its meaning names;
//!
//! the top k are kept, and the foreign-key tables that connect them are added as
//! bridges ([`bridges`]). Tables whose description says they are dead, legacy or
//! configuration are never picked unless the question names them.
//!
//! The unknown-column repair uses [`SchemaIndex::owners_of_column`] and
//! [`SchemaIndex::join_path`]; [`eval`] measures the linker without a model.

pub mod bridges;
pub mod cards;
pub mod eval;
pub mod lexical;
pub mod values;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::gate::{Gate, GateError};
use crate::linking::cards::TableCard;
use crate::schema::SchemaNotes;
use bridges::FkGraph;
use lexical::{contains_run, identifier_terms, phrase_terms, text_terms, words, Bm25, Field};
use values::ValueIndex;

pub use bridges::ForeignKeyEdge;
pub use values::{ColumnValues, ValueMatch};

/// The default prompt budget for schema cards, in estimated tokens.
pub const DEFAULT_BUDGET_TOKENS: usize = 6000;

/// Tables kept by score when linking, before bridges.
pub const DEFAULT_K: usize = 5;

/// What one glossary term the question uses adds to each table its meaning names:
/// about one table-name hit, since the glossary is the database owner's own mapping.
const GLOSSARY_BONUS: f64 = 3.0;

/// What a value found in a column adds to its table, per unit of match strength.
const VALUE_BONUS: f64 = 2.5;

/// Words of a description that mark a table as not for answering questions.
const DISTRACTOR_MARKS: [&str; 9] = [
    "dead",
    "legacy",
    "deprecated",
    "obsolete",
    "unused",
    "configuration",
    "do not use",
    "don't use",
    "not business data",
];

/// Words that make a description clause say what a table is NOT for. Such clauses
/// ("Not payments: what was collected is in payments") name other tables' subjects
/// and would pull the wrong questions, so they are left out of the index.
const NEGATIONS: [&str; 9] = [
    "not", "never", "no", "nothing", "none", "neither", "nor", "cannot", "don",
];

/// How a selection was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelectionMode {
    /// Every card fits the budget: the schema went whole.
    Whole,
    /// The schema was too big (or linking was forced): tables were linked.
    Linked,
}

impl SelectionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SelectionMode::Whole => "whole",
            SelectionMode::Linked => "linked",
        }
    }
}

/// Why a table is in a selection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// Words of the question match its name, columns or description.
    Lexical,
    /// The question names a value stored in this column.
    Value { column: String, value: String },
    /// A glossary term of the question resolves to it.
    Glossary,
    /// Not chosen by score: it joins chosen tables together.
    Bridge,
    /// The whole schema was sent.
    Whole,
    /// A repair asked for it (the table that owns an unknown column).
    Repair,
}

/// One selected table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredTable {
    pub table: String,
    pub score: f64,
    pub reason: Reason,
}

/// Settings of one selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectOptions {
    /// The whole schema is sent when its cards fit in this many tokens.
    pub budget_tokens: usize,
    /// Tables kept by score when linking (bridges come on top).
    pub k: usize,
    /// Link even when the whole schema fits (evaluation, experiments).
    pub force_linking: bool,
    /// Extra tables on a retry after an unknown column or table.
    pub widen: usize,
}

impl Default for SelectOptions {
    fn default() -> Self {
        SelectOptions {
            budget_tokens: DEFAULT_BUDGET_TOKENS,
            k: DEFAULT_K,
            force_linking: false,
            widen: 0,
        }
    }
}

/// The tables chosen for a question, in table-name order so that prompts built from
/// them share their prefix from one question to the next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub mode: SelectionMode,
    pub tables: Vec<ScoredTable>,
    /// Sum of the chosen cards' estimated tokens.
    pub prompt_tokens: usize,
    /// Sum of every card's estimated tokens.
    pub whole_tokens: usize,
}

impl Selection {
    /// Adds a table a repair asked for, keeping table-name order.
    pub fn add_repair_table(&mut self, table: &str, tokens: usize) {
        if self.contains(table) {
            return;
        }
        self.tables.push(ScoredTable {
            table: table.to_string(),
            score: 0.0,
            reason: Reason::Repair,
        });
        self.tables.sort_by(|a, b| a.table.cmp(&b.table));
        self.prompt_tokens += tokens;
    }

    pub fn table_names(&self) -> Vec<&str> {
        self.tables.iter().map(|t| t.table.as_str()).collect()
    }

    /// Whether a table (any case) was selected.
    pub fn contains(&self, table: &str) -> bool {
        self.tables
            .iter()
            .any(|t| t.table.eq_ignore_ascii_case(table))
    }
}

/// A glossary term and the tables its meaning names.
#[derive(Debug, Clone)]
struct GlossaryEntry {
    phrase: Vec<String>,
    tables: Vec<usize>,
}

/// How one table scored for one question.
#[derive(Debug, Clone)]
struct Candidate {
    lexical: f64,
    glossary: f64,
    value: Option<ValueMatch>,
    total: f64,
    eligible: bool,
}

impl Candidate {
    fn reason(&self) -> Reason {
        if let Some(found) = &self.value {
            Reason::Value {
                column: found.column.clone(),
                value: found.value.clone(),
            }
        } else if self.glossary > self.lexical {
            Reason::Glossary
        } else {
            Reason::Lexical
        }
    }
}

/// One foreign-key hop of a join path: (table, column, table, column), the first
/// table's column equal to the second's.
pub type JoinHop = (String, String, String, String);

/// Everything the linker knows about one database: the cards, a BM25 index over them,
/// the value index, the glossary, the distractors and the foreign-key graph.
#[derive(Debug, Clone)]
pub struct SchemaIndex {
    /// In table-name order.
    cards: Vec<TableCard>,
    position: BTreeMap<String, usize>,
    bm25: Bm25,
    values: ValueIndex,
    glossary: Vec<GlossaryEntry>,
    /// Distractor tables and the words (singular, lower case) that name them.
    distractors: BTreeMap<usize, BTreeSet<String>>,
    graph: FkGraph,
}

/// Whether a description says its table is not for answering questions.
pub fn is_distractor_description(description: &str) -> bool {
    let text: Vec<String> = words(description);
    DISTRACTOR_MARKS
        .iter()
        .any(|mark| contains_run(&text, &words(mark)))
}

impl SchemaIndex {
    /// Builds the index of a database: its cards, its notes (descriptions of columns,
    /// glossary) and the distinct values of its short text columns, read through the
    /// gate. Distractor tables' values are not read: a value cannot make one eligible.
    pub async fn build(gate: &Gate, cards: &[TableCard]) -> Result<SchemaIndex, GateError> {
        let readable: Vec<&TableCard> = cards
            .iter()
            .filter(|card| !is_distractor_description(&card.description))
            .collect();
        let values = values::collect(gate, &readable).await?;
        Ok(Self::from_parts_with_notes(cards, values, gate.notes()))
    }

    /// An index from cards and values alone (no notes): for tests and for benchmarks
    /// with no database to read values from.
    pub fn from_parts(cards: &[TableCard], values: Vec<ColumnValues>) -> SchemaIndex {
        Self::from_parts_with_notes(cards, values, &SchemaNotes::default())
    }

    /// An index from cards, values and the database's notes.
    pub fn from_parts_with_notes(
        cards: &[TableCard],
        values: Vec<ColumnValues>,
        notes: &SchemaNotes,
    ) -> SchemaIndex {
        let mut cards = cards.to_vec();
        cards.sort_by(|a, b| a.table.cmp(&b.table));
        let position: BTreeMap<String, usize> = cards
            .iter()
            .enumerate()
            .map(|(index, card)| (card.table.to_lowercase(), index))
            .collect();
        let vocabulary: BTreeSet<String> = cards
            .iter()
            .flat_map(|card| std::iter::once(&card.table).chain(&card.columns))
            .flat_map(|name| words(name))
            .collect();
        let documents: Vec<Vec<(Field, String)>> = cards
            .iter()
            .map(|card| document(card, notes, &vocabulary))
            .collect();
        let bm25 = Bm25::new(&documents);
        let glossary = parse_glossary(notes, &position);
        let distractors = find_distractors(&cards);
        let graph = FkGraph::new(cards.len(), bridges::edges_from_cards(&cards), &position);
        SchemaIndex {
            cards,
            position,
            bm25,
            values: ValueIndex::new(values),
            glossary,
            distractors,
            graph,
        }
    }

    /// The columns that store `value` (case ignored), from the value index.
    pub fn columns_holding(&self, value: &str) -> Vec<(String, String)> {
        self.values.columns_holding(value)
    }

    /// The cards, in table-name order.
    pub fn cards(&self) -> &[TableCard] {
        &self.cards
    }

    /// The cards of a selection, in its order (table name), for the schema block.
    pub fn cards_for(&self, selection: &Selection) -> Vec<&TableCard> {
        selection
            .tables
            .iter()
            .filter_map(|t| self.card(&t.table))
            .collect()
    }

    pub fn card(&self, table: &str) -> Option<&TableCard> {
        self.position
            .get(&table.to_lowercase())
            .map(|&index| &self.cards[index])
    }

    /// Tables the linker never picks unless a question names them.
    pub fn distractors(&self) -> Vec<&str> {
        self.distractors
            .keys()
            .map(|&index| self.cards[index].table.as_str())
            .collect()
    }

    /// The foreign keys the bridges and join paths walk.
    pub fn foreign_keys(&self) -> &[ForeignKeyEdge] {
        &self.graph.edges
    }

    /// How many values the value index holds.
    pub fn indexed_values(&self) -> usize {
        self.values.len()
    }

    /// Estimated tokens of every card together.
    pub fn whole_tokens(&self) -> usize {
        self.cards.iter().map(|card| card.tokens).sum()
    }

    fn candidates(&self, question: &str) -> Vec<Candidate> {
        let lexical = self.bm25.scores(&text_terms(question));
        let phrase = phrase_terms(question);
        let mut glossary = vec![0.0; self.cards.len()];
        for entry in &self.glossary {
            if contains_run(&phrase, &entry.phrase) {
                for &table in &entry.tables {
                    glossary[table] += GLOSSARY_BONUS;
                }
            }
        }
        let mut value: Vec<Option<ValueMatch>> = vec![None; self.cards.len()];
        for found in self.values.matches(question) {
            let Some(&table) = self.position.get(&found.table.to_lowercase()) else {
                continue;
            };
            let better = value[table]
                .as_ref()
                .is_none_or(|best| found.strength > best.strength);
            if better {
                value[table] = Some(found);
            }
        }
        let question_words: BTreeSet<String> =
            words(question).iter().map(|word| singular(word)).collect();
        (0..self.cards.len())
            .map(|table| {
                let bonus = value[table]
                    .as_ref()
                    .map_or(0.0, |found| VALUE_BONUS * found.strength);
                let eligible = match self.distractors.get(&table) {
                    None => true,
                    Some(names) => {
                        names.iter().any(|word| question_words.contains(word))
                            || contains_run(&phrase, &phrase_terms(&self.cards[table].table))
                    }
                };
                Candidate {
                    lexical: lexical[table],
                    glossary: glossary[table],
                    total: lexical[table] + glossary[table] + bonus,
                    value: value[table].take(),
                    eligible,
                }
            })
            .collect()
    }

    /// Eligible tables, best first; ties go to better-connected tables, then by name.
    fn ranking(&self, candidates: &[Candidate]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..candidates.len())
            .filter(|&table| candidates[table].eligible)
            .collect();
        order.sort_by(|&a, &b| {
            candidates[b]
                .total
                .total_cmp(&candidates[a].total)
                .then(self.graph.degree(b).cmp(&self.graph.degree(a)))
                .then(self.cards[a].table.cmp(&self.cards[b].table))
        });
        order
    }

    /// Chooses the tables for a question: the whole schema when it fits the budget
    /// (and linking is not forced), else the top k (+ widen) by score plus the bridge
    /// tables that join them.
    pub fn select(&self, question: &str, options: &SelectOptions) -> Selection {
        let whole_tokens = self.whole_tokens();
        let candidates = self.candidates(question);
        if !options.force_linking && whole_tokens <= options.budget_tokens {
            return Selection {
                mode: SelectionMode::Whole,
                tables: self
                    .cards
                    .iter()
                    .zip(&candidates)
                    .map(|(card, candidate)| ScoredTable {
                        table: card.table.clone(),
                        score: candidate.total,
                        reason: Reason::Whole,
                    })
                    .collect(),
                prompt_tokens: whole_tokens,
                whole_tokens,
            };
        }
        let order = self.ranking(&candidates);
        let k = options.k.saturating_add(options.widen).max(1);
        let mut chosen: BTreeMap<usize, Reason> = BTreeMap::new();
        let mut tree: BTreeSet<usize> = BTreeSet::new();
        // Tables are joined to the growing tree in score order, so the tables chosen
        // at k are a subset of those chosen at k + 1.
        for &table in order.iter().take(k) {
            // A table with no score only fills the k: bridging it would bring in
            // tables nothing in the question asked for.
            let scored = candidates[table].total > 0.0;
            if scored && !tree.is_empty() && !tree.contains(&table) {
                let allowed = |node: usize| candidates[node].eligible;
                if let Some(path) = self.graph.shortest_path(&tree, table, &order, &allowed) {
                    for &(node, _) in path.iter().filter(|(node, _)| *node != table) {
                        tree.insert(node);
                        chosen.entry(node).or_insert(Reason::Bridge);
                    }
                }
            }
            tree.insert(table);
            chosen.insert(table, candidates[table].reason());
        }
        let tables: Vec<ScoredTable> = chosen
            .into_iter()
            .map(|(table, reason)| ScoredTable {
                table: self.cards[table].table.clone(),
                score: candidates[table].total,
                reason,
            })
            .collect();
        let prompt_tokens = tables
            .iter()
            .filter_map(|t| self.card(&t.table))
            .map(|card| card.tokens)
            .sum();
        Selection {
            mode: SelectionMode::Linked,
            tables,
            prompt_tokens,
            whole_tokens,
        }
    }

    /// (table, column) pairs for a column name the database rejected: the tables with
    /// a column of exactly that name, else the nearest names (edit distance at most
    /// 2, or the same name in another naming convention: see [`name_distance`]). A
    /// qualified `t.col` is looked up by its column part. Distractors come last.
    pub fn column_candidates(&self, column: &str) -> Vec<(String, String)> {
        let wanted = column
            .rsplit('.')
            .next()
            .unwrap_or(column)
            .trim()
            .trim_matches(|c| c == '"' || c == '`' || c == '[' || c == ']')
            .to_lowercase();
        let mut best = usize::MAX;
        let mut found: Vec<(usize, String)> = Vec::new();
        for (index, card) in self.cards.iter().enumerate() {
            let prefix = shared_prefix(&card.columns);
            for name in &card.columns {
                let distance = name_distance(&wanted, name, prefix);
                if distance > 2 || distance > best {
                    continue;
                }
                if distance < best {
                    best = distance;
                    found.clear();
                }
                found.push((index, name.clone()));
            }
        }
        found.sort_by_key(|(index, name)| {
            (self.distractors.contains_key(index), *index, name.clone())
        });
        found
            .into_iter()
            .map(|(index, name)| (self.cards[index].table.clone(), name))
            .collect()
    }

    /// Tables owning a column of that name (else of the nearest names); see
    /// [`SchemaIndex::column_candidates`].
    pub fn owners_of_column(&self, column: &str) -> Vec<String> {
        let mut tables: Vec<String> = Vec::new();
        for (table, _) in self.column_candidates(column) {
            if !tables.contains(&table) {
                tables.push(table);
            }
        }
        tables
    }

    /// The shortest foreign-key path from any of `from` to `to`, as hops, each joining
    /// the previous table to the next. Empty when `to` is already among `from`; None
    /// when nothing connects them.
    pub fn join_path(&self, from: &[String], to: &str) -> Option<Vec<JoinHop>> {
        let target = *self.position.get(&to.to_lowercase())?;
        let sources: BTreeSet<usize> = from
            .iter()
            .filter_map(|table| self.position.get(&table.to_lowercase()).copied())
            .collect();
        if sources.is_empty() {
            return None;
        }
        let path = self.graph.shortest_path(&sources, target, &[], &|_| true)?;
        let mut hops = Vec::new();
        for (node, edge) in path {
            let edge = &self.graph.edges[edge];
            let from_position = self.position.get(&edge.table.to_lowercase()).copied();
            let hop = if from_position == Some(node) {
                (
                    edge.ref_table.clone(),
                    edge.ref_column.clone(),
                    edge.table.clone(),
                    edge.column.clone(),
                )
            } else {
                (
                    edge.table.clone(),
                    edge.column.clone(),
                    edge.ref_table.clone(),
                    edge.ref_column.clone(),
                )
            };
            hops.push(hop);
        }
        Some(hops)
    }
}

/// One table's BM25 document: name words, column words, and the affirmative clauses
/// of its description and column notes. A name written as one run of lower-case
/// letters (`countrylanguage`) also gets the schema's own words it is made of.
fn document(
    card: &TableCard,
    notes: &SchemaNotes,
    vocabulary: &BTreeSet<String>,
) -> Vec<(Field, String)> {
    let name_terms = |name: &str| -> Vec<String> {
        let mut terms = identifier_terms(name);
        for word in words(name) {
            if let Some((left, right)) = lexical::compound_parts(&word, vocabulary) {
                terms.extend(identifier_terms(&left));
                terms.extend(identifier_terms(&right));
            }
        }
        terms
    };
    let mut terms: Vec<(Field, String)> = name_terms(&card.table)
        .into_iter()
        .map(|term| (Field::TableName, term))
        .collect();
    for column in &card.columns {
        terms.extend(
            name_terms(column)
                .into_iter()
                .map(|term| (Field::ColumnName, term)),
        );
    }
    let mut description = affirmative_clauses(&card.description);
    if let Some(note) = notes.tables.get(&card.table.to_lowercase()) {
        for (column, text) in &note.columns {
            if card.columns.iter().any(|c| c.eq_ignore_ascii_case(column)) {
                description.push_str(". ");
                description.push_str(&affirmative_clauses(text));
            }
        }
    }
    terms.extend(
        text_terms(&description)
            .into_iter()
            .map(|term| (Field::Description, term)),
    );
    terms
}

/// Sentences and `;` clauses of a note.
fn clauses(text: &str) -> impl Iterator<Item = &str> {
    text.split(". ").flat_map(|sentence| sentence.split(';'))
}

fn is_negated(clause: &str) -> bool {
    words(clause)
        .iter()
        .any(|word| NEGATIONS.contains(&word.as_str()))
}

/// The clauses of a description that say what the table is (see [`NEGATIONS`]).
fn affirmative_clauses(text: &str) -> String {
    clauses(text)
        .filter(|clause| !is_negated(clause))
        .collect::<Vec<_>>()
        .join(". ")
}

/// The tables a glossary meaning points to. A qualified `table.column` is a pointer
/// unless its clause opens with a negation ("Never tbl_prod_master_old.rate"); a bare
/// table name is prose, and counts only in a clause with no negation at all, so that
/// "Walk-ins are not rows of customers" does not send "walk-in" to customers.
fn glossary_tables(meaning: &str, position: &BTreeMap<String, usize>) -> Vec<usize> {
    let mut tables = Vec::new();
    for clause in clauses(meaning) {
        let opens_negated = words(clause)
            .first()
            .is_some_and(|word| NEGATIONS.contains(&word.as_str()));
        let negated = is_negated(clause);
        for token in clause.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')) {
            let token = token.trim_matches('.');
            let (name, qualified) = match token.split_once('.') {
                Some((table, _)) => (table, true),
                None => (token, false),
            };
            let counts = if qualified { !opens_negated } else { !negated };
            if let (true, Some(&table)) = (counts, position.get(&name.to_lowercase())) {
                tables.push(table);
            }
        }
    }
    tables.sort_unstable();
    tables.dedup();
    tables
}

/// Glossary terms with the tables their meanings point to. A meaning that defers to
/// another term ("See outstanding.", "Same as revenue when...") also takes that
/// term's tables.
fn parse_glossary(notes: &SchemaNotes, position: &BTreeMap<String, usize>) -> Vec<GlossaryEntry> {
    let direct: Vec<(Vec<String>, Vec<usize>, Vec<String>)> = notes
        .glossary
        .iter()
        .map(|(term, meaning)| {
            (
                phrase_terms(term),
                glossary_tables(meaning, position),
                phrase_terms(meaning),
            )
        })
        .collect();
    let see = phrase_terms("see");
    let same_as = phrase_terms("same as");
    direct
        .iter()
        .map(|(phrase, tables, meaning)| {
            let mut tables = tables.clone();
            for (other, other_tables, _) in &direct {
                let defers = [&see, &same_as].iter().any(|lead| {
                    let needle: Vec<String> = lead.iter().chain(other).cloned().collect();
                    contains_run(meaning, &needle)
                });
                if other != phrase && defers {
                    tables.extend(other_tables);
                }
            }
            tables.sort_unstable();
            tables.dedup();
            GlossaryEntry {
                phrase: phrase.clone(),
                tables,
            }
        })
        .filter(|entry| !entry.phrase.is_empty() && !entry.tables.is_empty())
        .collect()
}

/// Distractor tables and the words that name them: the words of the table's name that
/// no other table's document has ("settings", "tbl"), the marks its description uses
/// ("legacy", "configuration"), and the word qualifying a one-word mark ("till" in
/// "Till configuration"), which says what kind of dead or configuration table it is.
fn find_distractors(cards: &[TableCard]) -> BTreeMap<usize, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for (index, card) in cards.iter().enumerate() {
        if !is_distractor_description(&card.description) {
            continue;
        }
        let own_name = card.table.to_lowercase();
        let elsewhere: BTreeSet<String> = cards
            .iter()
            .enumerate()
            .filter(|(other, _)| *other != index)
            .flat_map(|(_, other)| {
                let mut text = words(&other.table);
                text.extend(other.columns.iter().flat_map(|column| words(column)));
                // Another table's note that mentions this one by name ("use products;
                // tbl_prod_master_old is not") does not make its words common.
                let description = other.description.to_lowercase().replace(&own_name, " ");
                text.extend(words(&description));
                text
            })
            .map(|word| singular(&word))
            .collect();
        let mut names: BTreeSet<String> = words(&card.table)
            .iter()
            .filter(|word| !text_terms(word).is_empty())
            .map(|word| singular(word))
            .filter(|word| !elsewhere.contains(word))
            .collect();
        let description = words(&card.description);
        for mark in DISTRACTOR_MARKS {
            let mark_words = words(mark);
            if !contains_run(&description, &mark_words) {
                continue;
            }
            if let [single] = mark_words.as_slice() {
                names.insert(singular(single));
                for pair in description.windows(2) {
                    let qualifier = &pair[0];
                    let is_mark = DISTRACTOR_MARKS.contains(&qualifier.as_str());
                    if pair[1] == *single
                        && !is_mark
                        && qualifier.chars().all(char::is_alphabetic)
                        && !text_terms(qualifier).is_empty()
                    {
                        names.insert(singular(qualifier));
                    }
                }
            }
        }
        out.insert(index, names);
    }
    out
}

/// A word without its plural s: how the words naming a distractor are compared. Not
/// the stemmer, which would send "settings" to "set" and let "a set of taps" name it.
fn singular(word: &str) -> String {
    match word.strip_suffix('s') {
        Some(base) if base.len() >= 3 && !base.ends_with('s') => base.to_string(),
        _ => word.to_string(),
    }
}

/// How far a rejected column name is from a real one, for the unknown-column repair:
/// the edit distance of the lowercased names, except that the same words in the
/// schema's naming convention count as 1. `ticker_type` for `sbTickerType` is 3 edits
/// apart and `high` for `sbDpHigh` 4, yet they are the columns a model meant when it
/// wrote the question's words in snake case where the schema prefixes every column of a
/// table (`prefix`, from [`shared_prefix`]); without this the repair told it no table
/// had such a column and the agent declined a question the database could answer.
/// Both names are already lowercase.
fn name_distance(wanted: &str, name: &str, prefix: &str) -> usize {
    let distance = edit_distance(wanted, name);
    if distance <= 1 {
        return distance;
    }
    let squashed = |text: &str| text.replace('_', "");
    let wanted = squashed(wanted);
    let own_part = name.strip_prefix(prefix).map(squashed);
    let name = squashed(name);
    // Six letters at least for a bare tail: `type` or `name` ends half the columns of
    // a schema. Past the table's own prefix the rest is the column's whole name.
    let same_words = wanted == name
        || (wanted.len() >= 6 && name.ends_with(&wanted))
        || (!prefix.is_empty() && own_part.is_some_and(|own| own == wanted));
    if same_words {
        1
    } else {
        distance
    }
}

/// The prefix every column of a table starts with (`sbdp` of `sbDpHigh`, `sbDpLow`,
/// ...; `customer_` of `Customer_ID`, `Customer_Name`, ...), or "" when the table has
/// fewer than 3 columns, they share fewer than 3 characters, or the prefix would leave
/// a column with fewer than 2 of its own.
fn shared_prefix(columns: &[String]) -> &str {
    let Some(first) = columns.first() else {
        return "";
    };
    if columns.len() < 3 {
        return "";
    }
    let mut length = first.len();
    for column in &columns[1..] {
        length = first
            .char_indices()
            .zip(column.chars())
            .take_while(|((_, a), b)| a == b)
            .last()
            .map_or(0, |((at, a), _)| (at + a.len_utf8()).min(length));
    }
    let prefix = &first[..length];
    let leaves_enough = columns.iter().all(|column| column.len() >= length + 2);
    if length >= 3 && leaves_enough {
        prefix
    } else {
        ""
    }
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests;
