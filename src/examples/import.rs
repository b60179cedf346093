//! Example files: JSONL (one object a line: `question`, `sql`, and optionally
//! `verified_by` and `notes`) and CSV (a header row naming the same columns), read into
//! drafts with every bad line reported by its number, and the JSONL `askdb examples
//! export` writes, which reads back as it was written. A line's `verified_at` is kept in
//! the file for people: an imported example is checked, and so verified, when imported.

use serde::{Deserialize, Serialize};

use super::{Draft, Example};

/// The largest example file read, in bytes: far beyond any hand-kept library, and a
/// bound on what one import holds in memory.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// How a file's lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Jsonl,
    Csv,
}

impl FileFormat {
    pub const ALL: [FileFormat; 2] = [FileFormat::Jsonl, FileFormat::Csv];

    pub fn as_str(self) -> &'static str {
        match self {
            FileFormat::Jsonl => "jsonl",
            FileFormat::Csv => "csv",
        }
    }

    /// The format a file's extension names: `.csv` is CSV, anything else JSONL.
    pub fn of_path(path: &std::path::Path) -> FileFormat {
        match path.extension().and_then(|extension| extension.to_str()) {
            Some(extension) if extension.eq_ignore_ascii_case("csv") => FileFormat::Csv,
            _ => FileFormat::Jsonl,
        }
    }
}

/// One line of an example file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExampleLine {
    pub question: String,
    pub sql: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

impl From<&Example> for ExampleLine {
    fn from(example: &Example) -> ExampleLine {
        ExampleLine {
            question: example.question.clone(),
            sql: example.sql.clone(),
            verified_by: Some(example.verified_by.clone()),
            verified_at: Some(example.verified_at.clone()),
            notes: example.notes.clone(),
        }
    }
}

/// A line that could not be read or saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineError {
    /// 1-based, as an editor shows it (a CSV's header is line 1).
    pub line: usize,
    pub error: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.error)
    }
}

/// One readable line: where it was and what it asks to save.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedLine {
    pub line: usize,
    pub draft: Draft,
}

/// The drafts of a file and its bad lines. A line without `verified_by` takes
/// `verified_by` (the person importing); with neither it is a bad line, since only a
/// person makes an example.
pub fn parse(
    text: &str,
    format: FileFormat,
    verified_by: Option<&str>,
) -> (Vec<ParsedLine>, Vec<LineError>) {
    let lines = match format {
        FileFormat::Jsonl => jsonl_lines(text),
        FileFormat::Csv => csv_lines(text),
    };
    let mut parsed = Vec::new();
    let mut errors = Vec::new();
    for (line, outcome) in lines {
        match outcome.and_then(|record| draft_of(record, verified_by)) {
            Ok(draft) => parsed.push(ParsedLine { line, draft }),
            Err(error) => errors.push(LineError { line, error }),
        }
    }
    (parsed, errors)
}

fn draft_of(line: ExampleLine, verified_by: Option<&str>) -> Result<Draft, String> {
    let verified_by = line
        .verified_by
        .filter(|name| !name.trim().is_empty())
        .or_else(|| verified_by.map(str::to_string))
        .ok_or_else(|| {
            "no verified_by: name the person who confirmed it (or pass --verified-by)".to_string()
        })?;
    Ok(Draft {
        question: line.question,
        sql: line.sql,
        verified_by,
        notes: line.notes,
    })
}

fn jsonl_lines(text: &str) -> Vec<(usize, Result<ExampleLine, String>)> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            (
                index + 1,
                serde_json::from_str::<ExampleLine>(line)
                    .map_err(|error| format!("not an example object: {error}")),
            )
        })
        .collect()
}

fn csv_lines(text: &str) -> Vec<(usize, Result<ExampleLine, String>)> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(text.as_bytes());
    let headers = match reader.headers() {
        Ok(headers) => headers.clone(),
        Err(error) => return vec![(1, Err(format!("unreadable CSV header: {error}")))],
    };
    let known = ["question", "sql", "verified_by", "verified_at", "notes"];
    if let Some(unknown) = headers.iter().find(|name| !known.contains(&name.trim())) {
        return vec![(
            1,
            Err(format!(
                "unknown column {unknown:?} in the header: use {}",
                known.join(", ")
            )),
        )];
    }
    let column = |name: &str| headers.iter().position(|header| header.trim() == name);
    let (Some(question), Some(sql)) = (column("question"), column("sql")) else {
        return vec![(
            1,
            Err("the header must name a question and a sql column".to_string()),
        )];
    };
    let optional = |record: &csv::StringRecord, name: &str| {
        column(name)
            .and_then(|index| record.get(index))
            .map(str::to_string)
            .filter(|value| !value.trim().is_empty())
    };
    reader
        .records()
        .map(|record| {
            let line = record
                .as_ref()
                .ok()
                .and_then(|record| record.position())
                .or_else(|| record.as_ref().err().and_then(|error| error.position()))
                .map_or(0, |position| usize::try_from(position.line()).unwrap_or(0));
            let outcome = record
                .map_err(|error| format!("unreadable CSV record: {error}"))
                .map(|record| ExampleLine {
                    question: record.get(question).unwrap_or_default().to_string(),
                    sql: record.get(sql).unwrap_or_default().to_string(),
                    verified_by: optional(&record, "verified_by"),
                    verified_at: optional(&record, "verified_at"),
                    notes: optional(&record, "notes"),
                });
            (line, outcome)
        })
        .collect()
}

/// Examples as JSONL, one line each, in the form [`parse`] reads back.
pub fn export_jsonl(examples: &[Example]) -> String {
    examples
        .iter()
        .map(|example| {
            serde_json::to_string(&ExampleLine::from(example)).unwrap_or_default() + "\n"
        })
        .collect()
}
