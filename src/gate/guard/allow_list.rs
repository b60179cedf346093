//! The guard's allow-list of functions and cast types, per dialect: reviewed data in
//! `config/guard_allow_list.toml`, embedded in the binary and read once. A function or a
//! custom type name that is not listed (nor added by the database's notes) is refused.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde::Deserialize;

use super::SqlDialect;

/// The reviewed list, as committed.
pub(crate) const ALLOW_LIST_TOML: &str = include_str!("../../../config/guard_allow_list.toml");

/// One dialect's section: category -> names.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct DialectSection {
    #[serde(default)]
    pub functions: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub types: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct AllowListFile {
    #[serde(default)]
    pub postgres: DialectSection,
    #[serde(default)]
    pub sqlite: DialectSection,
    #[serde(default)]
    pub mysql: DialectSection,
}

/// The names of one dialect, flattened and lower-cased.
#[derive(Debug, Default)]
struct Names {
    functions: BTreeSet<String>,
    types: BTreeSet<String>,
}

struct AllowList {
    postgres: Names,
    sqlite: Names,
    mysql: Names,
}

fn flatten(section: &DialectSection) -> Names {
    let fold = |lists: &BTreeMap<String, Vec<String>>| {
        lists
            .values()
            .flatten()
            .map(|name| name.to_lowercase())
            .collect()
    };
    Names {
        functions: fold(&section.functions),
        types: fold(&section.types),
    }
}

/// Parses the committed file. A file that does not parse allows nothing (every function
/// is refused), which a test turns into a failure before it could ship.
pub(crate) fn parse(text: &str) -> Result<AllowListFile, toml::de::Error> {
    toml::from_str(text)
}

fn list() -> &'static AllowList {
    static LIST: OnceLock<AllowList> = OnceLock::new();
    LIST.get_or_init(|| {
        let file = parse(ALLOW_LIST_TOML).unwrap_or_default();
        AllowList {
            postgres: flatten(&file.postgres),
            sqlite: flatten(&file.sqlite),
            mysql: flatten(&file.mysql),
        }
    })
}

fn names(dialect: SqlDialect) -> &'static Names {
    match dialect {
        SqlDialect::Postgres => &list().postgres,
        SqlDialect::Sqlite => &list().sqlite,
        SqlDialect::Mysql => &list().mysql,
    }
}

/// Whether the reviewed list allows this function (lower-cased last name part).
pub(crate) fn function_allowed(dialect: SqlDialect, name: &str) -> bool {
    names(dialect).functions.contains(name)
}

/// Whether the reviewed list allows a cast to this custom type name (lower-cased).
pub(crate) fn type_allowed(dialect: SqlDialect, name: &str) -> bool {
    names(dialect).types.contains(name)
}
