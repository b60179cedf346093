//! Plain-text tables for the terminal: the human form of rows, where NULL is shown as
//! `NULL` and never confused with an empty string, and long values are cut so a wide
//! row stays readable.

use serde_json::Value as JsonValue;

/// The widest a cell may be before it is cut.
const MAX_CELL_CHARS: usize = 60;

/// Renders a value for a terminal cell.
pub fn cell_text(value: &JsonValue) -> String {
    match value {
        JsonValue::Null => "NULL".to_string(),
        JsonValue::String(text) => text.replace(['\n', '\r', '\t'], " "),
        other => other.to_string(),
    }
}

/// Renders rows under a header, columns padded to their widest cell.
pub fn render(columns: &[String], rows: &[Vec<JsonValue>]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|value| crate::text::cut_text(&cell_text(value), MAX_CELL_CHARS))
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = columns.iter().map(|c| c.chars().count()).collect();
    for row in &cells {
        for (index, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(index) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let line = |values: &[String]| -> String {
        values
            .iter()
            .enumerate()
            .map(|(index, value)| {
                let width = widths.get(index).copied().unwrap_or(0);
                format!("{value:<width$}")
            })
            .collect::<Vec<_>>()
            .join(" | ")
            .trim_end()
            .to_string()
    };
    let mut out = String::new();
    out.push_str(&line(columns));
    out.push('\n');
    out.push_str(
        &widths
            .iter()
            .map(|width| "-".repeat(*width))
            .collect::<Vec<_>>()
            .join("-+-"),
    );
    out.push('\n');
    for row in &cells {
        out.push_str(&line(row));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn null_and_empty_string_look_different() {
        let table = render(
            &["a".to_string(), "b".to_string()],
            &[vec![json!(null), json!("")], vec![json!(12.5), json!("x")]],
        );
        assert_eq!(table, "a    | b\n-----+--\nNULL |\n12.5 | x\n");
    }
}
