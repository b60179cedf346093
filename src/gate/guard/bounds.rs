//! Bounds the guard enforces on the token stream, before the parser builds a tree and
//! before any recursive walk over one: how many tokens and operators a statement may
//! have (an operator chain such as `1+1+...+1` is parsed in a loop but walked, printed
//! and dropped by recursion, so its length is its depth), the parser's recursion limit,
//! and the literal forms sqlparser reads differently from the database (SQLite's `0x10`
//! is the integer 16, not the blob `X'10'`; `0X10` is one token to SQLite, two to
//! sqlparser). Also the bound on literal size arguments (`repeat`, `lpad`, printf
//! widths, `randomblob`...), which no statement timeout can interrupt.

use std::collections::BTreeSet;

use sqlparser::ast::{Expr, FunctionArg, FunctionArgExpr, FunctionArguments, UnaryOperator, Value};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer, Whitespace};

use super::{Refusal, RefusalReason, SqlDialect};

/// The most tokens a statement may have (whitespace and comments not counted).
pub const MAX_TOKENS: usize = 20_000;

/// The most operators (and operator keywords: AND, OR, NOT, IS, IN, LIKE, BETWEEN,
/// COLLATE, AT...) and set operations (UNION, EXCEPT, INTERSECT) a statement may have: a
/// bound on the depth of any operator chain, so
/// the tree can be walked, printed and dropped on a 2 MB thread stack.
pub const MAX_OPERATORS: usize = 1_000;

/// The parser's recursion limit (nested parentheses, subqueries, CASE, calls): deeper
/// input is a parse error, never a stack overflow.
pub const PARSER_RECURSION_LIMIT: usize = 50;

/// The largest literal size a function may be asked to build: `repeat`'s count,
/// `lpad`/`rpad` lengths, printf/format widths and precisions, `randomblob`/`zeroblob`.
pub const MAX_BUILT_SIZE: u64 = 1_000_000;

/// The longest literal a function whose work is the product of two lengths may take as
/// its second length: a trim's character set, `translate`'s from and to, `replace`'s
/// replacement. Such a call runs inside one function, where neither SQLite's progress
/// handler nor PostgreSQL's cancel reaches it; at 64 characters over a 1 MB value it ends
/// well inside the statement timeout (decision 0032 has the measurements).
pub const MAX_CHARACTER_SET: usize = 64;

/// What the token scan learned.
pub(crate) struct Scanned {
    pub tokens: Vec<TokenWithSpan>,
    /// Where SQLite hexadecimal integers (`0x10`) start: sqlparser tokenizes them as
    /// blob literals, so the guard turns them back into decimal integers.
    pub hex_integers: BTreeSet<(u64, u64)>,
}

fn too_long(message: String) -> Refusal {
    Refusal::new(RefusalReason::TooLong, message)
}

/// Tokenizes `sql` and applies the bounds; tokenizer errors are parse errors.
/// The longest name PostgreSQL keeps (NAMEDATALEN - 1); it truncates longer ones.
pub(crate) const POSTGRES_NAME_BYTES: usize = 63;

pub(crate) fn scan(sql: &str, dialect: SqlDialect) -> Result<Scanned, Refusal> {
    let parser_dialect = dialect.parser_dialect();
    let tokens = Tokenizer::new(parser_dialect.as_ref(), sql)
        .with_unescape(true)
        .tokenize_with_location()
        .map_err(|error| {
            Refusal::new(
                RefusalReason::ParseError,
                format!("could not parse the statement: {error}"),
            )
        })?;
    if dialect == SqlDialect::Mysql {
        super::mysql_tokens::check(sql, &tokens)?;
    }
    let mut counted = 0usize;
    let mut operators = 0usize;
    let mut hex_integers = BTreeSet::new();
    let line_starts = line_starts(sql);
    let mut previous: Option<&Token> = None;
    // The last token that was not whitespace, for SQLite's postfix `NOT NULL`.
    let mut operand_before: Option<&Token> = None;
    for (index, token) in tokens.iter().enumerate() {
        if let Token::Whitespace(Whitespace::MultiLineComment(_)) = &token.token {
            // sqlparser ends an unterminated /* comment at the end of the text; the
            // database refuses it, so the checked text would not be what was written.
            let closed = source_between(sql, &line_starts, token.span.start, token.span.end)
                .is_some_and(|text| text.ends_with("*/"));
            if !closed {
                return Err(Refusal::new(
                    RefusalReason::ParseError,
                    "an unterminated /* comment; close it with */ or remove it",
                ));
            }
        }
        if matches!(token.token, Token::Whitespace(_) | Token::EOF) {
            previous = Some(&token.token);
            continue;
        }
        if dialect == SqlDialect::Sqlite
            && is_keyword(&token.token, Keyword::NOT)
            && operand_before.is_some_and(ends_operand)
            && next_word_is(&tokens[index + 1..], Keyword::NULL)
        {
            return Err(Refusal::new(
                RefusalReason::ParseError,
                "a postfix NOT NULL (x NOT NULL) is read differently by SQLite; write (x IS NOT NULL)",
            ));
        }
        if dialect == SqlDialect::Postgres {
            if let Token::Word(word) = &token.token {
                if word.value.len() > POSTGRES_NAME_BYTES {
                    // PostgreSQL cuts a longer name to its first 63 bytes, so two names the
                    // guard would tell apart can be one name to the database.
                    return Err(Refusal::new(
                        RefusalReason::TooLong,
                        format!(
                            "a name of {} bytes; PostgreSQL names are at most {POSTGRES_NAME_BYTES} bytes",
                            word.value.len()
                        ),
                    ));
                }
            }
        }
        operand_before = Some(&token.token);
        counted += 1;
        if is_operator(&token.token) {
            operators += 1;
        }
        // MySQL reads `0x41` as the hexadecimal literal X'41' (a binary string, a number
        // in a numeric context), which is how sqlparser renders it: nothing to restore.
        if let (Token::HexStringLiteral(_), false) = (&token.token, dialect == SqlDialect::Mysql) {
            let start = token.span.start;
            if source_at(sql, &line_starts, start)
                .is_some_and(|rest| rest.starts_with("0x") || rest.starts_with("0X"))
            {
                hex_integers.insert((start.line, start.column));
            }
        }
        if dialect == SqlDialect::Sqlite && is_postfix_null_test(&token.token) {
            return Err(Refusal::new(
                RefusalReason::ParseError,
                "ISNULL and NOTNULL are read differently by SQLite (as a postfix test of a lower precedence than IS NULL, or as an alias); write IS NULL or IS NOT NULL, in parentheses",
            ));
        }
        if let Token::Word(word) = &token.token {
            if word.quote_style.is_none() {
                if let Some(invisible) = word.value.chars().find(|c| is_invisible(*c)) {
                    return Err(Refusal::new(
                        RefusalReason::ParseError,
                        format!(
                            "an invisible character (U+{:04X}) inside a name is read differently by the database; remove it",
                            u32::from(invisible)
                        ),
                    ));
                }
            }
        }
        if let (Some(Token::Number(..) | Token::HexStringLiteral(_)), Token::Word(_)) =
            (previous, &token.token)
        {
            return Err(Refusal::new(
                RefusalReason::ParseError,
                "a number directly followed by a name (such as 0X10 or 1abc) is read differently by the database; write numbers in decimal and separate them from names",
            ));
        }
        previous = Some(&token.token);
    }
    if counted > MAX_TOKENS {
        return Err(too_long(format!(
            "the statement has {counted} tokens; the limit is {MAX_TOKENS}"
        )));
    }
    if operators > MAX_OPERATORS {
        return Err(too_long(format!(
            "the statement has {operators} operators; the limit is {MAX_OPERATORS} (write long lists with IN (...) instead of chains)"
        )));
    }
    Ok(Scanned {
        tokens,
        hex_integers,
    })
}

/// Characters that show as nothing: a byte-order mark, zero-width spaces and joiners,
/// word joiners, a soft hyphen, and Unicode spaces. sqlparser takes them for part of a
/// bare name where a database may not (the guard fuzzer found SQLite reading
/// `SELECT \u{feff}\`id\`` differently from its rendering), and no real name has them.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{feff}' | '\u{00ad}' | '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}')
        || (c.is_whitespace() && !c.is_ascii())
}

fn is_keyword(token: &Token, keyword: Keyword) -> bool {
    matches!(token, Token::Word(word) if word.quote_style.is_none() && word.keyword == keyword)
}

/// Whether a token can end an operand, so that a `NOT` after it is SQLite's postfix
/// `x NOT NULL` rather than a prefix `NOT` or `IS NOT`.
fn ends_operand(token: &Token) -> bool {
    match token {
        Token::Word(word) => {
            word.quote_style.is_some()
                || !matches!(
                    word.keyword,
                    Keyword::IS
                        | Keyword::AND
                        | Keyword::OR
                        | Keyword::NOT
                        | Keyword::SELECT
                        | Keyword::WHERE
                        | Keyword::ON
                        | Keyword::HAVING
                        | Keyword::WHEN
                        | Keyword::THEN
                        | Keyword::ELSE
                        | Keyword::CASE
                        | Keyword::BY
                        | Keyword::DISTINCT
                        | Keyword::ALL
                        | Keyword::RETURN
                )
        }
        Token::Number(..)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::HexStringLiteral(_)
        | Token::RParen
        | Token::RBracket => true,
        _ => false,
    }
}

/// Whether the next token that is not whitespace is the keyword.
fn next_word_is(rest: &[TokenWithSpan], keyword: Keyword) -> bool {
    rest.iter()
        .find(|token| !matches!(token.token, Token::Whitespace(_)))
        .is_some_and(|token| is_keyword(&token.token, keyword))
}

/// SQLite's postfix `ISNULL` / `NOTNULL`. sqlparser reads `x NOTNULL` as `x IS NOT NULL`
/// and prints it so, but SQLite binds the two forms differently (`1 NOTNULL || 1` is
/// not `1 IS NOT NULL || 1`, which SQLite reads as `1 IS NOT (NULL || 1)`), and
/// sqlparser takes `x ISNULL` for an alias: the guard fuzzer found both.
fn is_postfix_null_test(token: &Token) -> bool {
    matches!(token, Token::Word(word) if word.quote_style.is_none()
        && (word.value.eq_ignore_ascii_case("isnull") || word.value.eq_ignore_ascii_case("notnull")))
}

/// Tokens that are not operands: counted as operators (conservative: a token kind not
/// named here as an operand counts).
fn is_operator(token: &Token) -> bool {
    match token {
        Token::Word(word) => matches!(
            word.keyword,
            Keyword::AND
                | Keyword::OR
                | Keyword::NOT
                | Keyword::IS
                | Keyword::IN
                | Keyword::LIKE
                | Keyword::ILIKE
                | Keyword::BETWEEN
                | Keyword::COLLATE
                | Keyword::AT
                | Keyword::SIMILAR
                | Keyword::REGEXP
                | Keyword::RLIKE
                | Keyword::GLOB
                | Keyword::MATCH
                | Keyword::DIV
                | Keyword::XOR
                | Keyword::ESCAPE
                | Keyword::OVERLAPS
                | Keyword::NOTNULL
                | Keyword::OPERATOR
                // Set operations nest like an operator chain: a long UNION is a deep tree.
                | Keyword::UNION
                | Keyword::EXCEPT
                | Keyword::INTERSECT
                | Keyword::MINUS
        ),
        Token::Number(..)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::NationalStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::Placeholder(_)
        | Token::Comma
        | Token::LParen
        | Token::RParen
        | Token::Period
        | Token::SemiColon
        | Token::Whitespace(_)
        | Token::EOF => false,
        _ => true,
    }
}

fn line_starts(sql: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(sql.match_indices('\n').map(|(index, _)| index + 1))
        .collect()
}

/// The source text from a tokenizer location (1-based line, 1-based column in chars).
fn source_at<'a>(sql: &'a str, line_starts: &[usize], location: Location) -> Option<&'a str> {
    let line_index = usize::try_from(location.line).ok()?.checked_sub(1)?;
    let column = usize::try_from(location.column).ok()?.checked_sub(1)?;
    let line_start = *line_starts.get(line_index)?;
    let line = sql.get(line_start..)?;
    let offset = line
        .char_indices()
        .nth(column)
        .map(|(offset, _)| offset)
        .or_else(|| (line.chars().count() == column).then_some(line.len()))?;
    line.get(offset..)
}

/// The source text from one location up to another (both suffixes of the text).
fn source_between<'a>(
    sql: &'a str,
    line_starts: &[usize],
    start: Location,
    end: Location,
) -> Option<&'a str> {
    let from = source_at(sql, line_starts, start)?;
    let rest = source_at(sql, line_starts, end)?;
    from.get(..from.len().checked_sub(rest.len())?)
}

/// The decimal value of a SQLite hexadecimal integer's digits (`10` for `0x10`), as
/// SQLite reads it: at most 16 digits, a 64-bit two's-complement integer. Negative
/// values (16 digits from `8...`) are refused: their decimal form is not one literal.
pub(crate) fn hex_integer_value(digits: &str) -> Result<String, Refusal> {
    let refuse = || {
        Refusal::new(
            RefusalReason::ParseError,
            format!(
                "the hexadecimal integer 0x{digits} is too large or malformed; write it in decimal"
            ),
        )
    };
    if digits.is_empty() || digits.len() > 16 {
        return Err(refuse());
    }
    let value = u64::from_str_radix(digits, 16).map_err(|_| refuse())?;
    let signed = i64::from_ne_bytes(value.to_ne_bytes());
    if signed < 0 {
        return Err(refuse());
    }
    Ok(signed.to_string())
}

/// Which argument of a function sets the size of what it builds, by function name.
fn size_argument(name: &str) -> Option<usize> {
    match name {
        "repeat" | "lpad" | "rpad" => Some(1),
        "randomblob" | "zeroblob" | "space" => Some(0),
        _ => None,
    }
}

/// Which arguments of a function multiply its work by their length, by function name.
fn product_arguments(name: &str) -> &'static [usize] {
    match name {
        "ltrim" | "rtrim" | "btrim" | "trim" => &[1],
        "translate" => &[1, 2],
        "replace" => &[2],
        _ => &[],
    }
}

/// A string literal's characters, if the expression is one.
fn literal_text(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Value(value) => match &value.value {
            Value::SingleQuotedString(text)
            | Value::EscapedStringLiteral(text)
            | Value::DollarQuotedString(sqlparser::ast::DollarQuotedString {
                value: text, ..
            }) => Some(text.as_str()),
            _ => None,
        },
        Expr::Nested(inner) => literal_text(inner),
        _ => None,
    }
}

/// Refuses a product argument that is not a string literal of at most
/// [`MAX_CHARACTER_SET`] characters.
fn check_product_arguments(name: &str, args: &[Option<&Expr>]) -> Result<(), Refusal> {
    for &index in product_arguments(name) {
        check_one_product_argument(name, args, index)?;
    }
    Ok(())
}

fn check_one_product_argument(
    name: &str,
    args: &[Option<&Expr>],
    index: usize,
) -> Result<(), Refusal> {
    let Some(arg) = args.get(index) else {
        return Ok(());
    };
    match arg.and_then(literal_text) {
        Some(text) if text.chars().count() <= MAX_CHARACTER_SET => Ok(()),
        _ => Err(too_large(format!(
            "argument {} of {name}() must be a string literal of at most {MAX_CHARACTER_SET} characters: its work grows with that length times the value's, and nothing can stop one call",
            index + 1
        ))),
    }
}

/// The character sets of `TRIM(BOTH 'xy' FROM v)` and `TRIM(v, 'xy')`, bounded like a
/// trim function's.
pub(crate) fn check_character_sets(name: &str, sets: &[&Expr]) -> Result<(), Refusal> {
    let args: Vec<Option<&Expr>> = std::iter::once(None)
        .chain(sets.iter().map(|set| Some(*set)))
        .collect();
    for index in 1..args.len() {
        check_one_product_argument(name, &args, index)?;
    }
    Ok(())
}

fn too_large(message: String) -> Refusal {
    Refusal::new(RefusalReason::TooLarge, message)
}

fn unnamed_args(args: &FunctionArguments) -> Vec<Option<&Expr>> {
    match args {
        FunctionArguments::List(list) => list
            .args
            .iter()
            .map(|arg| match arg {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => Some(expr),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// An integer literal's value (a leading minus allowed: a negative size builds nothing).
fn literal_integer(expr: &Expr) -> Option<i128> {
    match expr {
        Expr::Value(value) => match &value.value {
            Value::Number(text, _) => text.parse::<i128>().ok(),
            _ => None,
        },
        Expr::Nested(inner) => literal_integer(inner),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => literal_integer(expr).map(|value| -value),
        Expr::UnaryOp {
            op: UnaryOperator::Plus,
            expr,
        } => literal_integer(expr),
        _ => None,
    }
}

/// Refuses a size argument that is not an integer literal of at most [`MAX_BUILT_SIZE`],
/// and a printf/format string that is not a literal or asks for a wider field.
pub(crate) fn check_built_size(name: &str, args: &FunctionArguments) -> Result<(), Refusal> {
    let args = unnamed_args(args);
    check_product_arguments(name, &args)?;
    if let Some(index) = size_argument(name) {
        let Some(arg) = args.get(index) else {
            return Ok(());
        };
        return match arg.and_then(literal_integer) {
            Some(size) if size <= i128::from(MAX_BUILT_SIZE) => Ok(()),
            Some(size) => Err(too_large(format!(
                "{name}() would build {size} bytes or characters; the limit is {MAX_BUILT_SIZE}"
            ))),
            None => Err(too_large(format!(
                "the size given to {name}() must be a plain integer (at most {MAX_BUILT_SIZE}), so the result stays bounded"
            ))),
        };
    }
    if matches!(name, "printf" | "format") {
        let format = args.first().copied().flatten().and_then(|expr| match expr {
            Expr::Value(value) => match &value.value {
                Value::SingleQuotedString(text) | Value::EscapedStringLiteral(text) => {
                    Some(text.as_str())
                }
                _ => None,
            },
            _ => None,
        });
        let Some(format) = format else {
            return Err(too_large(format!(
                "the format given to {name}() must be a string literal, so its widths can be checked"
            )));
        };
        return check_format_widths(name, format);
    }
    Ok(())
}

/// Reads every `%` conversion of a printf/format string: a `*` width or precision (taken
/// from an argument) is refused, and any number in a conversion over the bound.
fn check_format_widths(name: &str, format: &str) -> Result<(), Refusal> {
    let mut chars = format.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch != '%' {
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            continue;
        }
        let mut number = String::new();
        while let Some(&next) = chars.peek() {
            if next.is_ascii_digit() {
                number.push(next);
                chars.next();
                continue;
            }
            check_width_number(name, &number)?;
            number.clear();
            if next == '*' {
                return Err(too_large(format!(
                    "a width or precision taken from an argument (`*`) is not allowed in {name}(); write the number"
                )));
            }
            if matches!(
                next,
                '-' | '+' | ' ' | '#' | ',' | '!' | '.' | '$' | 'l' | 'h'
            ) {
                chars.next();
                continue;
            }
            break;
        }
        check_width_number(name, &number)?;
    }
    Ok(())
}

fn check_width_number(name: &str, digits: &str) -> Result<(), Refusal> {
    if digits.is_empty() {
        return Ok(());
    }
    let too_wide = digits.len() > 7
        || digits
            .parse::<u64>()
            .map_or(true, |width| width > MAX_BUILT_SIZE);
    if too_wide {
        return Err(too_large(format!(
            "the width {digits} in the format of {name}() is over the limit of {MAX_BUILT_SIZE}"
        )));
    }
    Ok(())
}
