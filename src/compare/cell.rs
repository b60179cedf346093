//! Cell values normalised for comparison (numbers scaled to the options' decimals,
//! numeric text read as numbers, booleans as 1 and 0, arrays and objects by their JSON
//! text), and a result set as a table of such cells.

use serde_json::Value as JsonValue;

use super::ResultSet;

/// A cell after normalisation; equal cells are equal answers. The derived order is only
/// used to sort multisets, it means nothing else.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Cell {
    Null,
    /// The value times 10^decimals, rounded half away from zero.
    Scaled(i128),
    /// A double too large to scale, by its bits (normalised so -0.0 never gets here).
    Huge(u64),
    Text(String),
    /// An array or object, by its JSON text.
    Json(String),
}

fn normalise(value: &JsonValue, scale: i128) -> Cell {
    match value {
        JsonValue::Null => Cell::Null,
        JsonValue::Bool(flag) => Cell::Scaled(if *flag { scale } else { 0 }),
        JsonValue::Number(number) => {
            if let Some(integer) = number.as_i64() {
                scale_integer(i128::from(integer), scale)
            } else if let Some(integer) = number.as_u64() {
                scale_integer(i128::from(integer), scale)
            } else {
                match number.as_f64() {
                    Some(double) if double.is_finite() => scale_double(double, scale),
                    // Only reachable with serde_json's arbitrary precision: keep the text.
                    _ => Cell::Text(number.to_string()),
                }
            }
        }
        JsonValue::String(text) => {
            numeric_text(text, scale).unwrap_or_else(|| Cell::Text(text.clone()))
        }
        JsonValue::Array(_) | JsonValue::Object(_) => Cell::Json(value.to_string()),
    }
}

fn scale_integer(integer: i128, scale: i128) -> Cell {
    match integer.checked_mul(scale) {
        Some(scaled) => Cell::Scaled(scaled),
        // Precision is lost here, but only for integers beyond 1.7e38 / 10^decimals.
        None => scale_double(integer as f64, scale),
    }
}

fn scale_double(double: f64, scale: i128) -> Cell {
    let rounded = (double * scale as f64).round();
    // i128::MAX is about 1.7e38; stay clear of the edge, where `as` would saturate.
    if rounded.is_finite() && rounded.abs() < 1.0e38 {
        Cell::Scaled(rounded as i128)
    } else {
        Cell::Huge(double.to_bits())
    }
}

/// Reads `-?[0-9]+(\.[0-9]+)?` as a number; anything else stays text.
fn numeric_text(text: &str, scale: i128) -> Option<Cell> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = match unsigned.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (unsigned, None),
    };
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit());
    if !digits(whole) || !fraction.is_none_or(digits) {
        return None;
    }
    if fraction.is_none() {
        if let Ok(integer) = text.parse::<i128>() {
            return Some(scale_integer(integer, scale));
        }
    }
    let double = text.parse::<f64>().ok()?;
    if !double.is_finite() {
        return None;
    }
    Some(scale_double(double, scale))
}

/// A result set as normalised cells, every row padded to the same width.
pub(super) struct Table {
    pub(super) width: usize,
    pub(super) rows: Vec<Vec<Cell>>,
}

impl Table {
    pub(super) fn new(result: &ResultSet, scale: i128) -> Self {
        let longest_row = result.rows.iter().map(Vec::len).max().unwrap_or(0);
        let width = result.columns.len().max(longest_row);
        let rows = result
            .rows
            .iter()
            .map(|row| {
                (0..width)
                    .map(|index| {
                        row.get(index)
                            .map_or(Cell::Null, |value| normalise(value, scale))
                    })
                    .collect()
            })
            .collect();
        Table { width, rows }
    }

    pub(super) fn sorted_column(&self, index: usize) -> Vec<&Cell> {
        let mut values: Vec<&Cell> = self.rows.iter().map(|row| &row[index]).collect();
        values.sort();
        values
    }
}
