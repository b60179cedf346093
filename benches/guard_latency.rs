//! Guard latency over the external gold corpus (Spider dev via spiderman, defog's
//! SQLite gold): parses, checks and re-renders every query several times and prints
//! the mean microseconds per query with the count. Run: `cargo bench --bench guard_latency`.

use std::collections::BTreeMap;
use std::time::Instant;

use askdb::eval::external::{self, ExternalDialect};
use askdb::gate::{Gate, GateOptions};

const ROUNDS: usize = 5;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data_dir = askdb::home::shared_data_dir()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let mut corpus: Vec<(String, std::path::PathBuf, String)> = Vec::new();
    for query in external::load_spiderman(&data_dir)? {
        let path = external::spiderman_db_path(&data_dir, &query.db_name);
        for sql in external::concrete_golds(&query) {
            corpus.push(("spider".into(), path.clone(), sql));
        }
    }
    for query in external::load_defog(&data_dir, ExternalDialect::Sqlite)? {
        let path = external::defog_sqlite_path(&data_dir, &query.db_name);
        for sql in external::concrete_golds(&query) {
            corpus.push(("defog".into(), path.clone(), sql));
        }
    }
    let mut gates: BTreeMap<std::path::PathBuf, Gate> = BTreeMap::new();
    for (_, path, _) in &corpus {
        if !gates.contains_key(path) {
            let gate = runtime.block_on(askdb::database::open_gate(
                &askdb::database::DatabaseUrl::Sqlite(path.clone()),
                GateOptions::default(),
            ))?;
            gates.insert(path.clone(), gate);
        }
    }
    let mut per_set: BTreeMap<String, (usize, std::time::Duration)> = BTreeMap::new();
    let mut accepted = 0usize;
    let started = Instant::now();
    for round in 0..ROUNDS {
        for (set, path, sql) in &corpus {
            let gate = &gates[path];
            let one = Instant::now();
            let verdict = gate.check(sql);
            let elapsed = one.elapsed();
            if round == 0 && verdict.is_ok() {
                accepted += 1;
            }
            let entry = per_set.entry(set.clone()).or_default();
            entry.0 += 1;
            entry.1 += elapsed;
        }
    }
    let total = started.elapsed();
    println!("guard latency (parse + check + re-render), {ROUNDS} rounds, debug/release as built");
    for (set, (count, time)) in &per_set {
        println!(
            "  {set:<7} {:>5} queries  mean {:>7.1} us/query",
            count / ROUNDS,
            time.as_secs_f64() * 1e6 / *count as f64
        );
    }
    let checks = corpus.len() * ROUNDS;
    println!(
        "  all     {:>5} queries  mean {:>7.1} us/query  ({} accepted)",
        corpus.len(),
        total.as_secs_f64() * 1e6 / checks as f64,
        accepted
    );
    Ok(())
}
