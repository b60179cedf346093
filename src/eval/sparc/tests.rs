//! SParC's loading, sampling and figures, and a whole run of the three modes on a tiny
//! set with scripted replies: every count the script implies comes out of the summary.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::llm::scripted::ScriptedProvider;
use crate::llm::{PriceTable, SpendLedger};

#[test]
fn gold_strings_in_double_quotes_become_sql_literals() {
    assert_eq!(
        gold_text("SELECT * FROM AIRLINES WHERE Airline  =  \"JetBlue Airways\";"),
        "SELECT * FROM AIRLINES WHERE Airline  =  'JetBlue Airways'"
    );
    assert_eq!(
        gold_text("SELECT 'it''s \"x\"' , \"O'Hare\""),
        "SELECT 'it''s \"x\"' , 'O''Hare'"
    );
    assert_eq!(
        gold_text("SELECT a FROM t WHERE LANGUAGE ! =  'English'"),
        "SELECT a FROM t WHERE LANGUAGE !=  'English'"
    );
}

#[test]
fn the_dev_file_is_read_by_interaction_and_sampled_the_same_way_every_time() {
    let text = json!([
        {"database_id": "b", "turns": [{"utterance": " q1 ", "query": "SELECT 1"}], "final": {}},
        {"database_id": "a", "turns": [], "final": {}},
        {"database_id": "a", "interaction": [{"utterance": "q", "query": "SELECT 2", "utterance_toks": ["q"], "sql": {}}, {"utterance": "r", "query": "SELECT 3"}], "final": {}}
    ])
    .to_string();
    let interactions = parse_sparc(&text).expect("parses");
    assert_eq!(
        interactions.len(),
        2,
        "an interaction without turns is dropped"
    );
    assert_eq!(interactions[0].id, "000-b");
    assert_eq!(interactions[0].turns[0].question, "q1");
    assert_eq!(interactions[1].id, "002-a");
    let again = sample(interactions.clone(), Some(2), 0, 7);
    assert_eq!(again, sample(interactions.clone(), Some(2), 0, 7));
    assert_eq!(again[0].db_name, "a", "back in database order");
    // A sample at an offset shares no interaction with the one before it.
    let first = sample(interactions.clone(), Some(1), 0, 7);
    let second = sample(interactions.clone(), Some(1), 1, 7);
    assert_eq!(first.len(), 1);
    assert_eq!(second.len(), 1);
    assert_ne!(first[0].id, second[0].id);
    assert!(sample(interactions.clone(), Some(1), 2, 7).is_empty());
    assert!(matches!(parse_sparc("{"), Err(EvalError::Data(_))));
    // The real file, where it is present: 422 interactions, 1,203 turns.
    if let Ok(dir) = crate::home::shared_data_dir() {
        if let Ok(all) = load_sparc(&dir) {
            assert_eq!(all.len(), 422);
            assert_eq!(all.iter().map(|i| i.turns.len()).sum::<usize>(), 1_203);
        }
    }
}

fn agent_reply(understood: &str, sql: &str) -> serde_json::Value {
    json!(format!(
        "```sql\n-- Understood as: {understood}\n{sql}\n```"
    ))
}

#[tokio::test]
async fn a_run_asks_every_turn_in_three_modes_and_counts_what_the_script_implies() {
    let data = tempfile::tempdir().expect("temp dir");
    let db_dir = data.path().join("spiderman").join("sqlite");
    std::fs::create_dir_all(&db_dir).expect("dirs");
    let connection =
        rusqlite::Connection::open(db_dir.join("tiny.sqlite")).expect("creates the database");
    connection
        .execute_batch(
            "CREATE TABLE airlines (id INTEGER PRIMARY KEY, name TEXT, country TEXT);
             INSERT INTO airlines VALUES (1, 'JetBlue', 'USA'), (2, 'Lufthansa', 'Germany'), (3, 'Delta', 'USA');",
        )
        .expect("rows");
    drop(connection);
    std::fs::create_dir_all(data.path().join("sparc")).expect("dir");
    let count = "How many airlines are there?";
    let usa = "Which of them are in the USA?";
    let list = "List the airlines";
    let mars = "Which are on Mars?";
    std::fs::write(
        data.path().join(SPARC_DEV),
        json!([
            {"database_id": "tiny", "turns": [
                {"utterance": count, "query": "SELECT count(*) FROM airlines"},
                {"utterance": usa, "query": "SELECT name FROM airlines WHERE country = \"USA\""}
            ], "final": {}},
            {"database_id": "tiny", "turns": [
                {"utterance": list, "query": "SELECT name FROM airlines"},
                {"utterance": mars, "query": "SELECT name FROM airlines WHERE country = \"Mars\""}
            ], "final": {}}
        ])
        .to_string(),
    )
    .expect("the set");
    let right_usa = "SELECT name FROM airlines WHERE country = 'USA'";
    let all_names = "SELECT name FROM airlines";
    let line = |question: &str, reply: serde_json::Value| {
        json!({"question": question, "purpose": "write_sql", "reply": reply}).to_string()
    };
    // Per question, in the order of the modes: agent, plain, alone.
    let script = [
        line(count, json!({"sql": "SELECT count(*) AS n FROM airlines"})),
        line(count, json!({"sql": "SELECT count(*) AS n FROM airlines"})),
        line(count, json!({"sql": "SELECT count(*) AS n FROM airlines"})),
        line(usa, agent_reply("the airlines in the USA", right_usa)),
        line(usa, json!({"sql": all_names})),
        line(usa, json!({"sql": all_names})),
        line(list, json!({"sql": all_names})),
        line(list, json!({"sql": all_names})),
        line(list, json!({"sql": all_names})),
        line(
            mars,
            agent_reply(
                "the airlines on Mars",
                "SELECT name FROM airlines WHERE country = 'Mars'",
            ),
        ),
        line(
            mars,
            json!({"sql": "SELECT name FROM airlines WHERE country = 'Mars'"}),
        ),
        line(
            mars,
            json!({"sql": "SELECT name FROM airlines WHERE country = 'Mars'"}),
        ),
    ]
    .join("\n");
    let provider = ScriptedProvider::parse(&script, "scripted").expect("script parses");
    let client = ModelClient::new(
        Arc::new(provider),
        &PriceTable::built_in().expect("prices"),
        Arc::new(SpendLedger::in_memory(None)),
        None,
    )
    .expect("client");
    let runs = tempfile::tempdir().expect("runs");
    let settings = SparcSettings {
        sample: None,
        sample_offset: 0,
        seed: 7,
        limit: None,
        strategy: "n=1".to_string(),
        row_cap: 200,
    };
    let (dir, report) = run(&settings, &client, data.path(), runs.path(), None)
        .await
        .expect("the run ends");
    let summary = report.summary.clone();
    // The database file was hashed when the run began and when it ended: the same.
    let (before, after) = report.database_hashes.get("tiny").expect("tiny hashed");
    assert_eq!(Some(before), after.as_ref());
    assert_eq!(
        databases_text(&report.database_hashes),
        "All 1 database files hash the same before and after the run."
    );
    let records: Vec<TurnRecord> = std::fs::read_to_string(dir.join("turns.jsonl"))
        .expect("records")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a record"))
        .collect();
    assert_eq!(records.len(), 12, "4 turns in 3 modes");
    let agent_usa = records
        .iter()
        .find(|r| r.mode == SparcMode::Agent && r.question == usa)
        .expect("asked");
    assert!(agent_usa.correct);
    assert_eq!(
        agent_usa.understood_as.as_deref(),
        Some("the airlines in the USA")
    );
    assert!(records.iter().all(|r| r.question != mars || !r.graded));
    assert_eq!(summary.interactions, 2);
    assert_eq!(summary.turns, 4);
    assert_eq!(summary.ungraded_gold_turns, 1);
    let figures = |mode: SparcMode| {
        summary
            .modes
            .iter()
            .find(|figures| figures.mode == mode)
            .expect("a mode")
            .clone()
    };
    let agent = figures(SparcMode::Agent);
    assert_eq!((agent.questions.successes, agent.questions.total), (3, 3));
    assert_eq!((agent.follow_ups.successes, agent.follow_ups.total), (1, 1));
    assert_eq!(
        (agent.interactions.successes, agent.interactions.total),
        (2, 2)
    );
    for other in [SparcMode::Plain, SparcMode::Alone] {
        let figures = figures(other);
        assert_eq!(
            (figures.questions.successes, figures.questions.total),
            (2, 3)
        );
        assert_eq!(
            (figures.first_turns.successes, figures.first_turns.total),
            (2, 2)
        );
        assert_eq!(
            (figures.follow_ups.successes, figures.follow_ups.total),
            (0, 1)
        );
        assert_eq!(
            (figures.interactions.successes, figures.interactions.total),
            (1, 2)
        );
    }
    assert_eq!(summary.agent_minus_plain.paired, 3);
    assert_eq!(summary.agent_minus_plain.agent_only_wins, 1);
    assert_eq!(summary.agent_minus_alone_follow_ups.paired, 1);
    assert_eq!(
        summary.agent_minus_alone_first_turns.mean_difference,
        Some(0.0)
    );
    let text = render(&summary);
    assert!(text.contains("1 turn(s) left ungraded"), "{text}");
    assert!(text.contains("| agent | 100.0% (3/3"), "{text}");
    assert!(agent.first_turn_p50_ms.is_some() && agent.follow_up_p50_ms.is_some());
    // Each turn keeps its model calls, so the uncached prompt tokens are counted.
    assert!(records
        .iter()
        .filter(|record| record.decision.is_some())
        .all(|record| !record.model_calls.is_empty() && record.attempts >= 1));
    assert!(agent
        .follow_up_new_prompt_tokens_p50
        .is_some_and(|tokens| tokens > 0));
    assert!(agent
        .follow_up_generated_tokens_p50
        .is_some_and(|tokens| tokens > 0));
    assert!(
        text.contains("median generated tokens, first / follow-up"),
        "{text}"
    );
    let written: SparcReport = serde_json::from_str(
        &std::fs::read_to_string(dir.join("summary.json")).expect("summary written"),
    )
    .expect("the folder's summary is a report");
    // Compared as shown: JSON's floats come back within a unit of the last place.
    assert_eq!(render(&written.summary), render(&summary));
    assert_eq!(written.settings, settings);
    assert_eq!(written.model.provider, "scripted");
    publishes_into_the_readme(&dir);
    // A run stopped between an interaction's turns resumes with whole interactions:
    // the cut group is asked again (the script has no replies left, so it fails on
    // infrastructure), the rest is kept.
    let text = std::fs::read_to_string(dir.join("turns.jsonl")).expect("records");
    let cut: Vec<&str> = text.lines().take(11).collect();
    std::fs::write(dir.join("turns.jsonl"), cut.join("\n") + "\n").expect("cut");
    let (_, resumed) = run(&settings, &client, data.path(), runs.path(), Some(&dir))
        .await
        .expect("resumes");
    let lines = std::fs::read_to_string(dir.join("turns.jsonl")).expect("records");
    assert_eq!(
        lines.lines().count(),
        12,
        "the cut interaction asked again, whole"
    );
    let alone = resumed
        .summary
        .modes
        .iter()
        .find(|figures| figures.mode == SparcMode::Alone)
        .expect("alone");
    assert_eq!(
        alone.first_turns.total, 1,
        "the re-asked turns failed on infrastructure"
    );
}

#[tokio::test]
async fn most_gold_turns_return_rows_on_the_spiderman_files() {
    let Ok(dir) = crate::home::shared_data_dir() else {
        return;
    };
    let Ok(interactions) = load_sparc(&dir) else {
        return;
    };
    let mut gates: HashMap<String, Gate> = HashMap::new();
    let (mut graded, mut total) = (0usize, 0usize);
    let mut failing = Vec::new();
    for interaction in &interactions {
        if !gates.contains_key(&interaction.db_name) {
            let db = format!(
                "sqlite:{}",
                spiderman_db_path(&dir, &interaction.db_name).display()
            );
            let gate = open_eval_gate(&db, 200).await.expect("a spiderman file");
            gates.insert(interaction.db_name.clone(), gate);
        }
        let Some(gate) = gates.get(&interaction.db_name) else {
            continue;
        };
        for (turn, rows) in interaction
            .turns
            .iter()
            .zip(gold_rows(gate, interaction).await)
        {
            total += 1;
            if rows.is_some() {
                graded += 1;
            } else if failing.len() < 5 {
                failing.push(turn.gold.clone());
            }
        }
    }
    eprintln!("{graded} of {total} gold turns graded; e.g. {failing:#?}");
    assert_eq!(total, 1_203);
    assert!(
        graded * 10 >= total * 9,
        "{graded} of {total}: {failing:#?}"
    );
}

/// `askdb eval publish` on a SParC run folder, into a copy of the repository's
/// documents and results: the report lands in `evals/results/sparc.json` and the README's
/// SParC block shows it.
fn publishes_into_the_readme(run_dir: &Path) {
    let repo = crate::eval::results::tests::scratch_repo();
    let written = crate::eval::results::publish_run(run_dir, repo.path()).expect("published");
    assert_eq!(written, repo.path().join("evals/results/sparc.json"));
    let readme = std::fs::read_to_string(repo.path().join("README.md")).expect("readme");
    let block = readme
        .split("<!-- generated:sparc:begin -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- generated:sparc:end -->").next())
        .expect("the README has the SParC block");
    assert!(
        block.contains("Generated from `evals/results/sparc.json`"),
        "{block}"
    );
    assert!(block.contains("| agent | 100.0% (3/3"), "{block}");
    assert!(
        block.contains("hash the same before and after the run"),
        "{block}"
    );
}

#[test]
fn a_database_file_a_run_changed_or_lost_is_named() {
    let mut hashes = std::collections::BTreeMap::new();
    hashes.insert("a".to_string(), ("x".to_string(), Some("x".to_string())));
    hashes.insert("b".to_string(), ("x".to_string(), Some("y".to_string())));
    hashes.insert("c".to_string(), ("x".to_string(), None));
    assert_eq!(databases_text(&hashes), "Changed by the run: b, c.");
    assert_eq!(
        databases_text(&std::collections::BTreeMap::new()),
        "No database file's hash was recorded."
    );
}

#[test]
fn each_modes_speed_is_the_model_servers_clock_over_its_turns() {
    let clocked = |turn: u32, written: u64, generation_ms: f64| TurnRecord {
        interaction: "i1".to_string(),
        turn,
        db: "concert_singer".to_string(),
        mode: SparcMode::Agent,
        question: format!("turn {turn}"),
        decision: Some(Decision::Answer),
        infrastructure: false,
        sql: Some("SELECT 1".to_string()),
        understood_as: None,
        graded: true,
        correct: true,
        latency_ms: 1_000,
        error: None,
        attempts: 1,
        model_calls: vec![crate::agent::ModelStep {
            purpose: crate::llm::Purpose::WriteSql,
            input_tokens: 900,
            cache_read_tokens: 880,
            output_tokens: written,
            cost_usd: 0.0,
            latency_ms: 1_000,
            server_timings: Some(crate::llm::ServerTimings {
                prompt_tokens_read: 20,
                prompt_ms: 500.0,
                generated_tokens: written,
                generation_ms,
                one_reply_generated_tokens: written,
                one_reply_generation_ms: generation_ms,
            }),
        }],
    };
    let summary = summarize(&[clocked(1, 10, 800.0), clocked(2, 30, 2_400.0)]);
    let agent = summary
        .modes
        .iter()
        .find(|figures| figures.mode == SparcMode::Agent)
        .expect("the agent's figures");
    let speed = agent.model_speed.expect("both turns were timed");
    assert_eq!(speed.ms_per_generated_token, Some(3_200.0 / 40.0));
    assert_eq!(speed.ms_per_prompt_token, Some(1_000.0 / 40.0));
    let plain = summary
        .modes
        .iter()
        .find(|figures| figures.mode == SparcMode::Plain)
        .expect("the plain prompt's figures");
    assert_eq!(plain.model_speed, None, "no plain turn was asked");
    let text = render(&summary);
    assert!(text.contains("| 80.0 / 25.0 |"), "{text}");
}
