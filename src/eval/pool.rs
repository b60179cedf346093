//! `askdb eval pool`: every candidate a question's first round could choose from, each run
//! through the gate and graded, so that how candidates are chosen (greedy alone, a vote
//! always, a vote only on doubt, what counts as doubt) is measured from one run of the
//! model instead of one run per policy (`scripts/selection-figures.py` reads the pool).
//!
//! Per question, in this order so the agent's prompt prefix stays cached between the
//! first two calls: the agent's greedy reply, `n` sampled replies of the same prompt, the
//! plain reference prompt's reply, and the greedy reply of each variant strategy asked
//! for (another prompt on the same question), each with its confidence (token
//! log-probabilities) where the model server gives them. Each database's prompt prefix is warmed before its
//! first question, as `askdb serve` does when it opens a database.
//!
//! The pool is written to `RUNS/pool-SET/STAMP/`: `manifest.json` and `pool.jsonl`, one
//! question per line, appended as soon as it is graded; `--resume` carries on.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::metrics::Expected;
use super::runner::{
    append_record, create_folder, grade_rows, load_set, model_info, open_eval_agent,
    open_eval_gate, open_records, read_lines, read_manifest_of, EvalError, EvalItem, ModelInfo,
    Sampling, EVAL_ROW_CAP,
};
use crate::agent::reply::{parse_reply, Reply};
use crate::agent::strategy::Strategy;
use crate::agent::Agent;
use crate::compare::{canonical_key, ResultSet};
use crate::database::DatabaseUrl;
use crate::gate::QueryOutcome;
use crate::llm::{CallLog, Confidence, ModelClient, ModelReply, ModelRequest};

/// How a pool is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolSettings {
    pub set: String,
    pub sample: Option<usize>,
    pub seed: u64,
    #[serde(default)]
    pub sample_offset: usize,
    pub limit: Option<usize>,
    /// The agent's strategy (its prompt); `n` and `t` below override its sampling.
    pub strategy: String,
    /// Sampled replies per question.
    pub candidates: u32,
    pub temperature: f32,
    /// Other strategies whose greedy replies join the pool (`variant:STRATEGY`).
    #[serde(default)]
    pub variants: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolManifest {
    pub settings: PoolSettings,
    pub model: ModelInfo,
    pub started_at: String,
    pub askdb_version: String,
    pub items: usize,
}

/// Where a candidate came from: `greedy` (the agent's prompt at temperature 0),
/// `sample` (the agent's prompt, sampled), `plain` (the reference prompt at temperature
/// 0) or `variant:STRATEGY` (another strategy's prompt at temperature 0).
pub type Source = String;

/// One model call of a question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolCall {
    pub source: Source,
    pub latency_ms: u64,
    pub input_tokens: u64,
    /// Prompt tokens the server read from its cache.
    pub cached_tokens: u64,
    pub output_tokens: u64,
}

/// One candidate after the gate and the grade.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolCandidate {
    pub source: Source,
    /// The SQL the reply held; None when it held none.
    pub sql: Option<String>,
    /// `rows`, `empty` (no rows, or only NULLs), `error`, `no_sql` or `cut_off`.
    pub outcome: String,
    /// The error type or the guard's reason, for `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// The result's canonical key (equal keys: equal results), for `rows` and `empty`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub correct: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Confidence>,
}

/// One question of the pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolRecord {
    pub id: String,
    pub db: String,
    pub question: String,
    pub expected: Expected,
    /// The rules ended the question before any call: no candidates.
    pub ended_by_rules: bool,
    pub calls: Vec<PoolCall>,
    pub candidates: Vec<PoolCandidate>,
    /// The model could not be asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Asks (or resumes) a pool. Returns its folder.
pub async fn run_pool(
    settings: PoolSettings,
    client: ModelClient,
    runs_root: &Path,
    resume: Option<PathBuf>,
) -> Result<PathBuf, EvalError> {
    let settings = match &resume {
        Some(dir) => read_manifest_of::<PoolManifest>(dir)?.settings,
        None => settings,
    };
    let strategy = Strategy::recorded(&settings.strategy)
        .map_err(|error| EvalError::Data(error.to_string()))?;
    let items = load_set(
        &settings.set,
        None::<&DatabaseUrl>,
        Sampling {
            size: settings.sample,
            seed: settings.seed,
            offset: settings.sample_offset,
        },
        settings.limit,
    )?;
    let dir = match resume {
        Some(dir) => dir,
        None => {
            let (now, stamp) = crate::calendar::utc_now();
            let dir = runs_root
                .join(format!("pool-{}", settings.set.replace(['/', ':'], "_")))
                .join(stamp);
            let manifest = PoolManifest {
                settings: settings.clone(),
                model: model_info(&client),
                started_at: now,
                askdb_version: env!("CARGO_PKG_VERSION").to_string(),
                items: items.len(),
            };
            create_folder(&dir, &manifest)?;
            dir
        }
    };
    let path = dir.join("pool.jsonl");
    let mut file = open_records(&path)?;
    let done: BTreeSet<String> = read_pool(&dir)?
        .into_iter()
        .map(|record| record.id)
        .collect();
    let variants: Vec<Strategy> = settings
        .variants
        .iter()
        .map(|text| text.parse::<Strategy>())
        .collect::<Result<_, _>>()
        .map_err(|error| EvalError::Data(error.to_string()))?;
    let mut agents: HashMap<String, Vec<Agent>> = HashMap::new();
    let mut gold_caches: HashMap<String, HashMap<String, Option<ResultSet>>> = HashMap::new();
    for (index, item) in items.iter().enumerate() {
        if done.contains(&item.id) {
            continue;
        }
        if !agents.contains_key(&item.db) {
            let gate = open_eval_gate(&item.db, EVAL_ROW_CAP).await?;
            let mut opened = Vec::new();
            for strategy in std::iter::once(strategy).chain(variants.iter().copied()) {
                let agent = open_eval_agent(gate.clone(), &client, strategy, &item.db).await?;
                // As `askdb serve` does on opening a database: the prefix is read once.
                let _ = agent.warm_up().await;
                opened.push(agent);
            }
            if let Some(agent) = opened.first() {
                let _ = agent.warm_up_plain().await;
            }
            agents.insert(item.db.clone(), opened);
        }
        let Some((agent, variant_agents)) = agents.get(&item.db).and_then(|a| a.split_first())
        else {
            continue;
        };
        let gold_cache = gold_caches.entry(item.db.clone()).or_default();
        let mut record = pool_question(agent, item, &settings, gold_cache).await?;
        for variant in variant_agents {
            if record.error.is_some() || record.ended_by_rules {
                break;
            }
            let source = format!("variant:{}", variant.strategy());
            if let Err(error) = pool_variant(variant, item, source, &mut record, gold_cache).await {
                record.error = Some(error);
            }
        }
        append_record(&mut file, &path, &record)?;
        let right = record.candidates.iter().filter(|c| c.correct).count();
        eprint!(
            "\r{}/{} {} {right} of {} candidates right      ",
            index + 1,
            items.len(),
            item.id,
            record.candidates.len()
        );
    }
    eprintln!();
    Ok(dir)
}

async fn pool_question(
    agent: &Agent,
    item: &EvalItem,
    settings: &PoolSettings,
    gold_cache: &mut HashMap<String, Option<ResultSet>>,
) -> Result<PoolRecord, EvalError> {
    let mut record = PoolRecord {
        id: item.id.clone(),
        db: item.db.clone(),
        question: item.question.clone(),
        expected: item.expected,
        ended_by_rules: false,
        calls: Vec::new(),
        candidates: Vec::new(),
        error: None,
    };
    let round = agent
        .first_round_requests(&item.question)
        .map_err(|error| EvalError::Data(error.to_string()))?;
    let Some(round) = round else {
        record.ended_by_rules = true;
        return Ok(record);
    };
    let sampled = round
        .sampled
        .with_candidates(settings.candidates)
        .with_temperature(settings.temperature);
    let asks: [(&str, ModelRequest); 3] = [
        ("greedy", round.greedy),
        ("sample", sampled),
        ("plain", round.plain),
    ];
    for (source, request) in asks {
        // Each prompt's prefix is put back into the server's cache before it is asked (the
        // sampled call's candidates take the other cache slots).
        agent.restore_prefix(source == "plain").await;
        if let Err(error) = ask_into(
            agent,
            item,
            source.to_string(),
            &request,
            &mut record,
            gold_cache,
        )
        .await
        {
            record.error = Some(error);
            break;
        }
    }
    Ok(record)
}

/// A variant strategy's greedy reply to the same question, added to the record.
async fn pool_variant(
    agent: &Agent,
    item: &EvalItem,
    source: Source,
    record: &mut PoolRecord,
    gold_cache: &mut HashMap<String, Option<ResultSet>>,
) -> Result<(), String> {
    let round = agent
        .first_round_requests(&item.question)
        .map_err(|error| error.to_string())?;
    match round {
        Some(round) => {
            agent.restore_prefix(false).await;
            ask_into(agent, item, source, &round.greedy, record, gold_cache).await
        }
        None => Ok(()),
    }
}

/// One call: its figures and its graded candidates go into the record.
async fn ask_into(
    agent: &Agent,
    item: &EvalItem,
    source: Source,
    request: &ModelRequest,
    record: &mut PoolRecord,
    gold_cache: &mut HashMap<String, Option<ResultSet>>,
) -> Result<(), String> {
    let reply = agent
        .client()
        .call(request, &CallLog::default())
        .await
        .map_err(|error| error.to_string())?;
    record.calls.push(PoolCall {
        source: source.clone(),
        latency_ms: u64::try_from(reply.latency.as_millis()).unwrap_or(u64::MAX),
        input_tokens: reply.input_tokens,
        cached_tokens: reply.cache_read_tokens,
        output_tokens: reply.output_tokens,
    });
    for (text, truncated, confidence) in replies_of(&reply) {
        let candidate = pool_candidate(
            agent,
            item,
            source.clone(),
            text,
            truncated,
            confidence,
            gold_cache,
        )
        .await;
        record.candidates.push(candidate);
    }
    Ok(())
}

fn replies_of(reply: &ModelReply) -> Vec<(&str, bool, Option<Confidence>)> {
    std::iter::once((reply.text.as_str(), reply.truncated, reply.confidence))
        .chain(reply.alternatives.iter().map(|alternative| {
            (
                alternative.text.as_str(),
                alternative.truncated,
                alternative.confidence,
            )
        }))
        .collect()
}

async fn pool_candidate(
    agent: &Agent,
    item: &EvalItem,
    source: Source,
    text: &str,
    truncated: bool,
    confidence: Option<Confidence>,
    gold_cache: &mut HashMap<String, Option<ResultSet>>,
) -> PoolCandidate {
    let mut candidate = PoolCandidate {
        source,
        sql: None,
        outcome: "no_sql".to_string(),
        error_type: None,
        key: None,
        correct: false,
        confidence,
    };
    if truncated {
        candidate.outcome = "cut_off".to_string();
        return candidate;
    }
    let Reply::Sql { sql, .. } = parse_reply(text) else {
        return candidate;
    };
    // As the agent runs a reply: on MySQL, what the model meant as MySQL reads it.
    let (sql, _) = crate::agent::as_mysql_reads(sql, agent.gate().dialect(), agent.gate().schema());
    candidate.sql = Some(sql.clone());
    match agent.gate().run_query(&sql).await {
        QueryOutcome::Rows(result) => {
            let set = ResultSet::from(&result);
            candidate.outcome = if crate::agent::empty::looks_empty(&result.rows) {
                "empty"
            } else {
                "rows"
            }
            .to_string();
            candidate.key = Some(canonical_key(&set));
            if item.expected == Expected::Answer {
                candidate.correct = grade_rows(agent.gate(), item, &set, gold_cache).await.0;
            }
        }
        QueryOutcome::Failed(error) => {
            candidate.outcome = "error".to_string();
            candidate.error_type = Some(match error.reason {
                Some(reason) => format!("rejected:{}", reason.as_str()),
                None => error.error_type.as_str().to_string(),
            });
        }
    }
    candidate
}

/// The records of a pool folder (a last line cut short by a crash is left out: its
/// question is asked again on resume).
pub fn read_pool(dir: &Path) -> Result<Vec<PoolRecord>, EvalError> {
    read_lines(&dir.join("pool.jsonl"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_folder_is_read_back_without_the_record_a_crash_cut_short() {
        let dir = tempfile::tempdir().expect("temp dir");
        let manifest = PoolManifest {
            settings: PoolSettings {
                set: "demo".to_string(),
                sample: None,
                seed: 1,
                sample_offset: 0,
                limit: Some(2),
                strategy: "n=1".to_string(),
                candidates: 4,
                temperature: 0.7,
                variants: Vec::new(),
            },
            model: ModelInfo {
                provider: "scripted".to_string(),
                model: "scripted".to_string(),
                endpoint: String::new(),
            },
            started_at: "2026-12-05T09:00:00Z".to_string(),
            askdb_version: "0.1.0".to_string(),
            items: 2,
        };
        let pool = dir.path().join("pool-demo");
        create_folder(&pool, &manifest).expect("created");
        assert_eq!(
            read_manifest_of::<PoolManifest>(&pool).expect("manifest"),
            manifest
        );
        assert!(matches!(
            read_manifest_of::<PoolManifest>(dir.path()),
            Err(EvalError::NotARun(_))
        ));

        let path = pool.join("pool.jsonl");
        let record = PoolRecord {
            id: "q1".to_string(),
            db: "demo".to_string(),
            question: "How many customers do we have?".to_string(),
            expected: Expected::Answer,
            ended_by_rules: false,
            calls: Vec::new(),
            candidates: Vec::new(),
            error: None,
        };
        let mut file = open_records(&path).expect("opened");
        append_record(&mut file, &path, &record).expect("appended");
        drop(file);
        let whole = std::fs::read_to_string(&path).expect("readable");
        // A crash mid-write: the second record has no line end.
        std::fs::write(&path, format!("{whole}{{\"id\": \"q2\", \"db")).expect("written");
        assert_eq!(read_pool(&pool).expect("records"), vec![record.clone()]);
        // On resume the cut-off record is gone before anything is appended.
        let mut file = open_records(&path).expect("reopened");
        assert_eq!(std::fs::read_to_string(&path).expect("readable"), whole);
        append_record(&mut file, &path, &record).expect("appended");
        assert_eq!(read_pool(&pool).expect("records").len(), 2);
    }
}
