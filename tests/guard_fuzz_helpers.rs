//! The guard fuzzer's helpers (benches/support/fuzz_*.rs), tested where they can be
//! wrong without running the fuzzer itself: the generator is deterministic for a seed,
//! the row comparison forgives only what the cap may do, and the independent round-trip
//! check catches a limit replaced by the cap.

#[path = "../benches/support/fuzz_gen.rs"]
mod fuzz_gen;
#[path = "../benches/support/fuzz_props.rs"]
mod fuzz_props;
#[path = "../benches/support/fuzz_rows.rs"]
mod fuzz_rows;

use askdb::gate::SqlDialect;
use fuzz_gen::{Generator, Names, Seed};
use fuzz_rows::{compare, Cell, Expect, Rows};

fn seeds() -> Vec<Seed> {
    [
        "SELECT cust_name FROM customers WHERE cust_id = 3",
        "SELECT count(*) AS n, status FROM bills GROUP BY status ORDER BY n DESC LIMIT 5",
        "WITH t AS (SELECT bill_no FROM bills) SELECT * FROM t UNION SELECT 'x'",
    ]
    .iter()
    .enumerate()
    .map(|(index, sql)| Seed {
        id: format!("s{index}"),
        sql: sql.to_string(),
        db: 0,
    })
    .collect()
}

fn names() -> Vec<Names> {
    vec![Names {
        tables: vec!["bills".into(), "customers".into()],
        columns: vec!["bill_no".into(), "cust_id".into(), "cust_name".into()],
        restricted: vec![("customers".into(), "phone".into())],
        hidden: vec!["askdb_query_log".into()],
    }]
}

fn cases(seed: u64, dialect: SqlDialect) -> Vec<String> {
    let (seeds, names) = (seeds(), names());
    let mut generator = Generator::new(dialect, &seeds, &names, seed);
    (0..300).map(|_| generator.next_case().sql).collect()
}

#[test]
fn the_generator_is_deterministic_for_a_seed_and_varies_with_it() {
    for dialect in [SqlDialect::Postgres, SqlDialect::Sqlite] {
        let first = cases(7, dialect);
        assert_eq!(first, cases(7, dialect));
        assert_ne!(first, cases(8, dialect));
        let distinct: std::collections::BTreeSet<&String> = first.iter().collect();
        assert!(
            distinct.len() > 200,
            "only {} distinct cases",
            distinct.len()
        );
    }
}

fn rows(values: &[i64]) -> Rows {
    Rows {
        columns: vec!["n".into()],
        rows: values.iter().map(|v| vec![Cell::Integer(*v)]).collect(),
    }
}

#[test]
fn the_row_comparison_forgives_only_what_the_cap_may_do() {
    let loose = Expect {
        cap: 3,
        ordered: false,
        same_tree: false,
        wrapped: false,
    };
    // Under the cap: the same multiset, in any order.
    assert!(compare(&rows(&[1, 2, 2]), &rows(&[2, 1, 2]), &loose).is_ok());
    assert!(compare(&rows(&[1, 2, 2]), &rows(&[1, 2]), &loose).is_err());
    // The cap cuts: exactly cap rows, each one of the original's.
    assert!(compare(&rows(&[1, 2, 3, 4, 5]), &rows(&[5, 1, 3]), &loose).is_ok());
    assert!(compare(&rows(&[1, 2, 3, 4, 5]), &rows(&[1, 2]), &loose).is_err());
    assert!(compare(&rows(&[1, 2, 3, 4, 5]), &rows(&[1, 2, 9]), &loose).is_err());
    assert!(compare(&rows(&[1, 1, 2, 3]), &rows(&[1, 1, 1]), &loose).is_err());
    // More rows than the original asked for (a limit replaced by the cap).
    assert!(compare(&rows(&[1, 2]), &rows(&[1, 2, 3]), &loose).is_err());
    // The same tree, ordered: the same sequence.
    let exact = Expect {
        cap: 3,
        ordered: true,
        same_tree: true,
        wrapped: false,
    };
    assert!(compare(&rows(&[1, 2]), &rows(&[1, 2]), &exact).is_ok());
    assert!(compare(&rows(&[1, 2]), &rows(&[2, 1]), &exact).is_err());
    // A plainly named column keeps its name (case aside); an expression's may be respaced.
    let mut renamed = rows(&[1]);
    renamed.columns = vec!["m".into()];
    assert!(compare(&rows(&[1]), &renamed, &loose).is_err());
    renamed.columns = vec!["N".into()];
    assert!(compare(&rows(&[1]), &renamed, &loose).is_ok());
    let mut expression = rows(&[1]);
    expression.columns = vec!["count( * )".into()];
    let mut respaced = rows(&[1]);
    respaced.columns = vec!["count(*)".into()];
    assert!(compare(&expression, &respaced, &loose).is_ok());
    // SQLite's `name:1` for a repeated name, only through the wrapper.
    let mut suffixed = rows(&[1]);
    suffixed.columns = vec!["n:1".into()];
    assert!(compare(&rows(&[1]), &suffixed, &loose).is_err());
    let wrapped = Expect {
        wrapped: true,
        ..loose
    };
    assert!(compare(&rows(&[1]), &suffixed, &wrapped).is_ok());
}

#[test]
fn the_round_trip_check_catches_a_limit_replaced_by_the_cap() {
    let check = |original: &str, rendered: &str| {
        fuzz_props::check_rendering(original, rendered, SqlDialect::Sqlite, 200)
            .map(|(_, facts)| facts.cap)
            .map_err(|violation| violation.kind)
    };
    assert_eq!(
        check("SELECT a FROM t LIMIT 5", "SELECT a FROM t LIMIT 5"),
        Ok(fuzz_props::CapFact::Kept)
    );
    assert_eq!(
        check("SELECT a FROM t", "SELECT a FROM t LIMIT 200"),
        Ok(fuzz_props::CapFact::Capped)
    );
    assert_eq!(
        check(
            "SELECT a FROM t LIMIT 5.0",
            "SELECT * FROM (SELECT a FROM t LIMIT 5.0) AS askdb_capped LIMIT 200"
        ),
        Ok(fuzz_props::CapFact::Wrapped)
    );
    assert_eq!(
        check("SELECT a FROM t LIMIT 5.0", "SELECT a FROM t LIMIT 200"),
        Err("limit_replaced")
    );
    assert_eq!(
        check("SELECT a FROM t LIMIT 5", "SELECT a FROM t LIMIT 200"),
        Err("limit_changed")
    );
    assert_eq!(
        check(
            "SELECT a FROM t WHERE b = 1",
            "SELECT a FROM t WHERE b = 2 LIMIT 200"
        ),
        Err("tree_changed")
    );
    assert_eq!(
        check("SELECT 0x10", "SELECT 16 LIMIT 200"),
        Ok(fuzz_props::CapFact::Capped)
    );
    assert_eq!(
        check("SELECT a FROM t", "SELECT a FROM t"),
        Err("cap_not_enforced")
    );
}

#[test]
fn the_walker_finds_each_refused_construct_and_passes_plain_queries() {
    let dialect = SqlDialect::Postgres;
    let (functions, types) = fuzz_props::allow_list(dialect);
    assert!(functions.contains("count") && !functions.contains("version"));
    let table = |columns: &[&str]| columns.iter().map(|c| c.to_string()).collect();
    let know = fuzz_props::Knowledge {
        dialect,
        tables: [
            (
                "customers".to_string(),
                table(&["cust_id", "cust_name", "phone"]),
            ),
            ("bills".to_string(), table(&["bill_no", "cust_id"])),
        ]
        .into_iter()
        .collect(),
        restricted: [("customers".to_string(), table(&["phone"]))]
            .into_iter()
            .collect(),
        hidden: ["askdb_query_log".to_string()].into_iter().collect(),
        functions,
        types,
    };
    let found = |sql: &str| -> Vec<&'static str> {
        let tree = fuzz_props::parse_one(sql, dialect).expect("the example parses");
        fuzz_props::Walker::walk(&know, &tree)
            .into_iter()
            .map(|violation| violation.kind)
            .collect()
    };
    for plain in [
        "SELECT cust_name, count(*) FROM customers c JOIN bills b ON b.cust_id = c.cust_id GROUP BY 1",
        "WITH t AS (SELECT cust_name AS phone FROM customers) SELECT cust_name FROM customers ORDER BY 1",
        "SELECT cust_name AS phone FROM customers ORDER BY phone",
        "SELECT CAST(bill_no AS text) FROM bills",
    ] {
        assert_eq!(found(plain), Vec::<&str>::new(), "{plain}");
    }
    for (sql, kind) in [
        ("SELECT version()", "walker_function"),
        ("SELECT relname FROM pg_class", "walker_catalog"),
        ("SELECT * FROM askdb_query_log", "walker_hidden"),
        ("SELECT 1 FROM nowhere", "walker_unknown_table"),
        ("SELECT phone FROM customers", "walker_restricted"),
        ("SELECT c.phone FROM customers c", "walker_restricted"),
        ("SELECT * FROM customers", "walker_restricted"),
        ("SELECT to_jsonb(c) FROM customers c", "walker_restricted"),
        ("SELECT c.to_jsonb FROM customers c", "walker_restricted"),
        (
            "SELECT 1 FROM customers NATURAL JOIN customers",
            "walker_restricted",
        ),
        ("SELECT bill_no::regclass FROM bills", "walker_type"),
        ("SELECT NULL::customers", "walker_type"),
        ("SELECT bill_no::oid FROM bills", "walker_type"),
    ] {
        assert!(found(sql).contains(&kind), "{sql}: {:?}", found(sql));
    }
}
