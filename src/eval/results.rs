//! Committed results: the files evaluation commands write under `evals/results/` (each
//! stamped with its date and settings) and the README blocks generated from them. The
//! README's numbers are never typed by hand: `askdb eval guard --write` rewrites the block
//! between its markers, and a test fails when the README and the file disagree.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::eval::guard_check::EquivalenceReport;

/// The guard-equivalence results file, relative to the project root.
pub const GUARD_RESULTS: &str = "evals/results/guard_equivalence.json";

const GUARD_BLOCK_BEGIN: &str = "<!-- generated:guard-equivalence:begin -->";
const GUARD_BLOCK_END: &str = "<!-- generated:guard-equivalence:end -->";

/// What `askdb eval guard` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardResults {
    /// UTC time the run finished, `YYYY-MM-DD HH:MM:SS`.
    pub generated_at: String,
    pub askdb_version: String,
    /// How the comparison ran (row cap raised so no LIMIT cuts a result; exact values).
    pub settings: String,
    pub reports: Vec<EquivalenceReport>,
}

impl GuardResults {
    pub fn new(reports: Vec<EquivalenceReport>) -> Self {
        GuardResults {
            generated_at: utc_now(),
            askdb_version: env!("CARGO_PKG_VERSION").to_string(),
            settings: "SQLite databases from ../shared/data; gold text run unguarded and re-rendered text run through run_query on the same read-only executor; row cap 1,000,000; rows compared in order with exact values".to_string(),
            reports,
        }
    }
}

/// The project root (where README.md and evals/ live).
pub fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn utc_now() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0);
    let days = (seconds / 86_400) as i64;
    crate::demo::dates::format_timestamp(days, (seconds % 86_400) as u32)
}

/// The README block for guard equivalence, generated from the results file.
pub fn guard_block(results: &GuardResults) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "Generated from `{GUARD_RESULTS}` ({} UTC, askdb {}).\n\n",
        results.generated_at, results.askdb_version
    ));
    out.push_str("| set | questions | gold queries | accepted by the guard | same rows after re-rendering | guard mean |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|\n");
    for report in &results.reports {
        out.push_str(&format!(
            "| {} ({}) | {} | {} | {} | {} | {:.0} us |\n",
            report.set,
            report.dialect,
            report.questions,
            report.gold_queries,
            report.accepted,
            report.same_result,
            report.guard_mean_us
        ));
    }
    out
}

/// Replaces the text between a block's markers; errors when the markers are missing.
pub fn replace_block(
    document: &str,
    begin: &str,
    end: &str,
    content: &str,
) -> Result<String, String> {
    let start = document
        .find(begin)
        .ok_or_else(|| format!("marker {begin} not found"))?;
    let after_begin = start + begin.len();
    let stop = document[after_begin..]
        .find(end)
        .map(|offset| after_begin + offset)
        .ok_or_else(|| format!("marker {end} not found"))?;
    Ok(format!(
        "{}\n{}{}",
        &document[..after_begin],
        content,
        &document[stop..]
    ))
}

/// Rewrites the guard block of the README at `readme` from `results`.
pub fn update_readme_guard_block(readme: &Path, results: &GuardResults) -> Result<(), String> {
    let text = std::fs::read_to_string(readme)
        .map_err(|error| format!("cannot read {}: {error}", readme.display()))?;
    let updated = replace_block(
        &text,
        GUARD_BLOCK_BEGIN,
        GUARD_BLOCK_END,
        &guard_block(results),
    )?;
    std::fs::write(readme, updated)
        .map_err(|error| format!("cannot write {}: {error}", readme.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_block_keeps_the_markers_and_the_rest() {
        let doc = "a\n<!-- b -->\nold\n<!-- e -->\nz\n";
        let new = replace_block(doc, "<!-- b -->", "<!-- e -->", "new\n").expect("markers present");
        assert_eq!(new, "a\n<!-- b -->\nnew\n<!-- e -->\nz\n");
        assert!(replace_block("no markers", "<!-- b -->", "<!-- e -->", "x").is_err());
    }

    #[test]
    fn the_readme_guard_table_is_generated_from_the_committed_results() {
        let root = project_root();
        let text = std::fs::read_to_string(root.join(GUARD_RESULTS))
            .expect("evals/results/guard_equivalence.json is committed");
        let results: GuardResults = serde_json::from_str(&text).expect("results parse");
        let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
        let expected = replace_block(
            &readme,
            GUARD_BLOCK_BEGIN,
            GUARD_BLOCK_END,
            &guard_block(&results),
        )
        .expect("README has the guard block markers");
        assert_eq!(
            readme, expected,
            "README's guard table differs from {GUARD_RESULTS}: run `askdb eval guard --write`"
        );
        for report in &results.reports {
            assert!(
                report.discrepancies.is_empty(),
                "{} has discrepancies",
                report.set
            );
        }
    }
}
