//! Committed results: the files evaluation commands write under `evals/results/` (each
//! stamped with its date and settings) and the README blocks generated from them. The
//! README's numbers are never typed by hand: `askdb eval guard --write` rewrites the block
//! between its markers, and a test fails when the README and the file disagree.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::eval::guard_check::EquivalenceReport;
use crate::eval::runner::{rate_text, EvalError, RunSummary};

/// The guard-equivalence results file, relative to the repository's root.
pub const GUARD_RESULTS: &str = "evals/results/guard_equivalence.json";

const GUARD_BLOCK_BEGIN: &str = "<!-- generated:guard-equivalence:begin -->";
const GUARD_BLOCK_END: &str = "<!-- generated:guard-equivalence:end -->";

const RESULTS_BLOCK_BEGIN: &str = "<!-- generated:results:begin -->";
const RESULTS_BLOCK_END: &str = "<!-- generated:results:end -->";

/// Where published run summaries live, relative to the repository's root.
pub const RESULTS_DIR: &str = "evals/results";

fn read(path: &Path) -> Result<String, EvalError> {
    std::fs::read_to_string(path).map_err(|error| EvalError::Read {
        path: path.display().to_string(),
        error,
    })
}

fn write(path: &Path, text: &str) -> Result<(), EvalError> {
    std::fs::write(path, text).map_err(|error| EvalError::Write {
        path: path.display().to_string(),
        error,
    })
}

/// Copies a finished run's summary and report into `<repo>/evals/results/<set>.summary.json`
/// and `<set>.report.md`, then regenerates the README results table from every
/// published summary. Returns the summary's path.
pub fn publish_run(run: &Path, repo: &Path) -> Result<PathBuf, EvalError> {
    let summary_path = run.join("summary.json");
    let summary_text = read(&summary_path)?;
    let summary: RunSummary = serde_json::from_str(&summary_text).map_err(|error| {
        EvalError::Data(format!(
            "{} is not a run summary: {error}",
            summary_path.display()
        ))
    })?;
    let dir = repo.join(RESULTS_DIR);
    std::fs::create_dir_all(&dir).map_err(|error| EvalError::Write {
        path: dir.display().to_string(),
        error,
    })?;
    let target = dir.join(format!("{}.summary.json", summary.set));
    write(&target, &summary_text)?;
    let report_path = run.join("report.md");
    if report_path.exists() {
        let report = read(&report_path)?;
        write(&dir.join(format!("{}.report.md", summary.set)), &report)?;
    }
    update_readme_results_block(&repo.join("README.md"), &published_summaries(&dir)?)?;
    Ok(target)
}

/// Every summary published in `dir` (`<set>.summary.json`), in name order.
pub fn published_summaries(dir: &Path) -> Result<Vec<RunSummary>, EvalError> {
    let mut summaries = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(summaries),
        Err(error) => {
            return Err(EvalError::Read {
                path: dir.display().to_string(),
                error,
            })
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.to_string_lossy().ends_with(".summary.json"))
        .collect();
    paths.sort();
    for path in paths {
        let summary: RunSummary = serde_json::from_str(&read(&path)?).map_err(|error| {
            EvalError::Data(format!("{} is not a run summary: {error}", path.display()))
        })?;
        summaries.push(summary);
    }
    Ok(summaries)
}

fn points(value: f64) -> String {
    format!("{:+.1}", value * 100.0)
}

fn paired_text(paired: &Option<crate::eval::metrics::PairedDifference>) -> String {
    paired
        .as_ref()
        .and_then(|paired| {
            let mean = paired.mean_difference?;
            let interval = paired.bootstrap95.as_ref()?;
            Some(format!(
                "{} [{}, {}]",
                points(mean),
                points(interval.lower),
                points(interval.upper),
            ))
        })
        .unwrap_or_else(|| "-".to_string())
}

/// The README results table, generated from published summaries.
pub fn results_block(summaries: &[RunSummary]) -> String {
    if summaries.is_empty() {
        return "No evaluation run has been published yet.\n".to_string();
    }
    let mut out = String::from(
        "| set | questions asked | model | agent [Wilson 95%] | baseline | plain | agent − baseline [bootstrap 95%] | agent − plain [bootstrap 95%] | agent p50 / p95 | rescued / broken | run (UTC) |\n|---|---:|---|---|---|---|---|---|---|---|---|\n",
    );
    for summary in summaries {
        let agent = summary.modes.get("agent");
        let rate = |mode: &str| {
            summary
                .modes
                .get(mode)
                .map(|s| rate_text(&s.accuracy))
                .unwrap_or_else(|| "-".into())
        };
        let questions = summary
            .modes
            .values()
            .map(|s| s.questions)
            .max()
            .unwrap_or(0);
        let asked = match summary.settings.sample {
            Some(_) => format!(
                "{questions} (random sample, seed {})",
                summary.settings.seed
            ),
            None => format!("{questions} of {}", summary.items),
        };
        let seconds = |ms: Option<u64>| {
            ms.map(|ms| format!("{:.1} s", ms as f64 / 1000.0))
                .unwrap_or_else(|| "-".into())
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            summary.set,
            asked,
            summary.model.model,
            rate("agent"),
            rate("baseline"),
            rate("plain"),
            paired_text(&summary.paired),
            paired_text(&summary.paired_plain),
            agent
                .map(|s| format!(
                    "{} / {}",
                    seconds(s.latency_p50_ms),
                    seconds(s.latency_p95_ms)
                ))
                .unwrap_or_else(|| "-".into()),
            agent
                .map(|s| format!("{} / {}", s.rescued, s.broken))
                .unwrap_or_else(|| "-".into()),
            summary.run,
        ));
    }
    out
}

fn update_readme_results_block(readme: &Path, summaries: &[RunSummary]) -> Result<(), EvalError> {
    let updated = replace_block(
        &read(readme)?,
        RESULTS_BLOCK_BEGIN,
        RESULTS_BLOCK_END,
        &results_block(summaries),
    )?;
    write(readme, &updated)
}

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
            generated_at: crate::calendar::utc_now().0,
            askdb_version: env!("CARGO_PKG_VERSION").to_string(),
            settings: "databases from ../shared/data (SQLite files; defog PostgreSQL dumps loaded into scratch databases); gold text run unguarded and re-rendered text run through run_query on the same read-only executor; row cap 1,000,000; rows compared in order with exact values".to_string(),
            reports,
        }
    }
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
) -> Result<String, EvalError> {
    let missing = |marker: &str| EvalError::Data(format!("marker {marker} not found"));
    let start = document.find(begin).ok_or_else(|| missing(begin))?;
    let after_begin = start + begin.len();
    let stop = document[after_begin..]
        .find(end)
        .map(|offset| after_begin + offset)
        .ok_or_else(|| missing(end))?;
    Ok(format!(
        "{}\n{}{}",
        &document[..after_begin],
        content,
        &document[stop..]
    ))
}

/// Writes `<repo>/evals/results/guard_equivalence.json` and rewrites the README's guard
/// block from it. Returns the results file's path.
pub fn write_guard_results(repo: &Path, results: &GuardResults) -> Result<PathBuf, EvalError> {
    let path = repo.join(GUARD_RESULTS);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|error| EvalError::Write {
            path: parent.display().to_string(),
            error,
        })?;
    }
    let text = serde_json::to_string_pretty(results)
        .map_err(|error| EvalError::Data(error.to_string()))?;
    write(&path, &(text + "\n"))?;
    let readme = repo.join("README.md");
    let updated = replace_block(
        &read(&readme)?,
        GUARD_BLOCK_BEGIN,
        GUARD_BLOCK_END,
        &guard_block(results),
    )?;
    write(&readme, &updated)?;
    Ok(path)
}

/// The summaries published in this repository when the binary was built, so an
/// installed `askdb serve` can show its evaluation card without the source tree:
/// (file name, contents).
pub const EMBEDDED_SUMMARIES: [(&str, &str); 4] = [
    (
        "chinook.summary.json",
        include_str!("../../evals/results/chinook.summary.json"),
    ),
    (
        "defog.summary.json",
        include_str!("../../evals/results/defog.summary.json"),
    ),
    (
        "demo.summary.json",
        include_str!("../../evals/results/demo.summary.json"),
    ),
    (
        "spider.summary.json",
        include_str!("../../evals/results/spider.summary.json"),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_results_table_is_generated_from_the_published_summaries() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
        let summaries =
            published_summaries(&root.join(RESULTS_DIR)).expect("published summaries parse");
        let expected = replace_block(
            &readme,
            RESULTS_BLOCK_BEGIN,
            RESULTS_BLOCK_END,
            &results_block(&summaries),
        )
        .expect("README has the results block markers");
        // `ASKDB_UPDATE_SNAPSHOTS=1` rewrites the table after a change in its layout.
        if std::env::var("ASKDB_UPDATE_SNAPSHOTS").is_ok_and(|value| value == "1") {
            std::fs::write(root.join("README.md"), &expected).expect("README written");
            return;
        }
        assert_eq!(
            readme, expected,
            "README's results table differs from evals/results/: run `askdb eval publish RUN`"
        );
    }

    #[test]
    fn every_published_summary_is_embedded_in_the_binary() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(RESULTS_DIR);
        let mut published: Vec<String> = std::fs::read_dir(&dir)
            .expect("evals/results exists")
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".summary.json"))
            .collect();
        published.sort();
        let embedded: Vec<&str> = EMBEDDED_SUMMARIES.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            published, embedded,
            "add the new summary to EMBEDDED_SUMMARIES"
        );
        for (name, text) in EMBEDDED_SUMMARIES {
            let on_disk = std::fs::read_to_string(dir.join(name)).expect("summary readable");
            assert_eq!(on_disk, text, "{name} is embedded as it is committed");
        }
    }

    #[test]
    fn replace_block_keeps_the_markers_and_the_rest() {
        let doc = "a\n<!-- b -->\nold\n<!-- e -->\nz\n";
        let new = replace_block(doc, "<!-- b -->", "<!-- e -->", "new\n").expect("markers present");
        assert_eq!(new, "a\n<!-- b -->\nnew\n<!-- e -->\nz\n");
        assert!(replace_block("no markers", "<!-- b -->", "<!-- e -->", "x").is_err());
    }

    #[test]
    fn the_readme_guard_table_is_generated_from_the_committed_results() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
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
