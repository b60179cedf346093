//! The guard's second check: what the database itself resolved the statement to, judged
//! against the same policy as the parser check. The parser check re-implements name
//! resolution on a tree (aliases, scopes, identifier rules), and every place it resolves
//! differently from the database is a way past it. Here the database has already
//! resolved every name: PostgreSQL's `EXPLAIN (VERBOSE, FORMAT JSON)` of the exact text
//! that will run (read by `postgres_plan.rs`), SQLite's authorizer calls while the
//! statement is prepared and never stepped (recorded by the SQLite executor). Both are
//! turned into one [`Resolution`], and [`verdict`] refuses in the same words as the
//! parser check: a relation that is not visible, a restricted column, a system column or
//! session fact, a function outside the allow-list.

use std::collections::BTreeSet;

use super::{restricted_refusal, unlisted_function_refusal, GuardPolicy, Refusal, RefusalReason};

/// One column the statement reads, as the database resolved it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ColumnRead {
    /// `table.column` of a base table.
    Column { table: String, column: String },
    /// The whole row of a base table (`c.*`, `to_json(c)`): every column, restricted
    /// ones included.
    WholeRow { table: String },
    /// An unqualified word where the statement has one table: a column of it, or a
    /// keyword the database writes in lower case (`year` in `EXTRACT(year FROM d)`).
    BareName { table: String, name: String },
}

/// What one statement reads and calls, in the database's own resolution. Names are
/// lower-cased, as the policy stores them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Resolution {
    /// Every relation any part of the statement scans: tables, views, sequences, the
    /// database's own catalogs, with the schema the database found it in (empty where
    /// the engine has one namespace).
    pub relations: BTreeSet<(String, String)>,
    /// Columns that are returned or that any part of the statement filters, joins,
    /// sorts, groups or windows on.
    pub columns: BTreeSet<ColumnRead>,
    /// Functions called, with their schema where the engine names one.
    pub functions: BTreeSet<(String, String)>,
    /// Facts about the session or the server rather than the data (`CURRENT_ROLE`,
    /// system columns such as `xmin`): never part of an answer.
    pub session_facts: BTreeSet<String>,
    /// Operators or types outside the database's built-in namespace, which could run
    /// code the allow-list never reviewed.
    pub foreign_objects: BTreeSet<String>,
    /// Anything the database would do besides reading and calling functions (a write,
    /// a PRAGMA, a transaction): a query never does.
    pub other_actions: BTreeSet<String>,
    /// Names read where SQLite does not say whether a CTE or a table of that name is
    /// meant: allowed unless a table of that name must never be read.
    pub cte_or_table: BTreeSet<String>,
}

/// One authorizer call SQLite made while it prepared a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SqliteAccess {
    /// A column read (empty for a read of no particular column, as `count(*)` makes),
    /// with the attached database it belongs to (`main`, `temp`) when SQLite names one.
    Read {
        table: String,
        column: String,
        database: Option<String>,
    },
    Function(String),
    /// A PRAGMA, which table-valued `pragma_*` functions run.
    Pragma(String),
    /// A SELECT or a recursive CTE starting: no read in itself. SQLite names the CTE
    /// it belongs to as its accessor.
    Query {
        cte: Option<String>,
    },
    /// Anything else, by the authorizer's name for it.
    Other(String),
}

impl Resolution {
    /// What SQLite resolved a statement to, from the authorizer's calls while it was
    /// prepared. Relations are named without a schema, so `data_schema` is empty.
    pub(crate) fn from_sqlite(accesses: &[SqliteAccess]) -> Resolution {
        let mut resolution = Resolution::default();
        let ctes: BTreeSet<String> = accesses
            .iter()
            .filter_map(|access| match access {
                SqliteAccess::Query { cte: Some(cte) } => Some(cte.to_lowercase()),
                _ => None,
            })
            .collect();
        for access in accesses {
            match access {
                // A read of no column with no database (`count(*) FROM x`) names a table
                // or a CTE alike; where a CTE of that name exists it may be either.
                SqliteAccess::Read {
                    table,
                    column,
                    database: None,
                } if column.is_empty() && ctes.contains(&table.to_lowercase()) => {
                    resolution.cte_or_table.insert(table.to_lowercase());
                }
                SqliteAccess::Read {
                    table,
                    column,
                    database,
                } => {
                    let table = table.to_lowercase();
                    let schema = match database.as_deref() {
                        None | Some("main") => String::new(),
                        Some(other) => other.to_lowercase(),
                    };
                    resolution.relations.insert((schema, table.clone()));
                    if !column.is_empty() {
                        resolution.columns.insert(ColumnRead::Column {
                            table,
                            column: column.to_lowercase(),
                        });
                    }
                }
                SqliteAccess::Function(name) => {
                    // SQLite's JSON operators reach the authorizer as functions; they are
                    // json_extract in another spelling, allowed as it is.
                    let name = match name.as_str() {
                        "->" | "->>" => "json_extract".to_string(),
                        other => other.to_lowercase(),
                    };
                    resolution.functions.insert((String::new(), name));
                }
                SqliteAccess::Pragma(name) => {
                    resolution
                        .relations
                        .insert((String::new(), format!("pragma_{}", name.to_lowercase())));
                }
                SqliteAccess::Query { .. } => {}
                SqliteAccess::Other(action) => {
                    resolution.other_actions.insert(action.clone());
                }
            }
        }
        resolution
    }
}

/// The schema PostgreSQL's built-in functions and operators live in.
pub(crate) const POSTGRES_BUILT_IN_SCHEMA: &str = "pg_catalog";

/// Judges a resolution against the policy; the first violation is the refusal, in the
/// same words the parser check uses for the same thing. `data_schema` is the schema the
/// visible tables live in (`public` on PostgreSQL, empty on SQLite).
pub(crate) fn verdict(
    resolution: &Resolution,
    policy: &GuardPolicy,
    data_schema: &str,
) -> Result<(), Refusal> {
    for (schema, name) in &resolution.relations {
        // The policy names a table of the data schema bare and any other `schema.table`.
        let key = if schema == data_schema {
            name.clone()
        } else {
            format!("{schema}.{name}")
        };
        // SQLite reads a table-valued function (`json_each(...)`) like a table.
        let table_valued_function = schema.is_empty() && policy.is_function_allowed(name);
        if !policy.is_visible(&key) && !table_valued_function {
            // Hidden tables, catalogs and sequences alike: the words of a table that does
            // not exist, never repaired, so the refusal confirms nothing.
            return Err(Refusal::hidden_table(name));
        }
    }
    for name in &resolution.cte_or_table {
        if policy.is_hidden(name) || super::is_catalog_name(name) || name == "dbstat" {
            return Err(Refusal::hidden_table(name));
        }
    }
    if let Some(action) = resolution.other_actions.iter().next() {
        return Err(Refusal::new(
            RefusalReason::NotAQuery,
            format!("only a read-only query may run; this statement would also {action}"),
        ));
    }
    if let Some(fact) = resolution.session_facts.iter().next() {
        return Err(session_fact_refusal(fact));
    }
    if let Some(object) = resolution.foreign_objects.iter().next() {
        return Err(Refusal::new(
            RefusalReason::DeniedFunction,
            format!("{object} is not a built-in operator or type; use the built-in ones"),
        ));
    }
    for read in &resolution.columns {
        match read {
            ColumnRead::Column { table, column } => {
                if policy.is_restricted(table, column) {
                    return Err(restricted_refusal(&format!("column {table}.{column}")));
                }
                let known = policy
                    .columns_of(table)
                    .is_some_and(|columns| columns.contains(column));
                // A table-valued function's columns (json_each's `value`) are its own.
                let function_column =
                    policy.columns_of(table).is_none() && policy.is_function_allowed(table);
                // A name the table does not have is a column renamed by an alias list
                // (`products AS p (id)`: PostgreSQL's plan says `p.id`), whose place the
                // plan does not say: it may be any column, so it is judged as the whole
                // row. (System columns are session facts, found apart.)
                let renamed_over_restricted = policy
                    .restricted_columns(table)
                    .is_some_and(|columns| !columns.is_empty());
                if !known
                    && !is_row_number_alias(column)
                    && !function_column
                    && renamed_over_restricted
                {
                    return Err(restricted_refusal(&format!(
                        "{table}.{column}, a renamed column of a table with restricted columns,"
                    )));
                }
            }
            ColumnRead::BareName { table, name } => {
                if policy.is_restricted(table, name) {
                    return Err(restricted_refusal(&format!("column {table}.{name}")));
                }
            }
            ColumnRead::WholeRow { table } => {
                if policy
                    .restricted_columns(table)
                    .is_some_and(|columns| !columns.is_empty())
                {
                    return Err(restricted_refusal(&format!(
                        "the whole row of {table} (it holds restricted columns)"
                    )));
                }
            }
        }
    }
    for (schema, name) in &resolution.functions {
        let built_in = schema.is_empty() || schema == POSTGRES_BUILT_IN_SCHEMA;
        if !built_in || !policy.is_function_allowed(name) {
            return Err(unlisted_function_refusal(name));
        }
    }
    Ok(())
}

/// SQLite's names for a table's row id, which every rowid table has whether or not a
/// column is declared for it; reading it reveals nothing the rows do not.
fn is_row_number_alias(column: &str) -> bool {
    matches!(column, "rowid" | "oid" | "_rowid_")
}

/// A session fact, a system column or a column the database has but the policy does not
/// know: catalog information, refused like a catalog.
fn session_fact_refusal(what: &str) -> Refusal {
    Refusal::new(
        RefusalReason::SystemCatalog,
        format!("{what} is information about the database system or the session, not data; query only the tables and columns in the schema"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql_text::SqlDialect;

    fn policy() -> GuardPolicy {
        let mut policy = GuardPolicy::new(SqlDialect::Postgres);
        policy.allow_table("customers", ["id", "name", "phone"]);
        policy.allow_table("bills", ["id", "customer_id", "total"]);
        policy.restrict_column("customers", "phone");
        policy.allow_table("askdb_query_log", ["id"]);
        policy.hide_table("askdb_query_log");
        policy
    }

    fn reading(table: &str, column: &str) -> Resolution {
        let mut resolution = Resolution::default();
        resolution.relations.insert(("public".into(), table.into()));
        resolution.columns.insert(ColumnRead::Column {
            table: table.into(),
            column: column.into(),
        });
        resolution
    }

    #[test]
    fn a_visible_column_passes_and_each_violation_is_refused_with_its_reason() {
        let policy = policy();
        assert_eq!(
            verdict(&reading("bills", "total"), &policy, "public"),
            Ok(())
        );
        // A renamed column (`bills AS b (n)`) reads a column of bills, any of them.
        assert_eq!(verdict(&reading("bills", "n"), &policy, "public"), Ok(()));
        let cases = [
            (
                reading("customers", "phone"),
                RefusalReason::RestrictedColumn,
            ),
            (
                reading("customers", "renamed"),
                RefusalReason::RestrictedColumn,
            ),
            (
                reading("askdb_query_log", "id"),
                RefusalReason::UnknownTable,
            ),
            (
                Resolution {
                    session_facts: ["system column xmin".to_string()].into(),
                    ..reading("bills", "total")
                },
                RefusalReason::SystemCatalog,
            ),
        ];
        for (resolution, reason) in cases {
            let refusal = verdict(&resolution, &policy, "public").expect_err("refused");
            assert_eq!(refusal.reason, reason, "{resolution:?}");
        }
        let mut other_schema = reading("bills", "total");
        other_schema.relations = [("pg_catalog".to_string(), "bills".to_string())].into();
        assert_eq!(
            verdict(&other_schema, &policy, "public").map_err(|r| r.reason),
            Err(RefusalReason::UnknownTable)
        );
        let mut named = policy.clone();
        named.allow_table("consumer_div.merchants", ["name"]);
        let mut qualified = reading("consumer_div.merchants", "name");
        qualified.relations = [("consumer_div".to_string(), "merchants".to_string())].into();
        assert_eq!(verdict(&qualified, &named, "public"), Ok(()));
    }

    #[test]
    fn sqlite_accesses_become_the_same_resolution() {
        let policy = policy();
        let read = |table: &str, column: &str, database: Option<&str>| SqliteAccess::Read {
            table: table.into(),
            column: column.into(),
            database: database.map(str::to_string),
        };
        let plain = Resolution::from_sqlite(&[
            SqliteAccess::Query { cte: None },
            SqliteAccess::Function("count".into()),
            read("bills", "", None),
            read("bills", "total", Some("main")),
        ]);
        assert_eq!(verdict(&plain, &policy, ""), Ok(()));
        let mut sqlite = policy.clone();
        sqlite.dialect = crate::sql_text::SqlDialect::Sqlite;
        let json = Resolution::from_sqlite(&[
            SqliteAccess::Function("->>".into()),
            read("json_each", "value", Some("main")),
        ]);
        assert_eq!(verdict(&json, &sqlite, ""), Ok(()));
        let refused = |accesses: &[SqliteAccess]| {
            verdict(&Resolution::from_sqlite(accesses), &policy, "").map_err(|r| r.reason)
        };
        // `(1, 'q') IN askdb_query_log` reads the hidden table's columns.
        assert_eq!(
            refused(&[read("askdb_query_log", "id", Some("main"))]),
            Err(RefusalReason::UnknownTable)
        );
        assert_eq!(
            refused(&[read("bills", "total", Some("temp"))]),
            Err(RefusalReason::UnknownTable)
        );
        assert_eq!(
            refused(&[SqliteAccess::Pragma("table_list".into())]),
            Err(RefusalReason::UnknownTable)
        );
        assert_eq!(
            refused(&[read("customers", "phone", Some("main"))]),
            Err(RefusalReason::RestrictedColumn)
        );
        // A CTE named like a hidden table in one scope, the table counted in another.
        let cte = SqliteAccess::Query {
            cte: Some("askdb_query_log".into()),
        };
        assert_eq!(
            refused(&[cte.clone(), read("askdb_query_log", "", None)]),
            Err(RefusalReason::UnknownTable)
        );
        let named = SqliteAccess::Query {
            cte: Some("recent".into()),
        };
        assert_eq!(refused(&[named, read("recent", "", None)]), Ok(()));
        assert_eq!(
            refused(&[SqliteAccess::Other("insert".into())]),
            Err(RefusalReason::NotAQuery)
        );
        assert_eq!(
            refused(&[SqliteAccess::Function("load_extension".into())]),
            Err(RefusalReason::DeniedFunction)
        );
    }

    #[test]
    fn a_whole_row_is_refused_only_where_the_table_restricts_a_column() {
        let policy = policy();
        let mut whole = reading("bills", "total");
        whole.columns.insert(ColumnRead::WholeRow {
            table: "bills".into(),
        });
        assert_eq!(verdict(&whole, &policy, "public"), Ok(()));
        whole.columns.insert(ColumnRead::WholeRow {
            table: "customers".into(),
        });
        assert_eq!(
            verdict(&whole, &policy, "public").map_err(|r| r.reason),
            Err(RefusalReason::RestrictedColumn)
        );
    }

    #[test]
    fn functions_must_be_built_in_and_allowed_and_session_facts_are_refused() {
        let policy = policy();
        let mut call = reading("bills", "total");
        call.functions.insert(("pg_catalog".into(), "sum".into()));
        assert_eq!(verdict(&call, &policy, "public"), Ok(()));
        let mut shadowing = call.clone();
        shadowing
            .functions
            .insert(("public".into(), "lower".into()));
        assert_eq!(
            verdict(&shadowing, &policy, "public").map_err(|r| r.reason),
            Err(RefusalReason::DeniedFunction)
        );
        let mut unlisted = call.clone();
        unlisted
            .functions
            .insert(("pg_catalog".into(), "pg_read_file".into()));
        assert!(verdict(&unlisted, &policy, "public").is_err());
        let mut session = call;
        session.session_facts.insert("CURRENT_ROLE".into());
        assert_eq!(
            verdict(&session, &policy, "public").map_err(|r| r.reason),
            Err(RefusalReason::SystemCatalog)
        );
    }
}
