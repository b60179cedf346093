//! The vague-word rules on databases askdb was never written for: every Spider dev and
//! defog SQLite database is asked the vague questions a user would ask, and each
//! clarification must offer only what that database has. Nothing of the demo shop
//! (its measures, its fiscal year) may reach another database.

use std::collections::BTreeSet;
use std::path::PathBuf;

use askdb::agent::ambiguity::{self, SchemaTerms};
use askdb::database::{open_gate, DatabaseUrl};
use askdb::eval::external::{self, ExternalDialect};
use askdb::gate::GateOptions;

fn external_databases() -> Vec<PathBuf> {
    let data_dir = askdb::home::shared_data_dir().expect("the external data (../shared/data)");
    let mut paths = BTreeSet::new();
    for query in external::load_spiderman(&data_dir).expect("spiderman") {
        paths.insert(external::spiderman_db_path(&data_dir, &query.db_name));
    }
    for query in external::load_defog(&data_dir, ExternalDialect::Sqlite).expect("defog") {
        paths.insert(external::defog_sqlite_path(&data_dir, &query.db_name));
    }
    paths.into_iter().collect()
}

/// The `(table.column)` and `(a count of table)` references an option names.
fn references(option: &str) -> Vec<(String, Option<String>)> {
    let Some(inner) = option
        .rfind('(')
        .and_then(|start| option[start + 1..].strip_suffix(')'))
    else {
        return Vec::new();
    };
    if let Some(table) = inner.strip_prefix("a count of ") {
        return vec![(table.to_string(), None)];
    }
    match inner.split_once('.') {
        Some((table, column)) => vec![(table.to_string(), Some(column.to_string()))],
        None => Vec::new(),
    }
}

#[tokio::test]
async fn clarifications_on_every_external_database_name_only_what_it_has() {
    let demo = askdb::demo::demo_notes();
    let demo_only: BTreeSet<&str> = demo.measures.iter().map(String::as_str).collect();
    let databases = external_databases();
    assert!(databases.len() >= 20, "{} databases", databases.len());
    let mut asked = 0;
    let mut offered = 0;
    for path in &databases {
        let gate = open_gate(&DatabaseUrl::Sqlite(path.clone()), GateOptions::default())
            .await
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let schema = gate.schema();
        let terms = SchemaTerms::new(schema, gate.notes());
        let mut questions = vec![
            "How did we do last quarter?".to_string(),
            "What happened recently?".to_string(),
            "How is our performance?".to_string(),
            "Which are the best ones?".to_string(),
        ];
        for table in schema {
            let words = table.name.replace('_', " ").to_lowercase();
            questions.push(format!("Who are the best {words}?"));
            questions.push(format!("Show the top {words}"));
        }
        for question in &questions {
            let decision = ambiguity::check(question, gate.notes(), &terms);
            let Some(clarify) = decision.clarify else {
                continue;
            };
            asked += 1;
            assert!(
                (2..=4).contains(&clarify.options.len()),
                "{}: {question}: {:?}",
                path.display(),
                clarify.options
            );
            for option in &clarify.options {
                offered += 1;
                assert!(
                    !demo_only.contains(option.as_str()) && !option.contains("fiscal"),
                    "{}: {question}: the demo's \"{option}\"",
                    path.display()
                );
                for (table, column) in references(option) {
                    let found = askdb::schema::table_named(schema, &table).unwrap_or_else(|| {
                        panic!("{}: {question}: no table {table}", path.display())
                    });
                    if let Some(column) = column {
                        assert!(
                            found.column_named(&column).is_some(),
                            "{}: {question}: no column {table}.{column}",
                            path.display()
                        );
                    }
                }
            }
        }
    }
    // The rules still ask somewhere: the test would pass vacuously otherwise.
    assert!(
        asked > 50,
        "only {asked} clarifications over {} databases",
        databases.len()
    );
    println!(
        "{asked} clarifications, {offered} options over {} databases",
        databases.len()
    );
}
