//! The shared state against a real PostgreSQL: the ledger's reservations, settlements,
//! releases and expiries one transaction each, the shared users (the users file's
//! answers, from a table), and `askdb db setup`'s state role, which writes its schema and
//! is refused the demo data and the query log.

use std::time::Duration;

use super::ledger::PgLedger;
use super::users::SharedUsers;
use super::*;
use crate::llm::{LedgerEntry, Purpose, SharedSpend};
use crate::scratch::{pg_connect, Scratch};
use crate::users::{Authenticated, SignIn, UserFile, UserStore, UsersError};

/// A scratch database holding the state schema, and its superuser URL.
async fn state_database(test: &str) -> Option<(Scratch, String)> {
    let scratch = Scratch::new(test, "state")?;
    scratch.create_empty_database().await;
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
    scratch.create_empty_database().await;
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
    let users = SharedUsers::connect(state.clone())
        .await
        .expect("setup made the users table");
    let token = users.add("ana", None).await.expect("the role adds a user");
    users.revoke("ana").await.expect("and revokes it");
    assert_eq!(users.authenticate(&token).await.expect("read"), None);
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

/// What a store answered, as text: the file's and the table's must read the same.
fn outcome<T: std::fmt::Debug>(result: Result<T, UsersError>) -> String {
    match result {
        Ok(value) => format!("ok {value:?}"),
        Err(error) => format!("error {error}"),
    }
}

#[tokio::test]
async fn the_shared_users_answer_as_the_users_file_does_and_keep_only_hashes() {
    let test = "the_shared_users_answer_as_the_users_file_does_and_keep_only_hashes";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    let state = SharedState::connect(&url).await.expect("connects");
    let users = SharedUsers::connect(state.clone()).await.expect("table");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = UserFile::at(dir.path().join("users.json"));
    assert_eq!(users.sign_in().await.expect("read"), SignIn::Open);

    let token = users.add("ana", None).await.expect("added");
    let other = users.add("ben", Some("sales")).await.expect("added");
    assert!(token.starts_with("askdb_") && token.len() == "askdb_".len() + 64);
    assert_ne!(token, other);
    assert_eq!(users.sign_in().await.expect("read"), SignIn::Required);
    // The table holds the token's SHA-256 and nothing of the token itself.
    let client = pg_connect(&url).await.expect("connects");
    let rows = client
        .query(
            "SELECT name, token_sha256, created, coalesce(revoked, ''), coalesce(policy, '') \
             FROM askdb_state.users ORDER BY id",
            &[],
        )
        .await
        .expect("rows");
    assert_eq!(rows.len(), 2);
    let stored: String = rows[0].get(1);
    assert_eq!(stored, crate::users::token_sha256(&token));
    for row in &rows {
        for column in 0..5 {
            let value: String = row.get(column);
            assert!(!value.contains(&token["askdb_".len()..]), "{value}");
            assert!(!value.contains(&other["askdb_".len()..]), "{value}");
        }
    }
    assert_eq!(
        users.authenticate(&token).await.expect("read"),
        Some(Authenticated {
            name: "ana".into(),
            policy: None
        })
    );
    assert_eq!(
        users.authenticate(&other).await.expect("read"),
        Some(Authenticated {
            name: "ben".into(),
            policy: Some("sales".into())
        })
    );
    for wrong in ["", "askdb_", &token["askdb_".len()..]] {
        assert_eq!(users.authenticate(wrong).await.expect("read"), None);
    }

    // Every refusal in the file's own words: a bad name, a taken one, an unknown one,
    // a policy that is neither a name nor a file.
    file.add("ana", None).expect("the file's ana");
    for name in ["a b", "", "ana\n", "x/y"] {
        let shared = outcome(users.add(name, None).await);
        assert_eq!(shared, outcome(file.add(name, None)), "{name:?}");
        assert!(shared.contains("a user name is 1 to 64"), "{shared}");
    }
    assert_eq!(
        outcome(users.add("ana", None).await),
        outcome(file.add("ana", None))
    );
    assert_eq!(
        outcome(users.add("carla", Some("no such.toml")).await),
        outcome(file.add("carla", Some("no such.toml")))
    );
    assert_eq!(
        outcome(UserStore::revoke(&users, "nobody").await),
        outcome(file.revoke("nobody"))
    );
    assert!(outcome(file.revoke("nobody")).contains("there is no user \"nobody\""));
    for not_live in ["carla", "", "ana ", "ANA"] {
        assert_eq!(
            users.live(not_live).await.expect("read"),
            None,
            "{not_live:?}"
        );
    }

    // A second replica's store: its own copy, read fresh, sees the same users.
    let replica = SharedUsers::connect(SharedState::connect(&url).await.expect("connects"))
        .await
        .expect("table");
    assert!(replica.live("ana").await.expect("read").is_some());
    UserStore::revoke(&users, "ana").await.expect("revoked");
    assert_eq!(users.authenticate(&token).await.expect("read"), None);
    assert_eq!(
        outcome(UserStore::revoke(&users, "ana").await),
        outcome(file.revoke("ana").and_then(|()| file.revoke("ana")))
    );
    // Revoked for good: listed as revoked, the name taken, the revoked list written.
    assert_eq!(
        outcome(users.add("ana", None).await),
        outcome(file.add("ana", None))
    );
    let listed: Vec<String> = client
        .query("SELECT user_name FROM askdb_state.revoked_users", &[])
        .await
        .expect("revoked list")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(listed, vec!["ana".to_string()]);
    UserStore::revoke(&users, "ben").await.expect("revoked");
    assert_eq!(users.sign_in().await.expect("read"), SignIn::Required);
    let summaries = users.list().await.expect("list");
    let names: Vec<&str> = summaries.iter().map(|user| user.name.as_str()).collect();
    assert_eq!(names, ["ana", "ben"], "in the order added");
    assert!(summaries.iter().all(|user| user.revoked.is_some()));
    assert_eq!(summaries[1].policy.as_deref(), Some("sales"));

    // A name revoked before the users were shared stays refused: it cannot come back.
    client
        .execute(
            "INSERT INTO askdb_state.revoked_users (user_name) VALUES ('dora')",
            &[],
        )
        .await
        .expect("an earlier revocation");
    assert!(matches!(
        users.add("dora", None).await,
        Err(UsersError::Exists(_))
    ));
}

#[tokio::test]
async fn a_users_file_imported_into_the_shared_state_keeps_its_tokens() {
    let test = "a_users_file_imported_into_the_shared_state_keeps_its_tokens";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    let state = SharedState::connect(&url).await.expect("connects");
    let users = SharedUsers::connect(state).await.expect("table");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = UserFile::at(dir.path().join("users.json"));
    let ana = file.add("ana", Some("sales")).expect("ana");
    let ben = file.add("ben", None).expect("ben");
    file.revoke("ben").expect("revoked");
    let carla = users.add("carla", None).await.expect("already shared");
    let mut records = file.records().expect("records");
    records.push(crate::users::UserRecord {
        name: "carla".into(),
        ..records[0].clone()
    });

    let imported = users.import(&records).await.expect("imported");
    assert_eq!(imported.added, ["ana", "ben"]);
    assert_eq!(imported.already_there, ["carla"]);
    assert_eq!(
        users.authenticate(&ana).await.expect("read"),
        Some(Authenticated {
            name: "ana".into(),
            policy: Some("sales".into())
        }),
        "the file's token works from the table"
    );
    assert_eq!(
        users.authenticate(&ben).await.expect("read"),
        None,
        "revoked"
    );
    // carla's row is the table's own: the imported hash did not replace hers.
    assert_eq!(
        users
            .authenticate(&carla)
            .await
            .expect("read")
            .map(|user| user.name),
        Some("carla".to_string())
    );
    let again = users.import(&records).await.expect("again");
    assert!(again.added.is_empty(), "{again:?}");
}

#[tokio::test]
async fn a_user_revoked_through_the_state_before_the_users_were_shared_is_imported_revoked() {
    let test = "a_user_revoked_through_the_state_before_the_users_were_shared_is_imported_revoked";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    let state = SharedState::connect(&url).await.expect("connects");
    let users = SharedUsers::connect(state).await.expect("table");
    let dir = tempfile::tempdir().expect("temp dir");
    // Decision 0079's state: `askdb users --state-url URL revoke ben` on machine A
    // revoked ben in A's file and listed him in the state; machine B's file still has
    // him live.
    let here = UserFile::at(dir.path().join("a.json"));
    let there = UserFile::at(dir.path().join("b.json"));
    here.add("ana", None).expect("ana");
    here.add("ben", None).expect("ben on A");
    here.revoke("ben").expect("revoked on A");
    let ben = there.add("ben", None).expect("ben on B");
    let client = pg_connect(&url).await.expect("connects");
    client
        .execute(
            "INSERT INTO askdb_state.revoked_users (user_name) VALUES ('ben')",
            &[],
        )
        .await
        .expect("the earlier revocation");

    let imported = users
        .import(&there.records().expect("B's records"))
        .await
        .expect("B imports");
    assert_eq!(
        imported,
        super::users::Imported {
            added_revoked: vec!["ben".into()],
            ..Default::default()
        }
    );
    assert_eq!(users.authenticate(&ben).await.expect("read"), None);
    let table = users.list().await.expect("list");
    assert_eq!(
        super::users::disagreement(&there.list().expect("B's list"), &table),
        None,
        "B starts"
    );

    let imported = users
        .import(&here.records().expect("A's records"))
        .await
        .expect("A imports");
    assert_eq!(imported.added, ["ana"]);
    assert_eq!(imported.already_there, ["ben"]);
    let table = users.list().await.expect("list");
    assert_eq!(
        super::users::disagreement(&here.list().expect("A's list"), &table),
        None,
        "A starts"
    );
    assert!(
        table[0].revoked.is_some() && table[0].name == "ben",
        "{table:?}"
    );

    // The other order, A's file first: ben, revoked there and listed by the state, is
    // copied revoked rather than skipped, so A starts instead of being told to import
    // again; B's live ben then finds the table narrower and starts too.
    client
        .execute("DELETE FROM askdb_state.users", &[])
        .await
        .expect("an empty table again");
    let imported = users
        .import(&here.records().expect("A's records"))
        .await
        .expect("A imports");
    assert_eq!(imported.added, ["ana", "ben"], "{imported:?}");
    let table = users.list().await.expect("list");
    assert_eq!(
        super::users::disagreement(&here.list().expect("A's list"), &table),
        None,
        "A starts"
    );
    let imported = users
        .import(&there.records().expect("B's records"))
        .await
        .expect("B imports");
    assert_eq!(imported.already_there, ["ben"], "{imported:?}");
    assert_eq!(users.authenticate(&ben).await.expect("read"), None);
    let table = users.list().await.expect("list");
    assert_eq!(
        super::users::disagreement(&there.list().expect("B's list"), &table),
        None,
        "B starts"
    );
}

#[tokio::test]
async fn a_revocation_in_a_users_file_is_carried_into_the_table_by_an_import_of_one_transaction() {
    let test =
        "a_revocation_in_a_users_file_is_carried_into_the_table_by_an_import_of_one_transaction";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    let state = SharedState::connect(&url).await.expect("connects");
    let users = SharedUsers::connect(state).await.expect("table");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = UserFile::at(dir.path().join("users.json"));
    let ana = file.add("ana", None).expect("ana");
    let imported = users
        .import(&file.records().expect("records"))
        .await
        .expect("imported");
    assert_eq!(imported.added, ["ana"]);

    // `askdb users revoke ana` without --state-url reaches only the file: the replica
    // refuses to start rather than let ana in.
    file.revoke("ana").expect("revoked in the file");
    let disagreement = super::users::disagreement(
        &file.list().expect("list"),
        &users.list().await.expect("list"),
    )
    .expect("the file revokes a user the table lets in");
    assert_eq!(disagreement.live_there, ["ana"]);
    assert!(
        disagreement
            .to_string()
            .contains("revokes users it lets sign in (ana)"),
        "{disagreement}"
    );
    assert!(users.authenticate(&ana).await.expect("read").is_some());

    let imported = users
        .import(&file.records().expect("records"))
        .await
        .expect("imported");
    assert_eq!(imported.revoked_there, ["ana"]);
    assert_eq!(users.authenticate(&ana).await.expect("read"), None);
    let client = pg_connect(&url).await.expect("connects");
    let listed = client
        .query_one(
            "SELECT count(*) FROM askdb_state.revoked_users WHERE user_name = 'ana'",
            &[],
        )
        .await
        .expect("revoked list")
        .get::<_, i64>(0);
    assert_eq!(listed, 1, "every replica's sessions of ana end");
    assert_eq!(
        super::users::disagreement(
            &file.list().expect("list"),
            &users.list().await.expect("list")
        ),
        None
    );

    // One transaction: a record the table refuses leaves nothing of the import.
    file.add("carla", None).expect("carla");
    let mut records = file.records().expect("records");
    records.push(crate::users::UserRecord {
        name: "dora".into(),
        token_sha256: "not a hash".into(),
        ..records[0].clone()
    });
    users
        .import(&records)
        .await
        .expect_err("dora's row is refused");
    let names: Vec<String> = users
        .list()
        .await
        .expect("list")
        .into_iter()
        .map(|user| user.name)
        .collect();
    assert_eq!(names, ["ana"], "carla was not kept either");
}

#[tokio::test]
async fn concurrent_misses_share_one_read_of_the_users() {
    let test = "concurrent_misses_share_one_read_of_the_users";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    let hour = Duration::from_secs(3600);
    let users = std::sync::Arc::new(
        SharedUsers::connect(SharedState::connect(&url).await.expect("connects"))
            .await
            .expect("table")
            .with_lifetimes(hour, hour),
    );
    let ana = users.add("ana", None).await.expect("ana");
    let mut requests = tokio::task::JoinSet::new();
    for request in 0..32 {
        let (users, ana) = (std::sync::Arc::clone(&users), ana.clone());
        requests.spawn(async move {
            let token = if request % 2 == 0 {
                ana
            } else {
                format!("askdb_{request:064}")
            };
            users.authenticate(&token).await.map(|user| user.is_some())
        });
    }
    let mut signed_in = 0;
    while let Some(joined) = requests.join_next().await {
        if joined.expect("joined").expect("read") {
            signed_in += 1;
        }
    }
    assert_eq!(signed_in, 16, "ana's requests, and no wrong token");
    assert_eq!(users.reads(), 1, "one read for every request, misses too");

    // A miss is answered from a copy young enough: a user another replica added since
    // is not read for it (with the store's own times, one read per 250 ms).
    let other = SharedUsers::connect(SharedState::connect(&url).await.expect("connects"))
        .await
        .expect("table");
    let ben = other.add("ben", None).await.expect("ben");
    assert_eq!(users.authenticate(&ben).await.expect("read"), None);
    assert_eq!(users.reads(), 1);
}

#[tokio::test]
async fn a_state_made_before_the_users_table_is_told_to_run_db_setup_again() {
    let test = "a_state_made_before_the_users_table_is_told_to_run_db_setup_again";
    let Some((_scratch, url)) = state_database(test).await else {
        return;
    };
    let client = pg_connect(&url).await.expect("connects");
    client
        .execute("DROP TABLE askdb_state.users", &[])
        .await
        .expect("dropped");
    let state = SharedState::connect(&url).await.expect("the rest is there");
    let missing = SharedUsers::connect(state)
        .await
        .expect_err("no users table");
    assert!(
        missing.to_string().contains("askdb_state.users")
            && missing.to_string().contains("askdb db setup"),
        "{missing}"
    );

    // So is `askdb examples --state-url ... list --caused-wrong` on a state older than
    // the wrong marks (the users table made again first, as `db setup` would).
    apply_schema(&client)
        .await
        .expect("db setup's statements again");
    client
        .execute("DROP TABLE askdb_state.wrong_marks", &[])
        .await
        .expect("dropped");
    let state = SharedState::connect(&url).await.expect("the rest is there");
    state
        .require_table(schema::EXAMPLES_TABLE)
        .await
        .expect("the examples are there");
    let missing = state
        .require_table(schema::WRONG_MARKS_TABLE)
        .await
        .expect_err("no marks table");
    assert!(
        missing.to_string().contains("askdb_state.wrong_marks")
            && missing.to_string().contains("askdb db setup"),
        "{missing}"
    );
    // A replica finds it missing before it listens, not at the first Wrong mark.
    let missing = state
        .require_replica_tables()
        .await
        .expect_err("a replica needs the marks");
    assert!(
        missing.to_string().contains("askdb_state.wrong_marks"),
        "{missing}"
    );
    apply_schema(&client)
        .await
        .expect("db setup's statements once more");
    state
        .require_replica_tables()
        .await
        .expect("every table is back");
}

#[test]
fn a_replica_looks_for_every_table_db_setup_makes() {
    let mut made: Vec<&str> = schema::STATEMENTS
        .iter()
        .filter_map(|statement| statement.strip_prefix("CREATE TABLE IF NOT EXISTS "))
        .filter_map(|rest| rest.split([' ', '(']).next())
        .collect();
    let mut looked_for = schema::REPLICA_TABLES.to_vec();
    made.sort_unstable();
    looked_for.sort_unstable();
    assert_eq!(made, looked_for);
}
