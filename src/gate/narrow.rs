//! Per-user policies (decision 0076): a TOML file beside the notes that may only narrow
//! what the notes allow: hide more tables, restrict more columns, show only some
//! tables or columns, cap rows lower, and (checked by the server, which knows its own
//! limits) lower the asks per minute and take a share of the spend cap. A policy that
//! would widen anything (a hidden table named as visible, a restricted column named as
//! shown, a cap raised) or names a table or column the gate does not know is refused
//! whole, at start. [`Gate::narrowed`] builds the narrowed gate once per policy; it
//! shares the database connections and has a guard policy (and verdict memory) of its
//! own, so a query checked for one user never runs as checked for another.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;

use super::{Gate, GateInner};

/// What a user's policy may say. Every field narrows; an unknown field (such as an
/// attempt to unrestrict something) is an error, not ignored.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserPolicy {
    /// Only these tables are visible (of those the notes show); absent: all of them.
    #[serde(default)]
    pub tables: Option<Vec<String>>,
    /// Tables hidden besides the notes' hidden tables.
    #[serde(default)]
    pub hidden_tables: Vec<String>,
    /// Per table, the only columns shown (of those the notes do not restrict).
    #[serde(default)]
    pub columns: BTreeMap<String, Vec<String>>,
    /// Columns restricted besides the notes' ones, written `table.column`.
    #[serde(default)]
    pub restricted_columns: Vec<String>,
    /// The most rows a result returns; at most the gate's own cap.
    #[serde(default)]
    pub row_cap: Option<u64>,
    /// Questions a minute; at most the server's `--asks-per-minute` (never 0, which
    /// would mean no limit).
    #[serde(default)]
    pub asks_per_minute: Option<u32>,
    /// The share of the spend cap this user's questions may spend, in (0, 1].
    #[serde(default)]
    pub spend_share: Option<f64>,
}

/// Which limit a policy tried to raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyLimit {
    RowCap,
    AsksPerMinute,
}

impl std::fmt::Display for PolicyLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PolicyLimit::RowCap => "row_cap",
            PolicyLimit::AsksPerMinute => "asks_per_minute",
        })
    }
}

/// Why a policy is refused. Each names the policy and what it tried.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PolicyError {
    #[error("cannot read the policy {path}: {error}")]
    Read { path: String, error: String },
    #[error("the policy {path} is not a policy askdb reads: {error}")]
    Malformed { path: String, error: String },
    #[error("the policy {policy:?} names table {table:?}, which the database does not have")]
    UnknownTable { policy: String, table: String },
    #[error("the policy {policy:?} names column {table}.{column}, which that table does not have")]
    UnknownColumn {
        policy: String,
        table: String,
        column: String,
    },
    #[error("the policy {policy:?} names column {entry:?}; write it table.column")]
    BadColumnName { policy: String, entry: String },
    #[error(
        "the policy {policy:?} names table {table:?} as visible, but the notes hide it: a \
         policy can only narrow the notes"
    )]
    ShowsHiddenTable { policy: String, table: String },
    #[error(
        "the policy {policy:?} names column {table}.{column} as shown, but the notes restrict \
         it: a policy can only narrow the notes"
    )]
    UnrestrictsColumn {
        policy: String,
        table: String,
        column: String,
    },
    #[error(
        "the policy {policy:?} sets {limit} = {value}, above the server's {allowed}: a policy \
         can only lower it"
    )]
    RaisesLimit {
        policy: String,
        limit: PolicyLimit,
        value: u64,
        allowed: u64,
    },
    #[error("the policy {policy:?} sets {limit} = 0, which lifts the limit: write at least 1")]
    LiftsLimit { policy: String, limit: PolicyLimit },
    #[error("the policy {policy:?} sets spend_share = {value}; a share is above 0 and at most 1")]
    BadShare { policy: String, value: f64 },
    #[error(
        "the policy {policy:?} sets spend_share, but no spend cap is configured \
         (ASKDB_SPEND_CAP_USD): a share of no cap would limit nothing"
    )]
    ShareWithoutCap { policy: String },
}

impl UserPolicy {
    /// Reads a policy file; every unknown field is an error.
    pub fn load(path: &Path) -> Result<UserPolicy, PolicyError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| PolicyError::Read {
            path: shown.clone(),
            error: error.to_string(),
        })?;
        toml::from_str(&text).map_err(|error| PolicyError::Malformed {
            path: shown,
            error: error.to_string(),
        })
    }

    /// The server's limits, narrowed: `server_per_minute` is `--asks-per-minute` (0: no
    /// limit), `spend_cap` the configured cap. Err when the policy would raise either.
    pub fn check_server_limits(
        &self,
        name: &str,
        server_per_minute: u32,
        spend_cap: Option<f64>,
    ) -> Result<(), PolicyError> {
        if let Some(per_minute) = self.asks_per_minute {
            if per_minute == 0 {
                return Err(PolicyError::LiftsLimit {
                    policy: name.to_string(),
                    limit: PolicyLimit::AsksPerMinute,
                });
            }
            if server_per_minute != 0 && per_minute > server_per_minute {
                return Err(PolicyError::RaisesLimit {
                    policy: name.to_string(),
                    limit: PolicyLimit::AsksPerMinute,
                    value: u64::from(per_minute),
                    allowed: u64::from(server_per_minute),
                });
            }
        }
        if let Some(share) = self.spend_share {
            if !(share > 0.0 && share <= 1.0) {
                return Err(PolicyError::BadShare {
                    policy: name.to_string(),
                    value: share,
                });
            }
            if spend_cap.is_none() {
                return Err(PolicyError::ShareWithoutCap {
                    policy: name.to_string(),
                });
            }
        }
        Ok(())
    }
}

impl Gate {
    /// This gate narrowed by a user's policy named `name`: the same connections, fewer
    /// tables and columns, a lower row cap, a guard policy of its own. Err, naming what
    /// it tried, when the policy would widen the notes or names something unknown.
    pub fn narrowed(&self, name: &str, user: &UserPolicy) -> Result<Gate, PolicyError> {
        let inner = &self.inner;
        let base = &inner.policy;
        let policy_name = name.to_string();
        // A table of the notes' view: visible, hidden by the notes, or unknown.
        let known_table = |table: &str| -> Result<String, PolicyError> {
            let folded = table.trim().to_lowercase();
            if base.is_hidden(&folded) {
                return Err(PolicyError::ShowsHiddenTable {
                    policy: policy_name.clone(),
                    table: table.to_string(),
                });
            }
            if base.columns_of(&folded).is_none() {
                return Err(PolicyError::UnknownTable {
                    policy: policy_name.clone(),
                    table: table.to_string(),
                });
            }
            Ok(folded)
        };
        let known_column = |table: &str, column: &str| -> Result<String, PolicyError> {
            let folded = column.trim().to_lowercase();
            let exists = base
                .columns_of(table)
                .is_some_and(|columns| columns.contains(&folded));
            if !exists {
                return Err(PolicyError::UnknownColumn {
                    policy: policy_name.clone(),
                    table: table.to_string(),
                    column: column.to_string(),
                });
            }
            Ok(folded)
        };

        let mut hide: BTreeSet<String> = BTreeSet::new();
        if let Some(only) = &user.tables {
            let mut shown = BTreeSet::new();
            for table in only {
                shown.insert(known_table(table)?);
            }
            for table in &inner.tables {
                let folded = table.name.to_lowercase();
                if !shown.contains(&folded) {
                    hide.insert(folded);
                }
            }
        }
        for table in &user.hidden_tables {
            let folded = table.trim().to_lowercase();
            // Hiding again what the notes hide narrows nothing and widens nothing.
            if !base.is_hidden(&folded) {
                hide.insert(known_table(table)?);
            }
        }
        let mut restrict: BTreeSet<(String, String)> = BTreeSet::new();
        for (table, columns) in &user.columns {
            let table = known_table(table)?;
            let mut shown = BTreeSet::new();
            for column in columns {
                let column = known_column(&table, column)?;
                if base.is_restricted(&table, &column) {
                    return Err(PolicyError::UnrestrictsColumn {
                        policy: policy_name.clone(),
                        table,
                        column,
                    });
                }
                shown.insert(column);
            }
            for column in base.columns_of(&table).into_iter().flatten() {
                if !shown.contains(column) {
                    restrict.insert((table.clone(), column.clone()));
                }
            }
        }
        for entry in &user.restricted_columns {
            let Some((table, column)) = entry.rsplit_once('.') else {
                return Err(PolicyError::BadColumnName {
                    policy: policy_name.clone(),
                    entry: entry.clone(),
                });
            };
            let folded_table = table.trim().to_lowercase();
            if base.is_hidden(&folded_table) {
                continue;
            }
            let table = known_table(table)?;
            let column = known_column(&table, column)?;
            restrict.insert((table, column));
        }
        let row_cap = match user.row_cap {
            Some(0) => {
                return Err(PolicyError::LiftsLimit {
                    policy: policy_name,
                    limit: PolicyLimit::RowCap,
                })
            }
            Some(cap) if cap > base.row_cap => {
                return Err(PolicyError::RaisesLimit {
                    policy: policy_name,
                    limit: PolicyLimit::RowCap,
                    value: cap,
                    allowed: base.row_cap,
                })
            }
            Some(cap) => cap,
            None => base.row_cap,
        };

        let mut policy = base.narrowed_copy();
        policy.row_cap = row_cap;
        let mut notes = inner.notes.clone();
        for table in &hide {
            policy.hide_table(table);
            notes.hidden_tables.push(table.clone());
        }
        for (table, column) in &restrict {
            policy.restrict_column(table, column);
            notes.restricted_columns.push(format!("{table}.{column}"));
        }
        let mut tables = inner.tables.clone();
        tables.retain(|table| !hide.contains(&table.name.to_lowercase()));
        for table in &mut tables {
            super::leave_out_restricted(table, &policy);
        }
        // Foreign keys into a table this user cannot see would name it.
        for table in &mut tables {
            table
                .foreign_keys
                .retain(|key| !hide.contains(&key.references_table.to_lowercase()));
        }
        let mut limits = inner.limits;
        limits.row_cap = row_cap;
        Ok(Gate {
            inner: std::sync::Arc::new(GateInner {
                label: inner.label.clone(),
                backend: inner.backend.clone(),
                policy: std::sync::Arc::new(policy),
                tables,
                notes,
                limits,
                verdicts: super::verdicts::Verdicts::default(),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{Database, GateOptions, QueryOutcome, RefusalReason};
    use crate::schema::SchemaNotes;

    async fn demo_like_gate(dir: &Path) -> Gate {
        let path = dir.join("shop.db");
        let connection = rusqlite::Connection::open(&path).expect("create");
        connection
            .execute_batch(
                "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT, phone TEXT);
                 CREATE TABLE bills (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), total REAL);
                 CREATE TABLE salaries (id INTEGER PRIMARY KEY, amount REAL);
                 INSERT INTO customers VALUES (1, 'Asha', 'Pune', '555'), (2, 'Ben', 'Goa', '556');
                 INSERT INTO bills VALUES (1, 1, 10.0), (2, 2, 20.0), (3, 1, 5.0);",
            )
            .expect("fill");
        drop(connection);
        let notes = SchemaNotes {
            hidden_tables: vec!["salaries".into()],
            restricted_columns: vec!["customers.phone".into()],
            ..SchemaNotes::default()
        };
        Gate::open(
            &Database::Sqlite(path),
            GateOptions {
                notes: Some(notes),
                row_cap: 100,
                ..GateOptions::default()
            },
        )
        .await
        .expect("open")
    }

    fn policy(text: &str) -> UserPolicy {
        toml::from_str(text).expect("policy parses")
    }

    #[tokio::test]
    async fn a_policy_that_widens_or_names_the_unknown_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let gate = demo_like_gate(dir.path()).await;
        let refused = |text: &str| {
            gate.narrowed("p", &policy(text))
                .err()
                .unwrap_or_else(|| panic!("{text} was accepted"))
        };
        assert!(matches!(
            refused("tables = [\"customers\", \"salaries\"]"),
            PolicyError::ShowsHiddenTable { table, .. } if table == "salaries"
        ));
        assert!(matches!(
            refused("[columns]\ncustomers = [\"id\", \"phone\"]"),
            PolicyError::UnrestrictsColumn { column, .. } if column == "phone"
        ));
        assert!(matches!(
            refused("row_cap = 500"),
            PolicyError::RaisesLimit {
                limit: PolicyLimit::RowCap,
                value: 500,
                allowed: 100,
                ..
            }
        ));
        assert!(matches!(
            refused("row_cap = 0"),
            PolicyError::LiftsLimit { .. }
        ));
        assert!(matches!(
            refused("hidden_tables = [\"orders\"]"),
            PolicyError::UnknownTable { table, .. } if table == "orders"
        ));
        assert!(matches!(
            refused("restricted_columns = [\"bills.discount\"]"),
            PolicyError::UnknownColumn { column, .. } if column == "discount"
        ));
        assert!(matches!(
            refused("restricted_columns = [\"discount\"]"),
            PolicyError::BadColumnName { .. }
        ));
        // A field that would unrestrict is not a field: the file is refused whole.
        assert!(
            toml::from_str::<UserPolicy>("unrestricted_columns = [\"customers.phone\"]").is_err()
        );
        let error = refused("tables = [\"salaries\"]").to_string();
        assert!(
            error.contains("\"p\"") && error.contains("salaries") && error.contains("narrow"),
            "{error}"
        );

        let limits = policy("asks_per_minute = 30\nspend_share = 0.5");
        assert!(matches!(
            limits.check_server_limits("p", 20, Some(1.0)),
            Err(PolicyError::RaisesLimit {
                limit: PolicyLimit::AsksPerMinute,
                ..
            })
        ));
        assert!(limits.check_server_limits("p", 0, Some(1.0)).is_ok());
        assert!(limits.check_server_limits("p", 30, Some(1.0)).is_ok());
        assert!(matches!(
            limits.check_server_limits("p", 30, None),
            Err(PolicyError::ShareWithoutCap { .. })
        ));
        for bad in [
            "spend_share = 1.5",
            "spend_share = 0.0",
            "spend_share = -0.1",
        ] {
            assert!(
                matches!(
                    policy(bad).check_server_limits("p", 30, Some(1.0)),
                    Err(PolicyError::BadShare { .. })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            policy("asks_per_minute = 0").check_server_limits("p", 30, Some(1.0)),
            Err(PolicyError::LiftsLimit { .. })
        ));
    }

    #[tokio::test]
    async fn a_narrowed_gate_hides_restricts_and_caps_and_keeps_its_own_verdicts() {
        let dir = tempfile::tempdir().expect("dir");
        let gate = demo_like_gate(dir.path()).await;
        let narrow = gate
            .narrowed(
                "sales",
                &policy(
                    "hidden_tables = [\"bills\", \"salaries\"]\n\
                     restricted_columns = [\"customers.city\"]\nrow_cap = 1\n",
                ),
            )
            .expect("narrows");
        let names: Vec<String> = narrow.list_tables().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["customers"]);
        let columns: Vec<String> = narrow
            .describe_table("customers")
            .expect("described")
            .columns
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(columns, ["id", "name"]);
        assert!(narrow.describe_table("bills").is_err());
        // The wide gate still sees what the notes allow.
        assert_eq!(gate.list_tables().len(), 2);

        let sql = "SELECT city FROM customers ORDER BY id";
        let QueryOutcome::Rows(rows) = gate.run_query(sql).await else {
            panic!("the wide gate runs it")
        };
        assert_eq!(rows.row_count, 2);
        let QueryOutcome::Failed(error) = narrow.run_query(sql).await else {
            panic!("the narrowed gate refuses a column its policy restricts")
        };
        assert_eq!(error.reason, Some(RefusalReason::RestrictedColumn));
        let QueryOutcome::Failed(error) = narrow.run_query("SELECT total FROM bills").await else {
            panic!("a table the policy hides is refused")
        };
        assert_eq!(error.reason, Some(RefusalReason::UnknownTable));
        let QueryOutcome::Rows(rows) = narrow.run_query("SELECT name FROM customers").await else {
            panic!("a visible column runs")
        };
        assert_eq!(
            (rows.row_count, rows.truncated),
            (1, true),
            "capped at the policy's 1"
        );

        // A query the wide gate checked does not run as checked on the narrowed one.
        let checked = gate.check("SELECT name FROM customers").expect("checked");
        let QueryOutcome::Failed(error) = narrow.run(&checked).await else {
            panic!("a foreign policy's query runs")
        };
        assert_eq!(error.reason, Some(RefusalReason::ForeignPolicy));

        // Only some columns: the rest are restricted.
        let only = gate
            .narrowed(
                "names",
                &policy("[columns]\ncustomers = [\"id\", \"name\"]"),
            )
            .expect("narrows");
        let QueryOutcome::Failed(error) = only.run_query("SELECT city FROM customers").await else {
            panic!("a column outside the list runs")
        };
        assert_eq!(error.reason, Some(RefusalReason::RestrictedColumn));
        let QueryOutcome::Failed(error) = only.run_query("SELECT * FROM customers").await else {
            panic!("SELECT * reads a column outside the list")
        };
        assert_eq!(error.reason, Some(RefusalReason::RestrictedColumn));
    }
}
