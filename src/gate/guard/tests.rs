//! Guard tests: one tiny helper per verdict, and hand-written cases for each rule and
//! each pitfall the parser is known for. The corpus-driven tests (hostile and benign
//! statements from `evals/`) live in `src/gate/tests.rs`, over the real demo schema.

use super::*;

pub(super) fn policy(dialect: SqlDialect) -> GuardPolicy {
    let mut policy = GuardPolicy::new(dialect);
    policy.allow_table(
        "bills",
        ["bill_id", "bill_no", "cust_id", "status", "total_amt"],
    );
    policy.allow_table(
        "customers",
        ["cust_id", "cust_name", "phone", "address", "notes"],
    );
    policy.allow_table("employees", ["emp_id", "emp_name", "mgr_id"]);
    policy.allow_table("askdb_query_log", ["id", "question"]);
    policy.restrict_column("customers", "phone");
    policy.restrict_column("customers", "address");
    policy.hide_table("askdb_query_log");
    policy
}

#[track_caller]
pub(super) fn accepted(dialect: SqlDialect, sql: &str) -> CheckedQuery {
    match check(sql, &Arc::new(policy(dialect))) {
        Ok(checked) => checked,
        Err(refusal) => panic!("expected {sql:?} to pass, refused: {refusal}"),
    }
}

#[track_caller]
pub(super) fn refused(dialect: SqlDialect, sql: &str, reason: RefusalReason) -> Refusal {
    match check(sql, &Arc::new(policy(dialect))) {
        Ok(checked) => panic!(
            "expected {sql:?} to be refused ({reason:?}), passed as {}",
            checked.sql()
        ),
        Err(refusal) => {
            assert_eq!(refusal.reason, reason, "{sql:?}: {refusal}");
            assert!(!refusal.message.is_empty());
            refusal
        }
    }
}

const PG: SqlDialect = SqlDialect::Postgres;
const LITE: SqlDialect = SqlDialect::Sqlite;

#[test]
fn statement_shape_rules() {
    refused(PG, "", RefusalReason::EmptyStatement);
    refused(PG, "  -- only a comment\n", RefusalReason::EmptyStatement);
    refused(PG, "SELEC 1", RefusalReason::ParseError);
    refused(
        PG,
        "SELECT 1; COMMIT; DROP TABLE bills",
        RefusalReason::MultipleStatements,
    );
    refused(
        LITE,
        "SELECT 1; DELETE FROM bills",
        RefusalReason::MultipleStatements,
    );
    refused(PG, "DELETE FROM bills", RefusalReason::NotAQuery);
    refused(PG, "COMMIT", RefusalReason::NotAQuery);
    refused(
        LITE,
        "ATTACH DATABASE '/tmp/x.db' AS x",
        RefusalReason::NotAQuery,
    );
    refused(LITE, "PRAGMA query_only = 0", RefusalReason::NotAQuery);
    refused(PG, "EXPLAIN ANALYZE SELECT 1", RefusalReason::NotAQuery);
    refused(
        PG,
        "WITH gone AS (DELETE FROM bills RETURNING *) SELECT count(*) FROM gone",
        RefusalReason::DataModifyingCte,
    );
    refused(
        PG,
        "SELECT * INTO copy_of_bills FROM bills",
        RefusalReason::SelectInto,
    );
    refused(
        PG,
        "SELECT bill_id FROM bills FOR UPDATE",
        RefusalReason::LockingClause,
    );
    refused(
        PG,
        "SELECT bill_id FROM bills FOR SHARE SKIP LOCKED",
        RefusalReason::LockingClause,
    );
}

#[test]
fn denied_functions_in_every_position() {
    for sql in [
        "SELECT pg_sleep(10)",
        "SELECT bill_id FROM bills WHERE pg_sleep(1) IS NOT NULL",
        "SELECT bill_id FROM bills ORDER BY pg_sleep(1)",
        "SELECT * FROM pg_sleep(1)",
        "SELECT pg_catalog.pg_sleep(1)",
        "SELECT \"pg_sleep\"(1)",
        "SELECT PG_SLEEP(1)",
        "SELECT (SELECT pg_read_file('/etc/passwd'))",
        "SELECT * FROM pg_ls_dir('.')",
        "SELECT set_config('statement_timeout', '0', true)",
        "SELECT nextval('bills_bill_id_seq')",
        "SELECT coalesce(pg_terminate_backend(1), false)",
        "SELECT query_to_xml('select 1', true, true, '')",
        "SELECT dblink_exec('host=x', 'drop table bills')",
        "SELECT lo_import('/etc/passwd')",
        "SELECT pg_advisory_lock(1)",
        "WITH s AS (SELECT pg_sleep_for('1 second')) SELECT * FROM s",
        "SELECT count(*) FILTER (WHERE pg_sleep(1) IS NULL) FROM bills",
    ] {
        refused(PG, sql, RefusalReason::DeniedFunction);
    }
    for sql in [
        "SELECT load_extension('/tmp/evil.so')",
        "SELECT writefile('/tmp/x', 'y')",
        "SELECT readfile('/etc/passwd')",
        "SELECT fts3_tokenizer('simple')",
    ] {
        refused(LITE, sql, RefusalReason::DeniedFunction);
    }
}

#[test]
fn catalogs_hidden_and_unknown_tables() {
    refused(
        PG,
        "SELECT * FROM pg_catalog.pg_class",
        RefusalReason::SystemCatalog,
    );
    refused(
        PG,
        "SELECT * FROM information_schema.tables",
        RefusalReason::SystemCatalog,
    );
    refused(
        PG,
        "SELECT usename FROM pg_user",
        RefusalReason::SystemCatalog,
    );
    refused(
        LITE,
        "SELECT sql FROM sqlite_master",
        RefusalReason::SystemCatalog,
    );
    refused(
        LITE,
        "SELECT sql FROM main.sqlite_schema",
        RefusalReason::SystemCatalog,
    );
    refused(
        LITE,
        "SELECT * FROM pragma_table_info('bills')",
        RefusalReason::SystemCatalog,
    );
    refused(PG, "SELECT * FROM nope_table", RefusalReason::UnknownTable);
    refused(
        PG,
        "SELECT * FROM other_schema.bills",
        RefusalReason::UnknownTable,
    );
    let hidden = refused(
        PG,
        "SELECT * FROM askdb_query_log",
        RefusalReason::UnknownTable,
    );
    assert!(!hidden.repairable, "a hidden table is never repaired");
    let unknown = refused(PG, "SELECT * FROM nope_table", RefusalReason::UnknownTable);
    assert!(unknown.repairable);
    assert_eq!(
        hidden.message.replace("askdb_query_log", "X"),
        unknown.message.replace("nope_table", "X"),
        "a hidden table is refused in the same words as a missing one"
    );
    refused(
        PG,
        "WITH askdb_query_log AS (SELECT 1) SELECT * FROM askdb_query_log",
        RefusalReason::UnknownTable,
    );
    accepted(PG, "SELECT * FROM public.bills");
    accepted(LITE, "SELECT * FROM main.bills");
    accepted(
        PG,
        "WITH recent AS (SELECT * FROM bills) SELECT count(*) FROM recent",
    );
}

#[test]
fn restricted_columns_in_every_form() {
    for sql in [
        "SELECT phone FROM customers",
        "SELECT c.phone FROM customers c",
        "SELECT cust_name FROM customers ORDER BY address",
        "SELECT upper(phone) FROM customers",
        "SELECT * FROM customers",
        "SELECT c.* FROM customers c",
        "SELECT b.*, c.* FROM bills b JOIN customers c ON c.cust_id = b.cust_id",
        "SELECT * FROM bills JOIN customers USING (cust_id)",
        "SELECT 1 FROM customers a JOIN customers b USING (phone)",
        "SELECT 1 FROM customers a NATURAL JOIN customers b",
        "SELECT 1 FROM bills NATURAL JOIN (SELECT * FROM bills) t NATURAL JOIN customers",
        "SELECT row_to_json(c) FROM customers c",
        "SELECT c FROM customers c",
        "SELECT to_jsonb(customers) FROM customers",
        "SELECT x FROM (SELECT phone AS x FROM customers) t",
        "SELECT t.phone FROM (SELECT cust_id, cust_name AS phone FROM customers) t",
        "SELECT \"PHONE\" FROM customers",
        "SELECT x.p FROM customers AS x(id, name, p)",
    ] {
        refused(PG, sql, RefusalReason::RestrictedColumn);
    }
    // `TABLE x` reads every column of x.
    refused(PG, "TABLE customers", RefusalReason::RestrictedColumn);
    accepted(PG, "SELECT count(*) FROM customers");
    // Shares cust_id alone with bills: no restricted column in the match.
    accepted(PG, "SELECT cust_name FROM customers NATURAL JOIN bills");
    accepted(PG, "SELECT b.n FROM bills AS b(id, n)");
    accepted(PG, "SELECT cust_name, notes FROM customers");
    accepted(
        PG,
        "SELECT t.* FROM (SELECT cust_id, cust_name FROM customers) t",
    );
    accepted(
        PG,
        "SELECT * FROM bills JOIN employees ON employees.emp_id = bills.cust_id",
    );
}

#[test]
fn benign_constructs_pass() {
    for sql in [
        "SELECT 'DELETE FROM bills; DROP TABLE bills' AS s",
        "SELECT 1 -- DROP TABLE bills\n",
        "SELECT /* ; DELETE */ bill_no FROM bills",
        "SELECT $$DROP TABLE bills$$ AS s",
        "SELECT bill_id, row_number() OVER (PARTITION BY status ORDER BY total_amt DESC) FROM bills",
        "SELECT count(*) FILTER (WHERE status = 'PAID') FROM bills",
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY total_amt) FROM bills",
        "SELECT b.bill_no, x.n FROM bills b, LATERAL (SELECT count(*) AS n FROM bills b2 WHERE b2.cust_id = b.cust_id) x",
        "SELECT DISTINCT ON (cust_id) cust_id, bill_no FROM bills ORDER BY cust_id, total_amt DESC",
        "WITH RECURSIVE chain AS (SELECT emp_id, mgr_id, 1 AS depth FROM employees WHERE mgr_id IS NULL UNION ALL SELECT e.emp_id, e.mgr_id, c.depth + 1 FROM employees e JOIN chain c ON e.mgr_id = c.emp_id) SELECT * FROM chain",
        "SELECT status, count(*) FROM bills GROUP BY ROLLUP (status)",
        "SELECT status, count(*) FROM bills GROUP BY GROUPING SETS ((status), ())",
        "SELECT total_amt::numeric(12, 0), CAST(bill_id AS TEXT) FROM bills",
        "SELECT now() - INTERVAL '30 days'",
        "SELECT * FROM generate_series(1, 10) AS g(n)",
        "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS v(n, s)",
        "SELECT timezone('Asia/Kolkata', now()) FROM bills",
        "SELECT daterange(current_date, current_date + 7) FROM bills",
        "SELECT bit_count(B'1011')",
        "SELECT s FROM string_to_table('a,b', ',') AS t(s)",
    ] {
        accepted(PG, sql);
    }
}

#[test]
fn limit_is_forced_on_the_outermost_query() {
    let kept = accepted(PG, "SELECT bill_no FROM bills LIMIT 5");
    assert_eq!(kept.limit, LimitAction::Kept(5));
    assert_eq!(kept.sql, "SELECT bill_no FROM bills LIMIT 5");

    let capped = accepted(PG, "SELECT bill_no FROM bills");
    assert_eq!(capped.limit, LimitAction::Capped(DEFAULT_ROW_CAP));
    assert_eq!(capped.sql, "SELECT bill_no FROM bills LIMIT 200");

    let too_many = accepted(PG, "SELECT bill_no FROM bills LIMIT 100000 OFFSET 3");
    assert_eq!(too_many.sql, "SELECT bill_no FROM bills LIMIT 200 OFFSET 3");

    let all = accepted(PG, "SELECT bill_no FROM bills LIMIT ALL");
    assert_eq!(all.sql, "SELECT bill_no FROM bills LIMIT 200");

    // A limit that is not a plain number may be below the cap: it stays, wrapped.
    let expression = accepted(PG, "SELECT bill_no FROM bills LIMIT (SELECT 5000)");
    assert_eq!(
        expression.sql,
        "SELECT * FROM (SELECT bill_no FROM bills LIMIT (SELECT 5000)) AS askdb_capped LIMIT 200"
    );
    for dialect in [PG, LITE] {
        for limit in ["LIMIT 5.0", "LIMIT 2 + 3", "LIMIT '5'"] {
            let computed = accepted(dialect, &format!("SELECT bill_no FROM bills {limit}"));
            assert_eq!(computed.limit, LimitAction::Wrapped(DEFAULT_ROW_CAP));
            assert_eq!(
                computed.sql,
                format!(
                    "SELECT * FROM (SELECT bill_no FROM bills {limit}) AS askdb_capped LIMIT 200"
                )
            );
        }
    }
    let minus_zero = accepted(LITE, "SELECT bill_no FROM bills LIMIT -0");
    assert_eq!(minus_zero.limit, LimitAction::Wrapped(DEFAULT_ROW_CAP));
    let both = accepted(
        PG,
        "SELECT bill_no FROM bills LIMIT 5 FETCH FIRST 3 ROWS ONLY",
    );
    assert_eq!(both.limit, LimitAction::Wrapped(DEFAULT_ROW_CAP));

    let negative = accepted(LITE, "SELECT bill_no FROM bills LIMIT -1");
    assert_eq!(negative.sql, "SELECT bill_no FROM bills LIMIT 200");

    let comma = accepted(LITE, "SELECT bill_no FROM bills LIMIT 10, 5000");
    assert_eq!(comma.sql, "SELECT bill_no FROM bills LIMIT 10, 200");
    let comma_small = accepted(LITE, "SELECT bill_no FROM bills LIMIT 10, 5");
    assert_eq!(comma_small.limit, LimitAction::Kept(5));

    let fetch = accepted(
        PG,
        "SELECT bill_no FROM bills ORDER BY bill_no FETCH FIRST 5 ROWS ONLY",
    );
    assert_eq!(fetch.limit, LimitAction::Kept(5));
    let big_fetch = accepted(
        PG,
        "SELECT bill_no FROM bills ORDER BY bill_no FETCH FIRST 5000 ROWS ONLY",
    );
    assert_eq!(
        big_fetch.sql,
        "SELECT bill_no FROM bills ORDER BY bill_no LIMIT 200"
    );
    assert!(!big_fetch.sql.contains("FETCH"));
    let ties = accepted(
        PG,
        "SELECT bill_no FROM bills ORDER BY total_amt FETCH FIRST 5 ROWS WITH TIES",
    );
    assert_eq!(ties.limit, LimitAction::Wrapped(DEFAULT_ROW_CAP));
    assert_eq!(
        ties.sql,
        "SELECT * FROM (SELECT bill_no FROM bills ORDER BY total_amt FETCH FIRST 5 ROWS WITH TIES) AS askdb_capped LIMIT 200"
    );

    let union = accepted(
        PG,
        "SELECT bill_no FROM bills UNION SELECT cust_name FROM customers",
    );
    assert_eq!(union.limit, LimitAction::Wrapped(DEFAULT_ROW_CAP));
    assert_eq!(
        union.sql,
        "SELECT * FROM (SELECT bill_no FROM bills UNION SELECT cust_name FROM customers) AS askdb_capped LIMIT 200"
    );
    let union_small = accepted(
        PG,
        "SELECT bill_no FROM bills UNION SELECT cust_name FROM customers LIMIT 3",
    );
    assert_eq!(union_small.limit, LimitAction::Kept(3));

    let values = accepted(LITE, "VALUES (1), (2)");
    assert_eq!(values.limit, LimitAction::Wrapped(DEFAULT_ROW_CAP));

    // Inner limits are the query's own business; only the outermost one is forced.
    let inner = accepted(PG, "SELECT * FROM (SELECT bill_no FROM bills LIMIT 5000) t");
    assert_eq!(
        inner.sql,
        "SELECT * FROM (SELECT bill_no FROM bills LIMIT 5000) t LIMIT 200"
    );
}

#[test]
fn re_rendering_drops_comments_and_keeps_meaning() {
    let checked = accepted(
        PG,
        "SELECT bill_no /* the number */ FROM bills WHERE status != 'VOID' -- live\n",
    );
    assert_eq!(
        checked.sql(),
        "SELECT bill_no FROM bills WHERE status <> 'VOID' LIMIT 200"
    );
    assert_eq!(checked.tables(), vec!["bills".to_string()]);
}

#[test]
fn oversized_statements_are_refused_before_parsing() {
    let huge = format!("SELECT '{}'", "x".repeat(MAX_SQL_BYTES));
    refused(PG, &huge, RefusalReason::TooLong);
}

#[test]
fn deeply_nested_input_is_a_parse_error_not_a_crash() {
    let nested = format!("SELECT {}1{}", "(".repeat(5_000), ")".repeat(5_000));
    refused(PG, &nested, RefusalReason::ParseError);
}

#[test]
fn the_round_trip_refuses_renderings_that_change_meaning() {
    // sqlparser prints the value `x\' , ... --` without doubling the quote after the
    // backslash: the rendering would run as a query over customers.
    let trick = "SELECT 'x\\'' , cust_name, phone, address FROM customers --'";
    refused(LITE, trick, RefusalReason::UnsafeRendering);
    // PostgreSQL has an escape-string form the printer gets right: one string literal.
    let rendered = accepted(PG, trick);
    assert_eq!(
        rendered.sql(),
        "SELECT E'x\\\\\\' , cust_name, phone, address FROM customers --' LIMIT 200"
    );
    assert!(rendered.tables().is_empty());
    refused(
        PG,
        "SELECT \"a\\\"\" , phone FROM customers --\" FROM bills",
        RefusalReason::UnsafeRendering,
    );
    refused(
        LITE,
        "SELECT \"a\\\"\" , phone FROM customers --\" FROM bills",
        RefusalReason::UnsafeRendering,
    );
    // Plain quotes and backslashes still render as written.
    let plain = accepted(
        LITE,
        "SELECT 'it''s', 'back\\slash', \"odd\"\"name\" FROM bills",
    );
    assert_eq!(
        plain.sql(),
        "SELECT 'it''s', 'back\\slash', \"odd\"\"name\" FROM bills LIMIT 200"
    );
}

#[test]
fn sqlite_hex_integers_stay_integers() {
    let hex = accepted(LITE, "SELECT 0x10, X'10', 0xff + 1");
    assert_eq!(hex.sql(), "SELECT 16, X'10', 255 + 1 LIMIT 200");
    refused(LITE, "SELECT 0X10", RefusalReason::ParseError);
    refused(LITE, "SELECT 0x8000000000000000", RefusalReason::ParseError);
    // PostgreSQL reads 0x10 as a number token and prints it back as written.
    assert_eq!(accepted(PG, "SELECT 0x10").sql(), "SELECT 0x10 LIMIT 200");
}

#[test]
fn functions_are_allowed_by_list() {
    for sql in [
        "SELECT ts_stat('SELECT 1')",
        "SELECT * FROM ts_stat('SELECT 1')",
        "SELECT ts_rewrite('a'::tsquery, 'SELECT 1')",
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT current_setting('data_directory')",
        "SELECT version()",
        "SELECT to_regclass('askdb_query_log')",
        "SELECT has_table_privilege('bills', 'SELECT')",
        "SELECT txid_current()",
        "SELECT pg_advisory_lock(1)",
        "SELECT pg_terminate_backend(1)",
        "SELECT json_populate_record(NULL::bills, '{}')",
        "SELECT my_udf(1)",
        "SELECT public.lower('A')",
    ] {
        refused(PG, sql, RefusalReason::DeniedFunction);
    }
    // Facts about the session, whether they parse as a name or a call.
    for sql in [
        "SELECT current_user",
        "SELECT session_user",
        "SELECT t.xmin FROM bills t",
    ] {
        refused(PG, sql, RefusalReason::SystemCatalog);
    }
    for sql in [
        "SELECT sqlite_version()",
        "SELECT sqlite_compileoption_get(0)",
        "SELECT changes()",
        "SELECT last_insert_rowid()",
    ] {
        refused(LITE, sql, RefusalReason::DeniedFunction);
    }
    // A hidden table named as a function: the words of any unknown function.
    let hidden = refused(
        PG,
        "SELECT * FROM askdb_query_log()",
        RefusalReason::DeniedFunction,
    );
    let unknown = refused(
        PG,
        "SELECT * FROM nope_table()",
        RefusalReason::DeniedFunction,
    );
    assert_eq!(
        hidden.message.replace("askdb_query_log", "X"),
        unknown.message.replace("nope_table", "X")
    );
    assert_eq!(hidden.repairable, unknown.repairable);
    for sql in [
        "SELECT pg_size_pretty(sum(total_amt)::bigint) FROM bills",
        "SELECT coalesce(max(total_amt), 0), count(DISTINCT status) FROM bills",
        "SELECT date_trunc('month', now()), extract(year FROM now()), CURRENT_DATE",
        "SELECT string_agg(status, ', ' ORDER BY status) FROM bills",
        "SELECT jsonb_build_object('n', count(*)) FROM bills",
        "SELECT pg_catalog.lower('A')",
    ] {
        accepted(PG, sql);
    }
    for sql in [
        "SELECT strftime('%Y', 'now'), julianday('now'), ifnull(NULL, 1)",
        "SELECT group_concat(status, ',') FROM bills",
        "SELECT json_extract('{\"a\": 1}', '$.a')",
    ] {
        accepted(LITE, sql);
    }
    // A database's notes can add a function; the deny list still wins.
    let mut extended = policy(PG);
    extended.allow_function("my_udf");
    extended.allow_function("pg_sleep");
    let extended = Arc::new(extended);
    assert!(check("SELECT my_udf(1)", &extended).is_ok());
    assert!(check("SELECT pg_sleep(1)", &extended).is_err());
}

#[test]
fn the_allow_list_file_parses_and_every_list_is_sorted_without_duplicates() {
    let file = allow_list::parse(allow_list::ALLOW_LIST_TOML).expect("the allow-list parses");
    for (dialect, section) in [
        ("postgres", &file.postgres),
        ("sqlite", &file.sqlite),
        ("mysql", &file.mysql),
    ] {
        assert!(
            section.functions.values().map(Vec::len).sum::<usize>() > 100 || dialect == "sqlite"
        );
        for (category, names) in section.functions.iter().chain(section.types.iter()) {
            let mut sorted = names.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(
                &sorted, names,
                "{dialect}.{category} is unsorted or has a duplicate"
            );
            for name in names {
                assert!(
                    !is_denied_function(name),
                    "{dialect}.{category} allows the denied function {name}"
                );
            }
        }
    }
}

#[test]
fn casts_to_catalog_and_row_types_are_refused() {
    for sql in [
        "SELECT 'askdb_query_log'::regclass",
        "SELECT 1259::oid::regclass",
        "SELECT 10::oid::regrole",
        "SELECT CAST('x' AS regtype)",
        "SELECT NULL::customers",
        "SELECT NULL::askdb_query_log",
        "SELECT regclass 'pg_class'",
        "SELECT ARRAY[1]::oid[]",
    ] {
        refused(PG, sql, RefusalReason::DeniedType);
    }
    let hidden = refused(
        PG,
        "SELECT NULL::askdb_query_log",
        RefusalReason::DeniedType,
    );
    let unknown = refused(PG, "SELECT NULL::nope_table", RefusalReason::DeniedType);
    assert_eq!(
        hidden.message.replace("askdb_query_log", "X"),
        unknown.message.replace("nope_table", "X")
    );
    accepted(
        PG,
        "SELECT total_amt::numeric(12, 2), bill_id::text, '2024-01-01'::date, ARRAY[1]::int[], '1 day'::interval, '{}'::jsonb, now()::timestamptz FROM bills",
    );
    accepted(
        LITE,
        "SELECT CAST(total_amt AS REAL), CAST(bill_id AS TEXT) FROM bills",
    );
}

#[test]
fn an_unknown_column_refusal_lists_the_columns_as_the_schema_declares_them() {
    let mut policy = GuardPolicy::new(PG);
    policy.allow_table("Tickers", ["TickerId", "sbTickerType", "Symbol", "Secret"]);
    policy.restrict_column("Tickers", "Secret");
    let policy = Arc::new(policy);
    let refusal =
        check("SELECT t.ticker_type FROM \"Tickers\" t", &policy).expect_err("no such column");
    assert_eq!(refusal.reason, RefusalReason::UnknownColumn);
    // Declared order and spelling, the restricted column left out.
    assert!(
        refusal
            .message
            .ends_with("its columns are TickerId, sbTickerType, Symbol"),
        "{}",
        refusal.message
    );
    // A derived table's columns are the names its query gives them.
    let derived = check(
        "SELECT d.symbol FROM (SELECT \"TickerId\" AS Tid FROM \"Tickers\") d",
        &policy,
    )
    .expect_err("no such column");
    assert!(
        derived.message.ends_with("its columns are tid"),
        "{}",
        derived.message
    );
}

#[test]
fn attribute_notation_and_alias_shadowing_are_refused() {
    for sql in [
        "SELECT c.to_jsonb ->> 'phone' FROM customers c",
        "SELECT c.row_to_json FROM customers c",
        "SELECT c.concat FROM customers c",
        "SELECT cust_id FROM customers c WHERE c.to_jsonb ->> 'phone' LIKE '9%'",
        "SELECT customers.lower FROM customers",
    ] {
        refused(PG, sql, RefusalReason::UnknownColumn);
    }
    // Any table: a qualified column it does not have, worded as the database words it.
    let wrong_alias = refused(
        PG,
        "SELECT b.qty FROM bills b",
        RefusalReason::UnknownColumn,
    );
    assert!(
        wrong_alias
            .message
            .starts_with("column b.qty does not exist: b is bills, which has no column qty"),
        "{}",
        wrong_alias.message
    );
    refused(
        PG,
        "SELECT (SELECT c::text FROM customers c LIMIT 1) FROM (SELECT 1) AS c",
        RefusalReason::RestrictedColumn,
    );
    accepted(
        PG,
        "SELECT b.bill_no, public.bills.status FROM bills b, public.bills",
    );
    accepted(PG, "SELECT t.n FROM (SELECT count(*) AS n FROM bills) t");
    accepted(
        PG,
        "WITH bills AS (SELECT 1 AS x) SELECT bills.x FROM bills",
    );
}

#[test]
fn statement_size_and_depth_are_bounded_before_any_walk() {
    // 70 KB of `1+1+...`: refused on its tokens, before a tree exists.
    let chain = format!("SELECT {}", vec!["1"; 35_000].join("+"));
    refused(PG, &chain, RefusalReason::TooLong);
    refused(LITE, &chain, RefusalReason::TooLong);
    // The longest chain allowed is walked, printed, re-parsed and dropped on the
    // guard's own thread.
    let longest = format!("SELECT {}", vec!["1"; bounds::MAX_OPERATORS].join("+"));
    accepted(PG, &longest);
    accepted(LITE, &longest);
    let casts = format!("SELECT 1{}", "::int".repeat(bounds::MAX_OPERATORS));
    accepted(PG, &casts);
    // A set operation nests like an operator: a UNION chain is as deep as it is long.
    let unions = format!(
        "SELECT 1{}",
        " UNION SELECT 1".repeat(bounds::MAX_OPERATORS + 1)
    );
    refused(PG, &unions, RefusalReason::TooLong);
    refused(LITE, &unions, RefusalReason::TooLong);
    accepted(LITE, &format!("SELECT 1{}", " UNION SELECT 1".repeat(500)));
}

#[test]
fn work_that_is_the_product_of_two_lengths_takes_a_short_literal_as_its_second() {
    let long = "y".repeat(65);
    for sql in [
        format!("SELECT translate(cust_name, '{long}', 'z') FROM customers"),
        "SELECT translate(cust_name, cust_name, 'z') FROM customers".to_string(),
        format!("SELECT ltrim(cust_name, '{long}') FROM customers"),
        "SELECT btrim(cust_name, repeat('y', 1000)) FROM customers".to_string(),
        format!("SELECT TRIM(BOTH '{long}' FROM cust_name) FROM customers"),
        "SELECT replace(repeat('x', 1000000), 'x', repeat('y', 300))".to_string(),
    ] {
        refused(PG, &sql, RefusalReason::TooLarge);
    }
    for sql in [
        format!("SELECT rtrim(cust_name, '{long}') FROM customers"),
        "SELECT trim(cust_name, hex(zeroblob(100))) FROM customers".to_string(),
    ] {
        refused(LITE, &sql, RefusalReason::TooLarge);
    }
    accepted(
        PG,
        "SELECT translate(bill_no, '-/', '  '), btrim(bill_no, '0'), replace(status, '_', ' '), TRIM(BOTH ' ' FROM status) FROM bills",
    );
    accepted(
        LITE,
        "SELECT ltrim(bill_no, 'B0'), replace(status, '_', ' ') FROM bills",
    );
}

#[test]
fn literal_sizes_are_bounded() {
    for sql in [
        "SELECT repeat('x', 50000000)",
        "SELECT strpos(repeat('a', 5000000), 'b')",
        "SELECT lpad('x', 2000000000)",
        "SELECT rpad(cust_name, cust_id * 100000000) FROM customers",
        "SELECT format('%2000000s', 'x')",
        "SELECT format('%*s', 10, 'x')",
    ] {
        refused(PG, sql, RefusalReason::TooLarge);
    }
    for sql in [
        "SELECT instr(printf('%.*c', 8000000, 'a'), 'b')",
        "SELECT printf('%9000000d', 1)",
        "SELECT length(randomblob(250000000))",
        "SELECT zeroblob(1000000000)",
        "SELECT printf(cust_name, 1) FROM customers",
    ] {
        refused(LITE, sql, RefusalReason::TooLarge);
    }
    accepted(
        PG,
        "SELECT lpad(bill_no, 12, '0'), repeat('-', 3), format('%-10s|%s', status, 'x') FROM bills",
    );
    accepted(
        LITE,
        "SELECT printf('%08.2f %%', total_amt), hex(randomblob(16)), zeroblob(4) FROM bills",
    );
}

#[test]
fn qualified_columns_resolve_against_every_kind_of_relation() {
    for dialect in [PG, LITE] {
        // Base tables, by alias or by name, in every scope.
        accepted(
            dialect,
            "SELECT b.bill_no, c.cust_name FROM bills b JOIN customers c ON b.cust_id = c.cust_id \
             WHERE EXISTS (SELECT 1 FROM employees e WHERE e.emp_id = b.cust_id)",
        );
        let refusal = refused(
            dialect,
            "SELECT T2.emp_name FROM bills AS T1 JOIN customers AS T2 ON T1.cust_id = T2.cust_id",
            RefusalReason::UnknownColumn,
        );
        // As written, so the repair reads it like the database's own error.
        assert!(
            refusal
                .message
                .starts_with("column T2.emp_name does not exist"),
            "{}",
            refusal.message
        );
        // Restricted columns are never listed as a relation's columns.
        assert!(!refusal.message.contains("phone"), "{}", refusal.message);
        // Correlated: the outer alias is resolved from inside the subquery.
        refused(
            dialect,
            "SELECT cust_name FROM customers c WHERE EXISTS (SELECT 1 FROM bills b WHERE b.cust_id = c.bill_no)",
            RefusalReason::UnknownColumn,
        );
        // Derived tables: their output names, renamed by an alias's column list.
        accepted(
            dialect,
            "SELECT t.n, t.status FROM (SELECT status, count(*) AS n FROM bills GROUP BY status) t",
        );
        refused(
            dialect,
            "SELECT t.total_amt FROM (SELECT status, count(*) AS n FROM bills GROUP BY status) t",
            RefusalReason::UnknownColumn,
        );
        accepted(
            dialect,
            "SELECT t.k FROM (SELECT bill_no FROM bills) AS t(k)",
        );
        accepted(
            dialect,
            "SELECT t.bill_no, t.status FROM (SELECT * FROM bills) t",
        );
        refused(
            dialect,
            "SELECT t.emp_name FROM (SELECT b.* FROM bills b) t",
            RefusalReason::UnknownColumn,
        );
        // CTEs, also one shadowing a table of the same name.
        accepted(
            dialect,
            "WITH x AS (SELECT bill_no AS k FROM bills) SELECT x.k FROM x",
        );
        accepted(
            dialect,
            "WITH x AS (SELECT bill_no AS k FROM bills) SELECT y.k FROM x y",
        );
        refused(
            dialect,
            "WITH x AS (SELECT bill_no AS k FROM bills) SELECT x.bill_no FROM x",
            RefusalReason::UnknownColumn,
        );
        accepted(
            dialect,
            "WITH x(k) AS (SELECT bill_no FROM bills) SELECT x.k FROM x",
        );
        accepted(
            dialect,
            "WITH bills AS (SELECT 1 AS x) SELECT t.x FROM (SELECT * FROM bills) t",
        );
        // Set operations: the left side names the columns.
        accepted(
            dialect,
            "SELECT u.bill_no FROM (SELECT bill_no FROM bills UNION SELECT cust_name FROM customers) u",
        );
        // Names the tree cannot know (an unnamed expression, a table function) are left
        // to the database.
        accepted(
            dialect,
            "SELECT t.anything FROM (SELECT count(*) FROM bills) t",
        );
        // A qualifier that names no relation is the database's to report.
        accepted(dialect, "SELECT nowhere.bill_no FROM bills");
    }
    accepted(LITE, "SELECT b.rowid, b.bill_no FROM bills b");
    accepted(PG, "SELECT g.n FROM generate_series(1, 3) AS g(n)");
    accepted(PG, "SELECT g FROM generate_series(1, 3) AS g");
}

#[test]
fn every_wrong_qualified_column_is_named_in_one_refusal_and_other_refusals_still_stop_first() {
    for dialect in [PG, LITE] {
        let refusal = refused(
            dialect,
            "SELECT T1.emp_name, T2.bill_no, T1.bill_no FROM bills AS T1 \
             JOIN customers AS T2 ON T1.cust_id = T2.cust_id WHERE T2.total_amt > 1",
            RefusalReason::UnknownColumn,
        );
        let lines: Vec<&str> = refusal.message.lines().collect();
        assert_eq!(lines.len(), 3, "{}", refusal.message);
        assert!(lines[0].starts_with("column T1.emp_name does not exist: T1 is bills"));
        assert!(lines[1].starts_with("column T2.bill_no does not exist: T2 is customers"));
        assert!(lines[2].starts_with("column T2.total_amt does not exist"));
        // A restricted column after a wrong one is refused for what it is.
        refused(
            dialect,
            "SELECT T1.emp_name, T2.phone FROM bills AS T1 JOIN customers AS T2 ON T1.cust_id = T2.cust_id",
            RefusalReason::RestrictedColumn,
        );
        // The same wrong column twice is named once.
        let twice = refused(
            dialect,
            "SELECT b.emp_name FROM bills b WHERE b.emp_name IS NOT NULL",
            RefusalReason::UnknownColumn,
        );
        assert_eq!(twice.message.lines().count(), 1, "{}", twice.message);
    }
}

/// Table-valued functions SQLite resolves as eponymous virtual tables: they are not in
/// `pragma_function_list`, so the build is asked by compiling a use of each.
const SQLITE_TABLE_VALUED: &[(&str, &str)] = &[
    ("json_each", "SELECT * FROM json_each('[]')"),
    ("json_tree", "SELECT * FROM json_tree('[]')"),
    ("generate_series", "SELECT * FROM generate_series(1, 3)"),
];

#[test]
fn every_sqlite_function_on_the_allow_list_exists_in_askdbs_sqlite_build() {
    let file = allow_list::parse(allow_list::ALLOW_LIST_TOML).expect("the allow-list parses");
    let connection = rusqlite::Connection::open_in_memory().expect("an in-memory database");
    let mut statement = connection
        .prepare("SELECT DISTINCT name FROM pragma_function_list")
        .expect("the build lists its functions");
    let built_in: BTreeSet<String> = statement
        .query_map([], |row| row.get::<_, String>(0))
        .expect("the function list is read")
        .map(|name| name.expect("a function name").to_lowercase())
        .collect();
    assert!(built_in.contains("lower"), "{built_in:?}");
    let table_valued = |name: &str| {
        SQLITE_TABLE_VALUED
            .iter()
            .find(|(listed, _)| *listed == name)
            .map(|(_, sql)| connection.prepare(sql).is_ok())
    };
    let mut missing = Vec::new();
    for (category, names) in &file.sqlite.functions {
        for name in names {
            let name = name.to_lowercase();
            let present = table_valued(&name).unwrap_or(false) || built_in.contains(&name);
            if !present {
                missing.push(format!("sqlite.{category}: {name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "allowed but not in askdb's SQLite build (a query using one fails only when run):\n{}",
        missing.join("\n")
    );
    // What the build lacks is refused before it runs, in words naming it; PostgreSQL has
    // these functions and keeps them.
    for sql in [
        "SELECT sqrt(total_amt) FROM bills",
        "SELECT ceil(total_amt) FROM bills",
        "SELECT floor(total_amt) FROM bills",
        "SELECT position('a' IN status) FROM bills",
        "SELECT overlay(status PLACING 'x' FROM 1 FOR 1) FROM bills",
        "SELECT value FROM generate_series(1, 3)",
    ] {
        refused(LITE, sql, RefusalReason::DeniedFunction);
    }
    accepted(
        PG,
        "SELECT sqrt(total_amt), ceil(total_amt), floor(total_amt), position('a' IN status) FROM bills",
    );
    accepted(PG, "SELECT g.n FROM generate_series(1, 3) AS g(n)");
    accepted(
        LITE,
        "SELECT abs(total_amt), round(total_amt, 1), sign(total_amt) FROM bills",
    );
    accepted(LITE, "SELECT j.value FROM json_each('[1, 2]') AS j");
}

/// PostgreSQL's `TABLE name` is what users write; sqlparser 0.64 parses it only inside
/// parentheses, so the guard wraps a statement that starts with TABLE and checks (and runs)
/// the wrapped tree. `ROWS FROM (...)` has no table factor in sqlparser 0.64: it stays a
/// parse error, and when a parser upgrade starts accepting it this fails, so the new tree
/// shape is reviewed (and given benign cases) before it passes the guard.
#[test]
fn top_level_table_is_checked_as_its_parenthesised_form_and_rows_from_is_a_parse_error() {
    refused(
        PG,
        "SELECT * FROM ROWS FROM (generate_series(1, 3), generate_series(1, 2)) AS t(a, b)",
        RefusalReason::ParseError,
    );
    for sql in [
        "TABLE bills",
        "table bills;",
        "  TABLE bills ORDER BY 1 LIMIT 3 -- note",
    ] {
        accepted(PG, sql);
    }
    assert_eq!(
        accepted(PG, "TABLE bills LIMIT 3").sql,
        "(TABLE bills LIMIT 3) LIMIT 200"
    );
    for sql in ["TABLE customers", "TABLE bills UNION TABLE customers"] {
        refused(PG, sql, RefusalReason::RestrictedColumn);
    }
    refused(PG, "TABLE askdb_query_log", RefusalReason::UnknownTable);
    // Whatever the wrap makes of the tokens is what is checked: a closing parenthesis in
    // the text cannot end the wrap early and leave an unchecked part.
    refused(
        PG,
        "TABLE bills) UNION (SELECT phone FROM customers",
        RefusalReason::RestrictedColumn,
    );
    // SQLite has no TABLE statement: no wrap.
    refused(LITE, "TABLE bills", RefusalReason::ParseError);
    accepted(PG, "(TABLE bills)");
    accepted(PG, "SELECT * FROM (TABLE bills) AS t");
    for sql in [
        "(TABLE customers)",
        "SELECT t.phone FROM (TABLE customers) AS t",
        "SELECT cust_id FROM bills UNION TABLE customers",
        "WITH c AS (TABLE customers) SELECT * FROM c",
    ] {
        refused(PG, sql, RefusalReason::RestrictedColumn);
    }
    refused(
        PG,
        "SELECT * FROM (TABLE askdb_query_log) AS t",
        RefusalReason::UnknownTable,
    );
}
