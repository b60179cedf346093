//! The shared state against a real PostgreSQL: the ledger's reservations, settlements,
//! releases and expiries one transaction each, and `askdb db setup`'s state role, which
//! writes its schema and is refused the demo data and the query log.

use std::time::Duration;

use super::ledger::PgLedger;
use super::*;
use crate::llm::{LedgerEntry, Purpose, SharedSpend};
use crate::scratch::{pg_connect, Scratch};

/// A scratch database holding the state schema, and its superuser URL.
async fn state_database(test: &str) -> Option<(Scratch, String)> {
    let scratch = Scratch::new(test, "state")?;
    let admin = pg_connect(&scratch.admin_url)
        .await
        .expect("admin connects");
    admin
        .execute(
            format!("CREATE DATABASE \"{}\"", scratch.database).as_str(),
            &[],
        )
        .await
        .expect("scratch database");
    let url = crate::admin::url_with_database(&scratch.admin_url, &scratch.database);
    let client = pg_connect(&url).await.expect("connects");
    apply_schema(&client).await.expect("schema");
    apply_schema(&client)
        .await
        .expect("the schema applies twice");
    Some((scratch, url))
}

fn entry(cost_usd: f64) -> LedgerEntry {
    LedgerEntry {
        at: 0,
        provider: "scripted".to_string(),
        model: "scripted".to_string(),
        purpose: Purpose::WriteSql,
        input_tokens: 10,
        output_tokens: 2,
        cost_usd,
        reservation: None,
    }
}

#[tokio::test]
async fn a_reservation_never_settled_expires_as_spent_and_a_release_gives_it_back() {
    let test = "a_reservation_never_settled_expires_as_spent_and_a_release_gives_it_back";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    let state = SharedState::connect(&url).await.expect("connects");
    // Reservations live 3 s: the settle and release below finish well inside that on a
    // loaded machine, and the orphan's expiry is waited for.
    let lifetime = Duration::from_secs(3);
    let ledger = PgLedger::new(state.clone(), lifetime);
    let cap = Some(1.0);

    let settled = ledger
        .reserve(cap, 0.4, Purpose::WriteSql)
        .await
        .expect("room");
    let refused = ledger
        .reserve(cap, 0.7, Purpose::WriteSql)
        .await
        .expect_err("0.4 in flight + 0.7 > 1.0");
    assert_eq!(refused.kind(), "spend_cap_reached");
    ledger.settle(settled, &entry(0.1)).await.expect("settled");
    let released = ledger
        .reserve(cap, 0.5, Purpose::RepairSql)
        .await
        .expect("room");
    ledger.release(released).await.expect("released");
    let totals = ledger.totals().await.expect("totals");
    assert!((totals.spent_usd - 0.1).abs() < 1e-12, "{totals:?}");
    assert!(totals.reserved_usd.abs() < 1e-12, "{totals:?}");
    assert_eq!(totals.calls, 1);

    // A replica killed mid-call: its reservation is never settled nor released.
    let orphan = ledger
        .reserve(cap, 0.3, Purpose::WriteSql)
        .await
        .expect("room");
    tokio::time::sleep(lifetime + Duration::from_millis(500)).await;
    let totals = ledger.totals().await.expect("totals");
    assert!(
        (totals.spent_usd - 0.4).abs() < 1e-12,
        "the orphan counts at its worst case: {totals:?}"
    );
    assert!(totals.reserved_usd.abs() < 1e-12, "{totals:?}");
    assert_eq!(totals.calls, 2);
    // A late release cannot give an expired reservation back; a late settlement
    // replaces the worst case with the real cost.
    ledger.release(orphan).await.expect("release");
    assert!((ledger.totals().await.expect("totals").spent_usd - 0.4).abs() < 1e-12);
    ledger
        .settle(orphan, &entry(0.05))
        .await
        .expect("late settlement");
    let totals = ledger.totals().await.expect("totals");
    assert!((totals.spent_usd - 0.15).abs() < 1e-12, "{totals:?}");
    assert_eq!(totals.calls, 2);
}

#[tokio::test]
async fn a_state_url_is_checked_before_a_replica_starts() {
    let refused = SharedState::connect("mysql://root@127.0.0.1:3306/x")
        .await
        .expect_err("not PostgreSQL");
    assert!(matches!(refused, StateError::BadUrl { .. }), "{refused}");
    let Some(scratch) = Scratch::new("a_state_url_is_checked_before_a_replica_starts", "state")
    else {
        return;
    };
    let admin = pg_connect(&scratch.admin_url)
        .await
        .expect("admin connects");
    admin
        .execute(
            format!("CREATE DATABASE \"{}\"", scratch.database).as_str(),
            &[],
        )
        .await
        .expect("scratch database");
    let url = crate::admin::url_with_database(&scratch.admin_url, &scratch.database);
    let missing = SharedState::connect(&url).await.expect_err("no schema yet");
    assert!(matches!(missing, StateError::NoSchema { .. }), "{missing}");
    let secret = "postgres://askdb_state:s3cret@127.0.0.1:1/none";
    let unreachable = SharedState::connect(secret)
        .await
        .expect_err("nothing listens");
    assert!(!unreachable.to_string().contains("s3cret"), "{unreachable}");
}

#[tokio::test]
async fn db_setup_makes_a_state_role_that_writes_its_schema_and_reads_nothing_else() {
    let test = "db_setup_makes_a_state_role_that_writes_its_schema_and_reads_nothing_else";
    let Some(scratch) = Scratch::new(test, "state") else {
        return;
    };
    let mut options = crate::admin::SetupOptions::new(&scratch.admin_url, &scratch.database);
    options.read_only_role = crate::admin::RoleSpec::new(&scratch.read_only_role);
    options.log_role = crate::admin::RoleSpec::new(&scratch.log_role);
    crate::admin::setup(&options).await.expect("setup");
    let role = crate::admin::RoleSpec::new(&scratch.state_role);
    let report = crate::admin::setup_state(&scratch.admin_url, &scratch.database, &role)
        .await
        .expect("state setup");
    let refusals = report
        .proofs
        .iter()
        .filter(|proof| proof.outcome.starts_with("refused with SQLSTATE 42501"))
        .count();
    assert_eq!(refusals, 2, "{:?}", report.proofs);
    // Again: idempotent, the tables kept.
    crate::admin::setup_state(&scratch.admin_url, &scratch.database, &role)
        .await
        .expect("state setup again");
    let state = SharedState::connect(report.role.connection_url())
        .await
        .expect("the role connects");
    state.ping().await.expect("answers");
    let ledger = PgLedger::new(state, Duration::from_secs(60));
    let id = ledger
        .reserve(Some(1.0), 0.2, Purpose::WriteSql)
        .await
        .expect("the role books a reservation");
    ledger
        .settle(id, &entry(0.1))
        .await
        .expect("and settles it");
    assert_eq!(ledger.totals().await.expect("totals").calls, 1);
}
