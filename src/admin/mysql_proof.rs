//! The proof of `askdb db setup` on MySQL and MariaDB: logs in as each user with the URL
//! it reports and tries what the user must and must not be able to do, each attempt in
//! a transaction that is rolled back. A wrong grant fails setup loudly.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::mysql::{connect_mysql, quote_name};
use super::{Proof, RoleLogin, SetupError, ROLE_STATEMENT_TIMEOUT};
use crate::demo;
use crate::gate::QUERY_LOG_TABLE;

/// Table or column access denied (ER_TABLEACCESS_DENIED_ERROR,
/// ER_COLUMNACCESS_DENIED_ERROR).
const DENIED: &[u16] = &[1142, 1143];
/// Access denied for a global privilege (FILE): ER_ACCESS_DENIED_ERROR (MariaDB's answer
/// to LOAD DATA INFILE) and ER_SPECIFIC_ACCESS_DENIED_ERROR (to INTO OUTFILE).
const GLOBAL_DENIED: &[u16] = &[1045, 1227];

/// Logs in as each user with its reported URL and checks that it can do exactly what
/// it should.
pub(super) async fn prove_users(
    read_only: &RoleLogin,
    log: &RoleLogin,
    mariadb: bool,
) -> Result<Vec<Proof>, SetupError> {
    let mut proofs = Vec::new();
    let bills = quote_name("bills");
    let query_log = quote_name(QUERY_LOG_TABLE);

    let mut conn = connect_mysql(read_only.connection_url(), None).await?;
    let user = &read_only.role;
    proofs.push(expect_global_usage_only(&mut conn, user).await?);
    if mariadb {
        let wanted = ROLE_STATEMENT_TIMEOUT.as_secs().max(1);
        proofs.push(
            expect_value(
                &mut conn,
                user,
                "SELECT CAST(@@max_statement_time AS UNSIGNED)",
                wanted,
            )
            .await?,
        );
    }
    proofs.push(expect_success(&mut conn, user, &format!("SELECT COUNT(*) FROM {bills}")).await?);
    for sql in [
        format!("DELETE FROM {bills}"),
        format!("SELECT COUNT(*) FROM {query_log}"),
        "CREATE TABLE askdb_planted (a INT)".to_string(),
    ] {
        proofs.push(expect_refusal(&mut conn, user, &sql, DENIED).await?);
    }
    for entry in demo::RESTRICTED_COLUMNS {
        if let Some((table, column)) = entry.split_once('.') {
            let sql = format!(
                "SELECT {} FROM {} LIMIT 1",
                quote_name(column),
                quote_name(table)
            );
            proofs.push(expect_refusal(&mut conn, user, &sql, DENIED).await?);
        }
    }
    // Files on the server: writing one and loading one need FILE, which the user lacks.
    for sql in [
        format!("SELECT bill_no FROM {bills} INTO OUTFILE '/tmp/askdb_setup_proof.txt'"),
        format!("LOAD DATA INFILE '/etc/hostname' INTO TABLE {bills}"),
    ] {
        proofs.push(expect_refusal(&mut conn, user, &sql, GLOBAL_DENIED).await?);
    }
    // LOAD_FILE does not fail without FILE: the server returns NULL instead of the file.
    proofs.push(
        expect_value(
            &mut conn,
            user,
            "SELECT LOAD_FILE('/etc/hostname') IS NULL",
            1,
        )
        .await?,
    );
    let _ = conn.disconnect().await;

    let mut conn = connect_mysql(log.connection_url(), None).await?;
    let user = &log.role;
    proofs.push(expect_global_usage_only(&mut conn, user).await?);
    for sql in [
        format!("SELECT COUNT(*) FROM {bills}"),
        format!("SELECT COUNT(*) FROM {query_log}"),
        format!("UPDATE {query_log} SET question = question"),
        format!("DELETE FROM {query_log}"),
    ] {
        proofs.push(expect_refusal(&mut conn, user, &sql, DENIED).await?);
    }
    proofs.push(
        expect_success(
            &mut conn,
            user,
            &format!(
                "INSERT INTO {query_log} (question, decision) VALUES ('askdb db setup: proof', 'proof')"
            ),
        )
        .await?,
    );
    let _ = conn.disconnect().await;
    Ok(proofs)
}

fn proof_failure(user: &str, attempt: &str, expected: &str, observed: String) -> SetupError {
    SetupError::ProofFailed {
        role: user.to_string(),
        attempt: attempt.to_string(),
        expected: expected.to_string(),
        observed,
    }
}

/// Runs `sql` in a transaction that is always rolled back; returns the rows it changed.
async fn attempt(conn: &mut Conn, sql: &str) -> Result<u64, mysql_async::Error> {
    conn.query_drop("START TRANSACTION").await?;
    let result = conn.query_drop(sql).await.map(|()| conn.affected_rows());
    // The attempt must never leave a trace, whatever it did.
    let _ = conn.query_drop("ROLLBACK").await;
    result
}

fn described(error: &mysql_async::Error) -> String {
    match error {
        mysql_async::Error::Server(server) => {
            format!("error {} ({})", server.code, server.message)
        }
        other => other.to_string(),
    }
}

async fn expect_refusal(
    conn: &mut Conn,
    user: &str,
    sql: &str,
    codes: &[u16],
) -> Result<Proof, SetupError> {
    let numbers: Vec<String> = codes.iter().map(u16::to_string).collect();
    let expected = format!("refused with error {}", numbers.join(" or "));
    match attempt(conn, sql).await {
        Ok(rows) => Err(proof_failure(
            user,
            sql,
            &expected,
            format!("it succeeded ({rows} rows)"),
        )),
        Err(mysql_async::Error::Server(server)) if codes.contains(&server.code) => Ok(Proof {
            role: user.to_string(),
            attempt: sql.to_string(),
            outcome: format!("refused with error {} ({})", server.code, server.message),
        }),
        Err(error @ mysql_async::Error::Server(_)) => Err(proof_failure(
            user,
            sql,
            &expected,
            format!(
                "it failed with {} instead, so the privilege was there",
                described(&error)
            ),
        )),
        Err(error) => Err(proof_failure(
            user,
            sql,
            &expected,
            format!("the connection failed: {}", described(&error)),
        )),
    }
}

async fn expect_success(conn: &mut Conn, user: &str, sql: &str) -> Result<Proof, SetupError> {
    match attempt(conn, sql).await {
        Ok(rows) => Ok(Proof {
            role: user.to_string(),
            attempt: sql.to_string(),
            outcome: format!("allowed ({rows} rows changed; rolled back)"),
        }),
        Err(error) => Err(proof_failure(
            user,
            sql,
            "allowed",
            format!("it failed with {}", described(&error)),
        )),
    }
}

async fn expect_value(
    conn: &mut Conn,
    user: &str,
    sql: &str,
    wanted: u64,
) -> Result<Proof, SetupError> {
    match conn.query_first::<u64, _>(sql).await {
        Ok(Some(value)) if value == wanted => Ok(Proof {
            role: user.to_string(),
            attempt: sql.to_string(),
            outcome: format!("{value}"),
        }),
        Ok(value) => Err(proof_failure(
            user,
            sql,
            &wanted.to_string(),
            format!("it is {value:?}"),
        )),
        Err(error) => Err(proof_failure(
            user,
            sql,
            &wanted.to_string(),
            format!("it could not be read: {}", described(&error)),
        )),
    }
}

/// `SHOW GRANTS`: the user's privileges on `*.*` are USAGE alone (no FILE, PROCESS,
/// SUPER or any other global privilege), and no role is granted to it.
async fn expect_global_usage_only(conn: &mut Conn, user: &str) -> Result<Proof, SetupError> {
    let attempt = "SHOW GRANTS";
    let grants: Vec<String> = conn.query(attempt).await.map_err(|error| {
        proof_failure(
            user,
            attempt,
            "readable",
            format!("it could not be read: {}", described(&error)),
        )
    })?;
    let global: Vec<&String> = grants
        .iter()
        .filter(|line| line.contains(" ON *.* ") || !line.contains(" ON "))
        .collect();
    let wrong: Vec<&&String> = global
        .iter()
        .filter(|line| !line.starts_with("GRANT USAGE ON *.* "))
        .collect();
    if global.len() != 1 || !wrong.is_empty() {
        let shown: Vec<String> = grants.iter().map(|line| redact_identified(line)).collect();
        return Err(proof_failure(
            user,
            attempt,
            "USAGE alone on *.* and no role",
            format!("the grants are: {}", shown.join("; ")),
        ));
    }
    Ok(Proof {
        role: user.to_string(),
        attempt: attempt.to_string(),
        outcome: format!(
            "USAGE alone on *.*; {} grant(s) on tables",
            grants.len() - 1
        ),
    })
}

/// A grant line without its password hash (`IDENTIFIED BY PASSWORD '*...'`).
fn redact_identified(line: &str) -> String {
    match line.find(" IDENTIFIED BY") {
        Some(index) => format!("{} IDENTIFIED BY ***", &line[..index]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_lines_lose_their_password_hashes() {
        assert_eq!(
            redact_identified(
                "GRANT USAGE ON *.* TO `askdb_ro`@`%` IDENTIFIED BY PASSWORD '*ABC' WITH MAX_STATEMENT_TIME 30"
            ),
            "GRANT USAGE ON *.* TO `askdb_ro`@`%` IDENTIFIED BY ***"
        );
        assert_eq!(redact_identified("GRANT SELECT ON x"), "GRANT SELECT ON x");
    }
}
