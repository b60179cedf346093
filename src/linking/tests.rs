//! Linking on the demo database (through the gate, as the agent builds it) and on
//! Spider dev (model-free, no database).

use std::collections::BTreeSet;

use serde::Deserialize;

use super::eval::{evaluate_items, evaluate_spider, DEFAULT_KS};
use super::*;
use crate::gate::GateOptions;

/// The demo database in a temp dir with its linker, built the way the agent builds it.
struct Demo {
    _dir: tempfile::TempDir,
    index: SchemaIndex,
}

async fn demo() -> Demo {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("demo.sqlite");
    crate::demo::write_sqlite(&path).expect("demo builds");
    let gate = crate::database::open_gate(
        &crate::database::DatabaseUrl::Sqlite(path),
        GateOptions::default(),
    )
    .await
    .expect("opens");
    let cards = crate::linking::cards::build_cards(&gate)
        .await
        .expect("cards");
    let index = SchemaIndex::build(&gate, &cards).await.expect("index");
    Demo { _dir: dir, index }
}

#[derive(Deserialize)]
struct GoldItem {
    question: String,
    gold_tables: Vec<String>,
}

fn demo_gold() -> Vec<GoldItem> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/evals/linking/demo_gold_tables.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("gold file");
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

fn forced() -> SelectOptions {
    SelectOptions {
        force_linking: true,
        ..SelectOptions::default()
    }
}

const DISTRACTORS: [&str; 2] = ["store_settings", "tbl_prod_master_old"];

#[tokio::test]
async fn every_demo_gold_table_is_linked_at_the_default_k() {
    let demo = demo().await;
    let gold = demo_gold();
    assert!(gold.len() >= 25, "{} questions", gold.len());
    let covered: BTreeSet<&str> = gold
        .iter()
        .flat_map(|item| item.gold_tables.iter().map(String::as_str))
        .collect();
    for card in demo.index.cards() {
        if !DISTRACTORS.contains(&card.table.as_str()) {
            assert!(
                covered.contains(card.table.as_str()),
                "{} uncovered",
                card.table
            );
        }
    }
    let mut missed = Vec::new();
    for item in &gold {
        let selection = demo.index.select(&item.question, &forced());
        assert_eq!(selection.mode, SelectionMode::Linked);
        for table in &item.gold_tables {
            if !selection.contains(table) {
                missed.push(format!(
                    "{:?}: {table} missing from {:?}",
                    item.question, selection.tables
                ));
            }
        }
    }
    let items: Vec<(String, Vec<String>)> = gold
        .iter()
        .map(|item| (item.question.clone(), item.gold_tables.clone()))
        .collect();
    println!("demo: {}", evaluate_items(&demo.index, &items, &DEFAULT_KS));
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

#[tokio::test]
async fn ordinary_questions_never_pick_the_distractors() {
    let demo = demo().await;
    assert_eq!(demo.index.distractors(), DISTRACTORS);
    let mut questions: Vec<String> = demo_gold().into_iter().map(|item| item.question).collect();
    questions.extend(
        [
            "What is the old price of Teflon Tape?",
            "Which products does the store sell by the set?",
            "Show the store's opening stock of PVC Pipe 1 inch",
            "What is the price of every product in the master list?",
            "List all tables",
            "How many rows are there?",
        ]
        .map(String::from),
    );
    let wide = SelectOptions {
        force_linking: true,
        widen: 20,
        ..SelectOptions::default()
    };
    for question in &questions {
        for options in [forced(), wide] {
            let selection = demo.index.select(question, &options);
            for distractor in DISTRACTORS {
                assert!(
                    !selection.contains(distractor),
                    "{question:?} picked {distractor}: {:?}",
                    selection.tables
                );
            }
        }
    }
    // Named, they may be picked.
    for (question, table) in [
        (
            "What rate does tbl_prod_master_old give Teflon Tape?",
            "tbl_prod_master_old",
        ),
        (
            "What did the legacy product list charge for nails?",
            "tbl_prod_master_old",
        ),
        (
            "Which printer do the store settings name?",
            "store_settings",
        ),
        ("What is the till opening float?", "store_settings"),
    ] {
        let selection = demo.index.select(question, &forced());
        assert!(
            selection.contains(table),
            "{question:?}: {:?}",
            selection.tables
        );
    }
}

fn value_reason(selection: &Selection, table: &str) -> Option<(String, String)> {
    selection
        .tables
        .iter()
        .find(|t| t.table == table)
        .and_then(|t| match &t.reason {
            Reason::Value { column, value } => Some((column.clone(), value.clone())),
            _ => None,
        })
}

#[tokio::test]
async fn literals_link_through_the_value_index() {
    let demo = demo().await;
    assert!(demo.index.indexed_values() > 100);
    for (question, table, column, value) in [
        (
            "How much 'Teflon Tape' went out last year?",
            "products",
            "prod_name",
            "Teflon Tape",
        ),
        ("How much came in through UPI?", "payments", "mode", "UPI"),
        (
            "Has Sharma Constructions cleared its account?",
            "customers",
            "cust_name",
            "Sharma Constructions",
        ),
        ("How many of them are paid?", "bills", "status", "PAID"),
    ] {
        let selection = demo.index.select(question, &forced());
        assert_eq!(
            value_reason(&selection, table),
            Some((column.to_string(), value.to_string())),
            "{question:?}: {:?}",
            selection.tables
        );
    }
}

#[tokio::test]
async fn the_demo_schema_goes_whole_within_the_default_budget() {
    let demo = demo().await;
    let selection = demo
        .index
        .select("What was the revenue in 2025?", &SelectOptions::default());
    assert_eq!(selection.mode, SelectionMode::Whole);
    assert_eq!(selection.tables.len(), 15);
    assert_eq!(selection.prompt_tokens, selection.whole_tokens);
    assert!(
        selection.whole_tokens <= DEFAULT_BUDGET_TOKENS,
        "{}",
        selection.whole_tokens
    );
    let tight = SelectOptions {
        budget_tokens: selection.whole_tokens - 1,
        ..SelectOptions::default()
    };
    let linked = demo.index.select("What was the revenue in 2025?", &tight);
    assert_eq!(linked.mode, SelectionMode::Linked);
    assert!(linked.prompt_tokens < linked.whole_tokens);
}

#[tokio::test]
async fn selections_are_in_name_order_nested_in_k_and_bridged() {
    let demo = demo().await;
    let question = "Which customers bought Teflon Tape?";
    let mut previous: BTreeSet<String> = BTreeSet::new();
    for k in 1..=10 {
        let options = SelectOptions { k, ..forced() };
        let selection = demo.index.select(question, &options);
        let names: Vec<&str> = selection.table_names();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        let now: BTreeSet<String> = names.iter().map(|s| s.to_string()).collect();
        assert!(
            previous.is_subset(&now),
            "k={k}: {previous:?} not in {now:?}"
        );
        previous = now;
    }
    // Two tables chosen, two bridges between them.
    let options = SelectOptions { k: 2, ..forced() };
    let pair = demo.index.select(
        "customer credit limits and product reorder levels",
        &options,
    );
    assert!(pair.contains("customers") && pair.contains("products"));
    for table in ["bills", "bill_items"] {
        let found = pair.tables.iter().find(|t| t.table == table);
        assert_eq!(
            found.map(|t| &t.reason),
            Some(&Reason::Bridge),
            "{:?}",
            pair.tables
        );
    }
    let widened = demo.index.select(
        question,
        &SelectOptions {
            widen: 3,
            ..forced()
        },
    );
    let plain = demo.index.select(question, &forced());
    assert!(widened.tables.len() > plain.tables.len());
}

#[test]
fn a_column_named_in_another_naming_convention_is_near() {
    // Snake case for a prefixed camel-case column is near; so is a squashed spelling.
    assert_eq!(name_distance("ticker_type", "sbtickertype", ""), 1);
    assert_eq!(name_distance("customer_id", "customerid", ""), 1);
    // Past the prefix every column of its table shares, the rest is the whole name.
    assert_eq!(name_distance("high", "sbdphigh", "sbdp"), 1);
    assert_eq!(name_distance("high", "sbdphigh", ""), 4);
    // Plain typos keep their edit distance, and a short common tail is not a match.
    assert_eq!(name_distance("cust_nme", "cust_name", ""), 1);
    assert_eq!(name_distance("type", "sbtickertype", ""), 8);
    assert_eq!(
        name_distance("ticker_name", "sbtickertype", ""),
        edit_distance("ticker_name", "sbtickertype")
    );
}

#[test]
fn the_prefix_a_tables_columns_share_is_found() {
    let columns = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert_eq!(
        shared_prefix(&columns(&[
            "sbdptickerid",
            "sbdpdate",
            "sbdphigh",
            "sbdplow"
        ])),
        "sbdp"
    );
    assert_eq!(
        shared_prefix(&columns(&[
            "customer_id",
            "customer_name",
            "customer_phone"
        ])),
        "customer_"
    );
    // Too few columns, too short a prefix, or a column left with too little of its own.
    assert_eq!(shared_prefix(&columns(&["sbdphigh", "sbdplow"])), "");
    assert_eq!(shared_prefix(&columns(&["id", "name", "age"])), "");
    assert_eq!(
        shared_prefix(&columns(&["name", "nation", "nationality"])),
        ""
    );
    assert_eq!(shared_prefix(&columns(&["ab_x", "ab_yyy", "ab_zzz"])), "");
    assert_eq!(shared_prefix(&[]), "");
}

#[tokio::test]
async fn repair_helpers_find_column_owners_and_join_paths() {
    let demo = demo().await;
    assert_eq!(
        demo.index.owners_of_column("status"),
        ["bill_archive", "bills", "purchase_orders"]
    );
    assert_eq!(
        demo.index.owners_of_column("bills.STATUS"),
        ["bill_archive", "bills", "purchase_orders"]
    );
    assert_eq!(
        demo.index.owners_of_column("cust_nme"),
        ["bill_archive", "customers"]
    );
    assert!(demo.index.owners_of_column("zzzzzzzz").is_empty());
    let path = demo
        .index
        .join_path(&["customers".to_string()], "products")
        .expect("connected");
    let hop = |a: &str, b: &str, c: &str, d: &str| {
        (a.to_string(), b.to_string(), c.to_string(), d.to_string())
    };
    assert_eq!(
        path,
        vec![
            hop("customers", "cust_id", "bills", "cust_id"),
            hop("bills", "bill_id", "bill_items", "bill_id"),
            hop("bill_items", "prod_id", "products", "prod_id"),
        ]
    );
    assert_eq!(
        demo.index.join_path(&["bills".to_string()], "bills"),
        Some(Vec::new())
    );
    assert_eq!(
        demo.index
            .join_path(&["bills".to_string()], "tbl_prod_master_old"),
        None
    );
}

#[test]
fn spider_linking_runs_over_the_dev_set() {
    let data = crate::home::shared_data_dir().unwrap_or_else(|message| panic!("{message}"));
    let spider = data.join("spider");
    let report = evaluate_spider(
        &spider.join("tables.json"),
        &spider.join("dev.json"),
        &DEFAULT_KS,
    )
    .expect("spider evaluation");
    println!("spider dev: {report}");
    assert_eq!(report.questions, 1034);
    assert_eq!(report.by_k.len(), DEFAULT_KS.len());
    for pair in report.by_k.windows(2) {
        assert!(pair[0].recall <= pair[1].recall, "{report}");
        assert!(
            pair[0].all_linked_rate <= pair[1].all_linked_rate,
            "{report}"
        );
    }
}
