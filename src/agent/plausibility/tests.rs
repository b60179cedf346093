//! Each rule with an answer it must flag and a right answer it must not, and every gold
//! answer of the demo set run on the demo database and checked: none may be flagged.

use serde_json::json;

use super::*;
use crate::gate::{GateOptions, QueryOutcome};

fn cols(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| name.to_string()).collect()
}

fn checks(
    question: &str,
    sql: &str,
    columns: &[&str],
    rows: &[Vec<JsonValue>],
    tables: &[&str],
) -> Vec<Check> {
    checks_in(SqlDialect::Sqlite, question, sql, columns, rows, tables)
}

fn checks_in(
    dialect: SqlDialect,
    question: &str,
    sql: &str,
    columns: &[&str],
    rows: &[Vec<JsonValue>],
    tables: &[&str],
) -> Vec<Check> {
    let notes = crate::demo::demo_notes();
    let columns = cols(columns);
    let tables = cols(tables);
    check_result(&Answer {
        question,
        sql,
        dialect,
        columns: &columns,
        rows,
        tables: &tables,
        notes: &notes,
        schema: &[],
        cards: &[],
    })
    .into_iter()
    .map(|finding| finding.check)
    .collect()
}

#[test]
fn named_periods_are_read_exactly_and_other_numbers_are_not_periods() {
    let span = |from, to| Some(YearSpan { from, to });
    assert_eq!(
        named_period("What was our total revenue in 2025?"),
        span(2025, 2025)
    );
    assert_eq!(
        named_period("Revenue for the financial year April 2024 to March 2025?"),
        span(2024, 2025)
    );
    assert_eq!(
        named_period("Bills between 2023 and 2024"),
        span(2023, 2024)
    );
    assert_eq!(named_period("Revenue since 2024"), span(2024, i64::MAX));
    assert_eq!(named_period("Bills before 2025"), span(i64::MIN, 2024));
    assert_eq!(
        named_period("Orchestras founded after the year 2008"),
        span(2008, i64::MAX)
    );
    assert_eq!(
        named_period("Singers born in either 1948 or 1949"),
        span(1948, 1949)
    );
    assert_eq!(named_period("Bills over 2000 rupees"), None);
    assert_eq!(named_period("How did we do last quarter?"), None);
    assert_eq!(
        named_period("How much of our 2026 revenue came from walk-ins?"),
        None
    );
}

#[test]
fn the_issue_example_is_flagged_for_its_years_its_table_and_its_grouping() {
    let found = checks(
        "What was the total billed amount per month in 2025, excluding void bills?",
        "SELECT strftime('%Y', txn_dt) AS year, SUM(bill_archive.amt) AS total \
         FROM bill_archive WHERE status <> 'VOID' GROUP BY year LIMIT 200",
        &["year", "total"],
        &[
            vec![json!("2023"), json!(611706.5)],
            vec![json!("2024"), json!(638357.5)],
        ],
        &["bill_archive"],
    );
    assert_eq!(
        found,
        vec![Check::PeriodRows, Check::TablePeriod, Check::Grouping]
    );
}

#[test]
fn the_right_answer_to_the_issue_example_is_not_flagged() {
    let found = checks(
        "What was the total billed amount per month in 2025, excluding void bills?",
        "SELECT strftime('%Y-%m', b.txn_dt) AS month, SUM(b.total_amt) AS total FROM bills AS b \
         WHERE b.status <> 'VOID' AND b.txn_dt >= '2025-01-01' AND b.txn_dt < '2026-01-01' \
         GROUP BY month ORDER BY month LIMIT 200",
        &["month", "total"],
        &[
            vec![json!("2025-01"), json!(81000.5)],
            vec![json!("2025-02"), json!(79000)],
        ],
        &["bills"],
    );
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_filter_on_another_year_is_flagged_and_the_named_year_in_any_spelling_is_not() {
    let question = "What was our total revenue in 2025?";
    let one = |sql: &str, dialect| {
        checks_in(
            dialect,
            question,
            sql,
            &["revenue"],
            &[vec![json!(1.5)]],
            &["bills"],
        )
    };
    assert_eq!(
        one(
            "SELECT SUM(total_amt) AS revenue FROM bills WHERE strftime('%Y', txn_dt) = '2024'",
            SqlDialect::Sqlite
        ),
        vec![Check::PeriodFilter]
    );
    assert_eq!(
        one(
            "SELECT SUM(total_amt) AS revenue FROM bills WHERE txn_dt BETWEEN '2025-01-01' AND '2026-06-30'",
            SqlDialect::Sqlite
        ),
        vec![Check::PeriodFilter],
        "a range running into 2026"
    );
    for (question, right) in [
        (
            "Cars made before 1980",
            "SELECT COUNT(*) FROM cars WHERE year < 1980",
        ),
        (
            "Orchestras founded after 2003",
            "SELECT COUNT(*) FROM orchestra WHERE year_founded > 2003",
        ),
        (
            "Concerts in 2014 or 2015",
            "SELECT COUNT(*) FROM concert WHERE year = 2014 OR year = 2015",
        ),
        (
            "Bills of 2025",
            "SELECT COUNT(*) FROM bills WHERE txn_dt > '2024-12-31' AND txn_dt <= '2025-12-31'",
        ),
    ] {
        assert!(
            checks(question, right, &["n"], &[vec![json!(3)]], &[]).is_empty(),
            "{question}: {right}"
        );
    }
    assert_eq!(
        checks(
            "Cars made before 1980",
            "SELECT COUNT(*) FROM cars WHERE year <= 1980",
            &["n"],
            &[vec![json!(3)]],
            &["cars"]
        ),
        vec![Check::PeriodFilter],
        "1980 itself is not before 1980"
    );
    assert!(
        checks(
            "Which cars were in stock in March 2023? Give the make and model year.",
            "SELECT c.make, c.year FROM cars AS c JOIN snapshots AS s ON s.car_id = c.id \
             WHERE s.snapshot_date BETWEEN '2023-03-01' AND '2023-03-31' GROUP BY c.make, c.year",
            &["make", "year"],
            &[vec![json!("Ford"), json!(2022)]],
            &[],
        )
        .is_empty(),
        "a filter on the period makes the rows' years another date"
    );
    for right in [
        "SELECT SUM(total_amt) AS revenue FROM bills WHERE strftime('%Y', txn_dt) = '2025'",
        "SELECT SUM(total_amt) AS revenue FROM bills WHERE txn_dt LIKE '2025%'",
        "SELECT SUM(total_amt) AS revenue FROM bills WHERE txn_dt >= '2025-01-01' AND txn_dt < '2026-01-01'",
        "SELECT SUM(total_amt) AS revenue FROM bills WHERE CAST(strftime('%Y', txn_dt) AS INTEGER) = 2025 AND total_amt > 2000",
    ] {
        assert!(one(right, SqlDialect::Sqlite).is_empty(), "{right}");
    }
    for right in [
        "SELECT SUM(b.total_amt) AS revenue FROM bills AS b WHERE EXTRACT(YEAR FROM b.txn_dt) = 2025",
        "SELECT SUM(b.total_amt) AS revenue FROM bills AS b WHERE b.txn_dt >= DATE '2025-01-01' AND b.txn_dt < DATE '2026-01-01'",
    ] {
        assert!(one(right, SqlDialect::Postgres).is_empty(), "{right}");
    }
}

#[test]
fn a_named_period_with_no_date_filter_is_flagged_unless_the_table_holds_only_it() {
    assert_eq!(
        checks(
            "What was our total revenue in 2025?",
            "SELECT SUM(total_amt) AS revenue FROM bills WHERE status <> 'VOID'",
            &["revenue"],
            &[vec![json!(1.5)]],
            &["bills"],
        ),
        vec![Check::PeriodUnfiltered]
    );
    assert!(checks(
        "What was our revenue between 2023 and 2024?",
        "SELECT SUM(amt) AS revenue FROM bill_archive WHERE status <> 'VOID'",
        &["revenue"],
        &[vec![json!(1.5)]],
        &["bill_archive"],
    )
    .is_empty());
    assert!(
        checks(
            "How many active products do we have?",
            "SELECT COUNT(*) FROM products WHERE is_active = 1",
            &["n"],
            &[vec![json!(480)]],
            &["products"],
        )
        .is_empty(),
        "no period named, nothing to check"
    );
}

#[test]
fn a_table_whose_notes_hold_another_period_is_flagged() {
    assert_eq!(
        checks(
            "What was our total revenue in 2025?",
            "SELECT SUM(amt) AS revenue FROM bill_archive WHERE txn_dt >= '2025-01-01'",
            &["revenue"],
            &[vec![JsonValue::Null]],
            &["bill_archive"],
        ),
        vec![Check::TablePeriod]
    );
    assert!(checks(
        "What was our total revenue in 2023?",
        "SELECT SUM(amt) AS revenue FROM bill_archive WHERE strftime('%Y', txn_dt) = '2023'",
        &["revenue"],
        &[vec![json!(611706.5)]],
        &["bill_archive"],
    )
    .is_empty());
}

#[test]
fn a_breakdown_the_query_does_not_group_by_is_flagged() {
    let monthly = "SELECT strftime('%Y', txn_dt) AS y, SUM(total_amt) AS t FROM bills \
                   WHERE txn_dt >= '2025-01-01' AND txn_dt < '2026-01-01' GROUP BY y";
    assert_eq!(
        checks(
            "Revenue by month in 2025",
            monthly,
            &["y", "t"],
            &[vec![json!("2025"), json!(1.5)]],
            &["bills"],
        ),
        vec![Check::Grouping]
    );
    for right in [
        "SELECT strftime('%m', txn_dt), SUM(total_amt) FROM bills GROUP BY 1",
        "SELECT substr(txn_dt, 1, 7) AS m, SUM(total_amt) FROM bills GROUP BY m",
        "SELECT DISTINCT strftime('%Y-%m', txn_dt), SUM(total_amt) OVER (PARTITION BY strftime('%Y-%m', txn_dt)) FROM bills",
    ] {
        assert!(
            checks("Revenue per month", right, &["m", "t"], &[vec![json!("01"), json!(1)]], &["bills"]).is_empty(),
            "{right}"
        );
    }
    assert!(
        checks(
            "What was the average revenue per month?",
            "SELECT SUM(total_amt) / 12 FROM bills",
            &["avg"],
            &[vec![json!(1.5)]],
            &["bills"],
        )
        .is_empty(),
        "a rate per month is no breakdown"
    );
    assert!(
        checks(
            "What is the total monthly salary of all staff?",
            "SELECT SUM(salary) FROM employees",
            &["s"],
            &[vec![json!(1.5)]],
            &["employees"],
        )
        .is_empty(),
        "monthly is an adjective here"
    );
}

#[test]
fn each_supplier_answered_with_one_ungrouped_row_is_flagged_and_a_grouped_one_is_not() {
    let question = "How many products does each supplier supply?";
    assert_eq!(
        checks(
            question,
            "SELECT COUNT(*) FROM products",
            &["n"],
            &[vec![json!(480)]],
            &["products"],
        ),
        vec![Check::Grouping]
    );
    for right in [
        "SELECT supp_id, COUNT(*) FROM products GROUP BY supp_id",
        "SELECT s.supp_name, (SELECT COUNT(*) FROM products AS p WHERE p.supp_id = s.supp_id) FROM suppliers AS s",
    ] {
        assert!(
            checks(question, right, &["s", "n"], &[vec![json!("A"), json!(3)]], &["products"]).is_empty(),
            "{right}"
        );
    }
    for passive in [
        "How many car models were produced by the maker American Motor Company?",
        "What is the average number of injuries caused each time?",
    ] {
        assert!(
            checks(
                passive,
                "SELECT COUNT(*) FROM products",
                &["n"],
                &[vec![json!(3)]],
                &["products"]
            )
            .is_empty(),
            "{passive}"
        );
    }
    assert!(
        checks(
            "Who is our top customer by revenue?",
            "SELECT cust_id, total_amt FROM bills ORDER BY total_amt DESC LIMIT 1",
            &["c", "t"],
            &[vec![json!(1), json!(3)]],
            &["bills"],
        )
        .is_empty(),
        "by revenue ranks, it does not break down"
    );
}

#[test]
fn a_column_named_for_another_currency_is_flagged() {
    let question = "What did we bill?";
    assert_eq!(
        checks(
            question,
            "SELECT SUM(total_amt) AS total_usd FROM bills",
            &["total_usd"],
            &[vec![json!(1)]],
            &["bills"]
        ),
        vec![Check::Currency]
    );
    assert!(checks(
        question,
        "SELECT SUM(total_amt) AS total_inr FROM bills",
        &["total_inr"],
        &[vec![json!(1)]],
        &["bills"]
    )
    .is_empty());
    let columns = cols(&["total_usd"]);
    let rows = vec![vec![json!(1)]];
    let no_currency = SchemaNotes::default();
    assert!(check_result(&Answer {
        question,
        sql: "SELECT 1 AS total_usd",
        dialect: SqlDialect::Sqlite,
        columns: &columns,
        rows: &rows,
        tables: &[],
        notes: &no_currency,
        schema: &[],
        cards: &[],
    })
    .is_empty());
}

#[test]
fn the_explanation_is_put_in_the_notes_currency_and_unsupported_years_are_flagged() {
    let notes = crate::demo::demo_notes();
    let question = "What was the total billed amount per month in 2025, excluding void bills?";
    let rows = vec![vec![json!("2025-01"), json!(611706.5)]];
    let (text, findings) = check_explanation(
        "The total billed amount was $611,706.5 in 2023 and 100 dollars in January.",
        question,
        &rows,
        &notes,
    );
    assert_eq!(
        text,
        "The total billed amount was ₹611,706.5 in 2023 and 100 INR in January."
    );
    let found: Vec<Check> = findings.iter().map(|finding| finding.check).collect();
    assert_eq!(
        found,
        vec![Check::ExplanationCurrency, Check::ExplanationPeriod]
    );
    assert!(findings[1].message.contains("2023"), "{:?}", findings[1]);
    let (right, none) = check_explanation(
        "In 2025 the shop billed ₹611,706.5 in January.",
        question,
        &rows,
        &notes,
    );
    assert_eq!(right, "In 2025 the shop billed ₹611,706.5 in January.");
    assert!(none.is_empty(), "{none:?}");
    assert_eq!(currency_symbol("INR"), "₹");
    assert_eq!(currency_symbol("CHF"), "CHF ");
}

#[tokio::test]
async fn no_gold_answer_of_the_demo_set_is_flagged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("demo.sqlite");
    crate::demo::write_sqlite(&path).expect("demo builds");
    let gate = crate::database::open_gate(
        &crate::database::DatabaseUrl::Sqlite(path),
        GateOptions::default(),
    )
    .await
    .expect("demo opens");
    let items = crate::eval::golden::builtin("demo").expect("the demo set loads");
    let cards = crate::linking::cards::build_cards(&gate)
        .await
        .expect("the demo's cards build");
    let mut checked = 0;
    for item in items.iter().filter(|item| item.is_answerable()) {
        let Some(gold) = &item.gold_sql else { continue };
        let QueryOutcome::Rows(result) = gate.run_query(gold.for_dialect(SqlDialect::Sqlite)).await
        else {
            panic!("{}: the gold runs", item.id);
        };
        let findings = check_result(&Answer {
            question: &item.question,
            sql: &result.sql,
            dialect: SqlDialect::Sqlite,
            columns: &result.columns,
            rows: &result.rows,
            tables: &result.tables,
            notes: gate.notes(),
            schema: gate.schema(),
            cards: &cards,
        });
        assert!(
            findings.is_empty(),
            "{} {:?}: {findings:?}",
            item.id,
            item.question
        );
        checked += 1;
    }
    assert!(checked >= 25, "{checked} gold answers checked");
}

#[test]
fn a_row_list_over_an_unread_join_is_flagged_only_when_a_row_repeats() {
    let table = |name: &str, columns: &[&str], key: &str| {
        crate::schema::TableSchema::for_tests(name, columns, "INTEGER", &[key])
    };
    let schema = vec![
        table("bills", &["bill_id", "bill_no"], "bill_id"),
        table("bill_items", &["item_id", "bill_id"], "item_id"),
    ];
    let notes = crate::schema::SchemaNotes::default();
    let columns = cols(&["bill_no"]);
    let tables = cols(&["bills", "bill_items"]);
    let sql = "SELECT b.bill_no FROM bills AS b JOIN bill_items AS i ON i.bill_id = b.bill_id";
    let found = |rows: &[Vec<JsonValue>]| -> Vec<Check> {
        check_result(&Answer {
            question: "Which bills have lines?",
            sql,
            dialect: SqlDialect::Sqlite,
            columns: &columns,
            rows,
            tables: &tables,
            notes: &notes,
            schema: &schema,
            cards: &[],
        })
        .into_iter()
        .map(|finding| finding.check)
        .collect()
    };
    assert_eq!(
        found(&[vec![json!("B-1")], vec![json!("B-1")], vec![json!("B-2")]]),
        vec![Check::RepeatedRows]
    );
    // Every bill with one line in this data: nothing repeated, nothing to flag.
    assert!(found(&[vec![json!("B-1")], vec![json!("B-2")]]).is_empty());
}
