//! The guard fuzzer's generator: deterministic (one splitmix64 stream per run) and
//! grammar-aware. Seeds (the hostile and benign corpora, Spider and defog gold) are
//! parsed with the run's dialect; each case starts from a seed (or an earlier accepted
//! case) and applies a few mutations: on the tree (subtrees spliced between seeds of the
//! same database, identifiers swapped for table, column, alias, hidden, restricted,
//! catalog and function names, values swapped for tricky literals, expressions wrapped
//! in casts, calls, subqueries and attribute notation, queries given LIMIT / OFFSET /
//! FETCH / WITH TIES forms, set operations and CTE or derived-table wrappers), on the
//! tokens of the text (tricky raw literals and comments inserted, tokens deleted,
//! swapped or duplicated), on the whole text (wrappers, deep nesting, long chains) and,
//! at a lower rate, on its characters.

#![allow(dead_code)]

use std::ops::ControlFlow;

use askdb::gate::SqlDialect;
use askdb::rng::SplitMix64;
use sqlparser::ast::{
    DollarQuotedString, Expr, Ident, Query, Statement, TableFactor, Value, ValueWithSpan, Visit,
    VisitMut, Visitor, VisitorMut,
};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};

/// One seed statement and the database it belongs to (an index into the run's databases).
#[derive(Debug, Clone)]
pub struct Seed {
    pub id: String,
    pub sql: String,
    pub db: usize,
}

/// The names one database offers the generator.
#[derive(Debug, Clone, Default)]
pub struct Names {
    pub tables: Vec<String>,
    pub columns: Vec<String>,
    /// `table.column` of restricted columns, and hidden tables: the names an attacker wants.
    pub restricted: Vec<(String, String)>,
    pub hidden: Vec<String>,
}

/// One generated statement.
#[derive(Debug, Clone)]
pub struct Case {
    pub sql: String,
    pub db: usize,
    pub seed: String,
    pub ops: Vec<&'static str>,
}

const CATALOGS: &[&str] = &[
    "pg_class",
    "pg_catalog.pg_class",
    "pg_authid",
    "pg_shadow",
    "pg_stat_activity",
    "pg_settings",
    "information_schema.tables",
    "information_schema.columns",
    "pg_roles",
    "sqlite_master",
    "sqlite_schema",
    "sqlite_temp_master",
    "main.sqlite_master",
    "temp.sqlite_master",
    "sqlite_sequence",
    "sqlite_stat1",
    "pg_toast.x",
    "public.pg_class",
];

const DENIED_FUNCTIONS: &[&str] = &[
    "pg_sleep",
    "pg_read_file",
    "current_setting",
    "version",
    "ts_stat",
    "ts_rewrite",
    "query_to_xml",
    "set_config",
    "txid_current",
    "pg_terminate_backend",
    "to_regclass",
    "has_table_privilege",
    "json_populate_record",
    "jsonb_to_record",
    "sqlite_version",
    "sqlite_compileoption_get",
    "load_extension",
    "readfile",
    "randomblob",
    "zeroblob",
    "pg_advisory_lock",
    "lo_import",
    "dblink",
    "nextval",
    "current_user",
    "inet_server_addr",
    "format_type",
    "obj_description",
    "pg_size_pretty",
    "pg_typeof",
    "unlikely",
    "likelihood",
    "sqlite_offset",
    "changes",
    "last_insert_rowid",
    "fts3_tokenizer",
    "edit",
    "fsdir",
];

const ALLOWED_FUNCTIONS: &[&str] = &[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "lower",
    "upper",
    "length",
    "substr",
    "coalesce",
    "round",
    "abs",
    "concat",
    "replace",
    "trim",
    "to_jsonb",
    "row_to_json",
    "json_build_array",
    "string_agg",
    "group_concat",
    "strftime",
    "date",
    "julianday",
    "printf",
    "format",
    "repeat",
    "lpad",
    "rpad",
    "instr",
    "strpos",
    "nullif",
    "ifnull",
    "iif",
    "cast",
    "row_number",
    "rank",
    "lag",
    "json_extract",
    "json_object",
    "array_agg",
    "unnest",
    "generate_series",
    "json_each",
    "json_tree",
    "date_trunc",
    "extract",
    "now",
    "random",
    "hex",
    "quote",
    "typeof",
    "char",
    "unicode",
    "glob",
    "like",
    "regexp_replace",
    "md5",
];

const TYPES: &[&str] = &[
    "regclass",
    "oid",
    "regrole",
    "regproc",
    "regtype",
    "regnamespace",
    "text",
    "integer",
    "int",
    "bigint",
    "numeric",
    "real",
    "float8",
    "boolean",
    "date",
    "timestamp",
    "json",
    "jsonb",
    "int[]",
    "text[]",
    "name",
    "xid",
    "pg_catalog.text",
    "public.customers",
    "customers",
    "askdb_query_log",
    "bills",
    "record",
    "anyelement",
    "\"char\"",
    "bytea",
    "blob",
    "varchar(3)",
    "interval",
    "uuid",
    "inet",
    "money",
    "bit(3)",
    "tsvector",
    "xml",
];

/// Raw text fragments the printer would never write.
const POSTGRES_FRAGMENTS: &[&str] = &[
    "E'x\\''",
    "E'\\\\'",
    "e'\\x41'",
    "E'\\047'",
    "$$a'b$$",
    "$t$ x' $t$",
    "$a$$a$",
    "U&'\\0070hone'",
    "U&\"\\0070hone\"",
    "U&'d!0061t' UESCAPE '!'",
    "B'101'",
    "X'1F'",
    "'x\\''",
    "'x\\'' , phone FROM customers --'",
    "'\\'",
    "''''",
    "'a''b'",
    "\"a\"\"b\"",
    "\"a\\\"",
    "\"a\\\"\"",
    "/* /* nested */ still */",
    "/* unterminated",
    "-- tail\n",
    "::regclass",
    "::oid",
    "::regrole",
    "::text",
    "::customers",
    "::json ->> 'phone'",
    ".to_jsonb",
    ".row_to_json",
    "->> 'phone'",
    "COLLATE \"C\"",
    "OPERATOR(pg_catalog.+)",
    "$1",
    "1e999",
    "1.",
    ".5",
    "0x10",
    "::int[]",
    "ARRAY[1,2]",
    "ROW(1, 'a')",
    "(c).phone",
    "customers.*",
    "c.*",
    "*",
];

const SQLITE_FRAGMENTS: &[&str] = &[
    "0x10",
    "0X10",
    "0xFFFFFFFFFFFFFFFF",
    "0x7fffffffffffffff",
    "X'10'",
    "x'1'",
    "'x\\''",
    "'x\\'' , phone FROM customers --'",
    "'\\'",
    "''''",
    "'a''b'",
    "\"a\"\"b\"",
    "\"a\\\"",
    "`a``b`",
    "`phone`",
    "[phone]",
    "[a]]b]",
    "/* /* nested */ still */",
    "/* unterminated",
    "-- tail\n",
    "#",
    "?1",
    ":name",
    "@x",
    "$x",
    "1e999",
    "1.",
    ".5",
    "N'abc'",
    "'a' || 'b'",
    "COLLATE NOCASE",
    "COLLATE \"binary\"",
    "NOT NULL",
    "ISNULL",
    "NOTNULL",
    "IS NOT DISTINCT FROM",
    "GLOB 'a*'",
    "REGEXP 'a'",
    "MATCH 'a'",
    "->> '$.a'",
    "-> 0",
    "customers.*",
    "*",
    "rowid",
    "oid",
    "_rowid_",
    "main.customers",
    "temp.x",
];

const COMMON_FRAGMENTS: &[&str] = &[
    "'",
    "\"",
    "\\",
    ";",
    "; SELECT 1",
    "(",
    ")",
    ",",
    ".",
    "*/",
    "/*",
    "--",
    "\n",
    "\t",
    "\r",
    "\u{a0}",
    "\u{feff}",
    "\u{0}",
    "é",
    "NULL",
    "TRUE",
    "1",
    "-1",
    "9223372036854775808",
    "phone",
    "PHONE",
    "\"phone\"",
    "\"Phone\"",
    "customers",
    "askdb_query_log",
    "\"askdb_query_log\"",
    "AS phone",
    "AS c",
    "c",
    "WHERE",
    "ORDER BY 1",
    "GROUP BY 1",
    "UNION ALL SELECT 1",
    "LIMIT 1",
    "OFFSET 1",
    "FETCH FIRST 2 ROWS WITH TIES",
    "||",
    "+",
];

const LIMIT_SUFFIXES: &[&str] = &[
    "LIMIT 5",
    "LIMIT 201",
    "LIMIT 100000",
    "LIMIT 0",
    "LIMIT ALL",
    "LIMIT NULL",
    "LIMIT -1",
    "LIMIT 2+3",
    "LIMIT (SELECT 3)",
    "LIMIT 3 OFFSET 2",
    "LIMIT 1000 OFFSET 1",
    "OFFSET 5",
    "OFFSET 2 ROWS",
    "LIMIT 3, 4",
    "LIMIT 3, 400",
    "FETCH FIRST 3 ROWS ONLY",
    "FETCH FIRST ROW ONLY",
    "FETCH NEXT 300 ROWS ONLY",
    "OFFSET 1 ROWS FETCH NEXT 2 ROWS ONLY",
    "FETCH FIRST 3 ROWS WITH TIES",
    "FETCH FIRST 10 PERCENT ROWS ONLY",
    "LIMIT 0x10",
    "LIMIT '5'",
    "LIMIT 5.0",
    "LIMIT 1e2",
    "LIMIT 9223372036854775807",
    "LIMIT 18446744073709551616",
    "LIMIT 200",
    "LIMIT (2)",
    "LIMIT CAST(3 AS INTEGER)",
    "LIMIT 7 OFFSET 1000000",
    "OFFSET 3 LIMIT 4",
];

const EXPR_WRAPS: &[&str] = &[
    "CAST(({e}) AS {type})",
    "({e})::{type}",
    "({e})::oid::regclass",
    "NOT ({e})",
    "-({e})",
    "({e}) IS NULL",
    "({e}) + 1",
    "({e}) || 'x'",
    "COALESCE({e}, NULL)",
    "{f}({e})",
    "{f}({e}, {e2})",
    "(SELECT {e})",
    "(SELECT {e} FROM {table})",
    "EXISTS (SELECT {e} FROM {table})",
    "CASE WHEN {e} THEN {e2} ELSE NULL END",
    "((((({e})))))",
    "({e}) IN (SELECT {col} FROM {table})",
    "{alias}.{f}",
    "{e} BETWEEN 1 AND 2",
    "({e}) ->> 'phone'",
    "{f}({alias})",
    "{f}({alias}.*)",
    "(SELECT {alias}::text FROM {table} {alias} LIMIT 1)",
    "{e} = ANY(SELECT {col} FROM {table})",
    "{f}(DISTINCT {e})",
    "count(*) OVER (PARTITION BY {e} ORDER BY {e2})",
    "({e}, {e2})",
    "{e} COLLATE NOCASE",
    "{e} LIKE 'a%' ESCAPE '\\'",
    "repeat('x', {e})",
    "printf('%.*c', {e}, 'a')",
    "format('%s', {e})",
];

const QUERY_WRAPS: &[&str] = &[
    "SELECT * FROM ({q}\n) AS t",
    "SELECT * FROM ({q}\n) AS askdb_capped LIMIT 200",
    "WITH w AS ({q}\n) SELECT * FROM w",
    "WITH {table} AS ({q}\n) SELECT * FROM {table}",
    "WITH RECURSIVE r AS ({q}\n) SELECT * FROM r",
    "{q}\nUNION ALL {q2}",
    "{q}\nUNION {q2}",
    "{q}\nINTERSECT {q2}",
    "{q}\nEXCEPT {q2}",
    "SELECT ({q}\n) AS v",
    "SELECT count(*) FROM ({q}\n) AS t",
    "({q}\n)",
    "{q};",
    "{q}; {q2}",
    "/* c */ {q} -- tail",
    "SELECT * FROM {table} WHERE EXISTS ({q}\n)",
    "SELECT * FROM ({q}\n) AS t ORDER BY 1 FETCH FIRST 3 ROWS WITH TIES",
    "SELECT * FROM ({q}\n) AS t, LATERAL ({q2}\n) AS u",
    "VALUES (1), (2)",
    "SELECT 1 FROM {table} NATURAL JOIN {table2}",
    "SELECT 1 FROM {table} JOIN {table2} USING ({col})",
    "SELECT {alias}.{col} FROM {table} AS {alias}({col})",
    "TABLE {table}",
];

pub struct Generator<'a> {
    pub dialect: SqlDialect,
    seeds: &'a [Seed],
    names: &'a [Names],
    /// Expressions and queries of the seeds, by database.
    exprs: Vec<Vec<Expr>>,
    queries: Vec<Vec<Query>>,
    /// Accepted cases, mutated again (bounded).
    accepted: Vec<(String, usize)>,
    rng: SplitMix64,
}

struct Collect {
    exprs: Vec<Expr>,
    queries: Vec<Query>,
}

impl Visitor for Collect {
    type Break = ();
    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        if self.exprs.len() < 400 {
            self.exprs.push(expr.clone());
        }
        ControlFlow::Continue(())
    }
    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if self.queries.len() < 50 {
            self.queries.push(query.clone());
        }
        ControlFlow::Continue(())
    }
}

fn parse(sql: &str, dialect: SqlDialect) -> Option<Statement> {
    // Long texts are operator chains and deep nests: mutate those as text only.
    if sql.len() > 20_000 {
        return None;
    }
    let d = dialect.parser_dialect();
    let mut statements = Parser::parse_sql(d.as_ref(), sql).ok()?;
    if statements.len() == 1 {
        statements.pop()
    } else {
        None
    }
}

fn parse_expr(text: &str, dialect: SqlDialect) -> Option<Expr> {
    let d = dialect.parser_dialect();
    Parser::new(d.as_ref())
        .try_with_sql(text)
        .ok()?
        .parse_expr()
        .ok()
}

fn parse_query(text: &str, dialect: SqlDialect) -> Option<Query> {
    let d = dialect.parser_dialect();
    Parser::new(d.as_ref())
        .try_with_sql(text)
        .ok()?
        .parse_query()
        .ok()
        .map(|q| *q)
}

fn parse_table_factor(text: &str, dialect: SqlDialect) -> Option<TableFactor> {
    let d = dialect.parser_dialect();
    Parser::new(d.as_ref())
        .try_with_sql(text)
        .ok()?
        .parse_table_factor()
        .ok()
}

/// Counts nodes of one kind, or acts on the `target`-th.
struct At<'f> {
    target: usize,
    seen: usize,
    expr: Option<&'f mut dyn FnMut(&mut Expr)>,
    ident: Option<&'f mut dyn FnMut(&mut Ident)>,
    value: Option<&'f mut dyn FnMut(&mut ValueWithSpan)>,
    query: Option<&'f mut dyn FnMut(&mut Query)>,
    factor: Option<&'f mut dyn FnMut(&mut TableFactor)>,
}

impl<'f> At<'f> {
    fn new(target: usize) -> Self {
        At {
            target,
            seen: 0,
            expr: None,
            ident: None,
            value: None,
            query: None,
            factor: None,
        }
    }
}

/// Acts on `node` when it is the target (`act` set for its kind); stops the walk then.
fn act_on<T: ?Sized>(
    seen: &mut usize,
    target: usize,
    act: &mut Option<&mut dyn FnMut(&mut T)>,
    node: &mut T,
) -> ControlFlow<()> {
    let Some(f) = act.as_mut() else {
        return ControlFlow::Continue(());
    };
    let hit = *seen == target;
    *seen += 1;
    if hit {
        f(node);
        return ControlFlow::Break(());
    }
    ControlFlow::Continue(())
}

impl VisitorMut for At<'_> {
    type Break = ();
    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        act_on(&mut self.seen, self.target, &mut self.expr, expr)
    }
    fn pre_visit_ident(&mut self, ident: &mut Ident) -> ControlFlow<()> {
        act_on(&mut self.seen, self.target, &mut self.ident, ident)
    }
    fn pre_visit_value(&mut self, value: &mut ValueWithSpan) -> ControlFlow<()> {
        act_on(&mut self.seen, self.target, &mut self.value, value)
    }
    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        act_on(&mut self.seen, self.target, &mut self.query, query)
    }
    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        act_on(&mut self.seen, self.target, &mut self.factor, factor)
    }
}

/// Counts of each node kind, for picking a target uniformly.
fn count(statement: &mut Statement, kind: usize) -> usize {
    let mut nothing_e = |_: &mut Expr| {};
    let mut nothing_i = |_: &mut Ident| {};
    let mut nothing_v = |_: &mut ValueWithSpan| {};
    let mut nothing_q = |_: &mut Query| {};
    let mut nothing_f = |_: &mut TableFactor| {};
    let mut at = At::new(usize::MAX);
    match kind {
        0 => at.expr = Some(&mut nothing_e),
        1 => at.ident = Some(&mut nothing_i),
        2 => at.value = Some(&mut nothing_v),
        3 => at.query = Some(&mut nothing_q),
        _ => at.factor = Some(&mut nothing_f),
    }
    let _ = VisitMut::visit(statement, &mut at);
    at.seen
}

impl<'a> Generator<'a> {
    pub fn new(dialect: SqlDialect, seeds: &'a [Seed], names: &'a [Names], seed: u64) -> Self {
        let mut exprs = vec![Vec::new(); names.len()];
        let mut queries = vec![Vec::new(); names.len()];
        for s in seeds {
            if let Some(statement) = parse(&s.sql, dialect) {
                let mut collect = Collect {
                    exprs: Vec::new(),
                    queries: Vec::new(),
                };
                let _ = statement.visit(&mut collect);
                if let Some(pool) = exprs.get_mut(s.db) {
                    pool.extend(collect.exprs);
                }
                if let Some(pool) = queries.get_mut(s.db) {
                    pool.extend(collect.queries);
                }
            }
        }
        for pool in exprs.iter_mut() {
            pool.truncate(20_000);
        }
        Generator {
            dialect,
            seeds,
            names,
            exprs,
            queries,
            accepted: Vec::new(),
            rng: SplitMix64::new(seed),
        }
    }

    fn pick<'s>(&mut self, list: &'s [&'s str]) -> &'s str {
        list[self.rng.index(list.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.rng.below(100) < percent
    }

    /// Remembers an accepted case for further mutation.
    pub fn remember(&mut self, sql: &str, db: usize) {
        if sql.len() > 4_000 {
            return;
        }
        if self.accepted.len() < 2_000 {
            self.accepted.push((sql.to_string(), db));
        } else {
            let slot = self.rng.index(self.accepted.len());
            self.accepted[slot] = (sql.to_string(), db);
        }
    }

    fn name(&mut self, db: usize) -> String {
        let names = &self.names[db.min(self.names.len() - 1)];
        let roll = self.rng.below(100);
        let pick = |rng: &mut SplitMix64, list: &[String]| -> Option<String> {
            if list.is_empty() {
                None
            } else {
                Some(list[rng.index(list.len())].clone())
            }
        };
        let chosen = if roll < 30 {
            pick(&mut self.rng, &names.columns)
        } else if roll < 50 {
            pick(&mut self.rng, &names.tables)
        } else if roll < 62 {
            let list = names.restricted.clone();
            if list.is_empty() {
                None
            } else {
                let (t, c) = list[self.rng.index(list.len())].clone();
                Some(if self.chance(50) {
                    c
                } else {
                    format!("{t}.{c}")
                })
            }
        } else if roll < 68 {
            pick(&mut self.rng, &names.hidden)
        } else if roll < 76 {
            Some(CATALOGS[self.rng.index(CATALOGS.len())].to_string())
        } else if roll < 86 {
            Some(DENIED_FUNCTIONS[self.rng.index(DENIED_FUNCTIONS.len())].to_string())
        } else {
            Some(ALLOWED_FUNCTIONS[self.rng.index(ALLOWED_FUNCTIONS.len())].to_string())
        };
        chosen.unwrap_or_else(|| "c".to_string())
    }

    fn simple_name(&mut self, db: usize) -> String {
        let name = self.name(db);
        name.rsplit('.').next().unwrap_or("c").to_string()
    }

    fn table(&mut self, db: usize) -> String {
        let names = &self.names[db.min(self.names.len() - 1)];
        if names.tables.is_empty() || self.chance(15) {
            return self.name(db);
        }
        names.tables[self.rng.index(names.tables.len())].clone()
    }

    fn column(&mut self, db: usize) -> String {
        let names = &self.names[db.min(self.names.len() - 1)];
        if names.columns.is_empty() || self.chance(15) {
            return self.simple_name(db);
        }
        names.columns[self.rng.index(names.columns.len())].clone()
    }

    fn donor_expr(&mut self, db: usize) -> Option<Expr> {
        let db = if self.chance(85) {
            db
        } else {
            self.rng.index(self.exprs.len())
        };
        let pool = self.exprs.get(db)?;
        if pool.is_empty() {
            return None;
        }
        Some(pool[self.rng.index(pool.len())].clone())
    }

    fn donor_query(&mut self, db: usize) -> Option<Query> {
        let db = if self.chance(85) {
            db
        } else {
            self.rng.index(self.queries.len())
        };
        let pool = self.queries.get(db)?;
        if pool.is_empty() {
            return None;
        }
        Some(pool[self.rng.index(pool.len())].clone())
    }

    fn donor_text(&mut self, db: usize) -> String {
        self.donor_query(db)
            .map(|q| q.to_string())
            .unwrap_or_else(|| "SELECT 1".to_string())
    }

    fn tricky_value(&mut self) -> Value {
        const STRINGS: &[&str] = &[
            "x\\'",
            "a''b",
            "\\",
            "'",
            "x\\' , phone FROM customers --",
            "\\\\'",
            "$$",
            "\u{0}",
            "é",
            "\n",
            "*/",
            "--",
            "\\'\\'",
            "'; DROP TABLE bills; --",
            "\"",
            "$a$",
            "%",
            "\\x41",
        ];
        let text = STRINGS[self.rng.index(STRINGS.len())].to_string();
        match self.rng.below(12) {
            0..=2 => Value::SingleQuotedString(text),
            3 => Value::EscapedStringLiteral(text),
            4 => Value::DollarQuotedString(DollarQuotedString {
                value: text,
                tag: if self.chance(50) {
                    None
                } else {
                    Some("t".to_string())
                },
            }),
            5 => Value::HexStringLiteral(
                ["10", "1", "", "zz", "FFFFFFFFFFFFFFFF"][self.rng.index(5)].to_string(),
            ),
            6 => Value::NationalStringLiteral(text),
            7 => Value::Number(
                [
                    "0x10",
                    "1e999",
                    "9223372036854775808",
                    ".5",
                    "1.",
                    "-0",
                    "00",
                ][self.rng.index(7)]
                .to_string(),
                false,
            ),
            8 => Value::DoubleQuotedString(text),
            9 => Value::UnicodeStringLiteral(text),
            10 => Value::Null,
            _ => Value::Boolean(self.chance(50)),
        }
    }

    fn tricky_ident(&mut self, db: usize) -> Ident {
        const ODD: &[&str] = &[
            "a\"b",
            "a\\",
            "a\"\"",
            "Phone",
            "PHONE",
            " phone",
            "ph\u{0}one",
            "a`b",
            "a]b",
            "to_jsonb",
        ];
        let value = if self.chance(25) {
            ODD[self.rng.index(ODD.len())].to_string()
        } else {
            self.simple_name(db)
        };
        let quote = match self.rng.below(5) {
            0 | 1 => None,
            2 | 3 => Some('"'),
            _ => Some(if self.dialect == SqlDialect::Sqlite {
                '`'
            } else {
                '"'
            }),
        };
        Ident {
            value,
            quote_style: quote,
            span: sqlparser::tokenizer::Span::empty(),
        }
    }

    fn fill(&mut self, template: &str, db: usize, e: &str) -> String {
        let e2 = self
            .donor_expr(db)
            .map(|e| e.to_string())
            .unwrap_or_else(|| "1".to_string());
        let mut out = template.replace("{e}", e).replace("{e2}", &e2);
        while out.contains("{type}") {
            let t = self.pick(TYPES).to_string();
            out = out.replacen("{type}", &t, 1);
        }
        while out.contains("{f}") {
            let f = if self.chance(50) {
                self.pick(DENIED_FUNCTIONS).to_string()
            } else {
                self.pick(ALLOWED_FUNCTIONS).to_string()
            };
            out = out.replacen("{f}", &f, 1);
        }
        let table = self.table(db);
        let table2 = self.table(db);
        let col = self.column(db);
        let alias = if self.chance(50) {
            "c".to_string()
        } else {
            table.clone()
        };
        out.replace("{table2}", &table2)
            .replace("{table}", &table)
            .replace("{col}", &col)
            .replace("{alias}", &alias)
    }

    /// One mutation on the tree; None when it did not apply.
    fn mutate_tree(&mut self, sql: &str, db: usize) -> Option<(String, &'static str)> {
        let mut statement = parse(sql, self.dialect)?;
        let kind = self.rng.below(9);
        let dialect = self.dialect;
        let op: &'static str;
        match kind {
            0..=2 => {
                let n = count(&mut statement, 0);
                if n == 0 {
                    return None;
                }
                let target = self.rng.index(n);
                let choice = self.rng.below(4);
                let replacement: Option<Expr> = match choice {
                    0 => {
                        op = "tree_splice_expr";
                        self.donor_expr(db)
                    }
                    1 => {
                        op = "tree_wrap_expr";
                        // Wrap the target: render it first, so the template sees it.
                        let mut rendered = String::new();
                        let mut grab = |e: &mut Expr| rendered = e.to_string();
                        let mut at = At::new(target);
                        at.expr = Some(&mut grab);
                        let _ = VisitMut::visit(&mut statement, &mut at);
                        let template = self.pick(EXPR_WRAPS).to_string();
                        let text = self.fill(&template, db, &rendered);
                        parse_expr(&text, dialect)
                    }
                    2 => {
                        op = "tree_name_expr";
                        let text = match self.rng.below(6) {
                            0 => self.column(db),
                            1 => format!("{}.{}", self.table(db), self.column(db)),
                            2 => format!("c.{}", self.simple_name(db)),
                            3 => self.name(db),
                            4 => format!(
                                "{}.to_jsonb",
                                if self.chance(50) {
                                    "c".to_string()
                                } else {
                                    self.table(db)
                                }
                            ),
                            _ => self.table(db),
                        };
                        parse_expr(&text, dialect)
                    }
                    _ => {
                        op = "tree_value_expr";
                        let frag = if dialect == SqlDialect::Postgres {
                            self.pick(POSTGRES_FRAGMENTS)
                        } else {
                            self.pick(SQLITE_FRAGMENTS)
                        };
                        parse_expr(frag, dialect)
                    }
                };
                let replacement = replacement?;
                let mut put = Some(replacement);
                let mut apply = |e: &mut Expr| {
                    if let Some(r) = put.take() {
                        *e = r;
                    }
                };
                let mut at = At::new(target);
                at.expr = Some(&mut apply);
                let _ = VisitMut::visit(&mut statement, &mut at);
            }
            3 => {
                op = "tree_ident";
                let n = count(&mut statement, 1);
                if n == 0 {
                    return None;
                }
                let target = self.rng.index(n);
                let ident = self.tricky_ident(db);
                let mut apply = |i: &mut Ident| *i = ident.clone();
                let mut at = At::new(target);
                at.ident = Some(&mut apply);
                let _ = VisitMut::visit(&mut statement, &mut at);
            }
            4 => {
                op = "tree_value";
                let n = count(&mut statement, 2);
                if n == 0 {
                    return None;
                }
                let target = self.rng.index(n);
                let value = self.tricky_value();
                let mut apply = |v: &mut ValueWithSpan| v.value = value.clone();
                let mut at = At::new(target);
                at.value = Some(&mut apply);
                let _ = VisitMut::visit(&mut statement, &mut at);
            }
            5 | 6 => {
                let n = count(&mut statement, 3);
                if n == 0 {
                    return None;
                }
                let target = self.rng.index(n);
                let choice = self.rng.below(3);
                let replacement: Option<Query> = match choice {
                    0 => {
                        op = "tree_splice_query";
                        self.donor_query(db)
                    }
                    _ => {
                        op = "tree_limit";
                        let mut base = None;
                        let mut grab = |q: &mut Query| base = Some(q.clone());
                        let mut at = At::new(target);
                        at.query = Some(&mut grab);
                        let _ = VisitMut::visit(&mut statement, &mut at);
                        let mut base = base?;
                        base.limit_clause = None;
                        base.fetch = None;
                        let order = if base.order_by.is_none() && self.chance(50) {
                            " ORDER BY 1"
                        } else {
                            ""
                        };
                        let suffix = self.pick(LIMIT_SUFFIXES);
                        parse_query(&format!("{base}{order} {suffix}"), dialect)
                    }
                };
                let replacement = replacement?;
                let mut put = Some(replacement);
                let mut apply = |q: &mut Query| {
                    if let Some(r) = put.take() {
                        *q = r;
                    }
                };
                let mut at = At::new(target);
                at.query = Some(&mut apply);
                let _ = VisitMut::visit(&mut statement, &mut at);
            }
            _ => {
                op = "tree_factor";
                let n = count(&mut statement, 4);
                if n == 0 {
                    return None;
                }
                let target = self.rng.index(n);
                let table = self.table(db);
                let name = self.name(db);
                let col = self.column(db);
                let q = self.donor_text(db);
                let text = match self.rng.below(12) {
                    0 => format!("{table} c"),
                    1 => format!("(SELECT * FROM {table}) c"),
                    2 => name,
                    3 => format!("{table} AS c({col})"),
                    4 => format!("{table} NATURAL JOIN {}", self.table(db)),
                    5 => format!("{table} JOIN {} USING ({col})", self.table(db)),
                    6 => "generate_series(1, 3) g".to_string(),
                    7 => "json_each('[1,2]')".to_string(),
                    8 => format!("LATERAL ({q}) l"),
                    9 => format!("{name}()"),
                    10 => "pragma_table_info('customers')".to_string(),
                    _ => format!("({q}) AS {table}"),
                };
                let factor = parse_table_factor(&text, dialect)?;
                let mut put = Some(factor);
                let mut apply = |f: &mut TableFactor| {
                    if let Some(r) = put.take() {
                        *f = r;
                    }
                };
                let mut at = At::new(target);
                at.factor = Some(&mut apply);
                let _ = VisitMut::visit(&mut statement, &mut at);
            }
        }
        Some((statement.to_string(), op))
    }

    /// One mutation on the token stream of the text.
    fn mutate_tokens(&mut self, sql: &str, db: usize) -> Option<String> {
        if sql.len() > 20_000 {
            return None;
        }
        let d = self.dialect.parser_dialect();
        let tokens = Tokenizer::new(d.as_ref(), sql)
            .with_unescape(false)
            .tokenize_with_location()
            .ok()?;
        // Byte offset of every char (and of the end), and the char index of each line's start.
        let char_bytes: Vec<usize> = sql
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(sql.len()))
            .collect();
        let line_chars: Vec<usize> = std::iter::once(0)
            .chain(
                sql.chars()
                    .enumerate()
                    .filter(|(_, c)| *c == '\n')
                    .map(|(i, _)| i + 1),
            )
            .collect();
        let offset = |line: u64, column: u64| -> Option<usize> {
            let first = *line_chars.get(usize::try_from(line).ok()?.checked_sub(1)?)?;
            let col = usize::try_from(column).ok()?.checked_sub(1)?;
            char_bytes.get(first + col).copied()
        };
        let spans: Vec<(usize, usize, bool)> = tokens
            .iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
            .filter_map(|t| {
                let start = offset(t.span.start.line, t.span.start.column)?;
                let end = offset(t.span.end.line, t.span.end.column)?;
                (start <= end).then_some((start, end, matches!(t.token, Token::Word(_))))
            })
            .collect();
        if spans.is_empty() {
            return None;
        }
        let (start, end, is_word) = spans[self.rng.index(spans.len())];
        let fragment = match self.rng.below(10) {
            0..=3 => {
                if self.dialect == SqlDialect::Postgres {
                    self.pick(POSTGRES_FRAGMENTS).to_string()
                } else {
                    self.pick(SQLITE_FRAGMENTS).to_string()
                }
            }
            4 | 5 => self.pick(COMMON_FRAGMENTS).to_string(),
            _ => {
                if is_word || self.chance(50) {
                    self.name(db)
                } else {
                    self.column(db)
                }
            }
        };
        let mut out = String::with_capacity(sql.len() + fragment.len() + 2);
        match self.rng.below(6) {
            0 | 1 => {
                out.push_str(&sql[..start]);
                out.push_str(&fragment);
                out.push_str(&sql[end..]);
            }
            2 => {
                out.push_str(&sql[..end]);
                out.push(' ');
                out.push_str(&fragment);
                out.push_str(&sql[end..]);
            }
            3 => {
                out.push_str(&sql[..start]);
                out.push_str(&fragment);
                out.push_str(&sql[start..]);
            }
            4 => {
                out.push_str(&sql[..start]);
                out.push_str(&sql[end..]);
            }
            _ => {
                let (s2, e2, _) = spans[self.rng.index(spans.len())];
                if s2 >= end {
                    out.push_str(&sql[..start]);
                    out.push_str(&sql[s2..e2]);
                    out.push_str(&sql[end..s2]);
                    out.push_str(&sql[start..end]);
                    out.push_str(&sql[e2..]);
                } else {
                    out.push_str(&sql[..end]);
                    out.push(' ');
                    out.push_str(&sql[s2..e2]);
                    out.push_str(&sql[end..]);
                }
            }
        }
        Some(out)
    }

    /// One wrapper around the whole text.
    fn wrap_text(&mut self, sql: &str, db: usize) -> String {
        match self.rng.below(10) {
            0 => {
                let depth = 5 + self.rng.index(60);
                format!(
                    "{}{sql}\n{}",
                    "SELECT * FROM (".repeat(depth),
                    ") AS t".repeat(depth)
                )
            }
            1 => {
                let depth = 10 + self.rng.index(50);
                format!("SELECT {}1{}", "(".repeat(depth), ")".repeat(depth))
            }
            2 => {
                let n = 990 + self.rng.index(20);
                let op = ["+", "||", " AND ", "::int", " OR "][self.rng.index(5)];
                if op == "::int" {
                    format!("SELECT 1{}", op.repeat(n))
                } else {
                    format!("SELECT 1{}", format!("{op}1").repeat(n))
                }
            }
            3 => {
                let suffix = self.pick(LIMIT_SUFFIXES);
                format!("{sql}\n{suffix}")
            }
            _ => {
                let template = self.pick(QUERY_WRAPS).to_string();
                let q2 = self.donor_text(db);
                let filled = template.replace("{q2}", &q2).replace("{q}", sql);
                self.fill(&filled, db, "1")
            }
        }
    }

    /// One mutation on the characters.
    fn mutate_chars(&mut self, sql: &str) -> String {
        const INTERESTING: &[char] = &[
            '\'', '"', '\\', ';', '-', '/', '*', '(', ')', '$', ',', '.', ':', '0', 'x', 'E', 'U',
            '&', '`', '[', ']', '#', '\n', '\u{0}', '?', '@', '%', ' ',
        ];
        let mut chars: Vec<char> = sql.chars().collect();
        let at = self.rng.index(chars.len() + 1);
        let c = if self.chance(70) {
            INTERESTING[self.rng.index(INTERESTING.len())]
        } else {
            char::from(32 + u8::try_from(self.rng.below(95)).unwrap_or(0))
        };
        match self.rng.below(5) {
            0 | 1 => chars.insert(at, c),
            2 => {
                if at < chars.len() {
                    chars[at] = c;
                }
            }
            3 => {
                if at < chars.len() {
                    chars.remove(at);
                }
            }
            _ => {
                let len = 1 + self.rng.index(16);
                let end = (at + len).min(chars.len());
                let piece: Vec<char> = chars[at.min(end)..end].to_vec();
                let to = self.rng.index(chars.len() + 1);
                for (i, ch) in piece.into_iter().enumerate() {
                    chars.insert((to + i).min(chars.len()), ch);
                }
            }
        }
        chars.into_iter().collect()
    }

    /// The next case.
    pub fn next_case(&mut self) -> Case {
        let (mut sql, db, seed) = if !self.accepted.is_empty() && self.chance(25) {
            let (sql, db) = self.accepted[self.rng.index(self.accepted.len())].clone();
            (sql, db, "accepted".to_string())
        } else {
            let s = &self.seeds[self.rng.index(self.seeds.len())];
            (s.sql.clone(), s.db, s.id.clone())
        };
        let mut ops = Vec::new();
        let rounds = 1 + self.rng.index(4);
        for _ in 0..rounds {
            let roll = self.rng.below(100);
            if roll < 50 {
                if let Some((text, op)) = self.mutate_tree(&sql, db) {
                    sql = text;
                    ops.push(op);
                    continue;
                }
            }
            if roll < 78 {
                if let Some(text) = self.mutate_tokens(&sql, db) {
                    sql = text;
                    ops.push("tokens");
                    continue;
                }
            }
            if roll < 92 {
                sql = self.wrap_text(&sql, db);
                ops.push("wrap");
                continue;
            }
            sql = self.mutate_chars(&sql);
            ops.push("chars");
        }
        if sql.len() > 120_000 {
            sql.truncate(
                sql.char_indices()
                    .nth(120_000)
                    .map_or(sql.len(), |(i, _)| i),
            );
        }
        Case { sql, db, seed, ops }
    }
}
