//! Benchmark dumps loaded into PostgreSQL databases of their own (defog's gold runs on
//! them), and dropped again: administration, outside the gate, never model or user SQL.

use tokio_postgres::Client;

use super::{
    check_name, connect, ensure_database, parse_admin_url, percent_encode, quote_ident, run,
    step_error, SetupError,
};

/// The admin URL pointed at another database on the same server.
pub fn url_with_database(admin_url: &str, database: &str) -> String {
    let (base, query) = match admin_url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (admin_url, None),
    };
    let scheme_end = base.find("://").map(|index| index + 3).unwrap_or(0);
    let authority_end = base[scheme_end..]
        .find('/')
        .map(|index| scheme_end + index)
        .unwrap_or(base.len());
    let mut url = format!("{}/{}", &base[..authority_end], percent_encode(database));
    if let Some(query) = query {
        url.push('?');
        url.push_str(query);
    }
    url
}

/// Creates a database and loads a plain SQL dump into it (a benchmark's own
/// schema and data, trusted text from `../shared/data`), for evaluations that compare
/// queries on PostgreSQL. Administration, like `setup`: it never runs model or user SQL.
/// Returns the scratch database's URL (the admin's credentials).
pub async fn load_dump_into_database(
    admin_url: &str,
    database: &str,
    dump_sql: &str,
) -> Result<String, SetupError> {
    check_name("database", database)?;
    let config = parse_admin_url(admin_url)?;
    let admin = connect(&config, admin_url).await?;
    ensure_database(&admin, database).await?;
    let url = url_with_database(admin_url, database);
    let scratch_config = parse_admin_url(&url)?;
    let scratch = connect(&scratch_config, &url).await?;
    scratch
        .batch_execute(dump_sql)
        .await
        .map_err(|error| step_error("load the dump", &error))?;
    scratch
        .batch_execute("ANALYZE")
        .await
        .map_err(|error| step_error("analyze the dump", &error))?;
    Ok(url)
}

/// Drops a database made by [`load_dump_into_database`] (its connections first).
pub async fn drop_database(admin_url: &str, database: &str) -> Result<(), SetupError> {
    check_name("database", database)?;
    let config = parse_admin_url(admin_url)?;
    let admin = connect(&config, admin_url).await?;
    drop_database_on(&admin, database).await
}

/// Ends a database's sessions and drops it, over an admin connection already open;
/// the caller has checked the name.
async fn drop_database_on(admin: &Client, database: &str) -> Result<(), SetupError> {
    admin
        .execute(
            "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_catalog.pg_backend_pid()",
            &[&database],
        )
        .await
        .map_err(|error| step_error("end the scratch database's sessions", &error))?;
    run(
        admin,
        "drop the scratch database",
        &format!("DROP DATABASE IF EXISTS {}", quote_ident(database)),
    )
    .await?;
    Ok(())
}

/// Whether a server answers at this URL (for tests and checks that need one).
pub async fn url_reachable(url: &str) -> Result<(), SetupError> {
    let config = parse_admin_url(url)?;
    connect(&config, url).await.map(|_| ())
}
