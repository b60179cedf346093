//! Reading JSON out of a model's reply. Models asked for JSON often wrap it in a markdown
//! fence (```` ```json ... ``` ````) or put a sentence before it; this parser accepts the
//! reply as-is, then the first fenced block that parses, then the first balanced `{...}`
//! or `[...]` in the text. It never guesses at broken JSON: no repair of quotes or commas.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// The reply held no JSON this parser could find.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the model's reply is not JSON ({reason}); reply began: {start:?}")]
pub struct JsonReplyError {
    pub reason: String,
    /// The first 200 characters of the reply, for the error message.
    pub start: String,
}

impl JsonReplyError {
    fn new(reason: impl Into<String>, text: &str) -> JsonReplyError {
        JsonReplyError {
            reason: reason.into(),
            start: text.chars().take(200).collect(),
        }
    }
}

/// The JSON value in a model reply (see the module doc for what is tolerated).
pub fn parse_json_reply(text: &str) -> Result<Value, JsonReplyError> {
    let trimmed = text.trim().trim_start_matches('\u{feff}');
    if trimmed.is_empty() {
        return Err(JsonReplyError::new("the reply is empty", text));
    }
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return Ok(value);
    }
    for block in fenced_blocks(trimmed) {
        if let Ok(value) = serde_json::from_str::<Value>(block.trim()) {
            return Ok(value);
        }
    }
    for (index, character) in trimmed.char_indices() {
        if character == '{' || character == '[' {
            if let Some(end) = balanced_end(&trimmed[index..]) {
                if let Ok(value) = serde_json::from_str::<Value>(&trimmed[index..index + end]) {
                    return Ok(value);
                }
            }
        }
    }
    Err(JsonReplyError::new(
        "no parseable JSON object, array or fenced block",
        text,
    ))
}

/// The reply deserialized into `T`.
pub fn parse_json_reply_as<T: DeserializeOwned>(text: &str) -> Result<T, JsonReplyError> {
    let value = parse_json_reply(text)?;
    serde_json::from_value(value)
        .map_err(|error| JsonReplyError::new(format!("JSON of the wrong shape: {error}"), text))
}

/// The contents of each ``` fenced block, in order (a missing closing fence runs to the
/// end of the text, as happens when a reply is cut at the token limit).
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after_fence = &rest[open + 3..];
        // Skip the info string (`json`, `JSON`, ...) up to the end of the line.
        let body_start = after_fence
            .find('\n')
            .map(|i| i + 1)
            .unwrap_or(after_fence.len());
        let body = &after_fence[body_start..];
        match body.find("```") {
            Some(close) => {
                blocks.push(&body[..close]);
                rest = &body[close + 3..];
            }
            None => {
                blocks.push(body);
                break;
            }
        }
    }
    blocks
}

/// The byte length of the balanced `{...}` or `[...]` at the start of `text`, skipping
/// brackets inside strings.
fn balanced_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (index, character) in text.char_indices() {
        if in_string {
            match (escaped, character) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match character {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(index + character.len_utf8());
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_json_parses() {
        assert_eq!(
            parse_json_reply(r#" {"sql": "SELECT 1"} "#),
            Ok(json!({"sql": "SELECT 1"}))
        );
    }

    #[test]
    fn a_fenced_block_parses_with_or_without_a_language() {
        let fenced = "Here you go:\n```json\n{\"sql\": \"SELECT 1\"}\n```\nHope it helps.";
        assert_eq!(parse_json_reply(fenced), Ok(json!({"sql": "SELECT 1"})));
        let bare = "```\n[1, 2]\n```";
        assert_eq!(parse_json_reply(bare), Ok(json!([1, 2])));
        let unclosed = "```json\n{\"sql\": \"SELECT 1\"}\n";
        assert_eq!(parse_json_reply(unclosed), Ok(json!({"sql": "SELECT 1"})));
    }

    #[test]
    fn an_object_inside_prose_parses_and_braces_in_strings_do_not_confuse_it() {
        let prose = r#"The query is {"sql": "SELECT '}' AS brace", "note": "a \"quoted\" word"} as requested."#;
        assert_eq!(
            parse_json_reply(prose),
            Ok(json!({"sql": "SELECT '}' AS brace", "note": "a \"quoted\" word"}))
        );
    }

    #[test]
    fn broken_json_is_an_error_that_shows_the_start_of_the_reply() {
        let error = parse_json_reply("{\"sql\": 'SELECT 1'}").expect_err("not JSON");
        assert!(error.start.starts_with("{\"sql\""));
        assert!(parse_json_reply("   ").is_err());
        assert!(parse_json_reply("I cannot help with that.").is_err());
    }

    #[test]
    fn typed_parsing_reports_the_wrong_shape() {
        #[derive(serde::Deserialize, Debug)]
        struct Reply {
            #[allow(dead_code)]
            sql: String,
        }
        assert!(parse_json_reply_as::<Reply>("```json\n{\"sql\": \"SELECT 1\"}\n```").is_ok());
        let error = parse_json_reply_as::<Reply>("{\"query\": 1}").expect_err("wrong shape");
        assert!(error.reason.contains("wrong shape"), "{error}");
    }
}
