//! What a model writes in the habits SQLite and PostgreSQL taught it, written as MySQL
//! and MariaDB read it, before the guard sees the SQL. Each rewrite keeps the meaning the
//! model wrote; the guard then checks the result like any SQL, and the trace notes it.
//!
//! - **Names in the case they were declared.** On Linux a MySQL or MariaDB server keeps
//!   `lower_case_table_names = 0`: a table is found only by its name as stored
//!   (`Addresses`, not `addresses`), and so is a table alias (`T1.name` after `AS t1` is
//!   an unknown column). SQLite and PostgreSQL (for bare names) ignore that case, and on
//!   MySQL every such reply cost an attempt and a repair. A table reference that matches
//!   exactly one table of the schema when case is ignored, and none as written, is
//!   written as the schema spells it; a qualifier that matches exactly one table name or
//!   alias of the statement when case is ignored, and none as written, is written as the
//!   statement declared it. Names of common table expressions are left as written (a
//!   reference may be one). [`declared_case`]
//! - **A LIMIT inside an IN, ANY/SOME or ALL subquery** (`x IN (SELECT ... ORDER BY n DESC
//!   LIMIT 1)`, `x > ALL (SELECT ... LIMIT 3)`), which
//!   neither server runs (error 1235, "doesn't yet support 'LIMIT & IN/ALL/ANY/SOME
//!   subquery'"), is moved into a derived table, the form both run with the same rows:
//!   `x IN (SELECT * FROM (SELECT ... LIMIT 1) AS limited_rows)`; a LIMIT in one branch
//!   of a UNION inside IN moves the whole union. Told the error, a
//!   1.5B model sent the statement back unchanged or answered another question. [`limited_subqueries_derived`]

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, Ident, InTarget, ObjectNamePart, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, Statement, TableFactor, Visit, VisitMut, Visitor,
    VisitorMut,
};
use sqlparser::parser::Parser;

use crate::gate::SqlDialect;
use crate::schema::TableSchema;

/// `sql` as MySQL and MariaDB read what the model meant (for the other dialects, as
/// written), with a note for the trace of each reading that changed it: a double-quoted
/// name after a qualifier in backticks ([`super::reply::qualified_names_in_backticks`]),
/// names in the case they were declared, a LIMIT inside an IN subquery in a derived table.
pub fn as_mysql_reads(
    sql: String,
    dialect: SqlDialect,
    schema: &[TableSchema],
) -> (String, Vec<&'static str>) {
    let mut notes = Vec::new();
    let mut sql = sql;
    if let Some(rewritten) = super::reply::qualified_names_in_backticks(&sql, dialect) {
        notes.push(
            "double-quoted names after a qualifier written in backticks, as MySQL reads names",
        );
        sql = rewritten;
    }
    if let Some(respelled) = declared_case(&sql, dialect, schema) {
        notes.push("table names and aliases written in the case they were declared, as MySQL compares them");
        sql = respelled;
    }
    if let Some(derived) = limited_subqueries_derived(&sql, dialect, schema) {
        notes.push("a LIMIT inside an IN subquery moved into a derived table, as MySQL runs it");
        sql = derived;
    }
    (sql, notes)
}

/// The one statement of `sql`, parsed as MySQL, when its text can be rewritten on the
/// tree and rendered again with the same meaning: none of the forms a rendering does
/// not give back as MySQL read them (a backslash, which the parser unescapes and the
/// pinned session does not; a comment, where `/*! ... */` is code), else None and the
/// text goes to the guard as written.
fn rewritable(sql: &str) -> Option<Statement> {
    if sql.contains(['\\', '#']) || sql.contains("/*") || sql.contains("--") {
        return None;
    }
    let dialect = SqlDialect::Mysql.parser_dialect();
    let mut statements = Parser::parse_sql(dialect.as_ref(), sql).ok()?;
    match statements.len() {
        1 => statements.pop(),
        _ => None,
    }
}

/// The rewritten tree as text, when that text parses back to the very same tree (a
/// value the printer cannot write faithfully, such as a doubled quote inside a string,
/// leaves the statement as written: the guard's own round trip refuses it there).
fn rendered(statement: &Statement) -> Option<String> {
    let text = statement.to_string();
    let dialect = SqlDialect::Mysql.parser_dialect();
    let reparsed = Parser::parse_sql(dialect.as_ref(), &text).ok()?;
    (reparsed.as_slice() == std::slice::from_ref(statement)).then_some(text)
}

/// `sql` with table names and qualifiers in the case the schema and the statement
/// declare them, or None when nothing changed (and always for the other dialects,
/// which ignore the case of bare names, or when the text is not one statement that
/// renders faithfully: the guard then reads it as written).
pub fn declared_case(sql: &str, dialect: SqlDialect, schema: &[TableSchema]) -> Option<String> {
    if dialect != SqlDialect::Mysql {
        return None;
    }
    let mut statement = rewritable(sql)?;
    let mut declared = Declared::default();
    let _ = Visit::visit(&statement, &mut declared);
    let mut rename = Rename {
        schema,
        declared: &declared,
        tables_renamed: BTreeMap::new(),
        changed: false,
    };
    let _ = VisitMut::visit(&mut statement, &mut rename);
    // Qualifiers are read after every table name is known, wherever in the text each is.
    let mut qualifiers = Qualifiers {
        declared: &declared,
        tables_renamed: &rename.tables_renamed,
        changed: false,
    };
    let _ = VisitMut::visit(&mut statement, &mut qualifiers);
    if !(rename.changed || qualifiers.changed) {
        return None;
    }
    rendered(&statement)
}

/// The names a statement declares: its common table expressions (lower-cased), the
/// aliases it gives relations (as written, grouped by their lower-cased form), and the
/// tables it reads without an alias (as written).
#[derive(Default)]
struct Declared {
    ctes: Vec<String>,
    aliases: BTreeMap<String, Vec<String>>,
    bare_tables: Vec<String>,
}

impl Visitor for Declared {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.push(cte.alias.name.value.to_lowercase());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        match (factor, crate::gate::table_factor_table_alias(factor)) {
            (_, Some(alias)) => {
                let name = &alias.name.value;
                let spellings = self.aliases.entry(name.to_lowercase()).or_default();
                if !spellings.contains(name) {
                    spellings.push(name.clone());
                }
            }
            (TableFactor::Table { name, .. }, None) => {
                if let [ObjectNamePart::Identifier(table)] = name.0.as_slice() {
                    self.bare_tables.push(table.value.clone());
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Renames table references to the schema's spelling.
struct Rename<'a> {
    schema: &'a [TableSchema],
    declared: &'a Declared,
    /// Table names written without an alias, as written, and the spelling they got.
    tables_renamed: BTreeMap<String, String>,
    changed: bool,
}

impl Rename<'_> {
    /// The schema's spelling of `written`, when it names exactly one table only if case
    /// is ignored.
    fn stored(&self, written: &str) -> Option<&str> {
        if self.schema.iter().any(|table| table.name == written)
            || self.declared.ctes.contains(&written.to_lowercase())
        {
            return None;
        }
        let mut matching = self
            .schema
            .iter()
            .filter(|table| table.name.eq_ignore_ascii_case(written));
        match (matching.next(), matching.next()) {
            (Some(table), None) => Some(&table.name),
            _ => None,
        }
    }
}

impl VisitorMut for Rename<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table { name, alias, .. } = factor else {
            return ControlFlow::Continue(());
        };
        // A name qualified by a database is another database's table: left alone.
        let [ObjectNamePart::Identifier(table)] = name.0.as_mut_slice() else {
            return ControlFlow::Continue(());
        };
        if let Some(stored) = self.stored(&table.value).map(str::to_string) {
            if alias.is_none() {
                self.tables_renamed
                    .insert(table.value.clone(), stored.clone());
            }
            table.value = stored;
            self.changed = true;
        }
        ControlFlow::Continue(())
    }
}

/// Writes each qualifier (`t1` in `t1.name`, `t1.*`) as the statement declared the
/// name it stands for.
struct Qualifiers<'a> {
    declared: &'a Declared,
    tables_renamed: &'a BTreeMap<String, String>,
    changed: bool,
}

impl Qualifiers<'_> {
    /// The one spelling the statement gives `written` when case is ignored (an alias as
    /// declared, a bare table as the schema spells it), when it is not `written` and no
    /// alias is written exactly so.
    fn declared_spelling(&self, written: &str) -> Option<String> {
        let lower = written.to_lowercase();
        let aliases = self
            .declared
            .aliases
            .get(&lower)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if aliases.iter().any(|alias| alias == written) {
            return None;
        }
        let mut spellings: Vec<String> = aliases.to_vec();
        for table in &self.declared.bare_tables {
            if table.to_lowercase() != lower {
                continue;
            }
            let spelled = self.tables_renamed.get(table).unwrap_or(table);
            if !spellings.contains(spelled) {
                spellings.push(spelled.clone());
            }
        }
        match spellings.as_slice() {
            [only] if only != written => Some(only.clone()),
            _ => None,
        }
    }

    fn respell(&mut self, qualifier: &mut Ident) {
        if let Some(spelling) = self.declared_spelling(&qualifier.value) {
            qualifier.value = spelling;
            self.changed = true;
        }
    }
}

impl VisitorMut for Qualifiers<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        // `q.column`: the qualifier is the part before the column; a longer name
        // (`db.table.column`) reads another database and is left alone.
        if let Expr::CompoundIdentifier(parts) = expr {
            if let [qualifier, _column] = parts.as_mut_slice() {
                self.respell(qualifier);
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        for item in &mut select.projection {
            if let SelectItem::QualifiedWildcard(
                SelectItemQualifiedWildcardKind::ObjectName(name),
                _,
            ) = item
            {
                if let [ObjectNamePart::Identifier(qualifier)] = name.0.as_mut_slice() {
                    self.respell(qualifier);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// `sql` with each `IN`, `ANY`/`SOME` or `ALL` subquery that carries a LIMIT moved into
/// a derived table, or None when there is none (and always for the other dialects,
/// which run it as written, or when the text is not one statement that renders
/// faithfully). A subquery
/// that may read the outer query (a qualifier it does not declare, a bare name no table
/// it reads has) is left as written: MariaDB does not let a derived table read outside.
pub fn limited_subqueries_derived(
    sql: &str,
    dialect: SqlDialect,
    schema: &[TableSchema],
) -> Option<String> {
    if dialect != SqlDialect::Mysql {
        return None;
    }
    let mut statement = rewritable(sql)?;
    let parser_dialect = dialect.parser_dialect();
    let mut derived = 0usize;
    let mut failed = false;
    let _ = sqlparser::ast::visit_expressions_mut(&mut statement, |expr| {
        // The subqueries MariaDB and MySQL refuse a LIMIT in (1235): IN, ANY, SOME, ALL.
        let compared = match expr {
            Expr::In {
                target: InTarget::Subquery(subquery),
                ..
            } => Some(subquery),
            Expr::AnyOp { right, .. } | Expr::AllOp { right, .. } => match right.as_mut() {
                Expr::Subquery(subquery) => Some(subquery),
                _ => None,
            },
            _ => None,
        };
        if let Some(subquery) = compared {
            if limited(subquery) && reads_only_itself(subquery, schema) {
                let wrapped = format!("SELECT * FROM ({subquery}) AS limited_rows");
                match Parser::new(parser_dialect.as_ref())
                    .try_with_sql(&wrapped)
                    .and_then(|mut parser| parser.parse_query())
                {
                    Ok(query) => {
                        *subquery = query;
                        derived += 1;
                    }
                    Err(_) => failed = true,
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    if derived == 0 || failed {
        return None;
    }
    rendered(&statement)
}

/// The branches of a UNION, INTERSECT or EXCEPT, however nested; any other body is its
/// own one branch.
fn set_branches(body: &SetExpr) -> Vec<&SetExpr> {
    match body {
        SetExpr::SetOperation { left, right, .. } => {
            let mut branches = set_branches(left);
            branches.extend(set_branches(right));
            branches
        }
        branch => vec![branch],
    }
}

/// Whether `query` carries a LIMIT (or FETCH) of its own or in one branch of a UNION,
/// INTERSECT or EXCEPT: MariaDB and MySQL refuse either inside IN, ANY and ALL (1235).
fn limited(query: &Query) -> bool {
    query.limit_clause.is_some()
        || query.fetch.is_some()
        || set_branches(&query.body)
            .into_iter()
            .any(|branch| matches!(branch, SetExpr::Query(inner) if limited(inner)))
}

/// Whether every column `query` names is one of its own relations': each qualifier one
/// it declares, each bare name a column of a table it reads. A derived table or a
/// common table expression inside, whose columns are not in the schema, counts as
/// reading outside unless every name is qualified. Each branch of a UNION, INTERSECT
/// or EXCEPT is judged on its own as well: a name one branch takes from the outer
/// query is not made its own by a table another branch reads.
fn reads_only_itself(query: &Query, schema: &[TableSchema]) -> bool {
    names_only_its_own(query, schema)
        && (!matches!(query.body.as_ref(), SetExpr::SetOperation { .. })
            || set_branches(&query.body)
                .into_iter()
                .all(|branch| match branch {
                    SetExpr::Query(inner) => reads_only_itself(inner, schema),
                    branch => names_only_its_own(branch, schema),
                }))
}

/// [`reads_only_itself`]'s test of one node, every relation inside it pooled.
fn names_only_its_own(node: &impl Visit, schema: &[TableSchema]) -> bool {
    let mut declared = Declared::default();
    let _ = node.visit(&mut declared);
    let mut names = ColumnNames::default();
    let _ = node.visit(&mut names);
    let own = |qualifier: &str| {
        declared.aliases.contains_key(&qualifier.to_lowercase())
            || declared
                .bare_tables
                .iter()
                .any(|table| table.eq_ignore_ascii_case(qualifier))
    };
    if !names.qualifiers.iter().all(|qualifier| own(qualifier)) {
        return false;
    }
    let tables: Vec<&TableSchema> = declared
        .bare_tables
        .iter()
        .chain(names.aliased_tables.iter())
        .filter_map(|name| crate::schema::table_named(schema, name))
        .collect();
    names.bare.iter().all(|column| {
        tables
            .iter()
            .any(|table| table.column_named(column).is_some())
    })
}

/// The column names a query writes: qualifiers of `q.column` and `q.*`, bare names,
/// and the tables it reads under an alias.
#[derive(Default)]
struct ColumnNames {
    qualifiers: Vec<String>,
    bare: Vec<String>,
    aliased_tables: Vec<String>,
}

impl Visitor for ColumnNames {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        match expr {
            Expr::Identifier(name) => self.bare.push(name.value.clone()),
            Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [qualifier, _column] => self.qualifiers.push(qualifier.value.clone()),
                // A longer name reads another database: not this query's own.
                _ => self.qualifiers.push(String::new()),
            },
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<()> {
        for item in &select.projection {
            if let SelectItem::QualifiedWildcard(
                SelectItemQualifiedWildcardKind::ObjectName(name),
                _,
            ) = item
            {
                let written: Vec<String> = name
                    .0
                    .iter()
                    .filter_map(ObjectNamePart::as_ident)
                    .map(|ident| ident.value.clone())
                    .collect();
                match written.as_slice() {
                    [qualifier] => self.qualifiers.push(qualifier.clone()),
                    _ => self.qualifiers.push(String::new()),
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table {
            name,
            alias: Some(_),
            ..
        } = factor
        {
            if let [ObjectNamePart::Identifier(table)] = name.0.as_slice() {
                self.aliased_tables.push(table.value.clone());
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Vec<TableSchema> {
        vec![
            TableSchema::for_tests(
                "Addresses",
                &["address_id", "line_1"],
                "TEXT",
                &["address_id"],
            ),
            TableSchema::for_tests(
                "Courses",
                &["course_id", "course_name"],
                "TEXT",
                &["course_id"],
            ),
            TableSchema::for_tests("city", &["ID", "Name"], "TEXT", &["ID"]),
        ]
    }

    fn declared(sql: &str) -> Option<String> {
        declared_case(sql, SqlDialect::Mysql, &schema())
    }

    #[test]
    fn table_names_and_qualifiers_take_the_case_they_were_declared_in() {
        assert_eq!(
            declared("SELECT line_1 FROM addresses").as_deref(),
            Some("SELECT line_1 FROM Addresses")
        );
        // A bare table's name qualifies its columns: both are respelled.
        assert_eq!(
            declared("SELECT addresses.line_1 FROM addresses WHERE addresses.address_id = 1")
                .as_deref(),
            Some("SELECT Addresses.line_1 FROM Addresses WHERE Addresses.address_id = 1")
        );
        assert_eq!(
            declared("SELECT ADDRESSES.line_1 FROM addresses").as_deref(),
            Some("SELECT Addresses.line_1 FROM Addresses")
        );
        assert_eq!(
            declared("SELECT addresses.* FROM addresses").as_deref(),
            Some("SELECT Addresses.* FROM Addresses")
        );
        assert_eq!(
            declared("SELECT t1.* FROM city AS T1").as_deref(),
            Some("SELECT T1.* FROM city AS T1")
        );
        // An alias written exactly as declared stays, though a table inside shares its
        // letters.
        assert_eq!(
            declared("SELECT addresses.line_1 FROM (SELECT line_1 FROM addresses) AS addresses")
                .as_deref(),
            Some("SELECT addresses.line_1 FROM (SELECT line_1 FROM Addresses) AS addresses")
        );
        // An alias is written as it was declared, wherever it is used.
        assert_eq!(
            declared("SELECT t1.Name FROM CITY AS T1 WHERE t1.ID IN (SELECT c.course_id FROM courses AS C)")
                .as_deref(),
            Some("SELECT T1.Name FROM city AS T1 WHERE T1.ID IN (SELECT C.course_id FROM Courses AS C)")
        );
    }

    #[test]
    fn a_limit_inside_an_in_subquery_moves_into_a_derived_table() {
        let written =
            "SELECT Name FROM city WHERE ID IN (SELECT ID FROM city ORDER BY Name DESC LIMIT 3)";
        assert_eq!(
            limited_subqueries_derived(written, SqlDialect::Mysql, &schema()).as_deref(),
            Some(
                "SELECT Name FROM city WHERE ID IN (SELECT * FROM (SELECT ID FROM city ORDER BY Name DESC LIMIT 3) AS limited_rows)"
            )
        );
        assert_eq!(
            limited_subqueries_derived(
                "SELECT Name FROM city WHERE ID NOT IN (SELECT ID FROM city LIMIT 1)",
                SqlDialect::Mysql,
                &schema()
            )
            .as_deref(),
            Some(
                "SELECT Name FROM city WHERE ID NOT IN (SELECT * FROM (SELECT ID FROM city LIMIT 1) AS limited_rows)"
            )
        );
        // The same refusal covers a comparison with ANY, SOME or ALL of a subquery.
        for (written, derived) in [
            (
                "SELECT Name FROM city WHERE ID = ANY (SELECT ID FROM city ORDER BY Name LIMIT 2)",
                "SELECT Name FROM city WHERE ID = ANY(SELECT * FROM (SELECT ID FROM city ORDER BY Name LIMIT 2) AS limited_rows)",
            ),
            (
                "SELECT Name FROM city WHERE ID > ALL (SELECT ID FROM city LIMIT 2)",
                "SELECT Name FROM city WHERE ID > ALL(SELECT * FROM (SELECT ID FROM city LIMIT 2) AS limited_rows)",
            ),
            // A LIMIT in one branch of a UNION is refused the same way: the whole union
            // moves.
            (
                "SELECT Name FROM city WHERE ID IN (SELECT ID FROM city WHERE ID < 3 UNION (SELECT ID FROM city ORDER BY Name DESC LIMIT 1))",
                "SELECT Name FROM city WHERE ID IN (SELECT * FROM (SELECT ID FROM city WHERE ID < 3 UNION (SELECT ID FROM city ORDER BY Name DESC LIMIT 1)) AS limited_rows)",
            ),
        ] {
            assert_eq!(
                limited_subqueries_derived(written, SqlDialect::Mysql, &schema()).as_deref(),
                Some(derived),
                "{written}"
            );
        }
        for untouched in [
            "SELECT Name FROM city WHERE ID IN (SELECT ID FROM city)",
            "SELECT Name FROM city WHERE ID IN (SELECT ID FROM city WHERE ID < 3 UNION SELECT ID FROM city WHERE ID > 9)",
            "SELECT Name FROM city WHERE ID > ALL (SELECT ID FROM city)",
            "SELECT Name FROM city WHERE EXISTS (SELECT ID FROM city LIMIT 1)",
            "SELECT Name FROM city WHERE ID = (SELECT ID FROM city LIMIT 1)",
            "SELECT Name FROM city LIMIT 1",
            // A subquery that reads the outer query, by its alias or by a bare name none
            // of its own tables has: a derived table may not, on MariaDB.
            "SELECT Name FROM city AS o WHERE ID IN (SELECT i.ID FROM city AS i WHERE i.Name = o.Name LIMIT 1)",
            "SELECT line_1 FROM Addresses WHERE address_id IN (SELECT ID FROM city WHERE Name = line_1 LIMIT 1)",
            // A union branch that reads the outer query, by a bare name or a qualifier,
            // though another branch reads a table with that name.
            "SELECT Name FROM city AS o WHERE ID IN (SELECT address_id FROM Addresses WHERE line_1 = Name UNION (SELECT ID FROM city ORDER BY Name LIMIT 1))",
            "SELECT Name FROM city AS o WHERE ID IN (SELECT address_id FROM Addresses WHERE line_1 = o.Name UNION (SELECT o.ID FROM city AS o ORDER BY o.Name LIMIT 1))",
        ] {
            assert_eq!(
                limited_subqueries_derived(untouched, SqlDialect::Mysql, &schema()),
                None,
                "{untouched}"
            );
        }
        for dialect in [SqlDialect::Sqlite, SqlDialect::Postgres] {
            assert_eq!(
                limited_subqueries_derived(written, dialect, &schema()),
                None
            );
        }
    }

    #[test]
    fn names_that_are_right_ambiguous_or_not_tables_are_left_as_written() {
        for sql in [
            // Already as stored.
            "SELECT line_1 FROM Addresses",
            "SELECT T1.Name FROM city AS T1",
            // No table of the schema by that name in any case: the guard says so.
            "SELECT * FROM nowhere",
            // A common table expression may share a table's name.
            "WITH addresses AS (SELECT 1 AS line_1) SELECT line_1 FROM addresses",
            // Another database's table.
            "SELECT * FROM other.addresses",
            // Two aliases that differ only by case: which one is meant is not known.
            "SELECT t.ID FROM city AS t JOIN city AS T ON t.ID = T.ID",
            // Not one statement.
            "SELECT 1; SELECT 2",
            "SELEC nothing",
            // What a rendering would not give back as MySQL reads it: a comment (where
            // `/*! ... */` is code), a backslash (an escape to the parser, not to the
            // pinned session), a doubled quote inside a string the printer would halve.
            "SELECT line_1 FROM addresses -- the lines",
            "SELECT line_1 FROM addresses /*! WHERE 1 */",
            "SELECT line_1 FROM addresses WHERE line_1 = 'a\\b'",
            "SELECT line_1 FROM addresses WHERE line_1 = 'It''''s'",
        ] {
            assert_eq!(declared(sql), None, "{sql}");
        }
        // The other dialects ignore the case of bare names: nothing is rewritten there.
        for dialect in [SqlDialect::Sqlite, SqlDialect::Postgres] {
            assert_eq!(
                declared_case("SELECT line_1 FROM addresses", dialect, &schema()),
                None
            );
        }
    }
}
