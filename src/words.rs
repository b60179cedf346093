//! Words of plain text: the one tokeniser every rule and index uses, and the one rough
//! token estimate. Questions and identifiers are split the same way everywhere, so a rule
//! and the index it relies on never disagree about what a word is.

/// How a text is split into lower-cased words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// On every character that is not a letter or digit.
    Alphanumeric,
    /// The same, but a hyphen stays inside a word ("walk-in", "year-to-date"), for rules
    /// that match hyphenated phrases.
    KeepHyphens,
    /// Alphanumeric, and identifiers also at case changes (`InvoiceLine` -> invoice,
    /// line; `HTTPServer` -> http, server), for matching questions to schema names.
    Identifier,
}

/// The lower-cased words of `text`.
pub fn words(text: &str, split: Split) -> Vec<String> {
    let keep_hyphens = split == Split::KeepHyphens;
    let chunks = text
        .split(|c: char| !(c.is_alphanumeric() || keep_hyphens && c == '-'))
        .filter(|chunk| !chunk.is_empty());
    if split != Split::Identifier {
        return chunks.map(str::to_lowercase).collect();
    }
    let mut out = Vec::new();
    for chunk in chunks {
        let chars: Vec<char> = chunk.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (prev, here) = (chars[i - 1], chars[i]);
            let next_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
            let boundary = (prev.is_lowercase() && here.is_uppercase())
                || (prev.is_uppercase() && here.is_uppercase() && next_lower);
            if boundary {
                out.push(chars[start..i].iter().collect::<String>().to_lowercase());
                start = i;
            }
        }
        if start < chars.len() {
            out.push(chars[start..].iter().collect::<String>().to_lowercase());
        }
    }
    out
}

/// A rough token count: about four characters per token for English and SQL. A fallback
/// where no real tokenizer answers (a server without usage figures, budgets decided
/// before any call); never billed.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_splits_differ_only_where_they_say() {
        let text = "Walk-in InvoiceLine HTTPServer, 2025";
        assert_eq!(
            words(text, Split::Alphanumeric),
            ["walk", "in", "invoiceline", "httpserver", "2025"]
        );
        assert_eq!(
            words(text, Split::KeepHyphens),
            ["walk-in", "invoiceline", "httpserver", "2025"]
        );
        assert_eq!(
            words(text, Split::Identifier),
            ["walk", "in", "invoice", "line", "http", "server", "2025"]
        );
    }

    #[test]
    fn the_estimate_is_four_characters_a_token_rounded_up() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcde"), 2);
    }
}
