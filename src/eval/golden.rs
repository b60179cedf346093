//! Golden sets: our own evaluation questions, one JSON object per line in
//! `evals/golden/<name>.jsonl`, built into the binary ([`builtin`]). Two sets exist:
//!
//! - `demo`: 40 questions over the embedded demo database, ten per category, the hard ones
//!   aimed at its deliberate mess (archive years, walk-in NULLs, status capitals,
//!   multiplied payments, negative adjustments, the owner's NULL manager, the dead legacy
//!   table) and ten that must be refused or clarified;
//! - `chinook`: questions over the Chinook sample database in the shared data folder
//!   ([`chinook_sqlite_path`]).
//!
//! Each answerable item carries gold SQL per dialect ([`GoldSql`]) because the two
//! backends spell dates, years and (for Chinook) every identifier differently; the gold
//! results are the same on both. `gold_tables` names the tables the gold query reads as
//! the SQLite database spells them (Chinook: `InvoiceLine`; its PostgreSQL copy says
//! `invoice_line`). Compare them case-insensitively: the guard reports lower case.
//!
//! This module owns the record, the loader and its consistency rules. It neither runs
//! questions nor scores answers.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::gate::SqlDialect;

/// Name of the demo database's golden set.
pub const DEMO_SET: &str = "demo";
/// Name of the Chinook golden set.
pub const CHINOOK_SET: &str = "chinook";

/// What kind of question an item is; metrics are reported per category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Counts, sums and averages over one table.
    Simple,
    /// Several tables joined, conventions followed.
    Join,
    /// Traps: the demo's deliberate mess, or window functions, set differences,
    /// subqueries and date handling.
    Hard,
    /// No honest answer exists in the database: writes, absent or restricted data,
    /// undefined words.
    Unanswerable,
}

impl Category {
    pub const ALL: [Category; 4] = [
        Category::Simple,
        Category::Join,
        Category::Hard,
        Category::Unanswerable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Simple => "simple",
            Category::Join => "join",
            Category::Hard => "hard",
            Category::Unanswerable => "unanswerable",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a correct response to the question is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// Rows matching the gold query's result.
    Answer,
    /// A refusal: a write request, data the database does not hold, or restricted data.
    /// Rows are wrong however plausible they look.
    Decline,
    /// A clarifying question: a word in the question has no definition here.
    Clarify,
    /// Either a refusal or a clarifying question is right; rows are not.
    RefuseOrClarify,
}

impl Expect {
    pub fn as_str(self) -> &'static str {
        match self {
            Expect::Answer => "answer",
            Expect::Decline => "decline",
            Expect::Clarify => "clarify",
            Expect::RefuseOrClarify => "refuse_or_clarify",
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The gold query in each dialect. Both keys are always present, identical text included,
/// so a reader never has to guess which dialect a lone query was written for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldSql {
    pub sqlite: String,
    pub postgres: String,
    /// The MySQL text, for a gold query whose PostgreSQL text MySQL reads otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mysql: Option<String>,
}

impl GoldSql {
    pub fn for_dialect(&self, dialect: SqlDialect) -> &str {
        match dialect {
            SqlDialect::Sqlite => &self.sqlite,
            SqlDialect::Postgres => &self.postgres,
            SqlDialect::Mysql => self.mysql.as_deref().unwrap_or(&self.postgres),
        }
    }
}

/// One golden question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldenItem {
    /// Stable identifier, `<set>-NNN`; unique within its set.
    pub id: String,
    pub question: String,
    pub category: Category,
    pub expect: Expect,
    /// Present exactly when `expect` is [`Expect::Answer`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gold_sql: Option<GoldSql>,
    /// Tables the gold query reads (SQLite spelling); empty when there is no gold query.
    #[serde(default)]
    pub gold_tables: Vec<String>,
    /// The question asks for an order, so a comparison must respect row order.
    #[serde(default)]
    pub ordered: bool,
    /// What trap the question tests, or why the gold is what it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl GoldenItem {
    pub fn is_answerable(&self) -> bool {
        self.expect == Expect::Answer
    }

    /// Why the item contradicts itself, if it does. A gold query on a question that must
    /// be declined, or an answerable one without gold, would score nonsense silently.
    fn inconsistency(&self) -> Option<&'static str> {
        if self.id.trim().is_empty() {
            return Some("the id is empty");
        }
        if self.question.trim().is_empty() {
            return Some("the question is empty");
        }
        let unanswerable = self.category == Category::Unanswerable;
        match (&self.gold_sql, self.is_answerable()) {
            (None, true) => Some("`expect` is answer but there is no gold_sql"),
            (Some(_), false) => Some("only an answerable item may have gold_sql"),
            (Some(gold), true) => {
                if unanswerable {
                    Some("category unanswerable needs an `expect` other than answer")
                } else if gold.sqlite.trim().is_empty() || gold.postgres.trim().is_empty() {
                    Some("gold_sql needs non-empty sqlite and postgres queries")
                } else if self.gold_tables.is_empty() {
                    Some("an answerable item needs gold_tables")
                } else {
                    None
                }
            }
            (None, false) => {
                if !unanswerable {
                    Some("an item that is not answered must have category unanswerable")
                } else if !self.gold_tables.is_empty() {
                    Some("an unanswerable item has no gold_tables")
                } else {
                    None
                }
            }
        }
    }
}

/// Why a golden set could not be loaded. Every variant names the file, and the line
/// when one line is at fault.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("cannot read the golden set {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}, line {line}: not a golden item: {source}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("{}, line {line}: id {id:?} already used on line {first_line}", path.display())]
    DuplicateId {
        path: PathBuf,
        line: usize,
        id: String,
        first_line: usize,
    },
    #[error("{}, line {line} ({id}): {problem}", path.display())]
    Inconsistent {
        path: PathBuf,
        line: usize,
        id: String,
        problem: &'static str,
    },
}

/// The golden sets built into the binary (`evals/golden/<name>.jsonl` when it was
/// built), so an installed askdb can evaluate without the source tree.
const BUILTIN_SETS: [(&str, &str); 2] = [
    ("demo", include_str!("../../evals/golden/demo.jsonl")),
    ("chinook", include_str!("../../evals/golden/chinook.jsonl")),
];

/// A built-in golden set (`demo` or `chinook`), parsed and checked.
pub fn builtin(name: &str) -> Result<Vec<GoldenItem>, GoldenError> {
    let origin = Path::new("evals")
        .join("golden")
        .join(format!("{name}.jsonl"));
    match BUILTIN_SETS.iter().find(|(set, _)| *set == name) {
        Some((_, text)) => parse_golden(text, &origin),
        None => Err(GoldenError::Read {
            path: origin,
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such built-in set"),
        }),
    }
}

/// The Chinook SQLite file the `chinook` set is asked against, inside the shared data
/// folder ([`crate::home::shared_data_dir`]).
pub fn chinook_sqlite_path(data_dir: &Path) -> PathBuf {
    data_dir.join("chinook").join("Chinook_Sqlite.sqlite")
}

/// Loads a golden set: one item per non-blank line, ids unique, each item consistent
/// (gold SQL and tables exactly when the answer is rows).
pub fn load_golden(path: impl AsRef<Path>) -> Result<Vec<GoldenItem>, GoldenError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| GoldenError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_golden(&text, path)
}

/// Parses and checks a golden set's JSONL text; `path` names it in errors.
pub fn parse_golden(text: &str, path: &Path) -> Result<Vec<GoldenItem>, GoldenError> {
    let mut items = Vec::new();
    // id -> the line it first appeared on, for the duplicate message.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let item: GoldenItem = serde_json::from_str(raw).map_err(|source| GoldenError::Parse {
            path: path.to_path_buf(),
            line,
            source,
        })?;
        if let Some(&first_line) = seen.get(&item.id) {
            return Err(GoldenError::DuplicateId {
                path: path.to_path_buf(),
                line,
                id: item.id,
                first_line,
            });
        }
        if let Some(problem) = item.inconsistency() {
            return Err(GoldenError::Inconsistent {
                path: path.to_path_buf(),
                line,
                id: item.id,
                problem,
            });
        }
        seen.insert(item.id.clone(), line);
        items.push(item);
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet, HashSet};
    use std::io::Write;

    use super::*;
    use crate::gate::guard::{self, GuardPolicy};
    use crate::gate::{Gate, GateOptions, QueryOutcome};

    /// Above every gold result size, so the forced LIMIT never cuts a result.
    const ROW_CAP: u64 = 100_000;

    fn load(name: &str) -> Vec<GoldenItem> {
        builtin(name).unwrap_or_else(|error| panic!("{error}"))
    }

    fn per_category(items: &[GoldenItem]) -> BTreeMap<Category, usize> {
        let mut counts = BTreeMap::new();
        for item in items {
            *counts.entry(item.category).or_insert(0) += 1;
        }
        counts
    }

    /// The Chinook file; a missing shared data folder fails with the message of
    /// `shared_data_dir()` (how to fetch it) rather than skipping silently.
    fn chinook_path() -> PathBuf {
        let dir = crate::home::shared_data_dir().unwrap_or_else(|message| panic!("{message}"));
        chinook_sqlite_path(&dir)
    }

    /// Chinook's PostgreSQL script names everything in snake_case: `InvoiceLine` becomes
    /// `invoice_line`, `AlbumId` becomes `album_id`.
    fn snake_case(name: &str) -> String {
        let mut out = String::new();
        let mut previous_lower = false;
        for c in name.chars() {
            if c.is_ascii_uppercase() && previous_lower {
                out.push('_');
            }
            previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            out.push(c.to_ascii_lowercase());
        }
        out
    }

    fn lower_set<'a>(names: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
        names.into_iter().map(|name| name.to_lowercase()).collect()
    }

    /// The items whose sqlite gold query fails to pass the guard, reads a table outside
    /// its gold tables, or returns no row holding a value: an all-NULL row (SUM over
    /// nothing) is the very "answer" a wrong table gives, so it must not pass for gold.
    /// One message per problem, so a run reports them all at once.
    async fn check_sqlite_golds(gate: &Gate, items: &[GoldenItem]) -> Vec<String> {
        let listed = lower_set(gate.list_tables().iter().map(|table| &table.name));
        let mut failures = Vec::new();
        for item in items {
            let Some(gold) = &item.gold_sql else { continue };
            let gold_tables = lower_set(&item.gold_tables);
            let unknown: Vec<_> = gold_tables.difference(&listed).collect();
            if !unknown.is_empty() {
                failures.push(format!(
                    "{}: gold_tables not in the database: {unknown:?}",
                    item.id
                ));
            }
            let sql = gold.for_dialect(SqlDialect::Sqlite);
            match gate.check(sql) {
                Ok(checked) => {
                    let read = lower_set(checked.tables());
                    let missing: Vec<_> = read.difference(&gold_tables).collect();
                    if !missing.is_empty() {
                        failures.push(format!(
                            "{}: reads {missing:?}, not in gold_tables",
                            item.id
                        ));
                    }
                }
                Err(refusal) => failures.push(format!("{}: guard refused: {refusal}", item.id)),
            }
            match gate.run_query(sql).await {
                QueryOutcome::Rows(result) => {
                    let has_value = result
                        .rows
                        .iter()
                        .any(|row| row.iter().any(|value| !value.is_null()));
                    if !has_value {
                        failures.push(format!("{}: empty result", item.id));
                    }
                    if result.truncated {
                        failures.push(format!("{}: result cut by the row cap", item.id));
                    }
                }
                QueryOutcome::Failed(error) => failures.push(format!("{}: {error}", item.id)),
            }
        }
        failures
    }

    /// The items whose postgres gold query the guard refuses under `policy`, or that
    /// reads a table outside its gold tables (renamed by `rename`). Needs no server: it
    /// is the guard alone, so a PostgreSQL-only construct the guard refuses shows up here.
    fn check_postgres_golds(
        policy: GuardPolicy,
        items: &[GoldenItem],
        rename: impl Fn(&str) -> String,
    ) -> Vec<String> {
        let policy = std::sync::Arc::new(policy);
        let mut failures = Vec::new();
        for item in items {
            let Some(gold) = &item.gold_sql else { continue };
            let expected: BTreeSet<String> =
                item.gold_tables.iter().map(|table| rename(table)).collect();
            match guard::check(gold.for_dialect(SqlDialect::Postgres), &policy) {
                Ok(checked) => {
                    let read = lower_set(checked.tables());
                    if !read.is_subset(&expected) {
                        failures.push(format!("{}: reads {read:?}, gold {expected:?}", item.id));
                    }
                }
                Err(refusal) => failures.push(format!("{}: guard refused: {refusal}", item.id)),
            }
        }
        failures
    }

    #[test]
    fn demo_set_has_forty_items_ten_per_category() {
        let items = load(DEMO_SET);
        assert_eq!(items.len(), 40);
        for category in Category::ALL {
            assert_eq!(per_category(&items).get(&category), Some(&10), "{category}");
        }
    }

    #[test]
    fn chinook_set_has_at_least_sixty_items() {
        let items = load(CHINOOK_SET);
        assert!(items.len() >= 60, "{} items", items.len());
        let counts = per_category(&items);
        for category in Category::ALL {
            assert!(counts.contains_key(&category), "no {category} question");
        }
        assert!(counts[&Category::Unanswerable] >= 5);
    }

    #[test]
    fn ids_are_unique_across_sets_and_name_their_set() {
        let mut seen = HashSet::new();
        for set in [DEMO_SET, CHINOOK_SET] {
            for item in load(set) {
                assert!(item.id.starts_with(&format!("{set}-")), "{}", item.id);
                assert!(seen.insert(item.id.clone()), "duplicate id {}", item.id);
            }
        }
    }

    #[test]
    fn gold_exactly_on_answerable_items() {
        for set in [DEMO_SET, CHINOOK_SET] {
            for item in load(set) {
                if item.category == Category::Unanswerable {
                    assert!(!item.is_answerable(), "{}", item.id);
                    assert!(item.gold_sql.is_none(), "{}", item.id);
                    assert!(item.gold_tables.is_empty(), "{}", item.id);
                } else {
                    assert!(item.is_answerable(), "{}", item.id);
                    assert!(item.gold_sql.is_some(), "{}", item.id);
                    assert!(!item.gold_tables.is_empty(), "{}", item.id);
                }
            }
        }
    }

    /// The restricted columns are refused by the guard anyway; this keeps a gold query
    /// from even naming one, so no gold can depend on a policy being lax.
    #[test]
    fn demo_gold_never_names_a_restricted_column() {
        for item in load(DEMO_SET) {
            let Some(gold) = &item.gold_sql else { continue };
            for dialect in [SqlDialect::Sqlite, SqlDialect::Postgres] {
                let sql = gold.for_dialect(dialect).to_lowercase();
                for column in crate::demo::RESTRICTED_COLUMNS {
                    let name = column.split('.').nth(1).expect("table.column");
                    assert!(!sql.contains(name), "{} names {column}", item.id);
                }
            }
        }
    }

    #[tokio::test]
    async fn demo_gold_queries_pass_the_guard_and_return_rows() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("demo.sqlite");
        crate::demo::write_sqlite(&path).expect("demo database written");
        let options = GateOptions {
            row_cap: ROW_CAP,
            ..Default::default()
        };
        let gate = crate::database::open_gate(&crate::database::DatabaseUrl::Sqlite(path), options)
            .await
            .expect("demo opens");
        let items = load(DEMO_SET);
        let mut failures = check_sqlite_golds(&gate, &items).await;
        // Same table and column names in both dialects: only the grammar changes.
        let mut policy = gate.policy().clone();
        policy.dialect = SqlDialect::Postgres;
        failures.extend(check_postgres_golds(policy, &items, |table| {
            table.to_lowercase()
        }));
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[tokio::test]
    async fn chinook_gold_queries_pass_the_guard_and_return_rows() {
        let options = GateOptions {
            row_cap: ROW_CAP,
            ..Default::default()
        };
        let gate = crate::database::open_gate(
            &crate::database::DatabaseUrl::Sqlite(chinook_path()),
            options,
        )
        .await
        .expect("Chinook opens");
        let items = load(CHINOOK_SET);
        let mut failures = check_sqlite_golds(&gate, &items).await;
        let mut policy = GuardPolicy::new(SqlDialect::Postgres);
        policy.row_cap = ROW_CAP;
        for table in gate.schema() {
            let columns = table.columns.iter().map(|column| snake_case(&column.name));
            policy.allow_table(&snake_case(&table.name), columns);
        }
        failures.extend(check_postgres_golds(policy, &items, snake_case));
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn snake_case_matches_the_chinook_postgres_names() {
        assert_eq!(snake_case("InvoiceLine"), "invoice_line");
        assert_eq!(snake_case("SupportRepId"), "support_rep_id");
        assert_eq!(snake_case("Track"), "track");
    }

    #[test]
    fn for_dialect_picks_the_dialect() {
        let gold = GoldSql {
            sqlite: "SELECT strftime('%Y', d) FROM t".to_string(),
            postgres: "SELECT to_char(d, 'YYYY') FROM t".to_string(),
            mysql: None,
        };
        assert_eq!(gold.for_dialect(SqlDialect::Sqlite), gold.sqlite);
        assert_eq!(gold.for_dialect(SqlDialect::Postgres), gold.postgres);
        assert_eq!(gold.for_dialect(SqlDialect::Mysql), gold.postgres);
        let mysql = GoldSql {
            mysql: Some("SELECT YEAR(d) FROM t".to_string()),
            ..gold
        };
        assert_eq!(
            mysql.for_dialect(SqlDialect::Mysql),
            "SELECT YEAR(d) FROM t"
        );
    }

    #[test]
    fn expect_uses_snake_case_names() {
        let expect: Expect = serde_json::from_str("\"refuse_or_clarify\"").expect("parses");
        assert_eq!(expect, Expect::RefuseOrClarify);
        assert_eq!(
            serde_json::to_string(&Expect::Decline).expect("serialises"),
            "\"decline\""
        );
    }

    fn write_set(lines: &[&str]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        for line in lines {
            writeln!(file, "{line}").expect("written");
        }
        file
    }

    const GOOD: &str = r#"{"id": "t-001", "question": "How many?", "category": "simple", "expect": "answer", "gold_sql": {"sqlite": "SELECT 1", "postgres": "SELECT 1"}, "gold_tables": ["t"], "ordered": false}"#;
    const REFUSE: &str = r#"{"id": "t-002", "question": "Drop it.", "category": "unanswerable", "expect": "decline", "gold_tables": []}"#;

    #[test]
    fn loader_skips_blank_lines() {
        let file = write_set(&[GOOD, "", REFUSE]);
        let items = load_golden(file.path()).expect("loads");
        assert_eq!(items.len(), 2);
        assert_eq!(items[1].expect, Expect::Decline);
        assert_eq!(items[1].note, None);
    }

    #[test]
    fn loader_errors_name_the_file_and_line() {
        let file = write_set(&[
            GOOD,
            r#"{"id": "t-002", "question": "x", "category": "tricky"}"#,
        ]);
        let message = load_golden(file.path())
            .expect_err("bad category")
            .to_string();
        assert!(
            message.contains(&file.path().display().to_string()),
            "{message}"
        );
        assert!(message.contains("line 2"), "{message}");

        let file = write_set(&[GOOD, GOOD]);
        let message = load_golden(file.path()).expect_err("duplicate").to_string();
        assert!(
            message.contains("line 2") && message.contains("line 1") && message.contains("t-001"),
            "{message}"
        );

        let message = builtin("no-such-set").expect_err("missing").to_string();
        assert!(message.contains("no-such-set.jsonl"), "{message}");
        let missing = std::env::temp_dir().join("askdb-no-such-set.jsonl");
        let message = load_golden(&missing).expect_err("missing").to_string();
        assert!(message.contains("askdb-no-such-set.jsonl"), "{message}");
    }

    #[test]
    fn loader_refuses_inconsistent_items() {
        let no_gold = GOOD.replace(
            r#""gold_sql": {"sqlite": "SELECT 1", "postgres": "SELECT 1"}, "#,
            "",
        );
        let gold_on_refusal = REFUSE.replace(
            r#""gold_tables": []"#,
            r#""gold_sql": {"sqlite": "SELECT 1", "postgres": "SELECT 1"}"#,
        );
        let no_tables = GOOD.replace(r#"["t"]"#, "[]");
        let answered_unanswerable = GOOD.replace("simple", "unanswerable");
        for bad in [no_gold, gold_on_refusal, no_tables, answered_unanswerable] {
            let file = write_set(&[&bad]);
            let error = load_golden(file.path()).expect_err(&bad);
            assert!(
                matches!(error, GoldenError::Inconsistent { line: 1, .. }),
                "{error}"
            );
        }
    }
}
