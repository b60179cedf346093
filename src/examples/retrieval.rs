//! Which verified examples a question is like: a pure function of the question, the
//! schema and the examples, testable without a model (decision 0060).
//!
//! The score is lexical, in two parts. The question's search terms (the linker's own:
//! stemmed, abbreviations expanded, stop words dropped) are compared with each example's
//! by overlap (Jaccard), 0.6 of the score. The schema terms the question links to (the
//! tables and columns whose every word it says) are compared with those of the
//! example's question and the tables its SQL reads, 0.4, so two questions worded
//! differently about the same tables still meet. Weighing words by their rarity among
//! the examples was measured too, and did worse (decision 0060).
//!
//! A question that says the very same words as an example, in the same order once
//! stemmed, is the same question ([`Ranked::same_question`]): it may be answered by
//! running the example's SQL again. Stop words count there ("not", "more than"), so a
//! negated or compared question is never the same as its plain form.

use std::collections::{BTreeMap, BTreeSet};

use super::Example;
use crate::linking::lexical::{identifier_terms, phrase_terms, text_terms};
use crate::schema::TableSchema;

/// How many examples at most go into a prompt.
pub const PROMPT_EXAMPLES: usize = 3;

/// The lowest score an example needs to be shown to the model at all: below it, the
/// example shares no more than an incidental word.
pub const MIN_PROMPT_SCORE: f64 = 0.2;

/// How a score is made: the weight of the question's words (the rest is its schema
/// terms), and whether a word counts by its rarity among the examples. The other
/// settings are what decision 0060 measured askdb's against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    pub words: f64,
    pub rarity: bool,
}

impl Weights {
    /// askdb's retrieval.
    pub const ASKDB: Weights = Weights {
        words: 0.6,
        rarity: false,
    };
    /// askdb's, with words weighed by rarity.
    pub const RARE_WORDS_AND_SCHEMA: Weights = Weights {
        words: 0.6,
        rarity: true,
    };
    /// Plain word overlap (Jaccard over the question's terms): the common baseline.
    pub const PLAIN_WORDS: Weights = Weights {
        words: 1.0,
        rarity: false,
    };
    /// Words weighed by rarity, no schema terms.
    pub const RARE_WORDS: Weights = Weights {
        words: 1.0,
        rarity: true,
    };
}

/// One example with how alike it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked<'a> {
    pub example: &'a Example,
    /// 0 to 1.
    pub score: f64,
    /// The very same question: its SQL may be run again without the model.
    pub same_question: bool,
}

/// The schema terms a text links to: `table` for a table whose every name word it
/// says, `table.column` likewise for a column.
fn linked_schema_terms(terms: &BTreeSet<String>, schema: &[TableSchema]) -> BTreeSet<String> {
    let says = |name: &str| {
        let words = identifier_terms(name);
        !words.is_empty() && words.iter().all(|word| terms.contains(word))
    };
    let mut linked = BTreeSet::new();
    for table in schema {
        let table_name = table.name.to_lowercase();
        if says(&table.name) {
            linked.insert(table_name.clone());
        }
        for column in &table.columns {
            if says(&column.name) {
                linked.insert(format!("{table_name}.{}", column.name.to_lowercase()));
            }
        }
    }
    linked
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

/// Whether two questions say the same words in the same order, once stemmed.
pub fn same_question(a: &str, b: &str) -> bool {
    let left = phrase_terms(a);
    !left.is_empty() && left == phrase_terms(b)
}

/// The examples ranked by how alike their questions are to `question`, best first
/// (ties by id, oldest first), scores above zero only, at most `limit`.
pub fn rank<'a>(
    question: &str,
    schema: &[TableSchema],
    examples: &'a [Example],
    limit: usize,
) -> Vec<Ranked<'a>> {
    rank_weighted(question, schema, examples, limit, Weights::ASKDB)
}

/// [`rank`] with other weights (what the measurement compares).
pub fn rank_weighted<'a>(
    question: &str,
    schema: &[TableSchema],
    examples: &'a [Example],
    limit: usize,
    weights: Weights,
) -> Vec<Ranked<'a>> {
    let query: BTreeSet<String> = text_terms(question).into_iter().collect();
    let documents: Vec<BTreeSet<String>> = examples
        .iter()
        .map(|example| text_terms(&example.question).into_iter().collect())
        .collect();
    let mut frequency: BTreeMap<&str, usize> = BTreeMap::new();
    for document in &documents {
        for term in document {
            *frequency.entry(term.as_str()).or_default() += 1;
        }
    }
    let count = examples.len() as f64;
    let weight = |term: &str| {
        if !weights.rarity {
            return 1.0;
        }
        let seen = frequency.get(term).copied().unwrap_or(0) as f64;
        (1.0 + (count + 1.0) / (seen + 1.0)).ln()
    };
    let query_links = linked_schema_terms(&query, schema);
    let mut ranked: Vec<Ranked<'a>> = examples
        .iter()
        .zip(&documents)
        .map(|(example, document)| {
            let shared: f64 = query.intersection(document).map(|t| weight(t)).sum();
            let all: f64 = query.union(document).map(|t| weight(t)).sum();
            let words = if all > 0.0 { shared / all } else { 0.0 };
            let mut links = linked_schema_terms(document, schema);
            links.extend(example.tables.iter().map(|table| table.to_lowercase()));
            let schema_score = jaccard(&query_links, &links);
            let same = same_question(question, &example.question);
            let score = if same {
                1.0
            } else {
                weights.words * words + (1.0 - weights.words) * schema_score
            };
            Ranked {
                example,
                score,
                same_question: same,
            }
        })
        .filter(|ranked| ranked.score > 0.0)
        .collect();
    ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.example.id.cmp(&b.example.id))
    });
    ranked.truncate(limit);
    ranked
}
