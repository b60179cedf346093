//! The demo loaded into PostgreSQL: the tables dropped and recreated with the
//! generator's rows, the query log kept, and every grant of the two roles, in one
//! transaction.

use tokio_postgres::Client;

use super::{quote_ident, run, step_error, SetupError, ROWS_PER_INSERT};
use crate::demo::{self, DdlDialect};
use crate::gate::QUERY_LOG_TABLE;

/// Rebuilds the demo tables and every grant in one transaction: either all of it
/// happens or none of it does.
pub(super) async fn load_demo(
    client: &mut Client,
    database: &str,
    read_only: &str,
    log: &str,
) -> Result<Vec<(String, usize)>, SetupError> {
    let tables = demo::generate();
    let transaction = client
        .transaction()
        .await
        .map_err(|error| step_error("start the load transaction", &error))?;
    let ro = quote_ident(read_only);
    let lg = quote_ident(log);
    let db = quote_ident(database);
    let log_table = quote_ident(QUERY_LOG_TABLE);

    let names: Vec<String> = tables
        .iter()
        .map(|table| quote_ident(table.def.name))
        .collect();
    run(
        &transaction,
        "drop the old demo tables",
        &format!("DROP TABLE IF EXISTS {} CASCADE", names.join(", ")),
    )
    .await?;
    let mut loaded = Vec::with_capacity(tables.len());
    for table in &tables {
        let name = table.def.name;
        run(
            &transaction,
            &format!("create table {name}"),
            &demo::create_table_sql(&table.def, DdlDialect::Postgres),
        )
        .await?;
        for insert in demo::insert_values_sql(table, DdlDialect::Postgres, ROWS_PER_INSERT) {
            run(&transaction, &format!("load table {name}"), &insert).await?;
        }
        if let Some(reset) = demo::sequence_reset_sql(&table.def, DdlDialect::Postgres) {
            // A SELECT (setval): query, not execute, so its row is read.
            transaction
                .query(reset.as_str(), &[])
                .await
                .map_err(|error| step_error(&format!("reset the sequence of {name}"), &error))?;
        }
        loaded.push((name.to_string(), table.rows.len()));
    }
    run(
        &transaction,
        "create the query log",
        &format!(
            "CREATE TABLE IF NOT EXISTS {log_table} (\
             id bigserial PRIMARY KEY, \
             asked_at timestamptz NOT NULL DEFAULT now(), \
             question text, sql text, decision text, error_type text, latency_ms integer)"
        ),
    )
    .await?;
    // A log made by an older askdb keeps its rows and gains the newer columns.
    for (column, data_type) in crate::querylog::POSTGRES_LOG_COLUMNS {
        run(
            &transaction,
            &format!("add the query log's column {column}"),
            &format!("ALTER TABLE {log_table} ADD COLUMN IF NOT EXISTS {column} {data_type}"),
        )
        .await?;
    }
    // Already quoted where needed and schema-qualified by PostgreSQL
    // (`public.askdb_query_log_id_seq`): usable in SQL as returned.
    let log_sequence: String = transaction
        .query_one(
            "SELECT pg_catalog.pg_get_serial_sequence($1, 'id')",
            &[&QUERY_LOG_TABLE],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|error| step_error("find the query log's sequence", &error))?;

    let mut grants: Vec<(String, String)> = vec![
        // Only the two roles (and the owner) may connect; nobody may create objects.
        (
            "revoke the database from PUBLIC".into(),
            format!("REVOKE ALL ON DATABASE {db} FROM PUBLIC"),
        ),
        (
            "grant CONNECT to the roles".into(),
            format!("GRANT CONNECT ON DATABASE {db} TO {ro}, {lg}"),
        ),
        (
            "revoke CREATE on schema public".into(),
            "REVOKE CREATE ON SCHEMA public FROM PUBLIC".into(),
        ),
        (
            "grant USAGE on schema public".into(),
            format!("GRANT USAGE ON SCHEMA public TO {ro}, {lg}"),
        ),
        // Start from nothing, so a grant from an earlier run or by hand cannot linger.
        (
            "revoke table privileges from the roles".into(),
            format!("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {ro}, {lg}"),
        ),
        (
            "revoke sequence privileges from the roles".into(),
            format!("REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {ro}, {lg}"),
        ),
        (
            "revoke the demo tables from PUBLIC".into(),
            format!("REVOKE ALL ON {} FROM PUBLIC", names.join(", ")),
        ),
        (
            "set default privileges for the read-only role".into(),
            format!("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {ro}"),
        ),
    ];
    for table in &tables {
        let name = table.def.name;
        let restricted: Vec<&str> = demo::RESTRICTED_COLUMNS
            .iter()
            .filter_map(|entry| entry.split_once('.'))
            .filter(|(table_name, _)| *table_name == name)
            .map(|(_, column)| column)
            .collect();
        let sql = if restricted.is_empty() {
            format!("GRANT SELECT ON {} TO {ro}", quote_ident(name))
        } else {
            // Column grants: restricted columns stay unreadable for the role too, while
            // count(*) keeps working (it needs SELECT on any one column).
            let visible: Vec<String> = table
                .def
                .columns
                .iter()
                .filter(|column| !restricted.contains(&column.name))
                .map(|column| quote_ident(column.name))
                .collect();
            format!(
                "GRANT SELECT ({}) ON {} TO {ro}",
                visible.join(", "),
                quote_ident(name)
            )
        };
        grants.push((format!("grant SELECT on {name}"), sql));
    }
    grants.extend([
        // The log is nobody's to read: not the read-only role (whatever the default
        // privileges gave it), not PUBLIC.
        (
            "revoke the query log".into(),
            format!("REVOKE ALL ON {log_table} FROM PUBLIC, {ro}, {lg}"),
        ),
        (
            "revoke the query log's sequence".into(),
            format!("REVOKE ALL ON SEQUENCE {log_sequence} FROM PUBLIC, {ro}, {lg}"),
        ),
        (
            "grant INSERT on the query log".into(),
            format!("GRANT INSERT ON {log_table} TO {lg}"),
        ),
        (
            "grant USAGE on the query log's sequence".into(),
            format!("GRANT USAGE ON SEQUENCE {log_sequence} TO {lg}"),
        ),
    ]);
    for (step, sql) in &grants {
        run(&transaction, step, sql).await?;
    }
    transaction
        .commit()
        .await
        .map_err(|error| step_error("commit the demo tables and grants", &error))?;
    Ok(loaded)
}
