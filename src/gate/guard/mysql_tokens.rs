//! MySQL's token rules: the forms MySQL and MariaDB read otherwise than the parser, or
//! that reach outside the query, refused on the token stream before a tree exists.
//!
//! - Executable comments (`/*! ... */`, `/*!50000 ... */`, MariaDB's `/*M! ... */`) and
//!   optimizer hints (`/*+ ... */`, whose `SET_VAR` can lift the statement's time limit):
//!   the server runs or obeys what a parser that skips comments never sees. sqlparser's
//!   MySQL dialect expands `/*!` into tokens of its own, so the scan finds them as tokens
//!   that start where the source has `/*`.
//! - A backslash anywhere outside a comment: inside a string it is an escape unless the
//!   session has NO_BACKSLASH_ESCAPES, so the parser's reading and the server's could
//!   differ, and a re-rendered string could close early (PostgreSQL's `E'...'` twin);
//!   outside a string `\N` is NULL.
//! - Double-quoted text: a string without ANSI_QUOTES, a name with it.
//! - User variables (`@a`, `@'a'`), their assignment (`:=`) and system variables
//!   (`@@version`, `@@global.x`): session state and server settings, not data.
//!
//! Three forms the parser refuses anyway as syntax errors get their own reason here, so
//! the words say what was refused: `INTO OUTFILE` / `INTO DUMPFILE` / `INTO @var`,
//! `LOCK IN SHARE MODE`, and `HANDLER`.

use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Whitespace};

use super::{Refusal, RefusalReason};

/// Byte offsets of a text's characters by tokenizer location (1-based line and column
/// in characters), so every token's source is found in constant time.
struct SourceIndex<'a> {
    sql: &'a str,
    /// For each line, the index into `offsets` of its first character.
    line_first_char: Vec<usize>,
    /// The byte offset of every character, and one past the end.
    offsets: Vec<usize>,
}

impl<'a> SourceIndex<'a> {
    fn new(sql: &'a str) -> Self {
        let mut line_first_char = vec![0];
        let mut offsets = Vec::with_capacity(sql.len() + 1);
        for (index, (offset, ch)) in sql.char_indices().enumerate() {
            offsets.push(offset);
            if ch == '\n' {
                line_first_char.push(index + 1);
            }
        }
        offsets.push(sql.len());
        SourceIndex {
            sql,
            line_first_char,
            offsets,
        }
    }

    fn offset(&self, location: Location) -> Option<usize> {
        let line = usize::try_from(location.line).ok()?.checked_sub(1)?;
        let column = usize::try_from(location.column).ok()?.checked_sub(1)?;
        let first = *self.line_first_char.get(line)?;
        self.offsets.get(first + column).copied()
    }

    fn from(&self, location: Location) -> Option<&'a str> {
        self.sql.get(self.offset(location)?..)
    }

    fn between(&self, start: Location, end: Location) -> Option<&'a str> {
        self.sql.get(self.offset(start)?..self.offset(end)?)
    }
}

fn executable_comment() -> Refusal {
    Refusal::new(
        RefusalReason::ExecutableComment,
        "executable comments and optimizer hints (/*! ... */, /*M! ... */, /*+ ... */) are not allowed: MySQL runs what they hold; write the query without them",
    )
}

fn session_variable(written: &str) -> Refusal {
    Refusal::new(
        RefusalReason::SessionVariable,
        format!("{written} reads or sets a session variable, not data; query only the tables and columns in the schema"),
    )
}

fn is_word(token: &Token, name: &str) -> bool {
    matches!(token, Token::Word(word) if word.quote_style.is_none() && word.value.eq_ignore_ascii_case(name))
}

/// The writes and locks MySQL spells in words the parser does not know.
fn check_word_sequences(tokens: &[TokenWithSpan]) -> Result<(), Refusal> {
    let significant: Vec<&Token> = tokens
        .iter()
        .map(|token| &token.token)
        .filter(|token| !matches!(token, Token::Whitespace(_) | Token::EOF))
        .collect();
    if significant
        .first()
        .is_some_and(|first| is_word(first, "handler"))
    {
        return Err(Refusal::new(
            RefusalReason::NotAQuery,
            "HANDLER opens a table outside any query; only a read-only query (SELECT, WITH ... SELECT) may run",
        ));
    }
    for (at, token) in significant.iter().enumerate() {
        let next = significant.get(at + 1).copied();
        if is_word(token, "into") {
            let target = next.is_some_and(|next| {
                is_word(next, "outfile")
                    || is_word(next, "dumpfile")
                    || matches!(next, Token::AtSign)
                    || matches!(next, Token::Word(word) if word.quote_style.is_none() && word.value.starts_with('@'))
            });
            if target {
                return Err(Refusal::new(
                    RefusalReason::SelectInto,
                    "SELECT ... INTO OUTFILE / DUMPFILE / @variable writes a file or a variable; select the rows without INTO",
                ));
            }
        }
        let lock_in_share_mode =
            ["lock", "in", "share", "mode"]
                .iter()
                .enumerate()
                .all(|(offset, word)| {
                    significant
                        .get(at + offset)
                        .is_some_and(|token| is_word(token, word))
                });
        if lock_in_share_mode {
            return Err(Refusal::new(
                RefusalReason::LockingClause,
                "locking clauses (LOCK IN SHARE MODE, FOR UPDATE, FOR SHARE) are not allowed; read without locking",
            ));
        }
    }
    Ok(())
}

/// Refuses the first token MySQL would read otherwise than the parser, or that reaches
/// outside the query.
pub(super) fn check(sql: &str, tokens: &[TokenWithSpan]) -> Result<(), Refusal> {
    check_word_sequences(tokens)?;
    let index = SourceIndex::new(sql);
    // Only text with a comment opener or a backslash needs each token's source.
    let may_hide_a_comment = sql.contains("/*");
    let has_backslash = sql.contains('\\');
    for token in tokens {
        match &token.token {
            Token::EOF => continue,
            Token::Whitespace(Whitespace::MultiLineComment(text)) => {
                let executable = text.starts_with('!')
                    || text.starts_with("M!")
                    || text.starts_with("m!")
                    || text.starts_with('+');
                if executable {
                    return Err(executable_comment());
                }
                continue;
            }
            _ => {}
        }
        if may_hide_a_comment {
            // sqlparser turns `/*!...*/` into the tokens it holds, placed where the
            // comment starts: a token that is not a comment but starts at `/*` is one.
            let from = index.from(token.span.start);
            if from.is_none_or(|text| text.starts_with("/*")) {
                return Err(executable_comment());
            }
        }
        if matches!(token.token, Token::Whitespace(_)) {
            continue;
        }
        if has_backslash {
            let source = index.between(token.span.start, token.span.end);
            if source.is_none_or(|text| text.contains('\\')) {
                return Err(Refusal::new(
                    RefusalReason::UnsafeRendering,
                    "a backslash is an escape to MySQL unless NO_BACKSLASH_ESCAPES is set (and \\N is NULL), so the statement could be read two ways; write strings and names without backslashes",
                ));
            }
        }
        match &token.token {
            Token::DoubleQuotedString(_) | Token::DoubleQuotedByteStringLiteral(_) => {
                return Err(Refusal::new(
                    RefusalReason::ParseError,
                    "MySQL reads \"...\" as a string or as a name depending on the server's ANSI_QUOTES mode; write strings in single quotes and names in backticks",
                ));
            }
            Token::Word(word) if word.quote_style.is_none() && word.value.starts_with("@@") => {
                return Err(Refusal::new(
                    RefusalReason::SystemCatalog,
                    format!(
                        "{} is a server or session setting, not data; query only the tables and columns in the schema",
                        word.value
                    ),
                ));
            }
            Token::Word(word) if word.quote_style.is_none() && word.value.starts_with('@') => {
                return Err(session_variable(&word.value));
            }
            Token::AtSign => return Err(session_variable("@")),
            Token::Assignment => return Err(session_variable(":=")),
            _ => {}
        }
    }
    Ok(())
}
