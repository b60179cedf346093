//! The row cap forced into the outermost query: a plain limit at most the cap is kept,
//! anything else becomes the cap, and a set operation is wrapped so the cap covers it
//! (decision 0003).

use super::*;

pub(super) fn cap_expr(cap: u64) -> Expr {
    Expr::Value(Value::Number(cap.to_string(), false).with_empty_span())
}

/// The query's own row limit when it is a plain number: from LIMIT, `LIMIT offset, n`
/// or FETCH FIRST n ROWS ONLY. FETCH ... WITH TIES or PERCENT can return more than n
/// rows, so they do not count as a plain limit.
pub(super) fn existing_limit(query: &Query) -> Option<u64> {
    if let Some(fetch) = &query.fetch {
        if fetch.percent || fetch.with_ties {
            return None;
        }
        return match &fetch.quantity {
            Some(quantity) => literal_count(quantity),
            None => Some(1),
        };
    }
    match &query.limit_clause {
        Some(LimitClause::LimitOffset {
            limit: Some(limit), ..
        }) => literal_count(limit),
        Some(LimitClause::OffsetCommaLimit { limit, .. }) => literal_count(limit),
        _ => None,
    }
}

/// Whether the query's own limit is one the guard cannot read as a number: an expression
/// (`LIMIT 2+3`, `LIMIT (SELECT 3)`), a literal that is not a plain integer (`LIMIT 5.0`,
/// `LIMIT '5'`, `LIMIT 1e2`, a placeholder), or LIMIT and FETCH side by side. It may be
/// smaller than the cap, so replacing it by the cap could return more rows than the
/// query asks for (the guard fuzzer found `LIMIT 5.0` returning 149 rows for 5).
/// A negative literal is no limit (SQLite) or an error (PostgreSQL): the cap replaces it.
/// `-0` is zero rows, so it stays.
pub(super) fn limit_is_computed(query: &Query) -> bool {
    let computed = |expr: &Expr| {
        literal_count(expr).is_none()
            && !matches!(expr, Expr::UnaryOp { op: sqlparser::ast::UnaryOperator::Minus, expr }
                if literal_count(expr).is_some_and(|count| count > 0))
    };
    let limit = match &query.limit_clause {
        Some(LimitClause::LimitOffset {
            limit: Some(limit), ..
        })
        | Some(LimitClause::OffsetCommaLimit { limit, .. }) => Some(limit),
        _ => None,
    };
    match &query.fetch {
        Some(_) if limit.is_some() => true,
        Some(fetch) => fetch.quantity.as_ref().is_some_and(computed),
        None => limit.is_some_and(computed),
    }
}

pub(super) fn force_limit(query: &mut Query, policy: &GuardPolicy) -> Result<LimitAction, Refusal> {
    let cap = policy.row_cap;
    // A limit that is not a plain number stays as written, inside an outer query
    // carrying the cap.
    if limit_is_computed(query) {
        wrap_with_cap(query, policy)?;
        return Ok(LimitAction::Wrapped(cap));
    }
    if let Some(limit) = existing_limit(query) {
        if limit <= cap {
            return Ok(LimitAction::Kept(limit));
        }
    }
    // FETCH ... WITH TIES or PERCENT means something a LIMIT cannot say: keep it, inside
    // an outer query carrying the cap.
    if query
        .fetch
        .as_ref()
        .is_some_and(|fetch| fetch.with_ties || fetch.percent)
    {
        wrap_with_cap(query, policy)?;
        return Ok(LimitAction::Wrapped(cap));
    }
    match query.body.as_ref() {
        SetExpr::SetOperation { .. } | SetExpr::Values(_) => {
            wrap_with_cap(query, policy)?;
            Ok(LimitAction::Wrapped(cap))
        }
        _ => {
            set_limit(query, cap);
            Ok(LimitAction::Capped(cap))
        }
    }
}

pub(super) fn set_limit(query: &mut Query, cap: u64) {
    // Never leave LIMIT and FETCH side by side: FETCH goes, LIMIT carries the cap.
    query.fetch = None;
    query.limit_clause = Some(match query.limit_clause.take() {
        Some(LimitClause::OffsetCommaLimit { offset, .. }) => LimitClause::OffsetCommaLimit {
            offset,
            limit: cap_expr(cap),
        },
        Some(LimitClause::LimitOffset { offset, .. }) => LimitClause::LimitOffset {
            limit: Some(cap_expr(cap)),
            offset,
            limit_by: Vec::new(),
        },
        None => LimitClause::LimitOffset {
            limit: Some(cap_expr(cap)),
            offset: None,
            limit_by: Vec::new(),
        },
    });
}

/// Wraps the whole query as `SELECT * FROM (<query>) AS askdb_capped LIMIT cap`, so
/// the cap visibly covers every branch of a set operation.
pub(super) fn wrap_with_cap(query: &mut Query, policy: &GuardPolicy) -> Result<(), Refusal> {
    let template = format!(
        "SELECT * FROM (SELECT 1) AS askdb_capped LIMIT {}",
        policy.row_cap
    );
    let dialect = policy.dialect.parser_dialect();
    let internal_error = || {
        Refusal::new(
            RefusalReason::ParseError,
            "internal error while applying the row cap",
        )
    };
    let mut parsed =
        Parser::parse_sql(dialect.as_ref(), &template).map_err(|_| internal_error())?;
    let Some(Statement::Query(mut outer)) = parsed.pop() else {
        return Err(internal_error());
    };
    let SetExpr::Select(select) = outer.body.as_mut() else {
        return Err(internal_error());
    };
    let Some(from) = select.from.first_mut() else {
        return Err(internal_error());
    };
    let TableFactor::Derived { subquery, .. } = &mut from.relation else {
        return Err(internal_error());
    };
    std::mem::swap(subquery.as_mut(), query);
    std::mem::swap(query, outer.as_mut());
    Ok(())
}
