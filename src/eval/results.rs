//! Committed results: the files evaluation commands and benches write under
//! `evals/results/` and `benches/results/` (each stamped with its date and settings), and
//! the documents generated from them: the README's results table and every block of
//! `docs/measured.md`. Their numbers are never typed by hand: each block sits between
//! `<!-- generated:NAME:begin -->` and `<!-- generated:NAME:end -->`, `askdb eval publish`
//! and `askdb eval guard --write` rewrite them all, and a test fails when either document
//! and the files disagree (`ASKDB_UPDATE_SNAPSHOTS=1` rewrites them after a bench or a
//! script wrote a new file).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::eval::guard_check::EquivalenceReport;
use crate::eval::runner::{rate_text, AskPath, EvalError, ExampleSource, RunSummary};

/// The guard-equivalence results file, relative to the repository's root.
pub const GUARD_RESULTS: &str = "evals/results/guard_equivalence.json";

/// Where published run summaries live, relative to the repository's root.
pub const RESULTS_DIR: &str = "evals/results";

/// The document of every measurement, relative to the repository's root.
pub const MEASURED_DOC: &str = "docs/measured.md";

/// Where the benches and their scripts write their figures, relative to the root.
pub const BENCH_RESULTS_DIR: &str = "benches/results";

/// The generated block names of the README.
const README_BLOCKS: [&str; 2] = ["results", "sparc"];

/// The published SParC run, relative to the results directory.
pub const SPARC_SUMMARY: &str = "sparc.json";

/// The generated block names of `docs/measured.md`, in the order they appear.
const MEASURED_BLOCKS: [&str; 16] = [
    "results",
    "failures",
    "run-figures",
    "ablation",
    "selection",
    "answer-checks-gold",
    "first-question",
    "guard-equivalence",
    "guard-fuzz",
    "corpora",
    "load-demo",
    "load-postgres",
    "faults",
    "peers",
    "mcp-demo",
    "rerun",
];

fn begin_marker(name: &str) -> String {
    format!("<!-- generated:{name}:begin -->")
}

fn end_marker(name: &str) -> String {
    format!("<!-- generated:{name}:end -->")
}

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
    if run.join(crate::eval::sparc::TURNS_FILE).exists() {
        return publish_sparc_run(&summary_path, &summary_text, repo);
    }
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
    let name = published_name(&summary);
    let target = dir.join(format!("{name}.summary.json"));
    // The run folder keeps the database URL whole (a resumed run reads it); what is
    // committed never carries its password.
    let without_password = |text: &str| match &summary.settings.db {
        Some(db) if crate::text::redact_password(db) != *db => {
            let quoted = |value: &str| serde_json::to_string(value).unwrap_or_default();
            let redacted = crate::text::redact_password(db);
            text.replace(&quoted(db), &quoted(&redacted))
                .replace(db.as_str(), &redacted)
        }
        _ => text.to_string(),
    };
    write(&target, &without_password(&summary_text))?;
    let report_path = run.join("report.md");
    if report_path.exists() {
        let report = read(&report_path)?;
        write(
            &dir.join(format!("{name}.report.md")),
            &without_password(&report),
        )?;
    }
    update_generated_documents(repo)?;
    Ok(target)
}

/// A SParC run's report, published as `evals/results/sparc.json` (one SParC run
/// is published at a time) and the README's SParC block regenerated.
fn publish_sparc_run(
    summary_path: &Path,
    summary_text: &str,
    repo: &Path,
) -> Result<PathBuf, EvalError> {
    let _: crate::eval::sparc::SparcReport =
        serde_json::from_str(summary_text).map_err(|error| {
            EvalError::Data(format!(
                "{} is not a finished SParC run's report: {error}",
                summary_path.display()
            ))
        })?;
    let dir = repo.join(RESULTS_DIR);
    std::fs::create_dir_all(&dir).map_err(|error| EvalError::Write {
        path: dir.display().to_string(),
        error,
    })?;
    let target = dir.join(SPARC_SUMMARY);
    write(&target, summary_text)?;
    update_generated_documents(repo)?;
    Ok(target)
}

/// The README's SParC block: the published run, or a sentence saying none is.
fn sparc_block(results: &Path) -> Result<String, EvalError> {
    let path = results.join(SPARC_SUMMARY);
    if !path.exists() {
        return Ok("No SParC run is published yet.\n".to_string());
    }
    let report: crate::eval::sparc::SparcReport = read_json(&path)?;
    Ok(crate::eval::sparc::report_block(&report))
}

/// The name a run is published under: its set, then `-report` for a sample taken after
/// the first questions of the shuffle (a report sample beside the tuning sample the set's
/// own name holds), `-mysql` when its databases were MySQL or MariaDB copies,
/// `-examples` when each question had the database's other questions as verified
/// examples, then the path users take when the agent was asked on one.
pub fn published_name(summary: &RunSummary) -> String {
    let mut name = summary.set.clone();
    if summary.settings.sample.is_some() && summary.settings.sample_offset > 0 {
        name.push_str("-report");
    }
    if asked_on_mysql(summary) {
        name.push_str("-mysql");
    }
    if summary.settings.examples == ExampleSource::LeaveOneOut {
        name.push_str("-examples");
    }
    match summary.settings.ask_path {
        AskPath::Harness => {}
        AskPath::Process => name.push_str("-ask"),
        AskPath::Serve => name.push_str("-serve"),
    }
    name
}

/// Whether a run asked its set's databases on a MySQL or MariaDB server (`--db`).
fn asked_on_mysql(summary: &RunSummary) -> bool {
    summary
        .settings
        .db
        .as_deref()
        .is_some_and(|db| crate::text::mysql_url(db).is_some())
}

/// Which questions a published run asked, and how, for the results table.
fn asked_text(summary: &RunSummary, questions: u64) -> String {
    let mut text = match (summary.settings.sample, summary.settings.sample_offset) {
        (Some(_), 0) => format!(
            "{questions} (tuning sample, seed {})",
            summary.settings.seed
        ),
        (Some(_), offset) => format!(
            "{questions} (report sample, seed {}, after the first {offset})",
            summary.settings.seed
        ),
        (None, _) => format!("{questions} of {}", summary.items),
    };
    if asked_on_mysql(summary) {
        text.push_str(", on MariaDB copies of the databases");
    }
    if summary.settings.examples == ExampleSource::LeaveOneOut {
        text.push_str(", verified examples: the database's other questions");
    }
    match summary.settings.ask_path {
        AskPath::Harness => {}
        AskPath::Process => text.push_str(", agent through `askdb ask` processes"),
        AskPath::Serve => text.push_str(", agent through `POST /api/ask`"),
    }
    text
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
        "| set | questions asked | model | agent [Wilson 95%] | baseline | plain | agent − baseline [bootstrap 95%] | agent − plain [bootstrap 95%] | agent p50 / p95 (the model server's ms a token written) | rescued / broken | run (UTC) |\n|---|---:|---|---|---|---|---|---|---|---|---|\n",
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
        let asked = asked_text(summary, questions);
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
                    "{} / {}{}",
                    seconds(s.latency_p50_ms),
                    seconds(s.latency_p95_ms),
                    // Latencies of runs on different days compare only at the same
                    // speed; summaries written before the server's clock was kept have none.
                    s.model_speed
                        .and_then(|speed| speed.ms_per_generated_token)
                        .map(|ms| format!(" ({ms:.0} ms)"))
                        .unwrap_or_default()
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
    out.push_str("| set | questions | gold queries | accepted by the guard | same rows after re-rendering | parser check mean | database check mean, first / repeated |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
    for report in &results.reports {
        out.push_str(&format!(
            "| {} ({}) | {} | {} | {} | {} | {:.0} us | {:.0} us / {:.1} us |\n",
            report.set,
            report.dialect,
            report.questions,
            report.gold_queries,
            report.accepted,
            same_rows_text(report),
            report.guard_mean_us,
            report.database_check_mean_us,
            report.database_check_repeat_mean_us
        ));
    }
    out
}

/// The same-rows count, and beside it the queries accepted unchanged whose two runs
/// differed only by the engine's choice among tied rows.
fn same_rows_text(report: &crate::eval::guard_check::EquivalenceReport) -> String {
    match report.same_text_rows_differ {
        0 => report.same_result.to_string(),
        ties => format!(
            "{} (+{ties} accepted as written, the engine choosing differently among tied rows)",
            report.same_result
        ),
    }
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

/// Writes `<repo>/evals/results/guard_equivalence.json` and regenerates the documents
/// (its table is in `docs/measured.md`). Returns the results file's path.
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
    update_generated_documents(repo)?;
    Ok(path)
}

/// Replaces the text of every named block (`<!-- generated:NAME:begin -->` to its end
/// marker) in `document`; errors when a block's markers are missing.
pub fn replace_blocks(document: &str, blocks: &[(&str, String)]) -> Result<String, EvalError> {
    let mut updated = document.to_string();
    for (name, content) in blocks {
        updated = replace_block(&updated, &begin_marker(name), &end_marker(name), content)?;
    }
    Ok(updated)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, EvalError> {
    serde_json::from_str(&read(path)?)
        .map_err(|error| EvalError::Data(format!("{} does not parse: {error}", path.display())))
}

/// The README's generated blocks, from the files under `repo`.
pub fn readme_blocks(repo: &Path) -> Result<Vec<(&'static str, String)>, EvalError> {
    let summaries = published_summaries(&repo.join(RESULTS_DIR))?;
    Ok(vec![
        (README_BLOCKS[0], results_block(&summaries)),
        (README_BLOCKS[1], sparc_block(&repo.join(RESULTS_DIR))?),
    ])
}

/// Every generated block of `docs/measured.md`, from the files under `repo`.
pub fn measured_blocks(repo: &Path) -> Result<Vec<(&'static str, String)>, EvalError> {
    let results = repo.join(RESULTS_DIR);
    let benches = repo.join(BENCH_RESULTS_DIR);
    let mut blocks = Vec::new();
    for name in MEASURED_BLOCKS {
        let content = match name {
            "results" => results_block(&published_summaries(&results)?),
            "failures" => failures_block(&published_summaries(&results)?),
            "run-figures" => run_figures_block(&results.join("run-figures"))?,
            "ablation" => ablation_block(&read_json(&results.join("ablations.json"))?),
            "selection" => selection_block(&read_json(&results.join("selection-spider.json"))?),
            "answer-checks-gold" => {
                gold_checks_block(&read_json(&results.join("answer_checks_gold.json"))?)
            }
            "first-question" => {
                first_question_block(&read_json(&benches.join("first-question.json"))?)
            }
            "guard-equivalence" => guard_block(&read_json(&repo.join(GUARD_RESULTS))?),
            "guard-fuzz" => guard_fuzz_block(&read_json(&benches.join("guard_fuzz.json"))?),
            "mcp-demo" => mcp_demo_block(&read_json(&benches.join("mcp-demo.json"))?),
            "corpora" => corpora_block(repo)?,
            bench => bench_report_block(&benches, &format!("{bench}.md"))?,
        };
        blocks.push((name, content));
    }
    Ok(blocks)
}

/// Regenerates the README's results table and every block of `docs/measured.md` from
/// the committed result files.
pub fn update_generated_documents(repo: &Path) -> Result<(), EvalError> {
    for (document, blocks) in [
        (repo.join("README.md"), readme_blocks(repo)?),
        (repo.join(MEASURED_DOC), measured_blocks(repo)?),
    ] {
        let updated = replace_blocks(&read(&document)?, &blocks)?;
        write(&document, &updated)?;
    }
    Ok(())
}

/// The agent's failures in each published run, by the error type of their last attempt
/// (`wrong_result`: the query ran and returned the wrong rows).
pub fn failures_block(summaries: &[RunSummary]) -> String {
    let mut out =
        String::from("| set | run (UTC) | agent failures | by kind |\n|---|---|---:|---|\n");
    for summary in summaries {
        let total: u64 = summary.agent_failures_by_type.values().sum();
        let kinds: Vec<String> = summary
            .agent_failures_by_type
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            summary.set,
            summary.run,
            total,
            kinds.join(", ")
        ));
    }
    out
}

/// One row of a figures file (`scripts/ablation-figures.py`): a mode of a named run,
/// scored on the questions every run of the file asked.
#[derive(Debug, Clone, Deserialize)]
pub struct FigureRow {
    pub name: String,
    pub mode: String,
    pub strategy: String,
    pub set: String,
    pub questions: u64,
    pub correct: u64,
    pub rate: Option<f64>,
    pub wilson95: (f64, f64),
    pub latency_p50_ms: Option<u64>,
    pub latency_p95_ms: Option<u64>,
    pub run: String,
    pub run_candidates: u64,
    pub run_candidates_at_token_limit: u64,
}

/// A figures file: `evals/results/ablations.json` and each of `run-figures/`.
#[derive(Debug, Clone, Deserialize)]
pub struct Figures {
    pub questions_compared: u64,
    pub rows: Vec<FigureRow>,
}

fn seconds_text(ms: Option<u64>) -> String {
    format!("{:.1} s", ms.unwrap_or(0) as f64 / 1000.0)
}

fn token_limit_text(row: &FigureRow) -> String {
    if row.run_candidates == 0 {
        "-".to_string()
    } else {
        format!(
            "{} of {}",
            row.run_candidates_at_token_limit, row.run_candidates
        )
    }
}

/// The first-attempt ablation table (decision 0009), as `scripts/ablation-figures.py`
/// writes it.
pub fn ablation_block(figures: &Figures) -> String {
    let mut out = format!(
        "Scored on the {} questions every run below asked.\n\n",
        figures.questions_compared
    );
    out.push_str("| run | mode | strategy | correct [Wilson 95%] | p50 / p95 | replies at the token limit (whole run) | run (UTC) |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    for row in &figures.rows {
        let strategy = if row.mode == "plain" {
            "(reference prompt)".to_string()
        } else {
            format!("`{}`", row.strategy)
        };
        out.push_str(&format!(
            "| {} | {} | {} | {:.1}% [{:.1}, {:.1}] ({}/{}) | {} / {} | {} | {} |\n",
            row.name,
            row.mode,
            strategy,
            100.0 * row.rate.unwrap_or(0.0),
            100.0 * row.wilson95.0,
            100.0 * row.wilson95.1,
            row.correct,
            row.questions,
            seconds_text(row.latency_p50_ms),
            seconds_text(row.latency_p95_ms),
            token_limit_text(row),
            row.run,
        ));
    }
    out
}

/// Every run kept in `evals/results/run-figures/`, oldest first: one line per named run,
/// its modes side by side.
pub fn run_figures_block(dir: &Path) -> Result<String, EvalError> {
    let entries = std::fs::read_dir(dir).map_err(|error| EvalError::Read {
        path: dir.display().to_string(),
        error,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    // (run, file, name) -> rows of that run, in the file's order.
    let mut runs: Vec<(String, String, String, Vec<FigureRow>)> = Vec::new();
    for path in paths {
        let figures: Figures = read_json(&path)?;
        let file = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        for row in figures.rows {
            match runs
                .iter_mut()
                .find(|(run, f, name, _)| *run == row.run && *f == file && *name == row.name)
            {
                Some((_, _, _, rows)) => rows.push(row),
                None => runs.push((row.run.clone(), file.clone(), row.name.clone(), vec![row])),
            }
        }
    }
    runs.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
    let mut out = String::from(
        "| run (UTC) | file | name | set | agent | baseline | plain | agent p50 / p95 | replies at the token limit |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for (run, file, name, rows) in &runs {
        let mode = |mode: &str| {
            rows.iter()
                .find(|row| row.mode == mode)
                .map(|row| {
                    format!(
                        "{:.1}% ({}/{})",
                        100.0 * row.rate.unwrap_or(0.0),
                        row.correct,
                        row.questions
                    )
                })
                .unwrap_or_else(|| "-".to_string())
        };
        let agent = rows.iter().find(|row| row.mode == "agent");
        out.push_str(&format!(
            "| {} | `{}` | {} | {} | {} | {} | {} | {} | {} |\n",
            run,
            file,
            name,
            rows.first().map(|row| row.set.as_str()).unwrap_or("-"),
            mode("agent"),
            mode("baseline"),
            mode("plain"),
            agent
                .map(|row| format!(
                    "{} / {}",
                    seconds_text(row.latency_p50_ms),
                    seconds_text(row.latency_p95_ms)
                ))
                .unwrap_or_else(|| "-".to_string()),
            rows.first()
                .map(token_limit_text)
                .unwrap_or_else(|| "-".to_string()),
        ));
    }
    Ok(out)
}

/// One way of choosing among a pool's candidates (`scripts/selection-figures.py`);
/// percentages as the script rounded them.
#[derive(Debug, Clone, Deserialize)]
pub struct SelectionPolicy {
    pub policy: String,
    pub correct: u64,
    pub questions: u64,
    pub accuracy: f64,
    pub wilson: (f64, f64),
    pub minus_plain: f64,
    pub minus_plain_bootstrap: (f64, f64),
    pub minus_greedy: f64,
    pub minus_greedy_bootstrap: (f64, f64),
    pub sampled_share: f64,
    pub mean_model_seconds: Option<f64>,
}

/// The pool a selection was scored on.
#[derive(Debug, Clone, Deserialize)]
pub struct SelectionPool {
    pub pool: String,
    pub started_at: String,
}

/// `evals/results/selection-spider.json` (decision 0010).
#[derive(Debug, Clone, Deserialize)]
pub struct Selection {
    pub pools: Vec<SelectionPool>,
    pub questions: u64,
    pub policies: Vec<SelectionPolicy>,
}

/// The table of ways to choose among candidates, as `scripts/selection-figures.py`
/// prints it.
pub fn selection_block(selection: &Selection) -> String {
    let pools: Vec<String> = selection
        .pools
        .iter()
        .map(|pool| format!("{} ({} UTC)", pool.pool, pool.started_at))
        .collect();
    let mut out = format!(
        "Scored on {} questions of pool {}.\n\n",
        selection.questions,
        pools.join(", ")
    );
    out.push_str("| policy | correct [Wilson 95%] | − plain [bootstrap 95%] | − greedy [bootstrap 95%] | sampled | model s / question |\n");
    out.push_str("|---|---|---|---|---:|---:|\n");
    for policy in &selection.policies {
        out.push_str(&format!(
            "| {} | {:.1}% [{:.1}, {:.1}] ({}/{}) | {:+.1} [{:+.1}, {:+.1}] | {:+.1} [{:+.1}, {:+.1}] | {:.1}% | {} |\n",
            policy.policy,
            policy.accuracy,
            policy.wilson.0,
            policy.wilson.1,
            policy.correct,
            policy.questions,
            policy.minus_plain,
            policy.minus_plain_bootstrap.0,
            policy.minus_plain_bootstrap.1,
            policy.minus_greedy,
            policy.minus_greedy_bootstrap.0,
            policy.minus_greedy_bootstrap.1,
            policy.sampled_share,
            policy
                .mean_model_seconds
                .map(|seconds| format!("{seconds:.1}"))
                .unwrap_or_else(|| "-".to_string()),
        ));
    }
    out
}

/// One set's gold answers through the answer checks.
#[derive(Debug, Clone, Deserialize)]
pub struct GoldCheckSet {
    pub checked: u64,
    pub flagged: u64,
    pub not_run: u64,
}

/// `evals/results/answer_checks_gold.json` (`scripts/gold-flags.py`).
#[derive(Debug, Clone, Deserialize)]
pub struct GoldChecks {
    pub sets: std::collections::BTreeMap<String, GoldCheckSet>,
    pub generated: String,
    pub checks: Vec<String>,
}

/// How many right answers the answer checks would flag, per set.
pub fn gold_checks_block(checks: &GoldChecks) -> String {
    let mut out = format!(
        "Generated {}; checks: {}.\n\n| set | gold answers checked | flagged | not run |\n|---|---:|---:|---:|\n",
        checks.generated,
        checks
            .checks
            .iter()
            .map(|check| format!("`{check}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut total = (0, 0, 0);
    for (set, figures) in &checks.sets {
        total = (
            total.0 + figures.checked,
            total.1 + figures.flagged,
            total.2 + figures.not_run,
        );
        out.push_str(&format!(
            "| {set} | {} | {} | {} |\n",
            figures.checked, figures.flagged, figures.not_run
        ));
    }
    out.push_str(&format!(
        "| all | {} | {} | {} |\n",
        total.0, total.1, total.2
    ));
    out
}

/// One start of `askdb serve` in `benches/results/first-question.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct FirstQuestionStart {
    pub answer: FirstQuestionAnswer,
    pub start_to_listening_s: f64,
    pub first_answer_after_listening_s: f64,
    pub warm_up_log: String,
}

/// The answer the first question got.
#[derive(Debug, Clone, Deserialize)]
pub struct FirstQuestionAnswer {
    pub decision: String,
    pub attempts: u64,
    pub rows: serde_json::Value,
}

/// `benches/results/first-question.json` (`scripts/first-question.sh`).
#[derive(Debug, Clone, Deserialize)]
pub struct FirstQuestion {
    pub measured_at: String,
    pub model: String,
    pub database: String,
    pub question: String,
    pub first_start: FirstQuestionStart,
    pub later_start: FirstQuestionStart,
    pub settings: String,
}

/// The wait for the first answer after `askdb serve` starts.
pub fn first_question_block(figures: &FirstQuestion) -> String {
    let mut out = format!(
        "Measured {} with {} on the {} database, question \"{}\"; {}.\n\n",
        figures.measured_at, figures.model, figures.database, figures.question, figures.settings
    );
    out.push_str("| start | start to listening | first answer after listening | answer | warm-up |\n|---|---:|---:|---|---|\n");
    for (label, start) in [
        ("first start ever", &figures.first_start),
        ("a later start", &figures.later_start),
    ] {
        out.push_str(&format!(
            "| {label} | {:.2} s | {:.2} s | {} {} in {} attempt(s) | {} |\n",
            start.start_to_listening_s,
            start.first_answer_after_listening_s,
            start.answer.decision,
            start.answer.rows,
            start.answer.attempts,
            start.warm_up_log,
        ));
    }
    out
}

/// One dialect's fuzzing campaign in `benches/results/guard_fuzz.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct FuzzRun {
    pub dialect: String,
    pub build: String,
    pub minutes: f64,
    pub seed: u64,
    pub executions: u64,
    pub executions_per_second: f64,
    pub accepted: u64,
    pub refused: u64,
    pub sqlite_rows_compared: u64,
    pub crashes: u64,
    pub findings: u64,
    pub measured_at: String,
    pub commit: String,
    pub machine: String,
}

/// `benches/results/guard_fuzz.json` (`scripts/fuzz-guard.sh --write`).
#[derive(Debug, Clone, Deserialize)]
pub struct GuardFuzz {
    pub generated_by: String,
    pub runs: Vec<FuzzRun>,
}

/// The last differential fuzzing campaign of the guard.
pub fn guard_fuzz_block(fuzz: &GuardFuzz) -> String {
    let mut out = format!("Generated by {}.\n\n", fuzz.generated_by);
    out.push_str("| dialect | build | minutes | seed | statements | per second | accepted | refused | SQLite row comparisons | crashes | findings | measured (UTC) | commit | machine |\n");
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n");
    for run in &fuzz.runs {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            run.dialect,
            run.build,
            run.minutes,
            run.seed,
            run.executions,
            run.executions_per_second,
            run.accepted,
            run.refused,
            run.sqlite_rows_compared,
            run.crashes,
            run.findings,
            run.measured_at.trim_end_matches(" UTC"),
            run.commit.chars().take(7).collect::<String>(),
            run.machine,
        ));
    }
    out
}

/// `benches/results/mcp-demo.json` (`cargo bench --bench mcp_latency`).
#[derive(Debug, Clone, Deserialize)]
pub struct McpLatency {
    pub generated_by: String,
    pub generated_at: String,
    pub machine: String,
    pub load_average: String,
    pub server: String,
    pub tool: String,
    pub sql: String,
    pub calls: u64,
    pub errors: u64,
    pub cold_start_ms: f64,
    pub cold_starts: u64,
    pub median_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub rss_initialized_kib: u64,
    pub rss_end_kib: u64,
    pub build: String,
}

/// `askdb mcp`'s round trips over stdio on the demo database.
pub fn mcp_demo_block(figures: &McpLatency) -> String {
    format!(
        "Generated by `{}` on {} ({}; load average {}), {}, {}: `{}` of `{}`.\n\n\
         | calls | errors | cold start (median of {}) | median | p95 | p99 | VmRSS initialized / at the end |\n\
         |---:|---:|---:|---:|---:|---:|---|\n\
         | {} | {} | {} ms | {} us | {} us | {} us | {} / {} KiB |\n",
        figures.generated_by,
        figures.generated_at,
        figures.machine,
        figures.load_average,
        figures.build,
        figures.server,
        figures.tool,
        figures.sql,
        figures.cold_starts,
        figures.calls,
        figures.errors,
        figures.cold_start_ms,
        figures.median_us,
        figures.p95_us,
        figures.p99_us,
        figures.rss_initialized_kib,
        figures.rss_end_kib,
    )
}

/// The statement corpora every guard change is tested against, counted from their files.
pub fn corpora_block(repo: &Path) -> Result<String, EvalError> {
    let mut out = String::from(
        "| corpus | statements | every dialect | PostgreSQL only | SQLite only | MySQL only | refusal reasons asserted |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for file in ["evals/hostile_sql.jsonl", "evals/benign_sql.jsonl"] {
        let text = read(&repo.join(file))?;
        let mut counts = std::collections::BTreeMap::<String, u64>::new();
        let mut reasons = std::collections::BTreeSet::new();
        let mut total = 0;
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            let value: serde_json::Value = serde_json::from_str(line)
                .map_err(|error| EvalError::Data(format!("{file}: {error}")))?;
            total += 1;
            let dialect = value["dialect"].as_str().unwrap_or("any").to_string();
            *counts.entry(dialect).or_default() += 1;
            if let Some(reason) = value["reason"].as_str() {
                reasons.insert(reason.to_string());
            }
        }
        let count = |dialect: &str| counts.get(dialect).copied().unwrap_or(0);
        out.push_str(&format!(
            "| `{file}` | {total} | {} | {} | {} | {} | {} |\n",
            count("any"),
            count("postgres"),
            count("sqlite"),
            count("mysql"),
            reasons.len()
        ));
    }
    Ok(out)
}

/// A bench's own Markdown report, as it was written, its headings moved two levels down
/// to sit under the document's.
pub fn bench_report_block(dir: &Path, file: &str) -> Result<String, EvalError> {
    let text = read(&dir.join(file))?;
    let mut out = format!("From `{BENCH_RESULTS_DIR}/{file}`:\n\n");
    for line in text.lines() {
        if line.starts_with('#') {
            out.push_str("##");
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}

mod embedded;
pub use embedded::EMBEDDED_SUMMARIES;

#[cfg(test)]
pub(crate) mod tests;
