//! The harness identity: with the scripted provider and a script whose outcomes are
//! known in advance, the runner must report exactly the implied counts. If grading,
//! attempt accounting or the metrics drift, these numbers move and the test fails.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::llm::scripted::ScriptedProvider;
use crate::llm::{PriceTable, SpendLedger};

const ACTIVE: &str = "How many active products do we have?";
const CUSTOMERS: &str = "How many customers do we have?";
const SALARY: &str = "What is the total monthly salary of all staff?";
const HOPELESS: &str = "How many bills per employee role?";
const DELETE: &str = "Delete the cancelled purchase orders.";
const UPDATE: &str = "Make every unpaid bill paid.";

/// A run under `dir/runs` with traces off, as every test here runs one.
async fn run_untraced(
    settings: RunSettings,
    client: ModelClient,
    dir: &std::path::Path,
    resume: Option<std::path::PathBuf>,
) -> Result<std::path::PathBuf, EvalError> {
    run(
        settings,
        client,
        &dir.join("runs"),
        resume,
        &crate::telemetry::Telemetry::off(),
    )
    .await
}

fn line(question: &str, purpose: &str, reply: serde_json::Value) -> String {
    json!({"question": question, "purpose": purpose, "reply": reply}).to_string()
}

fn sql(text: &str) -> serde_json::Value {
    json!({"action": "sql", "sql": text})
}

fn item(id: &str, question: &str, expected: Expected, gold: Option<&str>, db: &str) -> String {
    serde_json::to_string(&EvalItem {
        id: id.to_string(),
        question: question.to_string(),
        category: if gold.is_some() {
            "simple"
        } else {
            "unanswerable"
        }
        .to_string(),
        expected,
        golds: gold.map(|gold| vec![gold.to_string()]).unwrap_or_default(),
        ordered: false,
        db: db.to_string(),
    })
    .expect("serialises")
}

/// A client whose replies come from `script` (JSONL), with no cache of its own.
fn scripted_client(script: &str) -> ModelClient {
    let provider = ScriptedProvider::parse(script, "scripted").expect("script");
    ModelClient::new(
        Arc::new(provider),
        &PriceTable::built_in().expect("prices"),
        Arc::new(SpendLedger::in_memory(None)),
        None,
    )
    .expect("client")
}

/// The demo database as a SQLite file under `dir`, by the URL a set names it with.
fn demo_db(dir: &Path) -> String {
    let demo = dir.join("demo.sqlite");
    crate::demo::write_sqlite(&demo).expect("demo builds");
    format!("sqlite:{}", demo.display())
}

/// Runs `items` in both modes under `dir`, the model's replies coming from `script`.
async fn run_script(
    dir: &Path,
    items: &[String],
    script: &[String],
    shared_first_reply: bool,
) -> std::path::PathBuf {
    let items_path = dir.join("items.jsonl");
    std::fs::write(&items_path, items.join("\n")).expect("items written");
    let client = scripted_client(&script.join("\n"));
    let settings = both_modes(&items_path, shared_first_reply);
    run_untraced(settings, client, dir, None)
        .await
        .expect("the run completes")
}

/// Settings for a run of the items in `items_path` in both modes, agent first.
fn both_modes(items_path: &Path, shared_first_reply: bool) -> RunSettings {
    RunSettings {
        set: format!("file:{}", items_path.display()),
        modes: vec![Mode::Agent, Mode::Baseline],
        limit: None,
        sample: None,
        seed: 1,
        sample_offset: 0,
        db: None,
        row_cap: EVAL_ROW_CAP,
        budget_tokens: crate::linking::DEFAULT_BUDGET_TOKENS,
        k: crate::linking::DEFAULT_K,
        temperature: 0.0,
        explain: false,
        max_attempts: crate::agent::MAX_ATTEMPTS,
        shared_first_reply,
        // One candidate a round: the script's replies map one to one to calls.
        strategy: "n=1".to_string(),
        examples: ExampleSource::None,
        ask_path: AskPath::Harness,
    }
}

#[tokio::test]
async fn the_harness_reports_exactly_the_counts_the_script_implies() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = demo_db(dir.path());

    let items = [
        item("q1", ACTIVE, Expected::Answer, Some("SELECT COUNT(*) FROM products WHERE is_active = TRUE"), &db),
        item("q2", CUSTOMERS, Expected::Answer, Some("SELECT COUNT(*) FROM customers"), &db),
        item("q3", SALARY, Expected::Answer, Some("SELECT ROUND(SUM(salary), 2) FROM employees"), &db),
        item("q4", HOPELESS, Expected::Answer, Some("SELECT e.role, COUNT(*) FROM bills b JOIN employees e ON e.emp_id = b.emp_id GROUP BY e.role"), &db),
        item("q5", DELETE, Expected::Refuse, None, &db),
        item("q6", UPDATE, Expected::Refuse, None, &db),
        // No script line: the model "cannot be reached" for this one.
        item("q7", "How many suppliers are there?", Expected::Answer, Some("SELECT COUNT(*) FROM suppliers"), &db),
    ];

    // For each question, lines are consumed in order: the agent mode runs first, then the
    // baseline mode, so the second write_sql line of a question is the baseline's.
    let script = [
        // q1: right at once, both modes.
        line(
            ACTIVE,
            "write_sql",
            sql("SELECT count(*) FROM products WHERE is_active = 1"),
        ),
        line(
            ACTIVE,
            "write_sql",
            sql("SELECT count(*) FROM products WHERE is_active = 1"),
        ),
        // q2: wrong table first; the agent repairs it (rescued), the baseline gives up.
        line(
            CUSTOMERS,
            "write_sql",
            sql("SELECT count(*) FROM customerz"),
        ),
        line(
            CUSTOMERS,
            "repair_sql",
            sql("SELECT count(*) FROM customers"),
        ),
        line(
            CUSTOMERS,
            "write_sql",
            sql("SELECT count(*) FROM customerz"),
        ),
        // q3: runs but answers something else, in both modes: wrong, nothing to repair.
        line(
            SALARY,
            "write_sql",
            sql("SELECT SUM(salary) FROM employees WHERE role = 'CASHIER'"),
        ),
        line(
            SALARY,
            "write_sql",
            sql("SELECT SUM(salary) FROM employees WHERE role = 'CASHIER'"),
        ),
        // q4: three distinct failures (misspellings of employees.role, so not data the
        // database lacks): the agent gives up after 3 attempts.
        line(HOPELESS, "write_sql", sql("SELECT rol FROM bills")),
        line(HOPELESS, "repair_sql", sql("SELECT rolee FROM bills")),
        line(HOPELESS, "repair_sql", sql("SELECT roles FROM bills")),
        line(HOPELESS, "write_sql", sql("SELECT rol FROM bills")),
        // q5: declined by askdb's rules before any model call (no line); q6: a write
        // the rules do not see, which the guard turns into a decline.
        line(
            UPDATE,
            "write_sql",
            sql("UPDATE bills SET status = 'PAID' WHERE status = 'UNPAID'"),
        ),
        line(
            UPDATE,
            "write_sql",
            sql("UPDATE bills SET status = 'PAID' WHERE status = 'UNPAID'"),
        ),
    ];
    let run_dir = run_script(dir.path(), &items, &script, false).await;
    let summary = write_summary(&run_dir).expect("summary");
    let agent = &summary.modes["agent"];
    let baseline = &summary.modes["baseline"];

    assert_eq!(
        (agent.questions, agent.scored, agent.infrastructure_failures),
        (7, 6, 1)
    );
    assert_eq!((agent.accuracy.successes, agent.accuracy.total), (4, 6));
    assert_eq!((agent.rescued, agent.broken), (1, 0));
    assert_eq!(agent.decisions.gave_up, 1);
    assert_eq!(agent.decisions.declined, 2);
    assert_eq!(agent.correct_refusals, 2);
    // q2 (unknown table), q4 (unknown column) and q6 (the guard refused the UPDATE).
    assert_eq!(agent.first_attempt_failures, 3);

    assert_eq!(
        (baseline.accuracy.successes, baseline.accuracy.total),
        (3, 6)
    );
    assert_eq!((baseline.rescued, baseline.decisions.gave_up), (0, 2));

    let paired = summary.paired.as_ref().expect("both modes ran");
    assert_eq!(paired.paired, 6);
    assert_eq!((paired.agent_only_wins, paired.baseline_only_wins), (1, 0));
    assert_eq!(paired.excluded_infrastructure, 1);

    let records = read_records(&run_dir).expect("records");
    let hopeless = records
        .iter()
        .find(|record| record.id == "q4" && record.mode == Mode::Agent)
        .expect("q4 recorded");
    assert_eq!((hopeless.attempts, hopeless.history.len()), (3, 3));

    // Regrading without the model reproduces the same numbers.
    let regraded = regrade(&run_dir).await.expect("regrade");
    assert_eq!(regraded.modes["agent"].accuracy, agent.accuracy);
    assert_eq!(regraded.modes["baseline"].accuracy, baseline.accuracy);

    // Resuming a finished run asks nothing more and changes nothing.
    let client = scripted_client("");
    let manifest = read_manifest(&run_dir).expect("manifest");
    let resumed = run_untraced(manifest.settings, client, dir.path(), Some(run_dir.clone()))
        .await
        .expect("resume");
    assert_eq!(resumed, run_dir);
    assert_eq!(read_records(&run_dir).expect("records").len(), 14);
}

#[tokio::test]
async fn with_a_shared_first_reply_the_baseline_replays_the_agents_first_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = demo_db(dir.path());
    let gold = "SELECT COUNT(*) FROM customers";
    let items = [item("q1", CUSTOMERS, Expected::Answer, Some(gold), &db)];
    // Only the agent's two calls are scripted: a baseline that called the provider
    // would find the script exhausted and be recorded as an infrastructure failure.
    let script = [
        line(
            CUSTOMERS,
            "write_sql",
            sql("SELECT count(*) FROM customerz"),
        ),
        line(
            CUSTOMERS,
            "repair_sql",
            sql("SELECT count(*) FROM customers"),
        ),
    ];
    let run_dir = run_script(dir.path(), &items, &script, true).await;
    assert!(
        run_dir.join("replies").is_dir(),
        "the cache lives in the run folder"
    );
    let records = read_records(&run_dir).expect("records");
    let agent = records
        .iter()
        .find(|record| record.mode == Mode::Agent)
        .expect("agent record");
    let baseline = records
        .iter()
        .find(|record| record.mode == Mode::Baseline)
        .expect("baseline record");
    assert_eq!(agent.decision, Decision::Answer);
    assert!(agent.correct);
    assert_eq!(baseline.decision, Decision::GiveUp, "{baseline:?}");
    assert_eq!(baseline.history.len(), 1);
    assert_eq!(baseline.history[0].sql, agent.history[0].sql);
    let summary = write_summary(&run_dir).expect("summary");
    assert!(render_report(&summary).contains("replays the agent's first reply"));
}

#[test]
fn a_record_cut_short_by_a_crash_is_dropped_but_damage_elsewhere_is_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("questions.jsonl");
    let whole = serde_json::to_string(&sample_record("q1")).expect("JSON");
    // A crash mid-write: the last record has no line end.
    std::fs::write(&path, format!("{whole}\n{{\"id\": \"q2\", \"mo")).expect("written");
    assert_eq!(read_records(dir.path()).expect("records").len(), 1);
    open_records(&path).expect("trimmed");
    assert_eq!(
        std::fs::read_to_string(&path).expect("readable"),
        format!("{whole}\n")
    );
    // A bad line followed by good ones is not a crash: it is reported.
    std::fs::write(&path, format!("not json\n{whole}\n")).expect("written");
    let error = read_records(dir.path()).expect_err("damage is an error");
    assert!(error.to_string().contains("record 1"), "{error}");
}

fn sample_record(id: &str) -> QuestionRecord {
    QuestionRecord {
        id: id.to_string(),
        mode: Mode::Agent,
        question: "How many?".to_string(),
        category: "simple".to_string(),
        expected: Expected::Answer,
        db: "demo".to_string(),
        ordered: false,
        decision: RunOutcome::Decided(Decision::Answer),
        correct: true,
        verdict: None,
        first_attempt_correct: Some(true),
        first_attempt_failed: false,
        attempts: 1,
        sql: Some("SELECT 1".to_string()),
        first_sql: Some("SELECT 1".to_string()),
        history: Vec::new(),
        reason: None,
        input_tokens: 1,
        output_tokens: 1,
        cost_usd: 0.0,
        latency_ms: 1,
        error: None,
        golds: vec!["SELECT 1".to_string()],
        trace_id: None,
        warnings: None,
        examples: Vec::new(),
        example_scores: Vec::new(),
        answered_from_example: None,
        server_timings: None,
    }
}

#[tokio::test]
async fn the_flag_figures_count_wrong_answers_warned_and_right_answers_wrongly_flagged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = demo_db(dir.path());
    const MONTHLY: &str =
        "What was the total billed amount per month in 2025, excluding void bills?";
    const REVENUE: &str = "What was our total revenue in 2025?";
    const BILLS: &str = "How many bills were there in 2025?";
    let monthly = "SELECT strftime('%Y-%m', txn_dt) AS month, SUM(total_amt) FROM bills \
                   WHERE status <> 'VOID' AND txn_dt >= '2025-01-01' AND txn_dt < '2026-01-01' GROUP BY month";
    let archive = "SELECT strftime('%Y', txn_dt) AS year, SUM(amt) FROM bill_archive \
                   WHERE status <> 'VOID' GROUP BY year";
    let revenue = "SELECT SUM(total_amt) FROM bills WHERE status <> 'VOID' \
                   AND txn_dt >= '2025-01-01' AND txn_dt < '2026-01-01'";
    let unfiltered = "SELECT SUM(total_amt) FROM bills WHERE status <> 'VOID'";
    let wrong_year = "SELECT SUM(total_amt) FROM bills WHERE status <> 'VOID' AND strftime('%Y', txn_dt) = '2024'";
    // Right, but by the bill number's year: no date filter the checks can read.
    let by_number = "SELECT COUNT(*) FROM bills WHERE bill_no LIKE 'B25-%'";
    let items = [
        item("f1", MONTHLY, Expected::Answer, Some(monthly), &db),
        item("f2", REVENUE, Expected::Answer, Some(revenue), &db),
        item(
            "f3",
            ACTIVE,
            Expected::Answer,
            Some("SELECT COUNT(*) FROM products WHERE is_active = TRUE"),
            &db,
        ),
        item("f4", BILLS, Expected::Answer, Some(by_number), &db),
    ];
    let script = [
        // f1: suspect, repaired right; the baseline shows the suspect answer warned.
        line(MONTHLY, "write_sql", sql(archive)),
        line(MONTHLY, "repair_sql", sql(monthly)),
        line(MONTHLY, "write_sql", sql(archive)),
        // f2: suspect, and the repair is suspect again: wrong and warned in both modes.
        line(REVENUE, "write_sql", sql(unfiltered)),
        line(REVENUE, "repair_sql", sql(wrong_year)),
        line(REVENUE, "write_sql", sql(unfiltered)),
        // f3: right and unflagged.
        line(
            ACTIVE,
            "write_sql",
            sql("SELECT count(*) FROM products WHERE is_active = 1"),
        ),
        line(
            ACTIVE,
            "write_sql",
            sql("SELECT count(*) FROM products WHERE is_active = 1"),
        ),
        // f4: right but flagged (a false flag the figures must count).
        line(BILLS, "write_sql", sql(by_number)),
        line(
            BILLS,
            "repair_sql",
            sql("SELECT COUNT(bill_id) FROM bills WHERE bill_no LIKE 'B25-%'"),
        ),
        line(BILLS, "write_sql", sql(by_number)),
    ];
    let run_dir = run_script(dir.path(), &items, &script, false).await;
    let summary = write_summary(&run_dir).expect("summary");
    // Scoring is untouched by the checks: f1, f3, f4 right in the agent mode.
    assert_eq!(summary.modes["agent"].accuracy.successes, 3);
    assert_eq!(summary.modes["baseline"].accuracy.successes, 2);
    let agent = &summary.flags["agent"];
    assert_eq!((agent.answers_checked, agent.right, agent.wrong), (4, 3, 1));
    assert_eq!((agent.flagged_wrong, agent.flagged_right), (1, 1));
    assert_eq!((agent.fired_wrong, agent.fired_right), (1, 2));
    assert_eq!((agent.suspect_repairs, agent.suspect_repairs_right), (3, 2));
    assert_eq!(agent.warnings_by_check.get("period_filter"), Some(&1));
    assert_eq!(agent.warnings_by_check.get("period_unfiltered"), Some(&1));
    let baseline = &summary.flags["baseline"];
    assert_eq!((baseline.right, baseline.wrong), (2, 2));
    assert_eq!((baseline.flagged_wrong, baseline.flagged_right), (2, 1));
    assert_eq!(baseline.suspect_repairs, 0);
    // The same figures from the records alone (what `askdb eval flags` prints).
    let records = read_records(&run_dir).expect("records");
    assert_eq!(crate::eval::flags::figures(&records), summary.flags);
    let table = crate::eval::flags::render(&summary.flags);
    assert!(
        table.contains("| wrong answers shown with a warning | 1 of 1 | 2 of 2 |"),
        "{table}"
    );
    assert!(
        table.contains("| right answers wrongly flagged | 1 of 3 | 1 of 2 |"),
        "{table}"
    );
    assert!(std::fs::read_to_string(run_dir.join("report.md"))
        .expect("report")
        .contains("Answers flagged by the rule checks"));
    // Records from before the checks are left out, not counted as unflagged.
    let old: Vec<QuestionRecord> = records
        .into_iter()
        .map(|record| QuestionRecord {
            warnings: None,
            ..record
        })
        .collect();
    assert!(crate::eval::flags::figures(&old).is_empty());
}

#[test]
fn samples_of_one_seed_at_separate_offsets_share_no_question() {
    let items: Vec<EvalItem> = (0..50)
        .map(|index| EvalItem {
            id: format!("q{index:02}"),
            question: format!("question {index}"),
            category: String::new(),
            expected: Expected::Answer,
            golds: vec!["SELECT 1".to_string()],
            ordered: false,
            db: format!("db{}", index % 3),
        })
        .collect();
    let ids =
        |sample: Vec<EvalItem>| -> Vec<String> { sample.into_iter().map(|item| item.id).collect() };
    let first = ids(seeded_sample(items.clone(), 20, 7, 0));
    let second = ids(seeded_sample(items.clone(), 20, 7, 20));
    assert_eq!((first.len(), second.len()), (20, 20));
    assert!(
        first.iter().all(|id| !second.contains(id)),
        "{first:?} / {second:?}"
    );
    let mut both: Vec<String> = first.iter().chain(&second).cloned().collect();
    both.sort();
    let mut forty = ids(seeded_sample(items.clone(), 40, 7, 0));
    forty.sort();
    assert_eq!(
        both, forty,
        "two offsets are the two halves of one larger sample"
    );
    assert_eq!(
        seeded_sample(items, 20, 7, 45).len(),
        5,
        "the shuffle's end"
    );
}

/// Records as runs write them: the first four lines are a scripted run's (the harness
/// test's answer, give-up, decline and outage, its database named `demo`); the
/// clarification and askdb's own failure, which no scripted run reaches, are the same
/// records with those outcomes.
const RECORDS: &str = include_str!("testdata/records.jsonl");

#[test]
fn run_records_read_and_write_every_outcome_by_the_same_name() {
    let mut seen = Vec::new();
    for line in RECORDS.lines() {
        let record: QuestionRecord = serde_json::from_str(line).expect("a record");
        let written = serde_json::to_string(&record).expect("JSON");
        assert_eq!(written, line, "a record is written back as it was read");
        let named: serde_json::Value = serde_json::from_str(line).expect("JSON");
        assert_eq!(named["decision"], record.decision.as_str());
        seen.push(record.decision);
    }
    assert_eq!(seen.len(), RunOutcome::ALL.len());
    assert!(RunOutcome::ALL.iter().all(|outcome| seen.contains(outcome)));
    assert_eq!(seen[1], RunOutcome::Decided(Decision::GiveUp));
    assert_eq!(seen[3], RunOutcome::InfrastructureFailure);
}

/// Runs `items` in the agent mode only, with verified examples from `examples`.
async fn run_agent_only(
    dir: &Path,
    name: &str,
    items: &[String],
    script: &[String],
    examples: ExampleSource,
) -> std::path::PathBuf {
    let items_path = dir.join(format!("{name}.jsonl"));
    std::fs::write(&items_path, items.join("\n")).expect("items written");
    let settings = RunSettings {
        modes: vec![Mode::Agent],
        shared_first_reply: false,
        examples,
        ..both_modes(&items_path, false)
    };
    let client = scripted_client(&script.join("\n"));
    run_untraced(settings, client, &dir.join(name), None)
        .await
        .expect("the run completes")
}

#[tokio::test]
async fn leave_one_out_reruns_the_same_question_never_a_copy_and_pairs_with_a_run_without() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = demo_db(dir.path());
    let bills = "How many bills are there?";
    let items = [
        // The same question twice, verified with two ways of counting: each is the
        // other's verified example, re-run without the model.
        item(
            "a",
            CUSTOMERS,
            Expected::Answer,
            Some("SELECT COUNT(*) FROM customers"),
            &db,
        ),
        item(
            "b",
            CUSTOMERS,
            Expected::Answer,
            Some("SELECT COUNT(cust_id) FROM customers"),
            &db,
        ),
        // The same question with the same gold: a copy, never offered, so the model asks.
        item(
            "c",
            bills,
            Expected::Answer,
            Some("SELECT COUNT(*) FROM bills"),
            &db,
        ),
        item(
            "d",
            bills,
            Expected::Answer,
            Some("SELECT COUNT(*) FROM bills"),
            &db,
        ),
        item(
            "e",
            ACTIVE,
            Expected::Answer,
            Some("SELECT COUNT(*) FROM products WHERE is_active = TRUE"),
            &db,
        ),
    ];
    let answers = [
        line(bills, "write_sql", sql("SELECT count(*) FROM bills")),
        line(bills, "write_sql", sql("SELECT count(*) FROM bills")),
        line(
            ACTIVE,
            "write_sql",
            sql("SELECT count(*) FROM products WHERE is_active = 1"),
        ),
    ];
    // No line for CUSTOMERS: a model call for it fails its question.
    let with = run_agent_only(
        dir.path(),
        "with",
        &items,
        &answers,
        ExampleSource::LeaveOneOut,
    )
    .await;
    let records = read_records(&with).expect("records");
    let rerun: Vec<(&str, bool, bool)> = records
        .iter()
        .map(|r| (r.id.as_str(), r.answered_from_example.is_some(), r.correct))
        .collect();
    assert_eq!(
        rerun,
        vec![
            ("a", true, true),
            ("b", true, true),
            ("c", false, true),
            ("d", false, true),
            ("e", false, true),
        ]
    );
    // Each used example's retrieval score is kept beside its id, a re-run's a full match.
    for record in &records {
        assert_eq!(
            record.example_scores.len(),
            record.examples.len(),
            "{}",
            record.id
        );
        assert!(record
            .example_scores
            .iter()
            .all(|score| (0.0..=1.0).contains(score)));
        if record.answered_from_example.is_some() {
            assert_eq!(record.example_scores, vec![1.0], "{}", record.id);
        }
    }
    let summary = write_summary(&with).expect("summary");
    let figures = summary.examples.clone().expect("example figures");
    assert_eq!(
        (figures.asked, figures.reruns, figures.reruns_right),
        (5, 2, 2)
    );
    assert!(
        render_report(&summary).contains("2 answered by re-running"),
        "{}",
        render_report(&summary)
    );

    // Without examples the model answers the customers' question, once wrongly.
    let without_script: Vec<String> = answers
        .iter()
        .cloned()
        .chain([
            line(
                CUSTOMERS,
                "write_sql",
                sql("SELECT count(*) FROM customers"),
            ),
            line(
                CUSTOMERS,
                "write_sql",
                sql("SELECT count(*) FROM suppliers"),
            ),
        ])
        .collect();
    let without = run_agent_only(
        dir.path(),
        "without",
        &items,
        &without_script,
        ExampleSource::None,
    )
    .await;
    assert!(write_summary(&without).expect("summary").examples.is_none());
    let comparison = compare_runs(&with, &without, Mode::Agent).expect("compares");
    assert_eq!(comparison.paired.paired, 5);
    assert_eq!(
        (
            comparison.paired.agent_only_wins,
            comparison.paired.baseline_only_wins
        ),
        (1, 0)
    );
    assert_eq!(
        comparison.run_only_right.len() as u64,
        comparison.paired.agent_only_wins
    );
    assert!(comparison.other_only_right.is_empty());
    assert!(
        render_comparison(&comparison).contains("difference +20.0 points"),
        "{}",
        render_comparison(&comparison)
    );
    // These runs asked the agent alone: no first attempt of theirs to pair.
    let first_attempts = compare_runs(&with, &without, Mode::Baseline).expect("compares");
    assert_eq!(first_attempts.mode, Mode::Baseline);
    assert_eq!(first_attempts.paired.paired, 0);
    assert!(render_comparison(&first_attempts).contains("baseline accuracy n/a"));
}

#[test]
fn a_custom_sets_runs_go_in_a_folder_named_by_its_file() {
    assert_eq!(run_folder_name("spider"), "spider");
    assert_eq!(run_folder_name("file:/tmp/runs/mine.jsonl"), "mine");
    assert_eq!(run_folder_name("file:relative/other"), "other");
    assert_eq!(run_folder_name("file:"), "questions");
}
