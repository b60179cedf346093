//! Whether a gold query's row order is part of its answer: ORDER BY on the outermost
//! query, read from the parsed statement or, when the parser rejects it, from its tokens.

use sqlparser::ast::{SetExpr, Statement};
use sqlparser::dialect::Dialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};

use crate::gate::SqlDialect;

/// Whether the outermost query of `sql` has ORDER BY (so its row order is part of the
/// answer). ORDER BY inside a subquery, a CTE, a window or an aggregate does not count; a
/// parenthesised outermost query counts when it orders inside the parentheses; with several
/// statements, the last one decides. When the parser rejects the text, a token scan looks
/// for ORDER BY outside every parenthesis instead (the same rule on the raw tokens); when
/// even the tokenizer fails, the answer is false (compare without order, the lenient side).
pub fn gold_orders(sql: &str, dialect: SqlDialect) -> bool {
    let parser_dialect = dialect.parser_dialect();
    match Parser::parse_sql(parser_dialect.as_ref(), sql) {
        Ok(statements) => match statements.last() {
            Some(Statement::Query(query)) => query_orders(query),
            _ => false,
        },
        Err(_) => top_level_order_by(parser_dialect.as_ref(), sql),
    }
}

fn query_orders(query: &sqlparser::ast::Query) -> bool {
    if query.order_by.is_some() {
        return true;
    }
    match query.body.as_ref() {
        SetExpr::Query(inner) => query_orders(inner),
        _ => false,
    }
}

fn top_level_order_by(dialect: &dyn Dialect, sql: &str) -> bool {
    let Ok(tokens) = Tokenizer::new(dialect, sql).tokenize() else {
        return false;
    };
    let mut depth: i64 = 0;
    let mut after_order = false;
    for token in tokens {
        match token {
            Token::Whitespace(_) => continue,
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            // A `;` starts another statement; only the last one decides.
            Token::SemiColon => {
                depth = 0;
                after_order = false;
                continue;
            }
            Token::Word(ref word) if depth == 0 && after_order && word.keyword == Keyword::BY => {
                return true;
            }
            _ => {}
        }
        after_order =
            depth == 0 && matches!(&token, Token::Word(word) if word.keyword == Keyword::ORDER);
    }
    false
}
