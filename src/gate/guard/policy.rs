//! What the guard allows: the policy of one database (visible tables and their columns,
//! restricted columns, hidden tables, the row cap, the functions its notes add) and the
//! names never allowed whatever a policy says (denied functions, catalogs).

use super::*;

/// What the guard allows: the visible tables with their columns, the restricted
/// columns, the hidden tables and the row cap. All names are lower-cased on insertion.
#[derive(Debug, Clone)]
pub struct GuardPolicy {
    pub dialect: SqlDialect,
    pub row_cap: u64,
    /// Which policy this is: a [`CheckedQuery`] carries the id of the policy that
    /// checked it, so a query checked for one database cannot run on another.
    pub(super) id: u64,
    pub(super) tables: BTreeMap<String, BTreeSet<String>>,
    /// Each visible table's columns as the schema declares them (spelling and order),
    /// for words shown to people and the model; every check compares the folded names.
    pub(super) declared: BTreeMap<String, Vec<String>>,
    pub(super) restricted: BTreeMap<String, BTreeSet<String>>,
    pub(super) hidden: BTreeSet<String>,
    /// Functions this database's notes add to the reviewed allow-list.
    pub(super) extra_functions: BTreeSet<String>,
}

impl GuardPolicy {
    pub fn new(dialect: SqlDialect) -> Self {
        static NEXT_POLICY_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        GuardPolicy {
            dialect,
            row_cap: DEFAULT_ROW_CAP,
            id: NEXT_POLICY_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            tables: BTreeMap::new(),
            declared: BTreeMap::new(),
            restricted: BTreeMap::new(),
            hidden: BTreeSet::new(),
            extra_functions: BTreeSet::new(),
        }
    }

    /// A copy under a new id, for a gate that narrows this one (a user's policy): what
    /// this policy checked does not pass as checked by the copy.
    pub fn narrowed_copy(&self) -> GuardPolicy {
        GuardPolicy {
            id: GuardPolicy::new(self.dialect).id,
            ..self.clone()
        }
    }

    /// Allows one more function for this database (from its notes). The hard deny list
    /// still wins: a denied function cannot be allowed.
    pub fn allow_function(&mut self, name: &str) {
        self.extra_functions.insert(fold(name));
    }

    /// Whether a function (lower-cased last name part) may be called.
    pub fn is_function_allowed(&self, name: &str) -> bool {
        !is_denied_function(name)
            && (allow_list::function_allowed(self.dialect, name)
                || self.extra_functions.contains(name))
    }

    /// The columns of a visible table (lower-cased), restricted ones included.
    pub fn columns_of(&self, table: &str) -> Option<&BTreeSet<String>> {
        self.tables.get(&fold(table))
    }

    /// Allows a table with these columns (unless it is also declared hidden).
    pub fn allow_table<I, S>(&mut self, table: &str, columns: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let declared: Vec<String> = columns
            .into_iter()
            .map(|column| column.as_ref().to_string())
            .collect();
        self.tables.insert(
            fold(table),
            declared.iter().map(|column| fold(column)).collect(),
        );
        self.declared.insert(fold(table), declared);
    }

    /// The columns of a visible table as the schema declares them (spelling and order),
    /// restricted ones included.
    pub fn declared_columns(&self, table: &str) -> Option<&[String]> {
        self.declared.get(&fold(table)).map(Vec::as_slice)
    }

    /// Marks `table.column` as restricted: never readable through the guard.
    pub fn restrict_column(&mut self, table: &str, column: &str) {
        self.restricted
            .entry(fold(table))
            .or_default()
            .insert(fold(column));
    }

    /// Hides a table: refused as unknown, and a refusal that is never repaired.
    pub fn hide_table(&mut self, table: &str) {
        self.hidden.insert(fold(table));
    }

    pub fn is_visible(&self, table: &str) -> bool {
        let table = fold(table);
        self.tables.contains_key(&table) && !self.hidden.contains(&table)
    }

    pub fn is_hidden(&self, table: &str) -> bool {
        self.hidden.contains(&fold(table))
    }

    pub fn is_restricted(&self, table: &str, column: &str) -> bool {
        self.restricted
            .get(&fold(table))
            .is_some_and(|columns| columns.contains(&fold(column)))
    }

    /// The identity a [`CheckedQuery`] records.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The restricted columns of one table (lower-cased).
    pub fn restricted_columns(&self, table: &str) -> Option<&BTreeSet<String>> {
        self.restricted.get(&fold(table))
    }
}

/// Functions that read files, sleep, signal other sessions, change settings or
/// sequences, take advisory locks, reach other servers or load code.
pub(super) const DENIED_FUNCTIONS: &[&str] = &[
    // PostgreSQL
    "set_config",
    "nextval",
    "setval",
    "currval",
    "lastval",
    "txid_current",
    "query_to_xml",
    "query_to_xmlschema",
    "query_to_xml_and_xmlschema",
    "gin_clean_pending_list",
    "binary_upgrade_set_next_pg_type_oid",
    "make_interval_from_file",
    // SQLite
    "load_extension",
    "readfile",
    "writefile",
    "fts3_tokenizer",
    "edit",
    "fsdir",
    "zipfile",
    "sqlar_compress",
    "sqlar_uncompress",
    // MySQL and MariaDB: files, time, locks, replication waits, user-defined escapes,
    // and the XML functions whose errors carry their argument out (error-based reads).
    "load_file",
    "sleep",
    "benchmark",
    "get_lock",
    "release_lock",
    "release_all_locks",
    "is_free_lock",
    "is_used_lock",
    "master_pos_wait",
    "master_gtid_wait",
    "source_pos_wait",
    "wait_for_executed_gtid_set",
    "sys_exec",
    "sys_eval",
    "name_const",
    "extractvalue",
    "updatexml",
];

/// Name prefixes that are denied as a family: PostgreSQL administration functions
/// (`pg_*`: sleep, files, signals, advisory locks, WAL, notifications), large objects,
/// dblink, the XML dumpers of whole tables and schemas, and index maintenance.
pub(super) const DENIED_PREFIXES: &[&str] = &[
    "pg_",
    "lo_",
    "dblink",
    "table_to_xml",
    "cursor_to_xml",
    "schema_to_xml",
    "database_to_xml",
    "brin_",
    "binary_upgrade_",
];

/// `pg_*` functions that only describe a value and are safe to call.
/// (`pg_typeof` is not: comparing its result with a string casts the string to a type
/// name, and the error for a missing one tells which names exist.)
pub(super) const ALLOWED_PG_FUNCTIONS: &[&str] = &["pg_size_pretty"];

pub(super) fn is_denied_function(name: &str) -> bool {
    if ALLOWED_PG_FUNCTIONS.contains(&name) {
        return false;
    }
    DENIED_FUNCTIONS.contains(&name)
        || DENIED_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

pub(super) const CATALOG_SCHEMAS: &[&str] = &["pg_catalog", "information_schema", "pg_toast"];

/// MySQL's and MariaDB's system databases: grants, users, server state and their views.
pub(super) const MYSQL_CATALOG_SCHEMAS: &[&str] = &["mysql", "performance_schema", "sys"];

/// Whether a schema name is a system catalog of the dialect.
pub(super) fn is_catalog_schema(name: &str, dialect: SqlDialect) -> bool {
    CATALOG_SCHEMAS.contains(&name)
        || dialect == SqlDialect::Mysql && MYSQL_CATALOG_SCHEMAS.contains(&name)
}
pub(super) const CATALOG_PREFIXES: &[&str] = &["pg_", "sqlite_", "pragma_"];

pub(super) fn is_catalog_name(name: &str) -> bool {
    CATALOG_PREFIXES
        .iter()
        .any(|prefix| name.starts_with(prefix))
}
