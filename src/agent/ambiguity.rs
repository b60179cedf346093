//! The ambiguity check, by rules before any model call: words such as best, top,
//! recent, lately or last quarter have no single meaning. When the database's glossary
//! defines the word, the definition becomes a stated assumption and the question goes
//! on; when it does not, askdb asks, offering concrete options. The model may still ask
//! on its own (a `clarify` reply); these rules catch the common cases for free. The
//! decision also carries the [`super::scope`] findings (a restricted column asked for,
//! a period the question names), so `askdb plan` shows everything decided before a call.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::schema::{SchemaNotes, TableSchema};

/// What the rules decided about a question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AmbiguityDecision {
    /// Vague words found, each resolved or not.
    pub terms: Vec<VagueTerm>,
    /// Assumptions taken from the glossary, stated to the model and the user.
    pub assumptions: Vec<String>,
    /// A clarification to ask instead of answering, when a term stays unresolved.
    pub clarify: Option<Clarification>,
    /// A restricted column (`table.column`) the question asks for: declined before any
    /// model call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restricted_column: Option<String>,
    /// Why the question asks to change data: declined before any model call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_request: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VagueTerm {
    pub term: String,
    pub resolved_by_glossary: bool,
}

/// A question back to the user with 2-4 concrete options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Clarification {
    pub question: String,
    pub options: Vec<String>,
}

/// A vague word, how to spot it, and where its options come from when the glossary is
/// silent.
struct Rule {
    term: &'static str,
    /// Word sequences (lower-case) that signal the term.
    phrases: &'static [&'static str],
    ask: &'static str,
    options: Options,
}

/// Where a rule's options come from. Nothing of one database's business is written
/// here: measures come from the database's notes or its schema, and the fiscal quarter
/// only from notes that name the fiscal year's first month.
#[derive(Clone, Copy)]
enum Options {
    /// What to rank or judge by: the notes' measures, else counts of the tables that
    /// refer to the ones the question names and their numeric columns.
    Measures,
    /// A window of time, offered only where the schema holds dates.
    RecentPeriods,
    /// Which quarter, offered only where the schema holds dates.
    Quarters,
}

const RULES: &[Rule] = &[
    Rule {
        term: "best",
        phrases: &["best", "most valuable", "top performing"],
        ask: "What should \"best\" be measured by?",
        options: Options::Measures,
    },
    Rule {
        term: "top",
        phrases: &["top"],
        ask: "Top by which measure?",
        options: Options::Measures,
    },
    Rule {
        term: "recent",
        phrases: &["recent", "recently", "lately", "these days", "nowadays"],
        ask: "Which period counts as recent?",
        options: Options::RecentPeriods,
    },
    Rule {
        term: "last quarter",
        phrases: &["last quarter", "this quarter", "previous quarter"],
        ask: "Which quarter do you mean?",
        options: Options::Quarters,
    },
    Rule {
        term: "performance",
        phrases: &[
            "how did we do",
            "how are we doing",
            "performance",
            "doing well",
        ],
        ask: "Which figure should describe how it went?",
        options: Options::Measures,
    },
];

/// At most this many options are offered.
const MAX_OPTIONS: usize = 4;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// What the rules know of one database's schema: the words of its names, what can be
/// counted or summed, and whether it holds dates. Built once per gate.
#[derive(Debug, Clone, Default)]
pub struct SchemaTerms {
    /// Every table and column name as lower-case words ([`schema_words`]).
    pub words: BTreeSet<String>,
    tables: Vec<MeasurableTable>,
    /// The noun each measure column measures, its name's last word (`rank` of
    /// `loser_rank`), read once here rather than for every word of every question.
    measure_nouns: BTreeSet<String>,
    has_dates: bool,
}

#[derive(Debug, Clone)]
struct MeasurableTable {
    name: String,
    /// The table's name as words ("order items").
    words: String,
    /// Tables with a foreign key to this one.
    referenced_by: Vec<String>,
    /// Numeric columns that are neither keys nor identifiers, nor restricted.
    measures: Vec<String>,
}

impl SchemaTerms {
    /// The terms of the visible schema; restricted columns are never offered.
    pub fn new(schema: &[TableSchema], notes: &SchemaNotes) -> Self {
        let words = schema_words(schema.iter().flat_map(|table| {
            std::iter::once(table.name.as_str())
                .chain(table.columns.iter().map(|column| column.name.as_str()))
        }));
        let restricted: BTreeSet<String> = notes
            .restricted_columns
            .iter()
            .map(|column| column.to_lowercase())
            .collect();
        let tables: Vec<MeasurableTable> = schema
            .iter()
            .map(|table| {
                let keys: BTreeSet<String> = table
                    .primary_key
                    .iter()
                    .chain(table.foreign_keys.iter().flat_map(|key| key.columns.iter()))
                    .map(|column| column.to_lowercase())
                    .collect();
                let measures = table
                    .columns
                    .iter()
                    .filter(|column| is_numeric(&column.data_type))
                    .filter(|column| {
                        let name = column.name.to_lowercase();
                        !keys.contains(&name)
                            && !is_identifier_name(&name)
                            && !restricted
                                .contains(&format!("{}.{name}", table.name.to_lowercase()))
                    })
                    .map(|column| column.name.clone())
                    .collect();
                let referenced_by = schema
                    .iter()
                    .filter(|other| {
                        other.name != table.name
                            && other
                                .foreign_keys
                                .iter()
                                .any(|key| key.references_table.eq_ignore_ascii_case(&table.name))
                    })
                    .map(|other| other.name.clone())
                    .collect();
                MeasurableTable {
                    words: identifier_words(&table.name),
                    name: table.name.clone(),
                    referenced_by,
                    measures,
                }
            })
            .collect();
        let has_dates = schema
            .iter()
            .flat_map(|table| &table.columns)
            .any(|column| is_date_like(&column.name, &column.data_type));
        let measure_nouns = tables
            .iter()
            .flat_map(|table| &table.measures)
            .filter_map(|column| {
                identifier_words(column)
                    .split_whitespace()
                    .last()
                    .map(str::to_string)
            })
            .collect();
        SchemaTerms {
            words,
            tables,
            measure_nouns,
            has_dates,
        }
    }

    /// Whether a word of the question is the noun a numeric column measures, its name's
    /// last word: "best rank" beside `loser_rank`, "top 5 largest area" beside
    /// `SurfaceArea` say what is ranked. (The name's other words are most often the
    /// entity, as "order" in `order_total`, which says nothing of the measure.)
    fn measure_word(&self, word: &str) -> bool {
        self.measure_nouns.contains(word)
            || word
                .strip_suffix('s')
                .is_some_and(|noun| self.measure_nouns.contains(noun))
    }

    /// Measures from the schema: for the tables the question names (or, when it names
    /// none, every table), how many rows of each table that refers to them, then their
    /// numeric columns, each naming the table and column it means.
    fn measure_options(&self, words: &[String]) -> Vec<String> {
        let named: Vec<&MeasurableTable> = self
            .tables
            .iter()
            .filter(|table| names_schema_name(words, &table.words))
            .collect();
        let candidates: Vec<&MeasurableTable> = if named.is_empty() {
            self.tables.iter().collect()
        } else {
            named
        };
        let mut options = Vec::new();
        for table in &candidates {
            for referrer in &table.referenced_by {
                options.push(format!(
                    "most {} (a count of {referrer})",
                    identifier_words(referrer)
                ));
            }
        }
        for table in &candidates {
            for column in &table.measures {
                options.push(format!(
                    "highest {} ({}.{column})",
                    identifier_words(column),
                    table.name
                ));
            }
        }
        let mut seen = BTreeSet::new();
        options.retain(|option| seen.insert(option.clone()));
        options.truncate(MAX_OPTIONS);
        options
    }

    fn options(&self, kind: Options, notes: &SchemaNotes, words: &[String]) -> Vec<String> {
        match kind {
            Options::Measures if !notes.measures.is_empty() => {
                notes.measures.iter().take(MAX_OPTIONS).cloned().collect()
            }
            Options::Measures => self.measure_options(words),
            Options::RecentPeriods if self.has_dates => vec![
                "the last 7 days".to_string(),
                "the last 30 days".to_string(),
                "the last 90 days".to_string(),
            ],
            Options::Quarters if self.has_dates => {
                let mut options = vec![
                    "the last complete calendar quarter in the data".to_string(),
                    "the last 3 months up to the latest date in the data".to_string(),
                ];
                if let Some(first) = notes
                    .fiscal_year_start_month
                    .filter(|month| (2..=12).contains(month))
                {
                    let first = usize::from(first) - 1;
                    let last = (first + 11) % 12;
                    options.push(format!(
                        "the quarter of the fiscal year ({}-{}) before the current one",
                        MONTHS[first], MONTHS[last]
                    ));
                }
                options
            }
            Options::RecentPeriods | Options::Quarters => Vec::new(),
        }
    }
}

fn identifier_words(name: &str) -> String {
    crate::words::words(name, crate::words::Split::Identifier).join(" ")
}

/// A declared type that holds numbers: SQLite's affinities and PostgreSQL's names.
fn is_numeric(data_type: &str) -> bool {
    let lowered = data_type.to_lowercase();
    ["int", "real", "num", "dec", "float", "double", "money"]
        .iter()
        .any(|part| lowered.contains(part))
}

/// Names that number or code things rather than measure them (`id`, `zip_code`,
/// `phone_no`): never offered as a measure.
fn is_identifier_name(name: &str) -> bool {
    let words = identifier_words(name);
    let last = words.split_whitespace().last().unwrap_or("");
    matches!(
        last,
        "id" | "ids" | "code" | "no" | "num" | "number" | "zip" | "phone" | "key" | "year"
    )
}

fn is_date_like(name: &str, data_type: &str) -> bool {
    let data_type = data_type.to_lowercase();
    let name = identifier_words(name);
    data_type.contains("date")
        || data_type.contains("time")
        || name
            .split_whitespace()
            .any(|word| matches!(word, "date" | "dt" | "time" | "day" | "year" | "month"))
}

fn words(text: &str) -> Vec<String> {
    crate::words::words(text, crate::words::Split::KeepHyphens)
}

fn contains_phrase(words: &[String], phrase: &str) -> bool {
    let wanted: Vec<&str> = phrase.split_whitespace().collect();
    !wanted.is_empty()
        && words
            .windows(wanted.len())
            .any(|window| window.iter().zip(&wanted).all(|(a, b)| a == b))
}

/// Whether the question names what to measure ("by revenue", "sold", "price"): then
/// "top 5" is concrete, and so is "performance" ("stock performance ... calculate the
/// price change" says which figure describes it; defog's questions define their vague
/// words this way in the instructions that follow them).
fn names_a_measure(words: &[String]) -> bool {
    const MEASURES: &[&str] = &[
        "by",
        "revenue",
        "sales",
        "sold",
        "spent",
        "amount",
        "quantity",
        "units",
        "billed",
        "collected",
        "paid",
        "count",
        "number",
        "most",
        "highest",
        "expensive",
        "cheapest",
        "price",
        "value",
        "longest",
        "stock",
        // Superlatives name their measure as plainly as "highest" does.
        "largest",
        "biggest",
        "greatest",
        "smallest",
        "lowest",
        "least",
        "fewest",
        "shortest",
        "oldest",
        "youngest",
        "newest",
        "latest",
        "earliest",
        "heaviest",
        "lightest",
    ];
    words.iter().any(|word| MEASURES.contains(&word.as_str()))
}

/// "best selling", "best ratings", "best customers by revenue": the word after "best",
/// or a "by" that ranks, names the measure "best" is judged by; so does a word of a
/// numeric column's name right after it ("best rank" beside `loser_rank`).
fn best_is_concrete(words: &[String], terms: &SchemaTerms) -> bool {
    const MEASURED: &[&str] = &[
        "selling", "sold", "sellers", "rated", "rating", "ratings", "reviewed", "paid", "paying",
        "scoring", "scored", "score", "scores",
    ];
    let measured_next = words.windows(2).any(|pair| {
        pair[0] == "best" && (MEASURED.contains(&pair[1].as_str()) || terms.measure_word(&pair[1]))
    });
    measured_next || words.iter().any(|word| word == "by")
}

fn glossary_meaning(notes: &SchemaNotes, rule: &Rule, words: &[String]) -> Option<String> {
    let mut keys: Vec<&str> = vec![rule.term];
    keys.extend(rule.phrases.iter().copied());
    for key in keys {
        if !contains_phrase(words, key) && key != rule.term {
            continue;
        }
        if let Some((term, meaning)) = notes
            .glossary
            .iter()
            .find(|(term, _)| term.eq_ignore_ascii_case(key))
        {
            // "See recent." points at another entry: follow it once.
            let meaning = match meaning.strip_prefix("See ") {
                Some(target) => {
                    let target = target.trim_end_matches('.').trim();
                    notes
                        .glossary
                        .iter()
                        .find(|(term, _)| term.eq_ignore_ascii_case(target))
                        .map(|(_, meaning)| meaning.clone())
                        .unwrap_or_else(|| meaning.clone())
                }
                None => meaning.clone(),
            };
            return Some(format!("\"{term}\" means: {meaning}"));
        }
    }
    None
}

/// Every table and column name as lower-case words (split at underscores and case
/// changes: `Best_Finish` is "best finish"), for [`check`]: a vague word is not vague
/// where the question names a schema name that contains it.
pub fn schema_words<'a>(names: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    names
        .into_iter()
        .map(|name| crate::words::words(name, crate::words::Split::Identifier).join(" "))
        .filter(|name| !name.is_empty())
        .collect()
}

/// Whether the question's words hold this schema name, each word also in the plural
/// ("best finishes" for `Best_Finish`, "performances" for `performance`).
fn names_schema_name(words: &[String], name: &str) -> bool {
    let wanted: Vec<&str> = name.split_whitespace().collect();
    let same = |said: &String, word: &str| {
        said == word
            || said
                .strip_suffix('s')
                .is_some_and(|stem| stem == word || stem.strip_suffix('e') == Some(word))
    };
    !wanted.is_empty()
        && words.windows(wanted.len()).any(|window| {
            window
                .iter()
                .zip(&wanted)
                .all(|(said, word)| same(said, word))
        })
}

/// "the most recent", "most recently": a superlative names its measure (the latest).
fn recent_is_superlative(words: &[String]) -> bool {
    words
        .windows(2)
        .any(|pair| pair[0] == "most" && pair[1].starts_with("recent"))
}

/// Applies the rules to a question. `terms` holds what the rules know of the database's
/// schema ([`SchemaTerms`]): a vague word inside a name the question uses ("performance"
/// where a `performance` table exists, "best finishes" beside `Best_Finish`) is that
/// table or column, not a vague measure, and the options offered come from the notes or
/// the schema. A word with fewer than two options to offer is left to the model.
pub fn check(question: &str, notes: &SchemaNotes, terms: &SchemaTerms) -> AmbiguityDecision {
    let words = words(question);
    let mut decision = AmbiguityDecision {
        terms: Vec::new(),
        assumptions: Vec::new(),
        clarify: None,
        restricted_column: super::question_rules::restricted_column_named(question, notes),
        write_request: super::question_rules::write_request(question),
    };
    if let Some(period) = super::question_rules::named_period_assumption(question) {
        decision.assumptions.push(period);
    }
    for rule in RULES {
        if !rule
            .phrases
            .iter()
            .any(|phrase| contains_phrase(&words, phrase))
        {
            continue;
        }
        if matches!(rule.term, "top" | "performance")
            && (names_a_measure(&words) || words.iter().any(|word| terms.measure_word(word)))
        {
            continue;
        }
        if rule.term == "best" && best_is_concrete(&words, terms) {
            continue;
        }
        if rule.term == "recent" && recent_is_superlative(&words) {
            continue;
        }
        let names_schema = terms.words.iter().any(|name| {
            rule.phrases.iter().any(|phrase| {
                phrase
                    .split_whitespace()
                    .any(|word| name.split_whitespace().any(|part| part == word))
            }) && names_schema_name(&words, name)
        });
        if names_schema {
            continue;
        }
        let options = terms.options(rule.options, notes, &words);
        // A question that already names one of the options (the page sends
        // "question (option)" when an option is clicked) is resolved by it.
        let lowered = question.to_lowercase();
        if let Some(option) = options
            .iter()
            .find(|option| lowered.contains(&option.to_lowercase()))
        {
            decision.terms.push(VagueTerm {
                term: rule.term.to_string(),
                resolved_by_glossary: false,
            });
            decision
                .assumptions
                .push(format!("\"{}\" means: {option}", rule.term));
            continue;
        }
        match glossary_meaning(notes, rule, &words) {
            Some(assumption) => {
                decision.terms.push(VagueTerm {
                    term: rule.term.to_string(),
                    resolved_by_glossary: true,
                });
                decision.assumptions.push(assumption);
            }
            None => {
                decision.terms.push(VagueTerm {
                    term: rule.term.to_string(),
                    resolved_by_glossary: false,
                });
                if decision.clarify.is_none() && options.len() >= 2 {
                    decision.clarify = Some(Clarification {
                        question: rule.ask.to_string(),
                        options,
                    });
                }
            }
        }
    }
    decision
}

/// Words that open a question of its own ("how many...", "list..."): a follow-up that
/// opens with one after a declined write is a new read, not more of the write.
const QUESTION_OPENERS: &[&str] = &[
    "how", "what", "which", "who", "whom", "whose", "when", "where", "why", "is", "are", "was",
    "were", "do", "does", "did", "can", "list", "show", "count", "give", "find", "tell", "name",
    "sum", "total",
];

/// The rules for a question in a conversation ([`check`] when it is the first). The
/// follow-up is read with the latest earlier turn that was not a clarification:
/// - a follow-up that continues the earlier question without opening one of its own
///   ("and for 2024?") is declined when the two together name a restricted column, or
///   when the earlier question was a declined write ("and the 2024 ones too" after
///   "Delete the voided bills"); one that opens its own question ("How many are
///   there?") is judged on its own words for these, as any question is;
/// - a vague word the earlier question settles ("the top ones" after "customers by
///   revenue") is not asked about again, and the glossary's reading it got stands;
/// - the follow-up's own period stands; without one it keeps the earlier question's.
pub fn check_in_context(
    question: &str,
    context: &super::conversation::Context,
    notes: &SchemaNotes,
    terms: &SchemaTerms,
) -> AmbiguityDecision {
    use super::conversation::TurnOutcome;
    use super::question_rules::{named_period_assumption, restricted_column_named, write_request};
    let mut decision = check(question, notes, terms);
    let Some(previous) = context
        .turns
        .iter()
        .rev()
        .find(|turn| turn.outcome != TurnOutcome::Clarification)
    else {
        return decision;
    };
    // The user's own earlier words for what they asked for (a restatement is the
    // model's, and "Change in revenue..." must not read as a write); the standalone
    // question for what it meant (its measure, its period).
    let asked_before = format!("{}\n{question}", previous.question);
    // A follow-up that opens a question of its own is judged on its own words for what
    // it asks for; one that continues ("and for 2024?") asks for what the earlier did.
    let opens_question = words(question)
        .first()
        .is_some_and(|word| QUESTION_OPENERS.contains(&word.as_str()));
    if decision.restricted_column.is_none() && !opens_question {
        decision.restricted_column = restricted_column_named(&asked_before, notes);
    }
    if decision.write_request.is_none()
        && previous.outcome == TurnOutcome::Declined
        && !opens_question
    {
        decision.write_request = write_request(&previous.question)
            .map(|reason| format!("it continues an earlier request to change data ({reason})"));
    }
    let earlier = previous.standalone();
    let together = format!("{earlier}\n{question}");
    let in_context = check(&together, notes, terms);
    if decision.clarify.is_some() && in_context.clarify.is_none() {
        decision.clarify = None;
        decision.terms = in_context.terms;
        let periods = [
            named_period_assumption(&together),
            named_period_assumption(question),
        ];
        for assumption in in_context.assumptions {
            if !periods.contains(&Some(assumption.clone()))
                && !decision.assumptions.contains(&assumption)
            {
                decision.assumptions.push(assumption);
            }
        }
    }
    if named_period_assumption(question).is_none() {
        if let Some(period) = named_period_assumption(earlier) {
            decision.assumptions.push(period);
        }
    }
    decision
}

#[cfg(test)]
#[path = "ambiguity_tests.rs"]
mod tests;
