//! External benchmarks: loads the Spider questions (as cleaned up by SpiderMan) and the
//! defog sql-eval questions from the shared data folder (`../shared/data`, see its
//! README.md and [`crate::home::shared_data_dir`]), locates their databases, and turns
//! their gold SQL into concrete queries.
//!
//! defog writes its gold SQL in a small template language: `;` separates alternative
//! gold queries, `{a, b}` in a SELECT list accepts any non-empty subset of the listed
//! items, and a later `{}` (always `GROUP BY {}` in the data) repeats the chosen items.
//! [`expand_gold`] and [`concrete_golds`] turn that into plain SQL that a database can run.
//!
//! This module owns the [`ExternalQuery`] record, the loaders, the database paths and the
//! gold expansion. It neither runs queries nor compares results.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `ExternalQuery::set` of the Spider questions (loaded from SpiderMan's files).
pub const SET_SPIDER: &str = "spider";
/// `ExternalQuery::set` of the defog sql-eval questions.
pub const SET_DEFOG: &str = "defog";

/// The defog question files that carry gold SQL, in load order. `idk.csv` is left out on
/// purpose: its questions have no answer in the database and need another kind of check.
pub const DEFOG_FILES: [&str; 3] = ["questions_gen", "instruct_basic", "instruct_advanced"];

/// One benchmark question with its gold SQL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalQuery {
    /// [`SET_SPIDER`] or [`SET_DEFOG`].
    pub set: String,
    /// Stable identifier built from the row position in the source file:
    /// `spider-0042` (0-based row of spiderman/test_queries.csv) or
    /// `defog-questions_gen-017` (0-based row of that defog file). The PostgreSQL and
    /// SQLite defog files list the same questions in the same order, so an id names the
    /// same question in both dialects.
    pub id: String,
    /// Database the question is asked against (see the `*_path` functions).
    pub db_name: String,
    pub question: String,
    /// defog's `query_category` (e.g. `group_by`, `order_by`); `None` for Spider.
    pub category: Option<String>,
    /// defog's per-question `instructions` when not empty. The `full_instructions`
    /// column of instruct_advanced is not kept: it adds definitions meant for other
    /// questions.
    pub instructions: Option<String>,
    /// Alternative gold queries, raw text (defog templates still contain `{...}`; see
    /// [`concrete_golds`]). Never empty.
    pub gold: Vec<String>,
}

/// Which of defog's question files to read: the gold SQL differs per dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExternalDialect {
    Postgres,
    Sqlite,
}

impl ExternalDialect {
    /// The suffix defog uses in its file names (`questions_gen_postgres.csv`).
    pub fn as_str(self) -> &'static str {
        match self {
            ExternalDialect::Postgres => "postgres",
            ExternalDialect::Sqlite => "sqlite",
        }
    }
}

/// Why a benchmark file could not be loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ExternalError {
    #[error("cannot open {}: {error} (run scripts/fetch-data.sh to download the external data)", path.display())]
    Open { path: PathBuf, error: csv::Error },
    #[error("cannot read {}: {error}", path.display())]
    Read { path: PathBuf, error: csv::Error },
    #[error("{} has no `{column}` column (header: {header})", path.display())]
    MissingColumn {
        path: PathBuf,
        column: &'static str,
        header: String,
    },
    #[error("{}, line {line}: `{column}` is empty", path.display())]
    EmptyField {
        path: PathBuf,
        line: u64,
        column: &'static str,
    },
    #[error("{}, line {line}: the gold SQL holds no query once split on `;`", path.display())]
    NoGold { path: PathBuf, line: u64 },
}

// ---------------------------------------------------------------------------------------
// Loaders and paths
// ---------------------------------------------------------------------------------------

/// Loads spiderman/test_queries.csv (columns `database,question,sql`): Spider's 1,034 dev
/// questions, each with one gold query written with MySQL-style backquotes (which SQLite
/// accepts).
pub fn load_spiderman(data_dir: &Path) -> Result<Vec<ExternalQuery>, ExternalError> {
    let table = CsvTable::read(&data_dir.join("spiderman").join("test_queries.csv"))?;
    let db_col = table.column("database")?;
    let question_col = table.column("question")?;
    let sql_col = table.column("sql")?;
    table
        .records
        .iter()
        .enumerate()
        .map(|(index, record)| {
            Ok(ExternalQuery {
                set: SET_SPIDER.to_string(),
                id: format!("{SET_SPIDER}-{index:04}"),
                db_name: table.required(record, db_col, "database")?,
                question: table.required(record, question_col, "question")?,
                category: None,
                instructions: None,
                gold: vec![table.required(record, sql_col, "sql")?],
            })
        })
        .collect()
}

/// The SQLite file of a SpiderMan database: `spiderman/sqlite/<db>.sqlite`.
pub fn spiderman_db_path(data_dir: &Path, db_name: &str) -> PathBuf {
    data_dir
        .join("spiderman")
        .join("sqlite")
        .join(format!("{db_name}.sqlite"))
}

/// The database a Spider database's copy has on a MySQL or MariaDB server
/// (`askdb eval copy-spider`): `spider_<db>`.
pub fn spider_mysql_database(db_name: &str) -> String {
    format!("spider_{db_name}")
}

/// Loads the defog question files of one dialect, [`DEFOG_FILES`] in order. Their
/// columns differ from file to file (and between dialects), so they are found by name:
/// `question`, `query`, `db_name` are required; `query_category` and `instructions` are
/// read when present.
pub fn load_defog(
    data_dir: &Path,
    dialect: ExternalDialect,
) -> Result<Vec<ExternalQuery>, ExternalError> {
    let mut queries = Vec::new();
    for file in DEFOG_FILES {
        let path = defog_questions_path(data_dir, file, dialect);
        let table = CsvTable::read(&path)?;
        let question_col = table.column("question")?;
        let query_col = table.column("query")?;
        let db_col = table.column("db_name")?;
        let category_col = table.optional_column("query_category");
        let instructions_col = table.optional_column("instructions");
        for (index, record) in table.records.iter().enumerate() {
            let raw_gold = table.required(record, query_col, "query")?;
            let gold = split_alternatives(&raw_gold);
            if gold.is_empty() {
                return Err(ExternalError::NoGold {
                    path: path.clone(),
                    line: line_of(record),
                });
            }
            queries.push(ExternalQuery {
                set: SET_DEFOG.to_string(),
                id: format!("{SET_DEFOG}-{file}-{index:03}"),
                db_name: table.required(record, db_col, "db_name")?,
                question: table.required(record, question_col, "question")?,
                category: optional_field(record, category_col),
                instructions: optional_field(record, instructions_col),
                gold,
            });
        }
    }
    Ok(queries)
}

/// A defog question file: `defog/questions/<file>_<dialect>.csv`.
pub fn defog_questions_path(data_dir: &Path, file: &str, dialect: ExternalDialect) -> PathBuf {
    data_dir
        .join("defog")
        .join("questions")
        .join(format!("{file}_{}.csv", dialect.as_str()))
}

/// The SQLite file of a defog database (built locally): `defog/sqlite/<db>.db`.
pub fn defog_sqlite_path(data_dir: &Path, db_name: &str) -> PathBuf {
    data_dir
        .join("defog")
        .join("sqlite")
        .join(format!("{db_name}.db"))
}

/// The PostgreSQL dump of a defog database (schema and data): `defog/postgres/<db>.sql`.
pub fn defog_postgres_dump(data_dir: &Path, db_name: &str) -> PathBuf {
    data_dir
        .join("defog")
        .join("postgres")
        .join(format!("{db_name}.sql"))
}

/// A whole CSV file read up front: the files are small (at most a few hundred KB) and a
/// loader wants all rows anyway.
struct CsvTable {
    path: PathBuf,
    headers: csv::StringRecord,
    records: Vec<csv::StringRecord>,
}

impl CsvTable {
    fn read(path: &Path) -> Result<Self, ExternalError> {
        let mut reader = csv::Reader::from_path(path).map_err(|error| ExternalError::Open {
            path: path.to_path_buf(),
            error,
        })?;
        let read_error = |error| ExternalError::Read {
            path: path.to_path_buf(),
            error,
        };
        let headers = reader.headers().map_err(read_error)?.clone();
        let records = reader
            .records()
            .collect::<Result<Vec<_>, _>>()
            .map_err(read_error)?;
        Ok(CsvTable {
            path: path.to_path_buf(),
            headers,
            records,
        })
    }

    fn optional_column(&self, name: &str) -> Option<usize> {
        // A byte-order mark would otherwise hide the first column's name.
        self.headers
            .iter()
            .position(|header| header.trim_start_matches('\u{feff}').trim() == name)
    }

    fn column(&self, name: &'static str) -> Result<usize, ExternalError> {
        self.optional_column(name)
            .ok_or_else(|| ExternalError::MissingColumn {
                path: self.path.clone(),
                column: name,
                header: self.headers.iter().collect::<Vec<_>>().join(","),
            })
    }

    /// The trimmed field, which must not be empty.
    fn required(
        &self,
        record: &csv::StringRecord,
        index: usize,
        column: &'static str,
    ) -> Result<String, ExternalError> {
        optional_field(record, Some(index)).ok_or_else(|| ExternalError::EmptyField {
            path: self.path.clone(),
            line: line_of(record),
            column,
        })
    }
}

/// The trimmed field, `None` when the column is absent or the field blank.
fn optional_field(record: &csv::StringRecord, index: Option<usize>) -> Option<String> {
    let value = record.get(index?)?.trim();
    (!value.is_empty()).then(|| value.to_string())
}

/// The line a record starts on, for error messages (records may span several lines).
fn line_of(record: &csv::StringRecord) -> u64 {
    record.position().map_or(0, |position| position.line())
}

// ---------------------------------------------------------------------------------------
// Gold SQL: alternatives and column-subset templates
// ---------------------------------------------------------------------------------------

/// Every concrete gold query of a question: each `;`-separated alternative expanded with
/// [`expand_gold`], in order, exact duplicates dropped (defog repeats some alternatives
/// verbatim and there is no point running them twice).
pub fn concrete_golds(q: &ExternalQuery) -> Vec<String> {
    let mut seen = HashSet::new();
    q.gold
        .iter()
        .flat_map(|gold| expand_gold(gold))
        .filter(|sql| seen.insert(sql.clone()))
        .collect()
}

/// Splits a gold field into its alternatives at every `;` outside string literals,
/// quoted identifiers and comments. Alternatives are trimmed; empty ones (a trailing `;`,
/// or only a comment) are dropped.
pub fn split_alternatives(sql: &str) -> Vec<String> {
    let bytes = sql.as_bytes();
    let mask = code_mask(sql);
    let mut alternatives = Vec::new();
    let mut start = 0;
    for end in (0..=bytes.len()).filter(|&i| i == bytes.len() || (bytes[i] == b';' && mask[i])) {
        let has_code = (start..end).any(|i| mask[i] && !bytes[i].is_ascii_whitespace());
        if has_code {
            alternatives.push(sql[start..end].trim().to_string());
        }
        start = end + 1;
    }
    alternatives
}

/// Expands defog's column-subset syntax into every concrete query.
///
/// `{a, b, c}` (outside string literals, quoted identifiers and comments) stands for any
/// non-empty subset of its items, kept in their written order; a later `{}` stands for the
/// items chosen in the closest `{...}` before it, without their `AS alias` (it appears as
/// `GROUP BY {}`, possibly followed by more keys: `GROUP BY {}, m.category`). Items are
/// split at top-level commas only, so `{t.name, COALESCE(t.x, 0) AS x}` has two items.
///
/// Variants come full set first, then by decreasing size, each size in lexicographic
/// order of item positions: `{a,b,c}` gives `a, b, c` / `a, b` / `a, c` / `b, c` / `a` /
/// `b` / `c`. Several groups combine as a cartesian product (the last group varies
/// fastest). Chosen items are joined with `", "`; the text around them is kept verbatim.
/// A query without a group comes back unchanged, and so does a `{}` with no group before
/// it. Nested braces are not supported (they do not occur in the benchmarks).
pub fn expand_gold(sql: &str) -> Vec<String> {
    let (pieces, groups) = parse_template(sql);
    if groups.is_empty() {
        return vec![sql.to_string()];
    }
    // Per group, its subsets; `choice[g]` indexes the subset used in the current variant.
    let options: Vec<Vec<Vec<usize>>> = groups.iter().map(|items| subsets(items.len())).collect();
    let mut choice = vec![0usize; groups.len()];
    let mut variants = Vec::new();
    loop {
        let chosen = |g: usize| {
            let items = &groups[g];
            options[g][choice[g]].iter().map(move |&i| items[i])
        };
        let mut sql_variant = String::with_capacity(sql.len());
        for piece in &pieces {
            match *piece {
                Piece::Text(text) => sql_variant.push_str(text),
                Piece::Group(g) => sql_variant.push_str(&chosen(g).collect::<Vec<_>>().join(", ")),
                Piece::Chosen(g) => {
                    sql_variant.push_str(&chosen(g).map(strip_alias).collect::<Vec<_>>().join(", "))
                }
            }
        }
        variants.push(sql_variant);

        // Odometer over the groups' subset indices, last group fastest.
        let mut g = groups.len();
        loop {
            if g == 0 {
                return variants;
            }
            g -= 1;
            choice[g] += 1;
            if choice[g] < options[g].len() {
                break;
            }
            choice[g] = 0;
        }
    }
}

/// A gold template: verbatim text, a `{items}` group, or a `{}` repeating a group.
enum Piece<'a> {
    Text(&'a str),
    Group(usize),
    Chosen(usize),
}

/// Cuts `sql` into pieces and returns them with the items of each group.
fn parse_template(sql: &str) -> (Vec<Piece<'_>>, Vec<Vec<&str>>) {
    let bytes = sql.as_bytes();
    let mask = code_mask(sql);
    let mut pieces = Vec::new();
    let mut groups: Vec<Vec<&str>> = Vec::new();
    let mut text_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'{' || !mask[i] {
            i += 1;
            continue;
        }
        let Some(close) = (i + 1..bytes.len()).find(|&j| bytes[j] == b'}' && mask[j]) else {
            break; // an unclosed brace is no template: keep the rest verbatim
        };
        let items = split_top_level(sql, &mask, i + 1, close);
        let piece = if !items.is_empty() {
            groups.push(items);
            Some(Piece::Group(groups.len() - 1))
        } else {
            groups.len().checked_sub(1).map(Piece::Chosen)
        };
        if let Some(piece) = piece {
            pieces.push(Piece::Text(&sql[text_start..i]));
            pieces.push(piece);
            text_start = close + 1;
        }
        i = close + 1;
    }
    pieces.push(Piece::Text(&sql[text_start..]));
    (pieces, groups)
}

/// The trimmed, non-empty items of `sql[start..end]`, split at commas that are code and
/// not inside parentheses or brackets.
fn split_top_level<'a>(sql: &'a str, mask: &[bool], start: usize, end: usize) -> Vec<&'a str> {
    let bytes = sql.as_bytes();
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut item_start = start;
    for i in start..=end {
        if i < end && !mask[i] {
            continue;
        }
        match if i == end { b',' } else { bytes[i] } {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 0 || i == end => {
                let item = sql[item_start..i].trim();
                if !item.is_empty() {
                    items.push(item);
                }
                item_start = i + 1;
            }
            _ => {}
        }
    }
    items
}

/// All non-empty subsets of `0..n` as sorted index lists: full set first, then by
/// decreasing size, lexicographic within a size.
fn subsets(n: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for k in (1..=n).rev() {
        let mut combination: Vec<usize> = (0..k).collect();
        loop {
            out.push(combination.clone());
            // Rightmost position that can still move right.
            let Some(p) = (0..k).rev().find(|&p| combination[p] < n - k + p) else {
                break;
            };
            combination[p] += 1;
            for q in p + 1..k {
                combination[q] = combination[q - 1] + 1;
            }
        }
    }
    out
}

/// `item` without a trailing top-level `AS alias`: a GROUP BY key cannot carry an alias.
fn strip_alias(item: &str) -> &str {
    let bytes = item.as_bytes();
    let mask = code_mask(item);
    let mut depth = 0usize;
    let mut last_as = None;
    for i in 0..bytes.len() {
        if !mask[i] {
            continue;
        }
        match bytes[i] {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b'a' | b'A'
                if depth == 0
                    && matches!(bytes.get(i + 1), Some(b's' | b'S'))
                    && i > 0
                    && bytes[i - 1].is_ascii_whitespace()
                    && bytes.get(i + 2).is_some_and(|b| b.is_ascii_whitespace()) =>
            {
                last_as = Some(i);
            }
            _ => {}
        }
    }
    match last_as {
        // Only an alias if a single identifier (plain or quoted) follows.
        Some(i) if is_single_identifier(item[i + 2..].trim()) => item[..i].trim_end(),
        _ => item,
    }
}

fn is_single_identifier(text: &str) -> bool {
    let quoted = text.len() >= 2
        && matches!(
            (text.as_bytes()[0], text.as_bytes()[text.len() - 1]),
            (b'"', b'"') | (b'`', b'`')
        );
    quoted || (!text.is_empty() && text.bytes().all(is_identifier_byte))
}

fn is_identifier_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// For each byte of `sql`, whether it is SQL code (true) or part of something whose
/// content is not syntax: a string literal (`'...'` with `''` escapes, PostgreSQL
/// `E'...'` with backslash escapes, `$tag$...$tag$`), a quoted identifier (`"..."`,
/// `` `...` ``) or a comment (`-- ...`, `/* ... */`). Delimiters count as not code. An
/// unterminated literal or comment runs to the end. Working on bytes is safe: every
/// delimiter is ASCII and UTF-8 never uses ASCII bytes inside a multi-byte character.
fn code_mask(sql: &str) -> Vec<bool> {
    let bytes = sql.as_bytes();
    let mut mask = vec![true; bytes.len()];
    let mut i = 0;
    while i < bytes.len() {
        let end = match bytes[i] {
            b'\'' => Some(quoted_end(bytes, i, b'\'', is_escape_string(bytes, i))),
            b'"' => Some(quoted_end(bytes, i, b'"', false)),
            b'`' => Some(quoted_end(bytes, i, b'`', false)),
            b'-' if bytes.get(i + 1) == Some(&b'-') => Some(
                (i + 2..bytes.len())
                    .find(|&j| bytes[j] == b'\n')
                    .unwrap_or(bytes.len()),
            ),
            b'/' if bytes.get(i + 1) == Some(&b'*') => Some(
                (i + 2..bytes.len().saturating_sub(1))
                    .find(|&j| bytes[j] == b'*' && bytes[j + 1] == b'/')
                    .map_or(bytes.len(), |j| j + 2),
            ),
            b'$' => dollar_quote_end(bytes, i),
            _ => None,
        };
        match end {
            Some(end) => {
                mask[i..end].iter_mut().for_each(|m| *m = false);
                i = end;
            }
            None => i += 1,
        }
    }
    mask
}

/// End (exclusive) of the quoted run opened at `start`; a doubled quote is an escaped
/// quote, and so is a backslash-escaped one when `backslash_escapes`.
fn quoted_end(bytes: &[u8], start: usize, quote: u8, backslash_escapes: bool) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        if backslash_escapes && bytes[i] == b'\\' {
            i += 2;
        } else if bytes[i] == quote {
            if bytes.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return i + 1;
            }
        } else {
            i += 1;
        }
    }
    bytes.len()
}

/// Whether the `'` at `quote` opens a PostgreSQL escape string (`E'...'`): preceded by a
/// lone `E` that is not the end of a longer identifier.
fn is_escape_string(bytes: &[u8], quote: usize) -> bool {
    quote >= 1
        && matches!(bytes[quote - 1], b'e' | b'E')
        && (quote < 2 || !is_identifier_byte(bytes[quote - 2]))
}

/// End (exclusive) of a PostgreSQL dollar-quoted string opened at `start`, or `None` when
/// the `$` opens none (a parameter like `$1`, or part of an identifier).
fn dollar_quote_end(bytes: &[u8], start: usize) -> Option<usize> {
    if start > 0 && is_identifier_byte(bytes[start - 1]) {
        return None;
    }
    let tag_len = bytes[start + 1..]
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'_')
        .count();
    let tag_end = start + 1 + tag_len;
    if bytes.get(tag_end) != Some(&b'$') || bytes.get(start + 1).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let delimiter = &bytes[start..=tag_end];
    let body = tag_end + 1;
    Some(
        bytes[body..]
            .windows(delimiter.len())
            .position(|window| window == delimiter)
            .map_or(bytes.len(), |p| body + p + delimiter.len()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared data folder; a missing folder fails the test with the message of
    /// `shared_data_dir()` (how to fetch it) rather than skipping silently.
    fn data_dir() -> PathBuf {
        crate::home::shared_data_dir().unwrap_or_else(|message| panic!("{message}"))
    }

    /// Whether `sql` still has a `{` or `}` outside literals, identifiers and comments.
    fn has_code_brace(sql: &str) -> bool {
        let mask = code_mask(sql);
        sql.bytes()
            .zip(mask)
            .any(|(b, code)| code && (b == b'{' || b == b'}'))
    }

    #[test]
    fn query_without_braces_returns_itself() {
        let sql = "SELECT a, b FROM t WHERE c = 1;";
        assert_eq!(expand_gold(sql), vec![sql.to_string()]);
    }

    #[test]
    fn two_items_give_three_variants_full_set_first() {
        assert_eq!(
            expand_gold("SELECT {author.name,author.aid} FROM author"),
            vec![
                "SELECT author.name, author.aid FROM author",
                "SELECT author.name FROM author",
                "SELECT author.aid FROM author",
            ]
        );
    }

    #[test]
    fn three_items_give_seven_variants_by_decreasing_size() {
        let variants = expand_gold("SELECT DISTINCT {c.name, c.id, c.number} FROM c");
        let lists: Vec<&str> = variants
            .iter()
            .map(|v| {
                v.trim_start_matches("SELECT DISTINCT ")
                    .trim_end_matches(" FROM c")
            })
            .collect();
        assert_eq!(
            lists,
            vec![
                "c.name, c.id, c.number",
                "c.name, c.id",
                "c.name, c.number",
                "c.id, c.number",
                "c.name",
                "c.id",
                "c.number",
            ]
        );
    }

    #[test]
    fn group_by_braces_take_the_chosen_items() {
        let variants = expand_gold(
            "SELECT {a.aid, a.name}, COUNT(c.cited) AS total FROM author a JOIN cite c \
             ON a.aid = c.aid GROUP BY {} ORDER BY total DESC",
        );
        assert_eq!(
            variants,
            vec![
                "SELECT a.aid, a.name, COUNT(c.cited) AS total FROM author a JOIN cite c \
                 ON a.aid = c.aid GROUP BY a.aid, a.name ORDER BY total DESC",
                "SELECT a.aid, COUNT(c.cited) AS total FROM author a JOIN cite c \
                 ON a.aid = c.aid GROUP BY a.aid ORDER BY total DESC",
                "SELECT a.name, COUNT(c.cited) AS total FROM author a JOIN cite c \
                 ON a.aid = c.aid GROUP BY a.name ORDER BY total DESC",
            ]
        );
    }

    #[test]
    fn group_by_braces_followed_by_more_keys_in_a_cte() {
        let variants = expand_gold(
            "WITH r AS (SELECT {m.mid, m.name}, m.category AS cat, SUM(w.amount) AS rev \
             FROM m JOIN w ON m.mid = w.rid GROUP BY {}, m.category) SELECT * FROM r",
        );
        assert_eq!(variants.len(), 3);
        assert_eq!(
            variants[2],
            "WITH r AS (SELECT m.name, m.category AS cat, SUM(w.amount) AS rev \
             FROM m JOIN w ON m.mid = w.rid GROUP BY m.name, m.category) SELECT * FROM r"
        );
    }

    #[test]
    fn items_split_at_top_level_commas_only() {
        let variants = expand_gold(
            "SELECT {t.name, COALESCE(t.x, 0) AS x, CAST(t.y AS TEXT)}, COUNT(*) FROM t \
             GROUP BY {}",
        );
        assert_eq!(variants.len(), 7);
        assert_eq!(
            variants[0],
            "SELECT t.name, COALESCE(t.x, 0) AS x, CAST(t.y AS TEXT), COUNT(*) FROM t \
             GROUP BY t.name, COALESCE(t.x, 0), CAST(t.y AS TEXT)"
        );
        assert_eq!(
            variants[5],
            "SELECT COALESCE(t.x, 0) AS x, COUNT(*) FROM t GROUP BY COALESCE(t.x, 0)"
        );
    }

    #[test]
    fn alias_after_the_group_stays_on_the_last_item() {
        // As written in defog's advising questions.
        assert_eq!(
            expand_gold("SELECT DISTINCT {c.name, c.id} AS course_name FROM c"),
            vec![
                "SELECT DISTINCT c.name, c.id AS course_name FROM c",
                "SELECT DISTINCT c.name AS course_name FROM c",
                "SELECT DISTINCT c.id AS course_name FROM c",
            ]
        );
    }

    #[test]
    fn braces_in_literals_identifiers_and_comments_are_left_alone() {
        let sql = "SELECT '{a,b}', \"{c}\", `{d}` FROM t -- {e, f}\n\
                   WHERE j = '{}' /* {} */ AND k = E'\\'{x}' AND l = $$ {y} $$";
        assert_eq!(expand_gold(sql), vec![sql.to_string()]);

        let variants = expand_gold("SELECT {a, b} FROM t WHERE j = '{}' GROUP BY {}");
        assert_eq!(
            variants,
            vec![
                "SELECT a, b FROM t WHERE j = '{}' GROUP BY a, b",
                "SELECT a FROM t WHERE j = '{}' GROUP BY a",
                "SELECT b FROM t WHERE j = '{}' GROUP BY b",
            ]
        );
        // A comma inside a literal within an item does not split it.
        assert_eq!(
            expand_gold("SELECT {CONCAT(a, ', ', b), c} FROM t").len(),
            3
        );
        assert_eq!(
            expand_gold("SELECT {COALESCE(a, '),('), c} FROM t")[1],
            "SELECT COALESCE(a, '),(') FROM t"
        );
    }

    #[test]
    fn lone_or_unclosed_braces_stay_verbatim() {
        let lone = "SELECT a FROM t GROUP BY {}";
        assert_eq!(expand_gold(lone), vec![lone.to_string()]);
        let unclosed = "SELECT {a, b FROM t";
        assert_eq!(expand_gold(unclosed), vec![unclosed.to_string()]);
    }

    #[test]
    fn several_groups_combine_as_a_product() {
        let variants = expand_gold("SELECT {a, b} FROM t UNION SELECT {c, d} FROM u");
        assert_eq!(variants.len(), 9);
        assert_eq!(variants[0], "SELECT a, b FROM t UNION SELECT c, d FROM u");
        assert_eq!(variants[1], "SELECT a, b FROM t UNION SELECT c FROM u");
        assert_eq!(variants[8], "SELECT b FROM t UNION SELECT d FROM u");
    }

    #[test]
    fn semicolons_split_alternatives_outside_literals_only() {
        assert_eq!(
            split_alternatives(
                "SELECT 'a;b' FROM t;SELECT \"x;y\" FROM u WHERE v = E'\\';';;  ; \n"
            ),
            vec![
                "SELECT 'a;b' FROM t",
                "SELECT \"x;y\" FROM u WHERE v = E'\\';'"
            ]
        );
        assert_eq!(
            split_alternatives("SELECT 'it''s; fine' FROM t -- one; two\n;SELECT $$;$$; -- end;"),
            vec!["SELECT 'it''s; fine' FROM t -- one; two", "SELECT $$;$$"]
        );
        assert_eq!(
            split_alternatives("SELECT 1 /* ; */"),
            vec!["SELECT 1 /* ; */"]
        );
        assert!(split_alternatives(" ; ;").is_empty());
    }

    #[test]
    fn dollar_signs_that_open_no_string_are_code() {
        let sql = "SELECT a$b FROM t WHERE x = $1;SELECT 2";
        assert_eq!(
            split_alternatives(sql),
            vec!["SELECT a$b FROM t WHERE x = $1", "SELECT 2"]
        );
    }

    #[test]
    fn concrete_golds_expand_every_alternative_and_drop_duplicates() {
        let q = ExternalQuery {
            set: SET_DEFOG.to_string(),
            id: "defog-test-000".to_string(),
            db_name: "academic".to_string(),
            question: "q".to_string(),
            category: None,
            instructions: None,
            gold: split_alternatives(
                "SELECT {a, b} FROM t GROUP BY {};SELECT a FROM t GROUP BY a;SELECT c FROM t;",
            ),
        };
        assert_eq!(
            concrete_golds(&q),
            vec![
                "SELECT a, b FROM t GROUP BY a, b",
                "SELECT a FROM t GROUP BY a",
                "SELECT b FROM t GROUP BY b",
                "SELECT c FROM t",
            ]
        );
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = load_spiderman(Path::new("/nonexistent/askdb-data")).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("/nonexistent/askdb-data/spiderman/test_queries.csv"),
            "{message}"
        );
        assert!(message.contains("fetch-data.sh"), "{message}");
    }

    #[test]
    fn spiderman_loads_all_questions_with_their_databases() {
        let dir = data_dir();
        let queries = load_spiderman(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(queries.len(), 1_034);
        assert_eq!(queries[0].id, "spider-0000");
        assert_eq!(queries[42].id, "spider-0042");
        let ids: HashSet<&str> = queries.iter().map(|q| q.id.as_str()).collect();
        assert_eq!(ids.len(), queries.len());
        let dbs: HashSet<&str> = queries.iter().map(|q| q.db_name.as_str()).collect();
        assert_eq!(dbs.len(), 20);
        for db in dbs {
            let path = spiderman_db_path(&dir, db);
            assert!(path.is_file(), "missing {}", path.display());
        }
        for q in &queries {
            assert_eq!(q.set, SET_SPIDER);
            assert_eq!(q.gold.len(), 1, "{}", q.id);
            assert_eq!(concrete_golds(q), q.gold, "{}", q.id);
        }
    }

    #[test]
    fn defog_loads_the_expected_counts_per_file_and_dialect() {
        let dir = data_dir();
        let expected = [
            ("questions_gen", 210),
            ("instruct_basic", 40),
            ("instruct_advanced", 64),
        ];
        let mut by_dialect = Vec::new();
        for dialect in [ExternalDialect::Postgres, ExternalDialect::Sqlite] {
            let queries = load_defog(&dir, dialect).unwrap_or_else(|e| panic!("{e}"));
            for (file, count) in expected {
                let prefix = format!("defog-{file}-");
                let n = queries.iter().filter(|q| q.id.starts_with(&prefix)).count();
                assert_eq!(n, count, "{file} ({})", dialect.as_str());
            }
            assert_eq!(queries.len(), 314);
            let ids: HashSet<&str> = queries.iter().map(|q| q.id.as_str()).collect();
            assert_eq!(ids.len(), queries.len());
            for q in &queries {
                assert_eq!(q.set, SET_DEFOG);
                assert!(q.category.is_some(), "{}", q.id);
                assert!(!q.gold.is_empty(), "{}", q.id);
                assert!(defog_sqlite_path(&dir, &q.db_name).is_file(), "{}", q.id);
                assert!(defog_postgres_dump(&dir, &q.db_name).is_file(), "{}", q.id);
                if q.id.starts_with("defog-instruct_basic-") {
                    assert_eq!(q.instructions, None, "{}", q.id);
                }
                if q.id.starts_with("defog-instruct_advanced-") {
                    assert!(q.instructions.is_some(), "{}", q.id);
                }
            }
            by_dialect.push(queries);
        }
        // Same ids and databases in both dialects: an id names one question.
        for (pg, lite) in by_dialect[0].iter().zip(&by_dialect[1]) {
            assert_eq!(pg.id, lite.id);
            assert_eq!(pg.db_name, lite.db_name, "{}", pg.id);
        }
    }

    #[test]
    fn every_concrete_gold_is_free_of_template_braces() {
        let dir = data_dir();
        let mut all = load_spiderman(&dir).unwrap_or_else(|e| panic!("{e}"));
        for dialect in [ExternalDialect::Postgres, ExternalDialect::Sqlite] {
            all.extend(load_defog(&dir, dialect).unwrap_or_else(|e| panic!("{e}")));
        }
        for q in &all {
            let golds = concrete_golds(q);
            assert!(!golds.is_empty(), "{}", q.id);
            for sql in golds {
                assert!(!has_code_brace(&sql), "{}: {sql}", q.id);
                assert!(!sql.trim().is_empty(), "{}", q.id);
            }
        }
    }

    #[test]
    fn defog_template_counts_match_the_data() {
        // Measured on the pinned files: only the PostgreSQL golds use the subset syntax
        // (the SQLite files spell every variant out), one group per query, 2 or 3 items.
        let dir = data_dir();
        let pg = load_defog(&dir, ExternalDialect::Postgres).unwrap_or_else(|e| panic!("{e}"));
        let templated = pg
            .iter()
            .filter(|q| q.gold.iter().any(|g| has_code_brace(g)))
            .count();
        assert_eq!(templated, 42);
        let golds: usize = pg.iter().map(|q| q.gold.len()).sum();
        let concrete: usize = pg.iter().map(|q| concrete_golds(q).len()).sum();
        // 3 of the 487 raw variants repeat an identical alternative and are dropped.
        assert_eq!((golds, concrete), (361, 484));

        let lite = load_defog(&dir, ExternalDialect::Sqlite).unwrap_or_else(|e| panic!("{e}"));
        assert!(lite
            .iter()
            .all(|q| q.gold.iter().all(|g| !has_code_brace(g))));
        let golds: usize = lite.iter().map(|q| q.gold.len()).sum();
        let concrete: usize = lite.iter().map(|q| concrete_golds(q).len()).sum();
        assert_eq!((golds, concrete), (467, 467));
    }

    #[test]
    fn every_postgres_concrete_gold_parses() {
        // A parse failure would reveal a bad split or expansion (a cut string literal, a
        // dangling comma, an alias left in GROUP BY).
        let dir = data_dir();
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        for q in load_defog(&dir, ExternalDialect::Postgres).unwrap_or_else(|e| panic!("{e}")) {
            for sql in concrete_golds(&q) {
                if let Err(e) = sqlparser::parser::Parser::parse_sql(&dialect, &sql) {
                    panic!("{}: {e}: {sql}", q.id);
                }
            }
        }
    }

    #[test]
    fn every_sqlite_concrete_gold_prepares_against_its_database() {
        // Preparing checks syntax and every table and column name without running the
        // query; the databases are opened read-only.
        let dir = data_dir();
        let mut queries: Vec<(ExternalQuery, PathBuf)> = Vec::new();
        for q in load_defog(&dir, ExternalDialect::Sqlite).unwrap_or_else(|e| panic!("{e}")) {
            let path = defog_sqlite_path(&dir, &q.db_name);
            queries.push((q, path));
        }
        for q in load_spiderman(&dir).unwrap_or_else(|e| panic!("{e}")) {
            let path = spiderman_db_path(&dir, &q.db_name);
            queries.push((q, path));
        }
        let mut prepared = 0;
        for (q, path) in &queries {
            let conn = rusqlite::Connection::open_with_flags(
                path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for sql in concrete_golds(q) {
                if let Err(e) = conn.prepare(&sql) {
                    panic!("{}: {e}: {sql}", q.id);
                }
                prepared += 1;
            }
        }
        assert_eq!(prepared, 467 + 1_034);
    }
}
