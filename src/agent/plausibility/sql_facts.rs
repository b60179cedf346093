//! What the rules read from the parsed tree of the SQL that ran: the years its filters
//! hold dates to, its groupings, the joins that repeat rows, the years read as dates,
//! the spans computed as numbers, the subqueries that read the outer query's columns and
//! the joins on columns no declared key ties.

use super::*;

/// What the checks read from the SQL's tree.
#[derive(Debug, Default)]
pub(super) struct SqlFacts {
    /// Years the statement's comparisons hold its dates to.
    pub(super) filter_years: BTreeSet<i64>,
    /// Every GROUP BY and PARTITION BY expression as written (an alias or position
    /// resolved to its select item: `year (strftime('%Y', txn_dt))`).
    pub(super) groupings: Vec<String>,
    /// Tables joined and never read whose joins repeat other tables' rows.
    pub(super) repeating_joins: Vec<joins::RepeatingJoin>,
    /// Columns of years stored as numbers, read through a date function.
    pub(super) numbers_as_dates: Vec<dates::NumberAsDate>,
    /// SQLite only: `+`/`-` with a span of time written as text (`- '30 days'`).
    pub(super) spans_as_numbers: Vec<String>,
    /// IN-subqueries that select a column their own tables lack.
    pub(super) outer_columns: Vec<outer_columns::OuterColumn>,
    /// ON equalities between columns no declared key ties.
    pub(super) unkeyed_joins: Vec<join_keys::UnkeyedJoin>,
    /// A select item holds a subquery (a per-row count written as a correlated
    /// subquery breaks rows down without a GROUP BY).
    pub(super) projection_subquery: bool,
}

/// Whether a rendered expression reads a date (so a 2025 compared with it is a year).
pub(super) fn date_like(text: &str) -> bool {
    [
        "year", "%y", "date", "_dt", "time", "strftime", "extract", "substr", "month", "day",
        "_at", "when",
    ]
    .iter()
    .any(|part| text.contains(part))
}

/// The quoted text of a literal written alone or as a typed or cast literal
/// (`'2025-01-01'`, `DATE '2025-01-01'`, `CAST('2025' AS INTEGER)`), or a plain number.
pub(super) fn literal_text(expr: &Expr) -> Option<String> {
    if let Expr::Value(value) = expr {
        return match &value.value {
            Value::SingleQuotedString(text) => Some(text.clone()),
            Value::Number(number, _) => Some(number.clone()),
            _ => None,
        };
    }
    let rendered = expr.to_string();
    let start = rendered.find('\'')?;
    let end = start + 1 + rendered.get(start + 1..)?.find('\'')?;
    let inside = rendered.get(start + 1..end)?.to_string();
    let outside = format!("{}{}", &rendered[..start], &rendered[end + 1..]).to_lowercase();
    let rest = [
        "timestamp",
        "datetime",
        "date",
        "cast",
        "as",
        "text",
        "integer",
        "int",
    ]
    .iter()
    .fold(outside, |text, word| text.replace(word, ""));
    rest.chars()
        .all(|c| matches!(c, ' ' | '(' | ')' | ':'))
        .then_some(inside)
}

/// Which side of a range a literal bounds, and whether strictly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bound {
    /// `=`, `<>`, IN, BETWEEN's ends.
    Exact,
    /// `col < lit` (`strict`) or `col <= lit`.
    Upper { strict: bool },
    /// `col > lit` (`strict`) or `col >= lit`.
    Lower { strict: bool },
}

/// The year a literal holds a date to: a date (`2025-03-31`, `2025-03`), or a year
/// (`2025`) compared with a date expression. A 1 January on the upper side of a
/// comparison is the exclusive end of the year before; `year < 1980` ends in 1979 and
/// `year > 2003` starts in 2004.
pub(super) fn literal_year(literal: &Expr, other: &Expr, bound: Bound) -> Option<i64> {
    let upper_end = matches!(bound, Bound::Upper { .. });
    let text = literal_text(literal)?;
    let text = text.trim();
    let head = text.get(..4)?;
    if !head.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let year: i64 = head.parse().ok()?;
    if !(1900..=2100).contains(&year) {
        return None;
    }
    let rest = text.get(4..)?;
    let is_date =
        rest.starts_with('-') && rest.len() >= 3 && rest[1..3].chars().all(|c| c.is_ascii_digit());
    if is_date {
        let new_year = rest.starts_with("-01-01")
            && rest[6..]
                .trim_start_matches(['T', ' '])
                .chars()
                .all(|c| matches!(c, '0' | ':' | '.'));
        let year_end = rest.starts_with("-12-31");
        if year_end && bound == (Bound::Lower { strict: true }) {
            // `> '2024-12-31'` starts in 2025.
            return Some(year + 1);
        }
        return Some(if upper_end && new_year {
            year - 1
        } else {
            year
        });
    }
    let year = match bound {
        Bound::Upper { strict: true } => year - 1,
        Bound::Lower { strict: true } => year + 1,
        _ => year,
    };
    (rest.is_empty() && date_like(&other.to_string().to_lowercase())).then_some(year)
}

/// A LIKE pattern that pins a date's year (`'2025%'`, `'2025-03-%'`).
pub(super) fn pattern_year(pattern: &Expr) -> Option<i64> {
    let text = literal_text(pattern)?;
    let head = text.get(..4)?;
    let rest = text.get(4..)?;
    let pins = head.chars().all(|c| c.is_ascii_digit()) && (rest.starts_with(['%', '-']));
    pins.then(|| head.parse().ok()).flatten()
}

pub(super) struct Collect<'f> {
    pub(super) facts: &'f mut SqlFacts,
}

impl Collect<'_> {
    pub(super) fn select(&mut self, select: &Select) {
        let items: Vec<(Option<String>, String)> = select
            .projection
            .iter()
            .filter_map(|item| match item {
                SelectItem::UnnamedExpr(expr) => Some((None, expr.to_string())),
                SelectItem::ExprWithAlias { expr, alias } => {
                    Some((Some(alias.value.to_lowercase()), expr.to_string()))
                }
                _ => None,
            })
            .collect();
        if items
            .iter()
            .any(|(_, text)| text.to_uppercase().contains("SELECT "))
        {
            self.facts.projection_subquery = true;
        }
        let resolve = |expr: &Expr| -> String {
            let text = expr.to_string();
            if let Expr::Identifier(ident) = expr {
                let name = ident.value.to_lowercase();
                if let Some((_, item)) = items
                    .iter()
                    .find(|(alias, _)| alias.as_deref() == Some(name.as_str()))
                {
                    return format!("{} ({item})", ident.value);
                }
            }
            if let Some(position) = literal_text(expr)
                .filter(|_| matches!(expr, Expr::Value(_)))
                .and_then(|text| text.parse::<usize>().ok())
            {
                if let Some((alias, item)) = position.checked_sub(1).and_then(|i| items.get(i)) {
                    return match alias {
                        Some(alias) => format!("{alias} ({item})"),
                        None => item.clone(),
                    };
                }
            }
            text
        };
        match &select.group_by {
            GroupByExpr::Expressions(exprs, _) => {
                self.facts.groupings.extend(exprs.iter().map(resolve));
            }
            GroupByExpr::All(_) => {
                self.facts
                    .groupings
                    .extend(items.iter().map(|(_, text)| text.clone()));
            }
        }
    }

    pub(super) fn set(&mut self, set: &SetExpr) {
        match set {
            SetExpr::Select(select) => self.select(select),
            SetExpr::SetOperation { left, right, .. } => {
                self.set(left);
                self.set(right);
            }
            _ => {}
        }
    }

    pub(super) fn comparison(&mut self, left: &Expr, op: &BinaryOperator, right: &Expr) {
        use BinaryOperator as B;
        // The bound a literal on the right sets, then on the left (`2025 < col`).
        let (right_bound, left_bound) = match op {
            B::Lt => (Bound::Upper { strict: true }, Bound::Lower { strict: true }),
            B::LtEq => (
                Bound::Upper { strict: false },
                Bound::Lower { strict: false },
            ),
            B::Gt => (Bound::Lower { strict: true }, Bound::Upper { strict: true }),
            B::GtEq => (
                Bound::Lower { strict: false },
                Bound::Upper { strict: false },
            ),
            B::Eq | B::NotEq => (Bound::Exact, Bound::Exact),
            _ => return,
        };
        self.facts
            .filter_years
            .extend(literal_year(right, left, right_bound));
        self.facts
            .filter_years
            .extend(literal_year(left, right, left_bound));
    }
}

impl Visitor for Collect<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        self.set(&query.body);
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        match expr {
            Expr::BinaryOp { left, op, right } => self.comparison(left, op, right),
            Expr::Between {
                expr, low, high, ..
            } => {
                self.facts
                    .filter_years
                    .extend(literal_year(low, expr, Bound::Exact));
                self.facts
                    .filter_years
                    .extend(literal_year(high, expr, Bound::Exact));
            }
            Expr::In {
                expr,
                target: InTarget::List(list),
                ..
            } => {
                for item in list {
                    self.facts
                        .filter_years
                        .extend(literal_year(item, expr, Bound::Exact));
                }
            }
            Expr::Like { pattern, .. } | Expr::ILike { pattern, .. } => {
                self.facts.filter_years.extend(pattern_year(pattern));
            }
            Expr::Function(function) => {
                if let Some(WindowType::WindowSpec(spec)) = &function.over {
                    self.facts
                        .groupings
                        .extend(spec.partition_by.iter().map(|expr| expr.to_string()));
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

pub(super) fn sql_facts(
    sql: &str,
    dialect: SqlDialect,
    schema: &[TableSchema],
    cards: &[TableCard],
) -> Option<SqlFacts> {
    let statements = Parser::parse_sql(&*dialect.parser_dialect(), sql).ok()?;
    let statement: &Statement = statements.first()?;
    let mut facts = SqlFacts::default();
    let _ = statement.visit(&mut Collect { facts: &mut facts });
    facts.repeating_joins = joins::repeating_joins(statement, schema);
    facts.numbers_as_dates = dates::numbers_read_as_dates(statement, schema, cards);
    if dialect == SqlDialect::Sqlite {
        facts.spans_as_numbers = dates::spans_as_numbers(statement);
    }
    facts.outer_columns = outer_columns::outer_columns(statement, schema);
    facts.unkeyed_joins = join_keys::unkeyed_joins(statement, schema);
    Some(facts)
}
