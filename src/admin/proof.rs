//! The proof of `askdb db setup`: connects as each role with the URL it reports and
//! tries what the role must and must not be able to do, each attempt in a transaction
//! that is rolled back. A wrong grant fails setup loudly.

use tokio_postgres::Client;

use super::{connect_as, describe, quote_ident, Proof, RoleLogin, SetupError};
use crate::demo;
use crate::gate::QUERY_LOG_TABLE;

/// Connects as each role with its reported URL and checks that it can do exactly
/// what it should. Every attempt that could change data runs in a transaction that
/// is rolled back, so even a wrongly granted role changes nothing here.
pub async fn prove_roles(read_only: &RoleLogin, log: &RoleLogin) -> Result<Vec<Proof>, SetupError> {
    let mut proofs = Vec::new();
    let bills = quote_ident("bills");
    let query_log = quote_ident(QUERY_LOG_TABLE);

    let mut client = connect_as(read_only).await?;
    let role = &read_only.role;
    proofs.push(expect_setting(&client, role, "default_transaction_read_only", "on").await?);
    proofs.push(expect_setting(&client, role, "track_activities", "off").await?);
    proofs.push(expect_success(&mut client, role, &format!("SELECT count(*) FROM {bills}")).await?);
    proofs.push(
        expect_refusal(
            &mut client,
            role,
            &format!("DELETE FROM {bills}"),
            &["42501", "25006"],
        )
        .await?,
    );
    proofs.push(
        expect_refusal(
            &mut client,
            role,
            &format!("SELECT count(*) FROM {query_log}"),
            &["42501"],
        )
        .await?,
    );
    for entry in demo::RESTRICTED_COLUMNS {
        if let Some((table, column)) = entry.split_once('.') {
            let sql = format!(
                "SELECT {} FROM {} LIMIT 1",
                quote_ident(column),
                quote_ident(table)
            );
            proofs.push(expect_refusal(&mut client, role, &sql, &["42501"]).await?);
        }
    }
    drop(client);

    let mut client = connect_as(log).await?;
    let role = &log.role;
    for sql in [
        format!("SELECT count(*) FROM {bills}"),
        format!("SELECT count(*) FROM {query_log}"),
        format!("UPDATE {query_log} SET question = question"),
        format!("DELETE FROM {query_log}"),
    ] {
        proofs.push(expect_refusal(&mut client, role, &sql, &["42501"]).await?);
    }
    proofs.push(
        expect_success(
            &mut client,
            role,
            &format!(
                "INSERT INTO {query_log} (question, decision) VALUES ('askdb db setup: proof', 'proof')"
            ),
        )
        .await?,
    );
    Ok(proofs)
}

fn proof_failure(role: &str, attempt: &str, expected: &str, observed: String) -> SetupError {
    SetupError::ProofFailed {
        role: role.to_string(),
        attempt: attempt.to_string(),
        expected: expected.to_string(),
        observed,
    }
}

/// Runs `sql` in a transaction that is always rolled back; the role's own default
/// (read-only or not) applies, since BEGIN names no mode.
async fn attempt(client: &mut Client, sql: &str) -> Result<u64, tokio_postgres::Error> {
    let transaction = client.transaction().await?;
    let result = transaction.execute(sql, &[]).await;
    // The attempt must never leave a trace, whatever it did.
    let _ = transaction.rollback().await;
    result
}

fn row_count(rows: u64) -> String {
    crate::text::counted(rows, "row", "rows")
}

pub(super) async fn expect_refusal(
    client: &mut Client,
    role: &str,
    sql: &str,
    codes: &[&str],
) -> Result<Proof, SetupError> {
    let expected = format!("refused with SQLSTATE {}", codes.join(" or "));
    match attempt(client, sql).await {
        Ok(rows) => Err(proof_failure(
            role,
            sql,
            &expected,
            format!("it succeeded ({})", row_count(rows)),
        )),
        Err(error) => match error.as_db_error() {
            Some(db) if codes.contains(&db.code().code()) => Ok(Proof {
                role: role.to_string(),
                attempt: sql.to_string(),
                outcome: format!(
                    "refused with SQLSTATE {} ({})",
                    db.code().code(),
                    db.message()
                ),
            }),
            Some(db) => Err(proof_failure(
                role,
                sql,
                &expected,
                format!(
                    "it failed with SQLSTATE {} ({}) instead, so the privilege was there",
                    db.code().code(),
                    db.message()
                ),
            )),
            None => Err(proof_failure(
                role,
                sql,
                &expected,
                format!("the connection failed: {}", describe(&error)),
            )),
        },
    }
}

pub(super) async fn expect_success(
    client: &mut Client,
    role: &str,
    sql: &str,
) -> Result<Proof, SetupError> {
    match attempt(client, sql).await {
        Ok(rows) => Ok(Proof {
            role: role.to_string(),
            attempt: sql.to_string(),
            outcome: format!("allowed ({}; rolled back)", row_count(rows)),
        }),
        Err(error) => {
            let observed = match error.as_db_error() {
                Some(db) => format!(
                    "it failed with SQLSTATE {} ({})",
                    db.code().code(),
                    db.message()
                ),
                None => format!("it failed: {}", describe(&error)),
            };
            Err(proof_failure(role, sql, "allowed", observed))
        }
    }
}

async fn expect_setting(
    client: &Client,
    role: &str,
    setting: &str,
    wanted: &str,
) -> Result<Proof, SetupError> {
    let attempt = format!("SELECT current_setting('{setting}')");
    let value: Result<String, _> = client
        .query_one("SELECT pg_catalog.current_setting($1)", &[&setting])
        .await
        .and_then(|row| row.try_get(0));
    match value {
        Ok(value) if value == wanted => Ok(Proof {
            role: role.to_string(),
            attempt,
            outcome: format!("{setting} = {value}"),
        }),
        Ok(value) => Err(proof_failure(
            role,
            &attempt,
            &format!("{wanted:?}"),
            format!("it is {value:?}"),
        )),
        Err(error) => Err(proof_failure(
            role,
            &attempt,
            &format!("{wanted:?}"),
            format!("it could not be read: {}", describe(&error)),
        )),
    }
}
