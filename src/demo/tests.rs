//! Invariants of the generated demo data and of the SQLite file built from it: the
//! numbers golden questions rely on, and the deliberate mess the spec requires.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rusqlite::types::Value;
use rusqlite::Connection;

use super::*;

fn table<'a>(tables: &'a [DemoTable], name: &str) -> &'a DemoTable {
    tables
        .iter()
        .find(|t| t.def.name == name)
        .unwrap_or_else(|| panic!("no table {name}"))
}

/// Values of one column, by name.
fn column<'a>(t: &'a DemoTable, name: &str) -> Vec<&'a DemoValue> {
    let i = t
        .def
        .column_index(name)
        .unwrap_or_else(|| panic!("no column {}.{name}", t.def.name));
    t.rows.iter().map(|r| &r[i]).collect()
}

fn int_of(v: &DemoValue) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not a number: {v:?}"))
}

fn str_of(v: &DemoValue) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not text: {v:?}"))
}

/// (bill_id -> (total paise, status, date, cust_id))
fn bills_by_id(tables: &[DemoTable]) -> BTreeMap<i64, (i64, String, String, Option<i64>)> {
    let bills = table(tables, "bills");
    bills
        .rows
        .iter()
        .map(|r| {
            (
                int_of(&r[0]),
                (
                    int_of(&r[5]),
                    str_of(&r[6]).to_string(),
                    str_of(&r[4])[..10].to_string(),
                    r[2].as_i64(),
                ),
            )
        })
        .collect()
}

#[test]
fn generate_is_deterministic() {
    assert_eq!(generate(), generate());
}

#[test]
fn fifteen_tables_in_foreign_key_order_with_fitting_rows() {
    let tables = generate();
    assert_eq!(tables.len(), 15);
    let mut created = BTreeSet::new();
    for t in &tables {
        created.insert(t.def.name);
        for c in &t.def.columns {
            if let Some((target, target_col)) = c.references {
                assert!(created.contains(target), "{} before {target}", t.def.name);
                let target_def = &table(&tables, target).def;
                assert!(target_def.column_index(target_col).is_some());
            }
        }
        for row in &t.rows {
            if let Err(e) = check_row(&t.def, row) {
                panic!("{e}");
            }
        }
        // Serial ids start at 1 and run without gaps, written explicitly.
        if t.def.columns[0].ty == ColumnType::Serial {
            for (i, row) in t.rows.iter().enumerate() {
                assert_eq!(int_of(&row[0]), i as i64 + 1, "{} row {i}", t.def.name);
            }
        }
    }
}

#[test]
fn row_counts() {
    let tables = generate();
    let count = |name| table(&tables, name).rows.len();
    assert_eq!(count("categories"), 6);
    assert_eq!(count("suppliers"), 15);
    assert_eq!(count("employees"), 10);
    assert_eq!(count("customers"), 120);
    assert_eq!(count("products"), 150);
    assert_eq!(count("tbl_prod_master_old"), 40);
    assert_eq!(count("stock_entries"), 300);
    assert_eq!(count("purchase_orders"), 60);
    assert_eq!(count("bills"), BILL_COUNT);
    assert_eq!(count("stock_adjustments"), 60);
    assert_eq!(count("store_settings"), 8);
    let archive = table(&tables, "bill_archive");
    let archived: BTreeSet<&str> = column(archive, "bill_no").into_iter().map(str_of).collect();
    assert_eq!(archived.len(), ARCHIVE_BILL_COUNT);
    assert!(archive.rows.len() > ARCHIVE_BILL_COUNT);
    let names: Vec<&str> = column(table(&tables, "categories"), "cat_name")
        .into_iter()
        .map(str_of)
        .collect();
    assert_eq!(
        names,
        [
            "Plumbing",
            "Electrical",
            "Fasteners",
            "Paint",
            "Tools",
            "Cement"
        ]
    );
}

#[test]
fn bill_totals_are_the_sum_of_their_lines() {
    let tables = generate();
    let mut sums: BTreeMap<i64, i64> = BTreeMap::new();
    let mut lines: BTreeMap<i64, usize> = BTreeMap::new();
    for r in &table(&tables, "bill_items").rows {
        assert_eq!(int_of(&r[5]), int_of(&r[3]) * int_of(&r[4]), "line_total");
        assert!(int_of(&r[3]) > 0);
        *sums.entry(int_of(&r[1])).or_default() += int_of(&r[5]);
        *lines.entry(int_of(&r[1])).or_default() += 1;
    }
    for (id, (total, ..)) in bills_by_id(&tables) {
        assert_eq!(sums.get(&id), Some(&total), "bill {id}");
        assert!(
            (1..=5).contains(&lines[&id]),
            "bill {id} has {} lines",
            lines[&id]
        );
    }
}

#[test]
fn payments_match_statuses() {
    let tables = generate();
    let bills = bills_by_id(&tables);
    let mut paid: BTreeMap<i64, i64> = BTreeMap::new();
    let mut several = 0;
    for r in &table(&tables, "payments").rows {
        let bill = int_of(&r[1]);
        let (_, _, bill_day, _) = &bills[&bill];
        assert!(str_of(&r[2]) >= bill_day.as_str(), "paid before billed");
        assert!(str_of(&r[2]) <= BILLS_TO);
        assert!(int_of(&r[3]) > 0);
        assert!(["CASH", "UPI", "CARD", "CREDIT"].contains(&str_of(&r[4])));
        let entry = paid.entry(bill).or_default();
        if *entry > 0 {
            several += 1;
        }
        *entry += int_of(&r[3]);
    }
    assert!(
        several > 50,
        "payments must have several rows for some bills"
    );
    for (id, (total, status, ..)) in &bills {
        let got = paid.get(id).copied().unwrap_or(0);
        match status.as_str() {
            "PAID" => assert_eq!(got, *total, "PAID bill {id}"),
            "PART_PAID" => assert!(got > 0 && got < *total, "PART_PAID bill {id}"),
            _ => assert_eq!(got, 0, "{status} bill {id} has payments"),
        }
    }
}

#[test]
fn one_owner_and_a_reporting_line() {
    let tables = generate();
    let employees = table(&tables, "employees");
    let roles: BTreeMap<i64, &str> = employees
        .rows
        .iter()
        .map(|r| (int_of(&r[0]), str_of(&r[2])))
        .collect();
    let without_manager: Vec<i64> = employees
        .rows
        .iter()
        .filter(|r| r[4].is_null())
        .map(|r| int_of(&r[0]))
        .collect();
    assert_eq!(without_manager, [1]);
    assert_eq!(roles[&1], "OWNER");
    for r in &employees.rows {
        let Some(mgr) = r[4].as_i64() else { continue };
        let expected = if str_of(&r[2]) == "MANAGER" {
            "OWNER"
        } else {
            "MANAGER"
        };
        assert_eq!(roles[&mgr], expected);
    }
    // Bills are rung up by cashiers and managers only.
    for emp in column(table(&tables, "bills"), "emp_id") {
        assert!(["CASHIER", "MANAGER"].contains(&roles[&int_of(emp)]));
    }
}

#[test]
fn bills_shape_walk_ins_statuses_dates_and_numbers() {
    let tables = generate();
    let bills = table(&tables, "bills");
    let walk_ins = column(bills, "cust_id")
        .iter()
        .filter(|v| v.is_null())
        .count();
    let share = walk_ins as f64 / bills.rows.len() as f64;
    assert!((0.65..=0.75).contains(&share), "walk-in share {share}");
    assert_eq!(walk_ins, 980, "exactly 70% walk-ins");
    let statuses: BTreeSet<&str> = column(bills, "status").into_iter().map(str_of).collect();
    assert_eq!(
        statuses,
        BTreeSet::from(["PAID", "PART_PAID", "UNPAID", "VOID"])
    );
    let void = column(bills, "status")
        .into_iter()
        .filter(|v| str_of(v) == "VOID")
        .count();
    assert!((10..=100).contains(&void), "VOID bills: {void}");
    let mut previous = String::new();
    let mut numbers = BTreeSet::new();
    for r in &bills.rows {
        let ts = str_of(&r[4]);
        assert!(ts > previous.as_str(), "txn_dt increases with bill_id");
        assert!((BILLS_FROM..=BILLS_TO).contains(&&ts[..10]), "{ts}");
        let no = str_of(&r[1]);
        assert_eq!(no.len(), 10);
        assert_eq!(&no[..4], format!("B{}-", &ts[2..4]));
        assert!(no[4..].chars().all(|c| c.is_ascii_digit()));
        assert!(numbers.insert(no.to_string()), "duplicate {no}");
        previous = ts.to_string();
    }
    let archive = table(&tables, "bill_archive");
    for r in &archive.rows {
        let day = str_of(&r[2]);
        assert!((ARCHIVE_FROM..=ARCHIVE_TO).contains(&day), "{day}");
        assert_eq!(&str_of(&r[1])[1..3], &day[2..4]);
        assert!(["PAID", "PART_PAID", "UNPAID", "VOID"].contains(&str_of(&r[7])));
    }
    let archive_walk_ins = column(archive, "cust_name")
        .iter()
        .filter(|v| v.is_null())
        .count();
    assert!(archive_walk_ins * 2 > archive.rows.len());
}

#[test]
fn purchasing_and_stock_are_consistent() {
    let tables = generate();
    let orders: BTreeMap<i64, &str> = table(&tables, "purchase_orders")
        .rows
        .iter()
        .map(|r| (int_of(&r[0]), str_of(&r[4])))
        .collect();
    let statuses: BTreeSet<&str> = orders.values().copied().collect();
    assert_eq!(
        statuses,
        BTreeSet::from(["OPEN", "PARTIAL", "RECEIVED", "CANCELLED"])
    );
    let mut received: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for r in &table(&tables, "po_lines").rows {
        let (ordered, got) = (int_of(&r[3]), int_of(&r[4]));
        let sums = received.entry(int_of(&r[1])).or_default();
        sums.0 += ordered;
        sums.1 += got;
        match orders[&int_of(&r[1])] {
            "RECEIVED" => assert_eq!(got, ordered),
            "PARTIAL" => assert!(got > 0 && got < ordered),
            _ => assert_eq!(got, 0),
        }
    }
    assert_eq!(received.len(), orders.len(), "every order has lines");
    for r in &table(&tables, "stock_adjustments").rows {
        let change = int_of(&r[3]);
        match str_of(&r[4]) {
            "DAMAGE" | "THEFT" => assert!(change < 0),
            "STOCKTAKE" => assert_ne!(change, 0),
            other => panic!("reason {other}"),
        }
    }
    let products = table(&tables, "products");
    let names: Vec<&str> = column(products, "prod_name")
        .into_iter()
        .map(str_of)
        .collect();
    assert!(names.contains(&"Teflon Tape"));
    assert_eq!(names.iter().collect::<BTreeSet<_>>().len(), names.len());
    let low = products
        .rows
        .iter()
        .filter(|r| int_of(&r[6]) < int_of(&r[7]) && r[8] == DemoValue::Bool(true))
        .count();
    assert!((8..=30).contains(&low), "low stock: {low}");
    let inactive = column(products, "is_active")
        .into_iter()
        .filter(|v| **v == DemoValue::Bool(false))
        .count();
    assert_eq!(inactive, 6);
    // The dead table's codes never equal a product id, even after SQLite's affinity.
    for code in column(table(&tables, "tbl_prod_master_old"), "item_code") {
        assert!(str_of(code).parse::<i64>().is_err());
    }
}

#[test]
fn injection_is_planted_exactly_once_in_each_place() {
    let tables = generate();
    let notes = column(table(&tables, "customers"), "notes");
    let planted = notes
        .iter()
        .filter(|v| v.as_str().is_some_and(|s| s.contains(INJECTION)))
        .count();
    assert_eq!(planted, 1);
    let with_notes = notes.iter().filter(|v| !v.is_null()).count();
    assert!((5..=20).contains(&with_notes), "mostly NULL notes");
    let settings = column(table(&tables, "store_settings"), "setting_value");
    let planted = settings
        .iter()
        .filter(|v| v.as_str().is_some_and(|s| s.contains(INJECTION)))
        .count();
    assert_eq!(planted, 1);
}

#[test]
fn notes_cover_every_table() {
    let notes = demo_notes();
    for def in table_defs() {
        let note = notes.tables.get(def.name).expect("table note");
        assert!(!note.description.is_empty());
        for column in note.columns.keys() {
            assert!(def.column_index(column).is_some(), "{}.{column}", def.name);
        }
    }
    assert_eq!(
        notes.restricted_columns,
        ["customers.phone", "customers.address", "suppliers.phone"]
    );
    assert_eq!(notes.hidden_tables, ["askdb_query_log"]);
    assert!(notes.conventions.len() >= 4);
    for word in [
        "revenue",
        "collected",
        "billed",
        "walk-in",
        "low stock",
        "recent",
    ] {
        assert!(notes.glossary.contains_key(word), "glossary {word}");
    }
}

/// Every table's rows as stored, in rowid order (the primary key where there is one).
fn read_back(path: &Path) -> Vec<(String, Vec<Vec<Value>>)> {
    let conn = Connection::open(path).expect("open");
    table_defs()
        .iter()
        .map(|def| {
            let mut stmt = conn
                .prepare(&format!("SELECT * FROM {} ORDER BY rowid", def.name))
                .expect("prepare");
            let width = def.columns.len();
            let rows = stmt
                .query_map([], |row| {
                    (0..width).map(|i| row.get::<_, Value>(i)).collect()
                })
                .expect("query")
                .collect::<Result<Vec<Vec<Value>>, _>>()
                .expect("rows");
            (def.name.to_string(), rows)
        })
        .collect()
}

#[test]
fn sqlite_builds_are_identical_and_faithful() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a").join("demo.sqlite");
    let b = dir.path().join("b.sqlite");
    write_sqlite(&a).expect("first build");
    write_sqlite(&b).expect("second build");
    let first = read_back(&a);
    assert_eq!(first, read_back(&b));
    // Rows read back are the generated rows (SQLite keeps whole REALs in a NUMERIC
    // column as integers, so numbers compare by value).
    let tables = generate();
    for ((name, rows), t) in first.iter().zip(&tables) {
        assert_eq!(name, t.def.name);
        assert_eq!(rows.len(), t.rows.len(), "{name}");
        for (stored, generated) in rows.iter().zip(&t.rows) {
            for (s, g) in stored.iter().zip(generated) {
                let same = match (s, sqlite_value(g)) {
                    (Value::Integer(i), Value::Real(r)) => *i as f64 == r,
                    (s, g) => *s == g,
                };
                assert!(same, "{name}: stored {s:?}, generated {g:?}");
            }
        }
    }
    let conn = Connection::open(&a).expect("open");
    let violations: i64 = conn
        .query_row("SELECT COUNT(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .expect("fk check");
    assert_eq!(violations, 0);
    // No temporary files are left beside the database.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn ensure_builds_once_and_rebuilds_a_stale_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("demo.sqlite");
    sqlite::ensure_at(&path).expect("first build");
    // A marker table survives only if the second call leaves the file alone.
    Connection::open(&path)
        .expect("open")
        .execute_batch("CREATE TABLE marker (x INTEGER)")
        .expect("marker");
    sqlite::ensure_at(&path).expect("no rebuild");
    let conn = Connection::open(&path).expect("open");
    let markers: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'marker'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(markers, 1, "a current file is not rebuilt");
    drop(conn);
    std::fs::write(&path, b"not a database").expect("overwrite");
    sqlite::ensure_at(&path).expect("rebuild");
    assert_eq!(read_back(&path)[0].1.len(), 6);
}

#[test]
fn errors_name_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, b"x").expect("file");
    let err = write_sqlite(&blocker.join("demo.sqlite")).expect_err("must fail");
    assert!(err.to_string().contains("not-a-dir"), "{err}");
}

/// Figures golden questions are built on. They pin the generator: if this test fails
/// after a change to the generator, every golden answer must be recomputed too.
#[test]
fn golden_figures() {
    let tables = generate();
    let bills = bills_by_id(&tables);
    let revenue = |year: &str| -> i64 {
        bills
            .values()
            .filter(|(_, status, day, _)| status != "VOID" && day.starts_with(year))
            .map(|(total, ..)| total)
            .sum()
    };
    assert_eq!(revenue("2025"), 104_748_400);
    assert_eq!(revenue("2026"), 106_506_750);
    let walk_ins = bills.values().filter(|b| b.3.is_none()).count();
    assert_eq!(walk_ins, 980);
    let void = bills.values().filter(|b| b.1 == "VOID").count();
    assert_eq!(void, 46);
    let archive = table(&tables, "bill_archive");
    let archived = |year: &str| -> i64 {
        archive
            .rows
            .iter()
            .filter(|r| str_of(&r[7]) != "VOID" && str_of(&r[2]).starts_with(year))
            .map(|r| int_of(&r[6]))
            .sum()
    };
    assert_eq!(archived("2023"), 61_170_650);
    assert_eq!(archived("2024"), 63_835_750);
    let collected: i64 = column(table(&tables, "payments"), "amt")
        .into_iter()
        .map(int_of)
        .sum();
    assert_eq!(collected, 201_802_900);
}
