//! The guard's MySQL dialect: each of MySQL's ways to fool a careless guard, refused with
//! its reason, and ordinary MySQL analysis accepted with the text that runs.

use super::tests::{accepted, refused};
use super::*;

const MY: SqlDialect = SqlDialect::Mysql;

#[test]
fn executable_comments_and_hints_are_refused_wherever_they_stand() {
    for sql in [
        "SELECT /*! 1 */ 2",
        "SELECT 1 /*!50000 UNION SELECT phone FROM customers */",
        "SELECT bill_no FROM bills WHERE /*!SLEEP(5) AND*/ 1 = 1",
        "/*!SELECT phone FROM customers*/",
        "SELECT 1 /*M!100100 , phone FROM customers */",
        "SELECT /*+ SET_VAR(max_execution_time = 0) */ bill_no FROM bills",
        "SELECT /*+ MAX_EXECUTION_TIME(100000) */ 1",
    ] {
        refused(MY, sql, RefusalReason::ExecutableComment);
    }
    // Plain comments, in all three of MySQL's spellings, are dropped from what runs.
    let checked = accepted(
        MY,
        "SELECT bill_no /* note */ FROM bills # to the end of the line\n-- and this\n",
    );
    assert_eq!(checked.sql(), "SELECT bill_no FROM bills LIMIT 200");
    // `--` starts a comment only before a space: MySQL reads `1--1` as 1 - -1, and so
    // does the guard.
    assert_eq!(accepted(MY, "SELECT 1--1").sql(), "SELECT 1 - -1 LIMIT 200");
}

#[test]
fn backslashes_and_double_quotes_are_refused_so_no_string_is_read_two_ways() {
    // With backslash escapes on (MySQL's default) `'\''` is one quote; with
    // NO_BACKSLASH_ESCAPES it ends the string. Either reading could be the server's, so
    // neither is trusted: this is the re-render injection's MySQL twin.
    for sql in [
        "SELECT 'a\\'b'",
        "SELECT bill_no FROM bills WHERE status = 'x\\' OR 1=1 -- '",
        "SELECT 'a\\\\'",
        "SELECT \\N",
        "SELECT bill_no FROM bills WHERE bill_no LIKE 'A\\_%'",
    ] {
        refused(MY, sql, RefusalReason::UnsafeRendering);
    }
    // ANSI_QUOTES decides whether "x" is a string or a name.
    refused(
        MY,
        "SELECT \"status\" FROM bills",
        RefusalReason::ParseError,
    );
    refused(
        MY,
        "SELECT bill_no AS \"n\" FROM bills",
        RefusalReason::ParseError,
    );
    // A doubled quote means the same in every mode, and is rendered doubled.
    assert_eq!(
        accepted(MY, "SELECT bill_no FROM bills WHERE status = 'it''s'").sql(),
        "SELECT bill_no FROM bills WHERE status = 'it''s' LIMIT 200"
    );
}

#[test]
fn user_and_system_variables_are_refused() {
    for sql in [
        "SELECT @a",
        "SELECT @a := COUNT(*) FROM bills",
        "SELECT bill_no, @n := @n + 1 FROM bills",
        "SELECT @`a`",
        "SELECT @'a'",
    ] {
        refused(MY, sql, RefusalReason::SessionVariable);
    }
    for sql in [
        "SELECT @@version",
        "SELECT @@global.secure_file_priv",
        "SELECT @@session.sql_mode",
        "SELECT CURRENT_USER",
        "SELECT CURRENT_USER()",
        "SELECT CURRENT_ROLE",
    ] {
        refused(MY, sql, RefusalReason::SystemCatalog);
    }
}

#[test]
fn reads_outside_the_data_time_and_locks_are_refused() {
    for sql in [
        "SELECT LOAD_FILE('/etc/passwd')",
        "SELECT SLEEP(5)",
        "SELECT bill_no FROM bills WHERE SLEEP(1) = 0",
        "SELECT BENCHMARK(100000000, MD5('a'))",
        "SELECT GET_LOCK('askdb', 10)",
        "SELECT RELEASE_LOCK('askdb')",
        "SELECT EXTRACTVALUE(1, CONCAT(0x7e, (SELECT bill_no FROM bills LIMIT 1)))",
    ] {
        refused(MY, sql, RefusalReason::DeniedFunction);
    }
    for sql in [
        "SELECT DATABASE()",
        "SELECT USER()",
        "SELECT VERSION()",
        "SELECT CONNECTION_ID()",
        "SELECT UUID()",
    ] {
        refused(MY, sql, RefusalReason::DeniedFunction);
    }
    for sql in [
        "SELECT * FROM bills INTO OUTFILE '/tmp/askdb'",
        "SELECT bill_no FROM bills INTO DUMPFILE '/tmp/askdb'",
        "SELECT bill_no INTO @x FROM bills",
        "SELECT bill_no FROM bills LIMIT 1 INTO @x",
    ] {
        refused(MY, sql, RefusalReason::SelectInto);
    }
    refused(MY, "HANDLER bills OPEN", RefusalReason::NotAQuery);
    refused(MY, "HANDLER bills READ FIRST", RefusalReason::NotAQuery);
    for sql in [
        "SELECT * FROM bills LOCK IN SHARE MODE",
        "SELECT bill_no FROM bills FOR UPDATE",
        "SELECT bill_no FROM bills FOR SHARE NOWAIT",
    ] {
        refused(MY, sql, RefusalReason::LockingClause);
    }
    refused(MY, "SELECT SPACE(100000000)", RefusalReason::TooLarge);
}

#[test]
fn system_schemas_are_catalogs_and_hidden_tables_are_missing_ones() {
    for sql in [
        "SELECT * FROM information_schema.tables",
        "SELECT column_name FROM INFORMATION_SCHEMA.COLUMNS",
        "SELECT user, authentication_string FROM mysql.user",
        "SELECT * FROM performance_schema.threads",
        "SELECT * FROM sys.version",
        "SELECT bill_no FROM bills WHERE bill_no IN (SELECT user FROM mysql.user)",
    ] {
        refused(MY, sql, RefusalReason::SystemCatalog);
    }
    let hidden = refused(
        MY,
        "SELECT * FROM askdb_query_log",
        RefusalReason::UnknownTable,
    );
    let missing = refused(
        MY,
        "SELECT * FROM no_such_table",
        RefusalReason::UnknownTable,
    );
    assert_eq!(
        hidden.message.replace("askdb_query_log", "T"),
        missing.message.replace("no_such_table", "T")
    );
    assert!(!hidden.repairable);
    // Another database's table is not this database's, whatever its name.
    refused(
        MY,
        "SELECT bill_no FROM otherdb.bills",
        RefusalReason::UnknownTable,
    );
}

#[test]
fn restricted_columns_are_refused_in_every_position() {
    for sql in [
        "SELECT phone FROM customers",
        "SELECT `phone` FROM `customers`",
        "SELECT * FROM customers",
        "SELECT c.* FROM customers c",
        "SELECT cust_name FROM customers WHERE phone LIKE '5%'",
        "SELECT cust_name FROM customers ORDER BY address",
        "SELECT GROUP_CONCAT(phone) FROM customers",
        "SELECT cust_name FROM customers c WHERE EXISTS (SELECT 1 FROM bills b WHERE b.cust_id = c.cust_id AND c.phone = '1')",
    ] {
        refused(MY, sql, RefusalReason::RestrictedColumn);
    }
}

#[test]
fn ordinary_mysql_analysis_passes_and_runs_as_checked() {
    for (sql, runs) in [
        (
            "SELECT b.status, YEAR(NOW()) AS y, SUM(b.total_amt) FROM bills b GROUP BY b.status",
            "SELECT b.status, YEAR(NOW()) AS y, SUM(b.total_amt) FROM bills b GROUP BY b.status LIMIT 200",
        ),
        (
            "SELECT bill_no FROM bills LIMIT 5, 10",
            "SELECT bill_no FROM bills LIMIT 5, 10",
        ),
        (
            "SELECT `bill_no`, total_amt DIV 2 FROM `bills` WHERE status REGEXP '^p' OR status <=> NULL",
            "SELECT `bill_no`, total_amt DIV 2 FROM `bills` WHERE status REGEXP '^p' OR status <=> NULL LIMIT 200",
        ),
        (
            "SELECT GROUP_CONCAT(bill_no ORDER BY bill_no SEPARATOR ', ') FROM bills",
            "SELECT GROUP_CONCAT(bill_no ORDER BY bill_no SEPARATOR ', ') FROM bills LIMIT 200",
        ),
        (
            "SELECT DATE_FORMAT(DATE_SUB(CURDATE(), INTERVAL 30 DAY), '%Y-%m'), IF(1 > 0, 'a', 'b'), CAST(1 AS SIGNED)",
            "SELECT DATE_FORMAT(DATE_SUB(CURDATE(), INTERVAL 30 DAY), '%Y-%m'), IF(1 > 0, 'a', 'b'), CAST(1 AS SIGNED) LIMIT 200",
        ),
        // `||` is concatenation to sqlparser; the session's PIPES_AS_CONCAT makes it so to
        // the server (without it MySQL reads OR).
        (
            "SELECT bill_no || '-' || status FROM bills",
            "SELECT bill_no || '-' || status FROM bills LIMIT 200",
        ),
        // 0x41 is X'41' to MySQL in every context: kept as the hexadecimal literal.
        ("SELECT 0x41", "SELECT X'41' LIMIT 200"),
        (
            "SELECT 1 UNION SELECT 2",
            "SELECT * FROM (SELECT 1 UNION SELECT 2) AS askdb_capped LIMIT 200",
        ),
    ] {
        assert_eq!(accepted(MY, sql).sql(), runs, "{sql}");
    }
}

#[test]
fn the_pinned_session_mode_is_the_one_the_guard_reads_with() {
    let modes: Vec<&str> = MYSQL_SQL_MODE.split(',').collect();
    assert!(modes.contains(&"PIPES_AS_CONCAT"), "{MYSQL_SQL_MODE}");
    assert!(modes.contains(&"NO_BACKSLASH_ESCAPES"), "{MYSQL_SQL_MODE}");
    assert!(
        !modes.contains(&"ANSI_QUOTES") && !modes.contains(&"ANSI"),
        "{MYSQL_SQL_MODE}"
    );
    let statement = bounds::scan("SELECT a || b", MY)
        .ok()
        .and_then(|scanned| {
            Parser::new(MY.parser_dialect().as_ref())
                .with_tokens_with_locations(scanned.tokens)
                .parse_statement()
                .ok()
        })
        .map(|statement| format!("{statement:?}"))
        .unwrap_or_default();
    assert!(statement.contains("StringConcat"), "{statement}");
}

/// Every function on MySQL's allow-list exists on the server the tests run against
/// (`ASKDB_TEST_MYSQL_URL`, default MariaDB at 127.0.0.1:3306): called with no
/// arguments, a listed name may fail for its arguments or its syntax, never with
/// "FUNCTION ... does not exist" (1305, 1630), so no listed function passes the guard
/// only to fail on the server.
#[tokio::test]
async fn every_mysql_function_on_the_allow_list_exists_on_the_server() {
    use mysql_async::prelude::Queryable;
    let url = std::env::var("ASKDB_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/".to_string());
    let mut conn = match mysql_async::Conn::from_url(url.as_str()).await {
        Ok(conn) => conn,
        Err(error) => {
            crate::ci::skip_or_fail(
                "every_mysql_function_on_the_allow_list_exists_on_the_server",
                &format!("no MySQL server at {url}: {error}"),
            );
            return;
        }
    };
    // The check is live: a name the server lacks is reported as missing.
    let absent: Result<Option<mysql_async::Value>, _> =
        conn.exec_first("SELECT askdb_no_such_function()", ()).await;
    assert!(
        matches!(&absent, Err(mysql_async::Error::Server(error)) if error.code == 1305),
        "{absent:?}"
    );
    let file = allow_list::parse(allow_list::ALLOW_LIST_TOML).expect("the allow-list parses");
    let mut missing = Vec::new();
    let mut checked = 0;
    for (category, names) in &file.mysql.functions {
        for name in names {
            checked += 1;
            // A name from the reviewed list, never input: `name()` in a prepared SELECT.
            let called: Result<Option<mysql_async::Value>, _> =
                conn.exec_first(format!("SELECT {name}()"), ()).await;
            if let Err(mysql_async::Error::Server(error)) = called {
                if matches!(error.code, 1305 | 1630) {
                    missing.push(format!("mysql.{category}: {name} ({})", error.message));
                }
            }
        }
    }
    let _ = conn.disconnect().await;
    assert!(checked > 100, "{checked} names");
    assert!(
        missing.is_empty(),
        "listed but not on the server:\n{}",
        missing.join("\n")
    );
}
