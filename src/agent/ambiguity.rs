//! The ambiguity check, by rules before any model call: words such as best, top,
//! recent, lately or last quarter have no single meaning. When the database's glossary
//! defines the word, the definition becomes a stated assumption and the question goes
//! on; when it does not, askdb asks, offering concrete options. The model may still ask
//! on its own (a `clarify` reply); these rules catch the common cases for free. The
//! decision also carries the [`super::scope`] findings (a restricted column asked for,
//! a period the question names), so `askdb plan` shows everything decided before a call.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::schema::SchemaNotes;

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

/// A vague word, how to spot it, and what to offer when the glossary is silent.
struct Rule {
    term: &'static str,
    /// Word sequences (lower-case) that signal the term.
    phrases: &'static [&'static str],
    ask: &'static str,
    options: &'static [&'static str],
}

const RULES: &[Rule] = &[
    Rule {
        term: "best",
        phrases: &["best", "most valuable", "top performing"],
        ask: "What should \"best\" be measured by?",
        options: &[
            "highest total billed amount",
            "most bills or orders",
            "most money actually collected",
            "most units sold",
        ],
    },
    Rule {
        term: "top",
        phrases: &["top"],
        ask: "Top by which measure?",
        options: &["highest total amount", "highest count", "most units"],
    },
    Rule {
        term: "recent",
        phrases: &["recent", "recently", "lately", "these days", "nowadays"],
        ask: "Which period counts as recent?",
        options: &["the last 7 days", "the last 30 days", "the last 90 days"],
    },
    Rule {
        term: "last quarter",
        phrases: &["last quarter", "this quarter", "previous quarter"],
        ask: "Which quarter do you mean?",
        options: &[
            "the last complete calendar quarter in the data",
            "the last 3 months up to the latest date in the data",
            "the quarter of the fiscal year (April-March) before the current one",
        ],
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
        options: &[
            "revenue (billed, excluding VOID)",
            "money collected",
            "number of bills",
        ],
    },
];

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
    ];
    words.iter().any(|word| MEASURES.contains(&word.as_str()))
}

/// "best selling", "best ratings", "best customers by revenue": the word after "best",
/// or a "by" that ranks, names the measure "best" is judged by.
fn best_is_concrete(words: &[String]) -> bool {
    const MEASURED: &[&str] = &[
        "selling", "sold", "sellers", "rated", "rating", "ratings", "reviewed", "paid", "paying",
        "scoring", "scored", "score", "scores",
    ];
    let measured_next = words
        .windows(2)
        .any(|pair| pair[0] == "best" && MEASURED.contains(&pair[1].as_str()));
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

/// Applies the rules to a question. `schema` holds the database's table and column
/// names as words ([`schema_words`]): a vague word inside a name the question uses
/// ("performance" where a `performance` table exists, "best finishes" beside
/// `Best_Finish`) is that table or column, not a vague measure.
pub fn check(question: &str, notes: &SchemaNotes, schema: &BTreeSet<String>) -> AmbiguityDecision {
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
        if matches!(rule.term, "top" | "performance") && names_a_measure(&words) {
            continue;
        }
        if rule.term == "best" && best_is_concrete(&words) {
            continue;
        }
        if rule.term == "recent" && recent_is_superlative(&words) {
            continue;
        }
        let names_schema = schema.iter().any(|name| {
            rule.phrases.iter().any(|phrase| {
                phrase
                    .split_whitespace()
                    .any(|word| name.split_whitespace().any(|part| part == word))
            }) && names_schema_name(&words, name)
        });
        if names_schema {
            continue;
        }
        // A question that already names one of the options (the page sends
        // "question (option)" when an option is clicked) is resolved by it.
        let lowered = question.to_lowercase();
        if let Some(option) = rule.options.iter().find(|option| lowered.contains(*option)) {
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
                if decision.clarify.is_none() {
                    decision.clarify = Some(Clarification {
                        question: rule.ask.to_string(),
                        options: rule
                            .options
                            .iter()
                            .map(|option| option.to_string())
                            .collect(),
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
    schema: &BTreeSet<String>,
) -> AmbiguityDecision {
    use super::conversation::TurnOutcome;
    use super::question_rules::{named_period_assumption, restricted_column_named, write_request};
    let mut decision = check(question, notes, schema);
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
    let in_context = check(&together, notes, schema);
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
mod tests {
    use super::*;

    fn notes_with(entries: &[(&str, &str)]) -> SchemaNotes {
        let mut notes = SchemaNotes::default();
        for (term, meaning) in entries {
            notes.glossary.insert(term.to_string(), meaning.to_string());
        }
        notes
    }

    #[test]
    fn undefined_vague_words_ask_with_concrete_options() {
        let decision = check(
            "Who are our best customers?",
            &SchemaNotes::default(),
            &BTreeSet::new(),
        );
        let clarify = decision.clarify.expect("asks");
        assert!((2..=4).contains(&clarify.options.len()));
        let decision = check(
            "How did we do last quarter?",
            &SchemaNotes::default(),
            &BTreeSet::new(),
        );
        assert!(decision.clarify.is_some());
    }

    #[test]
    fn glossary_terms_become_assumptions() {
        let notes = notes_with(&[
            ("recent", "the last 30 days of data"),
            ("lately", "See recent."),
        ]);
        let decision = check("What sold lately?", &notes, &BTreeSet::new());
        assert!(decision.clarify.is_none());
        assert_eq!(
            decision.assumptions,
            vec!["\"recent\" means: the last 30 days of data"]
        );
    }

    #[test]
    fn plain_questions_and_concrete_tops_pass() {
        let notes = SchemaNotes::default();
        for question in [
            "How many bills are there?",
            "Top 5 products by revenue in 2025",
            "List the top 3 customers by amount billed",
            "List the restaurants starting from the best ratings to the lowest",
            "What are the top 5 best selling car models by total revenue?",
            "Who are our best customers by revenue?",
        ] {
            let decision = check(question, &notes, &BTreeSet::new());
            assert!(decision.clarify.is_none(), "{question}: {decision:?}");
        }
        // "best" with no measure after it or ranked by stays vague.
        for question in ["Which are our best tracks?", "Which suppliers are best?"] {
            assert!(
                check(question, &notes, &BTreeSet::new()).clarify.is_some(),
                "{question}"
            );
        }
        // "laptop" contains "top" but is not the word top.
        assert!(check("How many laptops?", &notes, &BTreeSet::new())
            .terms
            .is_empty());
    }

    #[test]
    fn a_chosen_option_resolves_the_word() {
        let decision = check(
            "Who are our best customers? (most bills or orders)",
            &SchemaNotes::default(),
            &BTreeSet::new(),
        );
        assert!(decision.clarify.is_none(), "{decision:?}");
        assert_eq!(
            decision.assumptions,
            vec!["\"best\" means: most bills or orders"]
        );
    }

    #[test]
    fn a_vague_word_that_names_the_schema_or_a_superlative_is_not_asked_about() {
        let schema = schema_words(["orchestra", "performance", "poker_player", "Best_Finish"]);
        let notes = SchemaNotes::default();
        for question in [
            "List the names of orchestras that have no performance.",
            "What are the final tables made and best finishes for all poker players?",
            "Find the production code of the most recently aired cartoon.",
        ] {
            let decision = check(question, &notes, &schema);
            assert!(decision.clarify.is_none(), "{question}: {decision:?}");
        }
        // The same words stay vague where they name nothing.
        assert!(check("Who are our best customers?", &notes, &schema)
            .clarify
            .is_some());
        assert!(
            check("How did our performance go?", &notes, &BTreeSet::new())
                .clarify
                .is_some()
        );
    }

    #[test]
    fn performance_with_its_measure_named_is_not_asked_about() {
        let notes = SchemaNotes::default();
        let defined = "Which 3 tickers had the highest performance? To analyze stock \
                       performance, join the daily price and ticker tables and calculate \
                       the price change.";
        assert!(check(defined, &notes, &BTreeSet::new()).clarify.is_none());
        assert!(check(
            "What was our performance by revenue?",
            &notes,
            &BTreeSet::new()
        )
        .clarify
        .is_none());
        // Without a measure it is still asked, with the options.
        let open = check("How was our performance?", &notes, &BTreeSet::new());
        assert_eq!(
            open.clarify.map(|ask| ask.question),
            Some("Which figure should describe how it went?".to_string())
        );
    }

    #[test]
    fn the_demo_glossary_resolves_recent_but_not_best() {
        let notes = crate::demo::demo_notes();
        assert!(check("Show recent bills", &notes, &BTreeSet::new())
            .clarify
            .is_none());
        assert!(
            check("Who are our best customers?", &notes, &BTreeSet::new())
                .clarify
                .is_some()
        );
    }

    fn earlier(
        question: &str,
        outcome: super::super::conversation::TurnOutcome,
    ) -> super::super::conversation::Context {
        let mut result =
            crate::agent::AgentResult::for_tests(question, crate::agent::Decision::Answer);
        result.decision = match outcome {
            super::super::conversation::TurnOutcome::Declined => crate::agent::Decision::Decline,
            _ => crate::agent::Decision::Answer,
        };
        super::super::conversation::Context::new(vec![
            super::super::conversation::Turn::from_result(1, &result),
        ])
    }

    #[test]
    fn a_follow_up_is_judged_with_the_question_it_continues() {
        use super::super::conversation::TurnOutcome;
        let notes = SchemaNotes {
            restricted_columns: vec!["customers.phone_number".to_string()],
            ..SchemaNotes::default()
        };
        let schema = BTreeSet::new();
        let top = "Which are the top ones?";
        assert!(check(top, &notes, &schema).clarify.is_some(), "vague alone");
        let settled = check_in_context(
            top,
            &earlier("Revenue by customer in 2025", TurnOutcome::Answered),
            &notes,
            &schema,
        );
        assert_eq!(
            settled.clarify, None,
            "the earlier question names the measure"
        );
        assert!(
            settled.assumptions.iter().any(|a| a.contains("(2025)")),
            "{:?}",
            settled.assumptions
        );
        let own_year = check_in_context(
            "And in 2024?",
            &earlier("Revenue by customer in 2025", TurnOutcome::Answered),
            &notes,
            &schema,
        );
        assert_eq!(own_year.assumptions.len(), 1, "{:?}", own_year.assumptions);
        assert!(own_year.assumptions[0].contains("(2024)"));
        let phones = earlier("List the customers' phone numbers", TurnOutcome::Declined);
        assert!(check_in_context("and for 2024?", &phones, &notes, &schema)
            .restricted_column
            .is_some());
        let write = earlier("Delete the voided bills", TurnOutcome::Declined);
        assert!(
            check_in_context("and the 2024 ones", &write, &notes, &schema)
                .write_request
                .is_some()
        );
        assert!(
            check_in_context("How many are there?", &write, &notes, &schema)
                .write_request
                .is_none()
        );
    }
}
