//! Small text helpers every layer uses: an error written with its chain of causes, a URL
//! shown without its password, and text cut to a length. One home each, so that, say, a
//! password is redacted the same way in a log line, a run manifest and an error. Also
//! a list of sentences with each said once, as a reader would count them, and a count
//! with its noun ("1 row", "2 rows").

/// An error with its chain of causes ("error connecting to server: Connection refused"):
/// many libraries print only the outermost part by themselves. A cause whose text the
/// message already contains is not repeated.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

/// The `mysql://` form of a MySQL or MariaDB URL (`mysql://` or `mariadb://`, the scheme
/// in either case, surrounding spaces ignored), or None for any other text: the one
/// reading of these URLs, so every command takes both spellings alike (the MySQL client
/// reads only the first).
pub fn mysql_url(text: &str) -> Option<String> {
    let trimmed = text.trim();
    let (scheme, rest) = trimmed.split_once("://")?;
    (scheme.eq_ignore_ascii_case("mysql") || scheme.eq_ignore_ascii_case("mariadb"))
        .then(|| format!("mysql://{rest}"))
}

/// Replaces the password of a `scheme://user:password@host` URL with `***`, and the value
/// of a `password=` query parameter. The credentials end at the last `@` before the query,
/// as the clients read them, so a password holding `/`, `:` or `@` is hidden whole; a
/// URL that cannot be read is hidden past its user rather than shown.
pub fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (main, query) = match rest.split_once('?') {
        Some((main, query)) => (main, Some(query)),
        None => (rest, None),
    };
    let main = match main.rfind('@') {
        Some(at) => match main[..at].split_once(':') {
            Some((user, _password)) => format!("{user}:***{}", &main[at..]),
            None => main.to_string(),
        },
        None => main.to_string(),
    };
    let query = query.map(|query| {
        query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                _ => pair.to_string(),
            })
            .collect::<Vec<_>>()
            .join("&")
    });
    match query {
        Some(query) => format!("{scheme}://{main}?{query}"),
        None => format!("{scheme}://{main}"),
    }
}

/// A count with its noun in the number it takes: `counted(1, "row", "rows")` is
/// "1 row", `counted(2, "row", "rows")` "2 rows".
pub fn counted(count: u64, one: &str, many: &str) -> String {
    if count == 1 {
        format!("1 {one}")
    } else {
        format!("{count} {many}")
    }
}

/// Cuts text to at most `max` characters, marking the cut with an ellipsis.
pub fn cut_text(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The sentences in their order with each kept once: two that differ only in case,
/// spacing or a final full stop are the same sentence (the first spelling is kept).
pub fn each_once(sentences: Vec<String>) -> Vec<String> {
    let key = |text: &str| {
        text.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .trim_end_matches(['.', ';', ','])
            .to_lowercase()
    };
    let mut seen = std::collections::HashSet::new();
    sentences
        .into_iter()
        .filter(|sentence| !sentence.trim().is_empty() && seen.insert(key(sentence)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_takes_its_nouns_number() {
        assert_eq!(counted(0, "row", "rows"), "0 rows");
        assert_eq!(counted(1, "row", "rows"), "1 row");
        assert_eq!(counted(2, "attempt", "attempts"), "2 attempts");
    }

    #[test]
    fn mysql_and_mariadb_urls_are_read_alike_and_nothing_else_is_one() {
        assert_eq!(
            mysql_url(" mariadb://u@h:3306/db ").as_deref(),
            Some("mysql://u@h:3306/db")
        );
        assert_eq!(
            mysql_url("MySQL://u@h/db").as_deref(),
            Some("mysql://u@h/db")
        );
        for other in [
            "postgres://u@h/db",
            "sqlite:x.db",
            "mysqlx://h",
            "mysql:h",
            "",
        ] {
            assert_eq!(mysql_url(other), None, "{other}");
        }
    }

    #[test]
    fn each_sentence_once_whatever_its_case_spacing_or_full_stop() {
        let said = vec![
            "The period is 2025.".to_string(),
            "the period is  2025".to_string(),
            "VOID bills are excluded".to_string(),
            " ".to_string(),
            "The period is 2025".to_string(),
        ];
        assert_eq!(
            each_once(said),
            vec![
                "The period is 2025.".to_string(),
                "VOID bills are excluded".to_string()
            ]
        );
    }

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);
    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|layer| layer as _)
        }
    }

    #[test]
    fn the_chain_names_each_cause_once() {
        let error = Layer(
            "error connecting",
            Some(Box::new(Layer(
                "refused",
                Some(Box::new(Layer("error connecting", None))),
            ))),
        );
        assert_eq!(error_chain(&error), "error connecting: refused");
    }

    #[test]
    fn passwords_are_redacted_and_other_urls_left_alone() {
        assert_eq!(
            redact_password("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_password("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact_password("demo"), "demo");
        // Where a client ends the credentials: at the last `@`, past any `/` or `@`.
        assert_eq!(
            redact_password("postgres://askdb_state:ab/cd@db/askdb"),
            "postgres://askdb_state:***@db/askdb"
        );
        assert_eq!(
            redact_password("mysql://root:p@ss:w/rd@h:3306/db"),
            "mysql://root:***@h:3306/db"
        );
        assert_eq!(
            redact_password("postgres://u@h/db?sslmode=require&password=s3cret"),
            "postgres://u@h/db?sslmode=require&password=***"
        );
    }

    #[test]
    fn cut_text_marks_the_cut() {
        assert_eq!(cut_text("abcdef", 4), "abc…");
        assert_eq!(cut_text("abc", 4), "abc");
        // Characters, not bytes: a multibyte text is cut at the same count.
        assert_eq!(cut_text(&"é".repeat(50), 40).chars().count(), 40);
    }
}
