//! `askdb db setup` on MySQL and MariaDB: the same promise as on PostgreSQL, in that
//! engine's terms (decision 0074). It owns:
//!
//! - the database (created when missing) in `utf8mb4` with the binary collation, so text
//!   compares and sorts as on SQLite and PostgreSQL (`'void' <> 'VOID'`), and the demo
//!   tables, dropped and recreated with the rows of the same deterministic generator;
//! - the query-log table `askdb_query_log` (kept across runs: it is history);
//! - the read-only user (`askdb_ro`@`%`): SELECT on the demo tables only, column grants
//!   that leave restricted columns out, nothing on the query log, no global privilege
//!   (FILE, PROCESS, SUPER...) and no role; on MariaDB a per-user statement limit;
//! - the log user (`askdb_log`@`%`): INSERT on the query log, nothing else;
//! - the proof (`mysql_proof.rs`): it logs in as each user with the URL it reports and
//!   tries what the user must not be able to do.
//!
//! MySQL commits DDL implicitly, so unlike PostgreSQL the rebuild is not one
//! transaction: each table's rows are, and a setup cut short is completed by running it
//! again. Every statement is the administrator's own fixed text over the admin URL, never
//! model or user SQL, and no statement text (some carry passwords) reaches an error.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

use super::{
    login_for, mysql_proof, SetupError, SetupOptions, SetupReport, CONNECT_TIMEOUT,
    ROLE_STATEMENT_TIMEOUT, ROWS_PER_INSERT,
};
use crate::demo::{self, DdlDialect};
use crate::gate::QUERY_LOG_TABLE;
pub(super) use crate::sql_text::quote_ident_mysql as quote_name;
use crate::text::redact_password;

/// The host part of both users: any host, as the URL's host may be a name or an
/// address the server sees differently. The server checked has no anonymous users that
/// a more specific host would let win; the proof logs in with the reported URL, so a
/// server where one shadows askdb_ro fails setup instead of passing it.
pub(super) const USER_HOST: &str = "%";

/// The demo database's collation: binary, as SQLite's and PostgreSQL's comparisons are.
pub(super) const COLLATION: &str = "utf8mb4_bin";

/// The admin session's mode: strict (a value that does not fit fails the load), and
/// backslashes literal, as the loader's quoting assumes.
pub(super) const LOAD_SQL_MODE: &str =
    "STRICT_ALL_TABLES,NO_BACKSLASH_ESCAPES,NO_ENGINE_SUBSTITUTION";

/// Whether a URL names a MySQL or MariaDB server.
pub(super) fn is_mysql_url(url: &str) -> bool {
    crate::text::mysql_url(url).is_some()
}

/// The client's options for a `mysql://` or `mariadb://` URL (mysql_async reads only the
/// former), with the connect timeout and, when given, another database.
pub(super) fn mysql_opts(url: &str, database: Option<&str>) -> Result<Opts, SetupError> {
    let shown = redact_password(url);
    let normalised = crate::text::mysql_url(url).unwrap_or_else(|| url.to_string());
    let opts = Opts::from_url(&normalised).map_err(|error| SetupError::BadAdminUrl {
        url: shown,
        reason: error.to_string(),
    })?;
    Ok(match database {
        Some(database) => Opts::from(OptsBuilder::from_opts(opts).db_name(Some(database))),
        None => opts,
    })
}

pub(super) async fn connect_mysql(url: &str, database: Option<&str>) -> Result<Conn, SetupError> {
    let opts = mysql_opts(url, database)?;
    let mut shown = redact_password(url);
    if let Some(database) = database {
        shown = format!("{shown} (database {database})");
    }
    match tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(opts)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(error)) => Err(SetupError::Connect {
            url: shown,
            message: error.to_string(),
        }),
        Err(_) => Err(SetupError::Connect {
            url: shown,
            message: format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
        }),
    }
}

/// Whether the MySQL or MariaDB server at `url` accepts a connection.
pub async fn mysql_reachable(url: &str) -> Result<(), SetupError> {
    let conn = connect_mysql(url, None).await?;
    let _ = conn.disconnect().await;
    Ok(())
}

/// A server error as a setup step's failure: the SQLSTATE, and the server's message
/// with its error number (MySQL's errors are told apart by number).
pub(super) fn mysql_step_error(step: &str, error: &mysql_async::Error) -> SetupError {
    match error {
        mysql_async::Error::Server(server) => SetupError::Step {
            step: step.to_string(),
            sqlstate: Some(server.state.clone()),
            message: format!("{} (error {})", server.message, server.code),
        },
        other => SetupError::Step {
            step: step.to_string(),
            sqlstate: None,
            message: other.to_string(),
        },
    }
}

async fn run(conn: &mut Conn, step: &str, sql: &str) -> Result<(), SetupError> {
    conn.query_drop(sql)
        .await
        .map_err(|error| mysql_step_error(step, &error))
}

/// A string literal for a session with NO_BACKSLASH_ESCAPES: quotes doubled.
fn quote_text(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `'user'@'%'`.
pub(super) fn account(user: &str) -> String {
    format!("{}@{}", quote_text(user), quote_text(USER_HOST))
}

/// Creates or refreshes everything on a MySQL or MariaDB server, then proves both users.
pub(super) async fn setup(options: &SetupOptions) -> Result<SetupReport, SetupError> {
    let read_only = login_for(
        &options.admin_url,
        &options.read_only_role,
        &options.database,
    )?;
    let log = login_for(&options.admin_url, &options.log_role, &options.database)?;
    let admin_user = mysql_opts(&options.admin_url, None)?
        .user()
        .map(str::to_string);
    if admin_user
        .as_deref()
        .is_some_and(|user| user == read_only.role || user == log.role)
    {
        return Err(SetupError::BadName {
            what: "role",
            name: admin_user.unwrap_or_default(),
            reason: "the admin URL logs in as one of the users being created".to_string(),
        });
    }

    let mut conn = connect_mysql(&options.admin_url, None).await?;
    let mariadb = conn
        .query_first::<String, _>("SELECT VERSION()")
        .await
        .map_err(|error| mysql_step_error("ask the server's version", &error))?
        .is_some_and(|version| version.contains("MariaDB"));
    run(
        &mut conn,
        "pin the session's sql_mode",
        &format!("SET SESSION sql_mode = '{LOAD_SQL_MODE}'"),
    )
    .await?;
    let database_created = ensure_database(&mut conn, &options.database).await?;
    for login in [&read_only, &log] {
        ensure_user(&mut conn, &login.role, login.password.expose(), mariadb).await?;
    }
    let tables = load_demo(&mut conn, &options.database).await?;
    grant(&mut conn, &options.database, &read_only.role, &log.role).await?;
    let _ = conn.disconnect().await;

    let proofs = mysql_proof::prove_users(&read_only, &log, mariadb).await?;
    Ok(SetupReport {
        database: options.database.clone(),
        database_created,
        tables,
        read_only,
        log,
        proofs,
    })
}

async fn ensure_database(conn: &mut Conn, database: &str) -> Result<bool, SetupError> {
    let exists: Option<String> = conn
        .exec_first(
            "SELECT schema_name FROM information_schema.schemata WHERE schema_name = ?",
            (database,),
        )
        .await
        .map_err(|error| mysql_step_error("look up the database", &error))?;
    let name = quote_name(database);
    let verb = if exists.is_some() {
        // Tables made below take the database's collation, whatever it was before.
        format!("ALTER DATABASE {name}")
    } else {
        format!("CREATE DATABASE IF NOT EXISTS {name}")
    };
    run(
        conn,
        "create the database",
        &format!("{verb} CHARACTER SET utf8mb4 COLLATE {COLLATION}"),
    )
    .await?;
    Ok(exists.is_none())
}

/// Creates the user or resets an existing one to exactly this password, no privilege,
/// no role, and (MariaDB) the statement limit.
async fn ensure_user(
    conn: &mut Conn,
    user: &str,
    password: &str,
    mariadb: bool,
) -> Result<(), SetupError> {
    let who = account(user);
    let secret = quote_text(password);
    run(
        conn,
        &format!("create user {user}"),
        &format!("CREATE USER IF NOT EXISTS {who} IDENTIFIED BY {secret}"),
    )
    .await?;
    run(
        conn,
        &format!("set {user}'s password"),
        &format!("ALTER USER {who} IDENTIFIED BY {secret}"),
    )
    .await?;
    // Start from nothing, so a grant from an earlier run or by hand cannot linger.
    run(
        conn,
        &format!("revoke {user}'s privileges"),
        &format!("REVOKE ALL PRIVILEGES, GRANT OPTION FROM {who}"),
    )
    .await?;
    // Roles would lend the user other privileges.
    let roles: Vec<String> = if mariadb {
        conn.exec(
            "SELECT Role FROM mysql.roles_mapping WHERE User = ? AND Host = ?",
            (user, USER_HOST),
        )
        .await
    } else {
        conn.exec(
            "SELECT FROM_USER FROM mysql.role_edges WHERE TO_USER = ? AND TO_HOST = ?",
            (user, USER_HOST),
        )
        .await
    }
    .map_err(|error| mysql_step_error(&format!("look up {user}'s roles"), &error))?;
    for role in roles {
        run(
            conn,
            &format!("remove role {role} from {user}"),
            &format!("REVOKE {} FROM {who}", quote_name(&role)),
        )
        .await?;
    }
    if mariadb {
        // The server's own limit for every statement of the user, also for a client
        // that sets none (PostgreSQL's role statement_timeout).
        run(
            conn,
            &format!("set {user}'s statement limit"),
            &format!(
                "ALTER USER {who} WITH MAX_STATEMENT_TIME {}",
                ROLE_STATEMENT_TIMEOUT.as_secs().max(1)
            ),
        )
        .await?;
    }
    Ok(())
}

/// Rebuilds the demo tables (each table's rows in one transaction) and makes sure the
/// query log exists.
async fn load_demo(conn: &mut Conn, database: &str) -> Result<Vec<(String, usize)>, SetupError> {
    run(
        conn,
        "use the database",
        &format!("USE {}", quote_name(database)),
    )
    .await?;
    let tables = demo::generate();
    let names: Vec<String> = tables
        .iter()
        .map(|table| quote_name(table.def.name))
        .collect();
    // The old tables refer to each other; dropped together, the order does not matter.
    run(
        conn,
        "drop the old demo tables",
        "SET SESSION foreign_key_checks = 0",
    )
    .await?;
    let dropped = run(
        conn,
        "drop the old demo tables",
        &format!("DROP TABLE IF EXISTS {}", names.join(", ")),
    )
    .await;
    run(
        conn,
        "drop the old demo tables",
        "SET SESSION foreign_key_checks = 1",
    )
    .await?;
    dropped?;
    let mut loaded = Vec::with_capacity(tables.len());
    for table in &tables {
        let name = table.def.name;
        run(
            conn,
            &format!("create table {name}"),
            &format!(
                "{} ENGINE=InnoDB",
                demo::create_table_sql(&table.def, DdlDialect::Mysql)
            ),
        )
        .await?;
        run(conn, &format!("load table {name}"), "START TRANSACTION").await?;
        for insert in demo::insert_values_sql(table, DdlDialect::Mysql, ROWS_PER_INSERT) {
            if let Err(error) = run(conn, &format!("load table {name}"), &insert).await {
                let _ = conn.query_drop("ROLLBACK").await;
                return Err(error);
            }
        }
        run(conn, &format!("load table {name}"), "COMMIT").await?;
        loaded.push((name.to_string(), table.rows.len()));
    }
    run(
        conn,
        "create the query log",
        &crate::querylog::mysql_create_sql(),
    )
    .await?;
    // Row estimates for list_tables (information_schema's table_rows).
    conn.query_drop(format!("ANALYZE TABLE {}", names.join(", ")))
        .await
        .map_err(|error| mysql_step_error("analyse the demo tables", &error))?;
    Ok(loaded)
}

/// Every grant of the two users, after `ensure_user` left them with none.
async fn grant(
    conn: &mut Conn,
    database: &str,
    read_only: &str,
    log: &str,
) -> Result<(), SetupError> {
    let db = quote_name(database);
    let ro = account(read_only);
    for table in demo::table_defs() {
        let name = table.name;
        let restricted: Vec<&str> = demo::RESTRICTED_COLUMNS
            .iter()
            .filter_map(|entry| entry.split_once('.'))
            .filter(|(table_name, _)| *table_name == name)
            .map(|(_, column)| column)
            .collect();
        let privilege = if restricted.is_empty() {
            "SELECT".to_string()
        } else {
            // Column grants: the server refuses a restricted column (and `*`) to the
            // user itself, while COUNT(*) still works.
            let visible: Vec<String> = table
                .columns
                .iter()
                .filter(|column| !restricted.contains(&column.name))
                .map(|column| quote_name(column.name))
                .collect();
            format!("SELECT ({})", visible.join(", "))
        };
        run(
            conn,
            &format!("grant SELECT on {name}"),
            &format!("GRANT {privilege} ON {db}.{} TO {ro}", quote_name(name)),
        )
        .await?;
    }
    run(
        conn,
        "grant INSERT on the query log",
        &format!(
            "GRANT INSERT ON {db}.{} TO {}",
            quote_name(QUERY_LOG_TABLE),
            account(log)
        ),
    )
    .await
}

/// Drops a database and users that `setup` made (tests and scratch copies): the
/// database with its tables, and each user with its grants. Names are checked as
/// `setup` checks them.
pub async fn remove_mysql_setup(
    admin_url: &str,
    database: &str,
    users: &[&str],
) -> Result<(), SetupError> {
    super::check_name("database", database)?;
    let mut conn = connect_mysql(admin_url, None).await?;
    run(
        &mut conn,
        "drop the database",
        &format!("DROP DATABASE IF EXISTS {}", quote_name(database)),
    )
    .await?;
    for user in users {
        super::check_name("role", user)?;
        run(
            &mut conn,
            &format!("drop user {user}"),
            &format!("DROP USER IF EXISTS {}", account(user)),
        )
        .await?;
    }
    let _ = conn.disconnect().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_accounts_are_quoted_for_mysql() {
        assert_eq!(quote_name("a`b"), "`a``b`");
        assert_eq!(account("o'brien"), "'o''brien'@'%'");
        assert!(is_mysql_url("mariadb://root@h/"));
        assert!(!is_mysql_url("postgres://root@h/"));
        let opts = mysql_opts("mariadb://root:pw@127.0.0.1:3307/x", Some("y")).expect("parses");
        assert_eq!(opts.tcp_port(), 3307);
        assert_eq!(opts.db_name(), Some("y"));
        let error = mysql_opts("mysql://root:hunter2@h:notaport/x", None).expect_err("bad port");
        assert!(!error.to_string().contains("hunter2"), "{error}");
    }
}
