//! Schema drift: the live schema compared with a snapshot taken when the notes (and the
//! prompts built from them) were last known to match it. `askdb schema snapshot` writes
//! the snapshot (tables, columns, types with precision and scale, keys); `askdb schema
//! drift` and `askdb serve` (at start and every few minutes) compare against it.
//!
//! What counts as drift is what can make a written query wrong: a dropped or renamed
//! table or column, a changed type (a NUMERIC scale included), a changed primary key, a
//! dropped foreign key, and a column or table the notes describe that no longer exists.
//! What cannot is not drift: a widened VARCHAR (or a VARCHAR become TEXT), a NUMERIC
//! that gained precision at the same scale, an integer widened, an added table or column.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::gate::Gate;
use crate::schema::{ColumnSchema, ForeignKey, SchemaNotes};

/// The snapshot file's format version.
pub const SNAPSHOT_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum DriftError {
    #[error("cannot read the schema snapshot {path}: {error}")]
    Read { path: String, error: String },
    #[error("cannot write the schema snapshot {path}: {error}")]
    Write { path: String, error: String },
}

/// One table as the snapshot keeps it (no row count: rows are not schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotTable {
    pub name: String,
    pub columns: Vec<ColumnSchema>,
    pub primary_key: Vec<String>,
    #[serde(default)]
    pub unique: Vec<Vec<String>>,
    #[serde(default)]
    pub foreign_keys: Vec<ForeignKey>,
}

/// The schema at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub version: u32,
    /// The database's label (no password).
    pub database: String,
    pub dialect: String,
    /// `YYYY-MM-DD HH:MM:SS` UTC.
    pub taken_at: String,
    pub tables: Vec<SnapshotTable>,
}

/// The gate's view of the schema now (hidden tables and restricted columns left out,
/// as everywhere else).
pub fn snapshot(gate: &Gate) -> Snapshot {
    Snapshot {
        version: SNAPSHOT_VERSION,
        database: gate.label().to_string(),
        dialect: gate.dialect().as_str().to_string(),
        taken_at: crate::calendar::utc_now().0,
        tables: gate
            .schema()
            .iter()
            .map(|table| SnapshotTable {
                name: table.name.clone(),
                columns: table.columns.clone(),
                primary_key: table.primary_key.clone(),
                unique: table.unique.clone(),
                foreign_keys: table.foreign_keys.clone(),
            })
            .collect(),
    }
}

/// A short, stable name for a set of tables as the snapshot keeps them (16 hex digits
/// of a SHA-256 over their JSON, sorted by name): equal when nothing a snapshot records
/// changed, so a record made against the schema can say which schema it was made
/// against without carrying the schema.
pub fn fingerprint(tables: &[SnapshotTable]) -> String {
    use sha2::{Digest, Sha256};
    let mut sorted: Vec<&SnapshotTable> = tables.iter().collect();
    sorted.sort_by_key(|table| table.name.to_lowercase());
    let text = serde_json::to_string(&sorted).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The tables of `snapshot` named in `names` (case-insensitive), in the snapshot's order.
pub fn tables_named(snapshot: &Snapshot, names: &[String]) -> Vec<SnapshotTable> {
    snapshot
        .tables
        .iter()
        .filter(|table| {
            names
                .iter()
                .any(|name| name.eq_ignore_ascii_case(&table.name))
        })
        .cloned()
        .collect()
}

/// Where the snapshot lives by default: beside the notes file (`NOTES.snapshot.json`),
/// else in askdb's data directory under `schema-snapshots/`, named after the database.
pub fn default_path(notes: Option<&Path>, database_label: &str) -> PathBuf {
    if let Some(notes) = notes {
        let stem = notes
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or("notes");
        return notes.with_file_name(format!("{stem}.snapshot.json"));
    }
    let name: String = database_label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    crate::home::data_dir()
        .join("schema-snapshots")
        .join(format!("{name}.json"))
}

pub fn write(snapshot: &Snapshot, path: &Path) -> Result<(), DriftError> {
    let fail = |error: String| DriftError::Write {
        path: path.display().to_string(),
        error,
    };
    if let Some(parent) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent).map_err(|error| fail(error.to_string()))?;
    }
    let text = serde_json::to_string_pretty(snapshot).map_err(|error| fail(error.to_string()))?;
    std::fs::write(path, text + "\n").map_err(|error| fail(error.to_string()))
}

pub fn read(path: &Path) -> Result<Snapshot, DriftError> {
    let fail = |error: String| DriftError::Read {
        path: path.display().to_string(),
        error,
    };
    let text = std::fs::read_to_string(path).map_err(|error| fail(error.to_string()))?;
    serde_json::from_str(&text).map_err(|error| fail(error.to_string()))
}

/// One way the live schema moved away from the snapshot or the notes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Difference {
    TableDropped {
        table: String,
    },
    TableRenamed {
        from: String,
        to: String,
    },
    ColumnDropped {
        table: String,
        column: String,
    },
    ColumnRenamed {
        table: String,
        from: String,
        to: String,
    },
    TypeChanged {
        table: String,
        column: String,
        from: String,
        to: String,
    },
    PrimaryKeyChanged {
        table: String,
        from: Vec<String>,
        to: Vec<String>,
    },
    ForeignKeyDropped {
        table: String,
        columns: Vec<String>,
        references: String,
    },
    /// The notes describe a column the live table does not have.
    NotedColumnMissing {
        table: String,
        column: String,
    },
    /// The notes describe a table the database does not have.
    NotedTableMissing {
        table: String,
    },
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::TableDropped { table } => write!(f, "table {table} was dropped"),
            Difference::TableRenamed { from, to } => {
                write!(f, "table {from} was renamed to {to}")
            }
            Difference::ColumnDropped { table, column } => {
                write!(f, "column {table}.{column} was dropped")
            }
            Difference::ColumnRenamed { table, from, to } => {
                write!(f, "column {table}.{from} was renamed to {to}")
            }
            Difference::TypeChanged {
                table,
                column,
                from,
                to,
            } => write!(
                f,
                "column {table}.{column} changed type from {from} to {to}"
            ),
            Difference::PrimaryKeyChanged { table, from, to } => write!(
                f,
                "the primary key of {table} changed from ({}) to ({})",
                from.join(", "),
                to.join(", ")
            ),
            Difference::ForeignKeyDropped {
                table,
                columns,
                references,
            } => write!(
                f,
                "the foreign key {table}({}) -> {references} was dropped",
                columns.join(", ")
            ),
            Difference::NotedColumnMissing { table, column } => write!(
                f,
                "the notes describe column {table}.{column}, which no longer exists"
            ),
            Difference::NotedTableMissing { table } => write!(
                f,
                "the notes describe table {table}, which no longer exists"
            ),
        }
    }
}

/// A type split into its lower-cased name and its numeric arguments:
/// `numeric(12,2)` -> (`numeric`, [12, 2]).
fn parse_type(text: &str) -> (String, Vec<u64>) {
    let lower = text.trim().to_lowercase();
    match lower.split_once('(') {
        Some((base, rest)) => {
            let inner = rest.split(')').next().unwrap_or("");
            let args = inner
                .split(',')
                .filter_map(|part| part.trim().parse::<u64>().ok())
                .collect();
            let tail = rest
                .split_once(')')
                .map(|(_, tail)| tail.trim())
                .unwrap_or("");
            let base = if tail.is_empty() {
                base.trim().to_string()
            } else {
                format!("{} {tail}", base.trim())
            };
            (base, args)
        }
        None => (lower, Vec::new()),
    }
}

fn is_varchar(base: &str) -> bool {
    matches!(
        base,
        "character varying" | "varchar" | "nvarchar" | "varchar2" | "text"
    )
}

fn is_numeric(base: &str) -> bool {
    matches!(base, "numeric" | "decimal")
}

fn integer_rank(base: &str) -> Option<u8> {
    match base {
        "smallint" | "int2" => Some(1),
        "integer" | "int" | "int4" => Some(2),
        "bigint" | "int8" => Some(3),
        _ => None,
    }
}

/// Whether a column's type change can change what a query means or returns.
pub fn type_change_is_drift(from: &str, to: &str) -> bool {
    // A snapshot taken before types were read without MySQL's display width (or on
    // another server) still compares equal.
    let (old_base, old_args) = parse_type(&crate::schema::without_display_width(from));
    let (new_base, new_args) = parse_type(&crate::schema::without_display_width(to));
    if old_base == new_base && old_args == new_args {
        return false;
    }
    if is_varchar(&old_base) && is_varchar(&new_base) {
        // Widened or unbounded: every old value still fits and compares the same.
        return match (old_args.first(), new_args.first()) {
            (_, None) => false,
            (Some(old), Some(new)) => new < old,
            (None, Some(_)) => true,
        };
    }
    if is_numeric(&old_base) && is_numeric(&new_base) {
        let scale = |args: &[u64]| args.get(1).copied().unwrap_or(0);
        // An unconstrained numeric keeps any scale: only a constrained one is compared.
        if old_args.is_empty() || new_args.is_empty() {
            return old_args.is_empty() != new_args.is_empty();
        }
        let widened = new_args.first() >= old_args.first();
        return scale(&old_args) != scale(&new_args) || !widened;
    }
    if let (Some(old), Some(new)) = (integer_rank(&old_base), integer_rank(&new_base)) {
        return new < old;
    }
    true
}

fn column_names(table: &SnapshotTable) -> BTreeSet<String> {
    table
        .columns
        .iter()
        .map(|column| column.name.to_lowercase())
        .collect()
}

/// Every difference between the snapshot and the live schema, and between the notes
/// and the live schema. `restricted(table, column)` is true for columns the notes
/// restrict (never part of the live view, so never missing). Sorted, so a report is
/// stable.
pub fn compare(
    saved: &Snapshot,
    live: &Snapshot,
    notes: &SchemaNotes,
    restricted: impl Fn(&str, &str) -> bool,
) -> Vec<Difference> {
    let by_name = |snapshot: &Snapshot| -> BTreeMap<String, SnapshotTable> {
        snapshot
            .tables
            .iter()
            .map(|table| (table.name.to_lowercase(), table.clone()))
            .collect()
    };
    let old = by_name(saved);
    let new = by_name(live);
    let mut differences = Vec::new();
    let added: Vec<&SnapshotTable> = new
        .iter()
        .filter(|(name, _)| !old.contains_key(*name))
        .map(|(_, table)| table)
        .collect();
    let mut renamed_to: BTreeSet<String> = BTreeSet::new();
    for (name, table) in &old {
        let Some(current) = new.get(name) else {
            // A new table with exactly the dropped one's columns is the same table renamed.
            let twin = added.iter().find(|candidate| {
                column_names(candidate) == column_names(table)
                    && !renamed_to.contains(&candidate.name)
            });
            match twin {
                Some(twin) => {
                    renamed_to.insert(twin.name.clone());
                    differences.push(Difference::TableRenamed {
                        from: table.name.clone(),
                        to: twin.name.clone(),
                    });
                }
                None => differences.push(Difference::TableDropped {
                    table: table.name.clone(),
                }),
            }
            continue;
        };
        compare_table(table, current, &mut differences);
    }
    for (table_name, note) in &notes.tables {
        let key = table_name.to_lowercase();
        if notes
            .hidden_tables
            .iter()
            .any(|hidden| hidden.eq_ignore_ascii_case(table_name))
        {
            continue;
        }
        let Some(table) = new.get(&key) else {
            // Already reported when the snapshot had it.
            if !old.contains_key(&key) {
                differences.push(Difference::NotedTableMissing {
                    table: table_name.clone(),
                });
            }
            continue;
        };
        let live_columns = column_names(table);
        let already: BTreeSet<String> = differences
            .iter()
            .filter_map(|difference| match difference {
                Difference::ColumnDropped { table: t, column }
                | Difference::ColumnRenamed {
                    table: t,
                    from: column,
                    ..
                } if t.eq_ignore_ascii_case(table_name) => Some(column.to_lowercase()),
                _ => None,
            })
            .collect();
        for column in note.columns.keys() {
            let lower = column.to_lowercase();
            if !live_columns.contains(&lower)
                && !already.contains(&lower)
                && !restricted(&table.name, column)
            {
                differences.push(Difference::NotedColumnMissing {
                    table: table.name.clone(),
                    column: column.clone(),
                });
            }
        }
    }
    differences.sort();
    differences
}

fn compare_table(old: &SnapshotTable, new: &SnapshotTable, out: &mut Vec<Difference>) {
    let find = |table: &SnapshotTable, name: &str| -> Option<ColumnSchema> {
        table
            .columns
            .iter()
            .find(|column| column.name.eq_ignore_ascii_case(name))
            .cloned()
    };
    let old_names = column_names(old);
    let new_names = column_names(new);
    let mut added: Vec<ColumnSchema> = new
        .columns
        .iter()
        .filter(|column| !old_names.contains(&column.name.to_lowercase()))
        .cloned()
        .collect();
    for column in &old.columns {
        match find(new, &column.name) {
            Some(current) => {
                if type_change_is_drift(&column.data_type, &current.data_type) {
                    out.push(Difference::TypeChanged {
                        table: new.name.clone(),
                        column: column.name.clone(),
                        from: column.data_type.clone(),
                        to: current.data_type.clone(),
                    });
                }
            }
            None => {
                // A new column in the same place, of the same type or a widening of it, is the old one renamed.
                let position = old.columns.iter().position(|c| c.name == column.name);
                let twin = added.iter().position(|candidate| {
                    !type_change_is_drift(&column.data_type, &candidate.data_type)
                        && new.columns.iter().position(|c| c.name == candidate.name) == position
                });
                match twin {
                    Some(index) => {
                        let to = added.remove(index);
                        out.push(Difference::ColumnRenamed {
                            table: new.name.clone(),
                            from: column.name.clone(),
                            to: to.name,
                        });
                    }
                    None => out.push(Difference::ColumnDropped {
                        table: new.name.clone(),
                        column: column.name.clone(),
                    }),
                }
            }
        }
    }
    let lower =
        |names: &[String]| -> Vec<String> { names.iter().map(|n| n.to_lowercase()).collect() };
    if lower(&old.primary_key) != lower(&new.primary_key) {
        out.push(Difference::PrimaryKeyChanged {
            table: new.name.clone(),
            from: old.primary_key.clone(),
            to: new.primary_key.clone(),
        });
    }
    for key in &old.foreign_keys {
        // A key whose columns were renamed or dropped is reported with them.
        if key
            .columns
            .iter()
            .any(|column| !new_names.contains(&column.to_lowercase()))
        {
            continue;
        }
        let kept = new.foreign_keys.iter().any(|candidate| {
            lower(&candidate.columns) == lower(&key.columns)
                && candidate
                    .references_table
                    .eq_ignore_ascii_case(&key.references_table)
        });
        if !kept {
            out.push(Difference::ForeignKeyDropped {
                table: new.name.clone(),
                columns: key.columns.clone(),
                references: key.references_table.clone(),
            });
        }
    }
}

/// The live schema behind `gate` against the snapshot at `path`, with the gate's notes.
pub fn check(gate: &Gate, saved: &Snapshot) -> Vec<Difference> {
    let live = snapshot(gate);
    let policy = gate.policy();
    compare(saved, &live, gate.notes(), |table, column| {
        policy.is_restricted(table, column)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(name: &str, data_type: &str) -> ColumnSchema {
        ColumnSchema {
            name: name.to_string(),
            data_type: data_type.to_string(),
            nullable: true,
        }
    }

    fn table(name: &str, columns: Vec<ColumnSchema>) -> SnapshotTable {
        SnapshotTable {
            name: name.to_string(),
            primary_key: vec![columns[0].name.clone()],
            columns,
            unique: Vec::new(),
            foreign_keys: Vec::new(),
        }
    }

    fn snap(tables: Vec<SnapshotTable>) -> Snapshot {
        Snapshot {
            version: SNAPSHOT_VERSION,
            database: "t".to_string(),
            dialect: "postgres".to_string(),
            taken_at: String::new(),
            tables,
        }
    }

    #[test]
    fn widening_is_not_drift_and_narrowing_or_rescaling_is() {
        assert!(!type_change_is_drift(
            "character varying(20)",
            "character varying(40)"
        ));
        assert!(!type_change_is_drift("varchar(20)", "text"));
        assert!(type_change_is_drift(
            "character varying(40)",
            "character varying(20)"
        ));
        assert!(type_change_is_drift("numeric(12,2)", "numeric(12,0)"));
        assert!(!type_change_is_drift("numeric(12,2)", "numeric(14,2)"));
        assert!(type_change_is_drift("numeric(12,2)", "numeric(10,2)"));
        assert!(!type_change_is_drift("integer", "bigint"));
        // MySQL's display widths, in a snapshot taken with them or without.
        assert!(!type_change_is_drift("int(10) unsigned", "int unsigned"));
        assert!(!type_change_is_drift("tinyint(4)", "tinyint"));
        assert!(!type_change_is_drift("mediumint(9)", "mediumint"));
        assert!(type_change_is_drift("tinyint(1)", "tinyint"));
        assert!(type_change_is_drift("integer", "text"));
        assert!(!type_change_is_drift("INTEGER", "integer"));
        assert!(!type_change_is_drift(
            "timestamp(3) without time zone",
            "timestamp(3) without time zone"
        ));
    }

    #[test]
    fn renamed_dropped_and_noted_columns_are_reported() {
        let saved = snap(vec![
            table(
                "bills",
                vec![
                    column("id", "integer"),
                    column("total", "numeric(12,2)"),
                    column("note", "text"),
                ],
            ),
            table("legacy", vec![column("id", "integer")]),
        ]);
        let live = snap(vec![table(
            "bills",
            vec![column("id", "integer"), column("amount", "numeric(12,2)")],
        )]);
        let mut notes = SchemaNotes::default();
        let mut note = crate::schema::TableNote::default();
        note.columns
            .insert("status".to_string(), "the state".to_string());
        note.columns
            .insert("secret".to_string(), "restricted".to_string());
        notes.tables.insert("bills".to_string(), note);
        let found = compare(&saved, &live, &notes, |_, column| column == "secret");
        let text: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            vec![
                "table legacy was dropped",
                "column bills.note was dropped",
                "column bills.total was renamed to amount",
                "the notes describe column bills.status, which no longer exists",
            ],
            "{found:?}"
        );
        assert!(compare(&saved, &saved, &SchemaNotes::default(), |_, _| false).is_empty());
    }
}
