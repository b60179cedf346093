//! Tests of the vague-word rules: options from the notes or the schema, what makes a
//! word concrete, and a follow-up judged with the question it continues.

use super::*;
use crate::schema::ForeignKey;

fn notes_with(entries: &[(&str, &str)]) -> SchemaNotes {
    let mut notes = SchemaNotes::default();
    for (term, meaning) in entries {
        notes.glossary.insert(term.to_string(), meaning.to_string());
    }
    notes
}

fn table(name: &str, columns: &[(&str, &str)], references: &[(&str, &str)]) -> TableSchema {
    let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
    let mut table = TableSchema::for_tests(name, &names, "TEXT", &names[..1]);
    for (column, (_, data_type)) in table.columns.iter_mut().zip(columns) {
        column.data_type = data_type.to_string();
    }
    table.foreign_keys = references
        .iter()
        .map(|(column, target)| ForeignKey {
            columns: vec![column.to_string()],
            references_table: target.to_string(),
            references_columns: vec![column.to_string()],
        })
        .collect();
    table
}

/// A small shop with no notes: customers, their orders, and a restricted column.
fn shop() -> Vec<TableSchema> {
    vec![
        table(
            "customers",
            &[
                ("customer_id", "INTEGER"),
                ("name", "TEXT"),
                ("credit_limit", "NUMERIC"),
                ("salary", "NUMERIC"),
                ("zip_code", "INTEGER"),
            ],
            &[],
        ),
        table(
            "orders",
            &[
                ("order_id", "INTEGER"),
                ("customer_id", "INTEGER"),
                ("order_total", "REAL"),
                ("order_date", "DATE"),
            ],
            &[("customer_id", "customers")],
        ),
    ]
}

fn shop_notes() -> SchemaNotes {
    SchemaNotes {
        restricted_columns: vec!["customers.salary".to_string()],
        ..SchemaNotes::default()
    }
}

fn shop_terms() -> SchemaTerms {
    SchemaTerms::new(&shop(), &shop_notes())
}

fn no_schema() -> SchemaTerms {
    SchemaTerms::default()
}

#[test]
fn undefined_vague_words_ask_with_options_from_the_schema() {
    let decision = check("Who are our best customers?", &shop_notes(), &shop_terms());
    let clarify = decision.clarify.expect("asks");
    assert_eq!(
        clarify.options,
        vec![
            "most orders (a count of orders)",
            "highest credit limit (customers.credit_limit)",
        ],
        "keys, codes and the restricted salary are not measures"
    );
    let decision = check("How did we do last quarter?", &shop_notes(), &shop_terms());
    let clarify = decision.clarify.expect("asks");
    assert_eq!(clarify.question, "Which quarter do you mean?");
    assert_eq!(clarify.options.len(), 2, "no fiscal year in the notes");
}

#[test]
fn a_vague_word_with_nothing_concrete_to_offer_is_left_to_the_model() {
    let decision = check(
        "Who are our best customers?",
        &SchemaNotes::default(),
        &no_schema(),
    );
    assert!(decision.clarify.is_none(), "{decision:?}");
    assert_eq!(decision.terms.len(), 1, "the word is still recorded");
    // No dates in the schema: "recent" has no window to offer.
    let dateless = SchemaTerms::new(
        &[table(
            "players",
            &[("player_id", "INTEGER"), ("name", "TEXT")],
            &[],
        )],
        &SchemaNotes::default(),
    );
    assert!(check(
        "Which players joined recently?",
        &SchemaNotes::default(),
        &dateless
    )
    .clarify
    .is_none());
}

#[test]
fn the_notes_measures_and_fiscal_year_come_before_the_schema() {
    let notes = SchemaNotes {
        measures: vec!["highest revenue".to_string(), "most visits".to_string()],
        fiscal_year_start_month: Some(7),
        ..shop_notes()
    };
    let best = check("Who are our best customers?", &notes, &shop_terms());
    assert_eq!(
        best.clarify.expect("asks").options,
        vec!["highest revenue", "most visits"]
    );
    let quarter = check("How did we do last quarter?", &notes, &shop_terms());
    assert_eq!(
        quarter.clarify.expect("asks").options[2],
        "the quarter of the fiscal year (July-June) before the current one"
    );
}

#[test]
fn a_word_of_a_numeric_column_after_best_names_the_measure() {
    let tennis = SchemaTerms::new(
        &[table(
            "matches",
            &[
                ("match_id", "INTEGER"),
                ("loser_rank", "INTEGER"),
                ("winner_rank", "INTEGER"),
            ],
            &[],
        )],
        &SchemaNotes::default(),
    );
    let decision = check(
        "What is the best rank of losers across all contests?",
        &SchemaNotes::default(),
        &tennis,
    );
    assert!(decision.clarify.is_none(), "{decision:?}");
    assert!(decision.terms.is_empty());
    let world = SchemaTerms::new(
        &[table(
            "country",
            &[
                ("Code", "TEXT"),
                ("SurfaceArea", "REAL"),
                ("Population", "INTEGER"),
            ],
            &[],
        )],
        &SchemaNotes::default(),
    );
    for question in [
        "What are the names of countries with the top 3 population?",
        "Which countries are the top 5 by area?",
        "What are the names and areas of countries with the top 5 largest area?",
    ] {
        let decision = check(question, &SchemaNotes::default(), &world);
        assert!(decision.clarify.is_none(), "{question}: {decision:?}");
    }
    // The entity word of a measure's name is not the measure: "orders" is not
    // `order_total`'s measure, "total" is.
    assert!(!shop_terms().measure_word("orders"));
    assert!(shop_terms().measure_word("totals"));
    assert!(
        check("Show the top customers", &shop_notes(), &shop_terms())
            .clarify
            .is_some()
    );
}

#[test]
fn glossary_terms_become_assumptions() {
    let notes = notes_with(&[
        ("recent", "the last 30 days of data"),
        ("lately", "See recent."),
    ]);
    let decision = check("What sold lately?", &notes, &shop_terms());
    assert!(decision.clarify.is_none());
    assert_eq!(
        decision.assumptions,
        vec!["\"recent\" means: the last 30 days of data"]
    );
}

#[test]
fn plain_questions_and_concrete_tops_pass() {
    let notes = shop_notes();
    let terms = shop_terms();
    for question in [
        "How many orders are there?",
        "Top 5 products by revenue in 2025",
        "List the top 3 customers by amount billed",
        "List the restaurants starting from the best ratings to the lowest",
        "What are the top 5 best selling car models by total revenue?",
        "Who are our best customers by revenue?",
    ] {
        let decision = check(question, &notes, &terms);
        assert!(decision.clarify.is_none(), "{question}: {decision:?}");
    }
    // "best" with no measure after it or ranked by stays vague.
    for question in ["Which are our best customers?", "Which customers are best?"] {
        assert!(
            check(question, &notes, &terms).clarify.is_some(),
            "{question}"
        );
    }
    // "laptop" contains "top" but is not the word top.
    assert!(check("How many laptops?", &notes, &terms).terms.is_empty());
}

#[test]
fn a_chosen_option_resolves_the_word() {
    let decision = check(
        "Who are our best customers? (most orders (a count of orders))",
        &shop_notes(),
        &shop_terms(),
    );
    assert!(decision.clarify.is_none(), "{decision:?}");
    assert_eq!(
        decision.assumptions,
        vec!["\"best\" means: most orders (a count of orders)"]
    );
}

#[test]
fn a_vague_word_that_names_the_schema_or_a_superlative_is_not_asked_about() {
    let music = SchemaTerms::new(
        &[
            table(
                "orchestra",
                &[("orchestra_id", "INTEGER"), ("year_founded", "REAL")],
                &[],
            ),
            table(
                "performance",
                &[
                    ("performance_id", "INTEGER"),
                    ("orchestra_id", "INTEGER"),
                    ("share", "REAL"),
                ],
                &[("orchestra_id", "orchestra")],
            ),
            table(
                "poker_player",
                &[
                    ("poker_player_id", "INTEGER"),
                    ("Best_Finish", "REAL"),
                    ("Earnings", "REAL"),
                ],
                &[],
            ),
            table(
                "cartoon",
                &[("id", "INTEGER"), ("original_air_date", "TEXT")],
                &[],
            ),
        ],
        &SchemaNotes::default(),
    );
    let notes = SchemaNotes::default();
    for question in [
        "List the names of orchestras that have no performance.",
        "What are the final tables made and best finishes for all poker players?",
        "Find the production code of the most recently aired cartoon.",
    ] {
        let decision = check(question, &notes, &music);
        assert!(decision.clarify.is_none(), "{question}: {decision:?}");
    }
    // The same words stay vague where they name nothing.
    assert!(
        check("Who are our best customers?", &shop_notes(), &shop_terms())
            .clarify
            .is_some()
    );
    assert!(
        check("How did our performance go?", &shop_notes(), &shop_terms())
            .clarify
            .is_some()
    );
}

#[test]
fn performance_with_its_measure_named_is_not_asked_about() {
    let notes = shop_notes();
    let defined = "Which 3 tickers had the highest performance? To analyze stock \
                   performance, join the daily price and ticker tables and calculate \
                   the price change.";
    assert!(check(defined, &notes, &shop_terms()).clarify.is_none());
    assert!(check(
        "What was our performance by revenue?",
        &notes,
        &shop_terms()
    )
    .clarify
    .is_none());
    // Without a measure it is still asked, with the options.
    let open = check("How was our performance?", &notes, &shop_terms());
    assert_eq!(
        open.clarify.map(|ask| ask.question),
        Some("Which figure should describe how it went?".to_string())
    );
}

#[test]
fn the_demo_notes_resolve_recent_and_offer_the_shops_measures_for_best() {
    let notes = crate::demo::demo_notes();
    let terms = SchemaTerms::new(&shop(), &notes);
    assert!(check("Show recent bills", &notes, &terms).clarify.is_none());
    let best = check("Who are our best customers?", &notes, &terms);
    assert_eq!(best.clarify.expect("asks").options, notes.measures);
    let quarter = check("How did we do last quarter?", &notes, &terms);
    assert!(quarter.clarify.expect("asks").options.contains(
        &"the quarter of the fiscal year (April-March) before the current one".to_string()
    ));
}

fn earlier(
    question: &str,
    outcome: super::super::conversation::TurnOutcome,
) -> super::super::conversation::Context {
    let mut result = crate::agent::AgentResult::for_tests(question, crate::agent::Decision::Answer);
    result.decision = match outcome {
        super::super::conversation::TurnOutcome::Declined => crate::agent::Decision::Decline,
        _ => crate::agent::Decision::Answer,
    };
    super::super::conversation::Context::new(vec![super::super::conversation::Turn::from_result(
        1, &result,
    )])
}

#[test]
fn a_follow_up_is_judged_with_the_question_it_continues() {
    use super::super::conversation::TurnOutcome;
    let notes = SchemaNotes {
        restricted_columns: vec!["customers.phone_number".to_string()],
        ..SchemaNotes::default()
    };
    let schema = shop_terms();
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
