//! `askdb db setup`'s part for replicas (decision 0079): the shared state's schema
//! `askdb_state` (its tables from [`crate::state::schema::STATEMENTS`], the one list)
//! and the role `askdb_state`, which may read and write that schema's tables and
//! nothing else, proven as the other roles are: it writes a table of its own and is
//! refused the demo data and the query log. PostgreSQL only.

use super::proof::{expect_refusal, expect_success};
use super::{
    check_name, connect, connect_as, ensure_role, login_for, parse_admin_url, quote_ident, run,
    Proof, RoleLogin, RoleSpec, SetupError,
};
use crate::gate::QUERY_LOG_TABLE;
use crate::state::schema::{SCHEMA, STATEMENTS};

/// The role the CLI creates for the shared state.
pub const DEFAULT_STATE_ROLE: &str = "askdb_state";
/// The variable the CLI reads the state role's password from (else one is generated).
pub const STATE_PASSWORD_ENV: &str = "ASKDB_STATE_PASSWORD";

/// What the shared state's setup made.
#[derive(Debug, Clone)]
pub struct StateSetupReport {
    pub role: RoleLogin,
    pub proofs: Vec<Proof>,
}

/// Creates (or brings back to exactly its grants) the shared state's schema and role
/// in `database`, then proves the role. Safe to run again: the tables are kept.
pub async fn setup_state(
    admin_url: &str,
    database: &str,
    role: &RoleSpec,
) -> Result<StateSetupReport, SetupError> {
    check_name("database", database)?;
    check_name("role", &role.name)?;
    let admin_config = parse_admin_url(admin_url)?;
    let login = login_for(admin_url, role, database)?;
    let admin = connect(&admin_config, admin_url).await?;
    ensure_role(&admin, &login, database).await?;
    drop(admin);

    let mut in_database = admin_config.clone();
    in_database.dbname(database);
    let client = connect(&in_database, admin_url).await?;
    for statement in STATEMENTS {
        run(
            &client,
            "create the shared state's schema and tables",
            statement,
        )
        .await?;
    }
    let (schema, quoted_role) = (quote_ident(SCHEMA), quote_ident(&login.role));
    for (step, sql) in [
        (
            "grant CONNECT to the state role",
            format!("GRANT CONNECT ON DATABASE {} TO {quoted_role}", quote_ident(database)),
        ),
        (
            "keep other roles out of the state schema",
            format!("REVOKE ALL ON SCHEMA {schema} FROM PUBLIC"),
        ),
        (
            "let the state role use its schema",
            format!("GRANT USAGE ON SCHEMA {schema} TO {quoted_role}"),
        ),
        (
            "let the state role read and write the state tables",
            format!(
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {quoted_role}"
            ),
        ),
        (
            "let the state role number its rows",
            format!("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {quoted_role}"),
        ),
        (
            "grant tables added later to the state role",
            format!(
                "ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {quoted_role}"
            ),
        ),
        (
            "grant sequences added later to the state role",
            format!(
                "ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT USAGE, SELECT ON SEQUENCES TO {quoted_role}"
            ),
        ),
    ] {
        run(&client, step, &sql).await?;
    }
    drop(client);
    let proofs = prove_state_role(&login).await?;
    Ok(StateSetupReport {
        role: login,
        proofs,
    })
}

/// The state role writes its own tables (rolled back) and is refused the demo data
/// and the query log.
async fn prove_state_role(login: &RoleLogin) -> Result<Vec<Proof>, SetupError> {
    let mut client = connect_as(login).await?;
    let role = &login.role;
    let mut proofs = vec![
        expect_success(
            &mut client,
            role,
            "INSERT INTO askdb_state.rate_buckets (asker, tokens, updated_at) VALUES ('askdb db setup: proof', 1, now())",
        )
        .await?,
        expect_success(&mut client, role, "SELECT count(*) FROM askdb_state.spend_entries")
            .await?,
    ];
    for table in [quote_ident("bills"), quote_ident(QUERY_LOG_TABLE)] {
        proofs.push(
            expect_refusal(
                &mut client,
                role,
                &format!("SELECT count(*) FROM {table}"),
                &["42501"],
            )
            .await?,
        );
    }
    Ok(proofs)
}
