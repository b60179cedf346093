//! Reading a PostgreSQL database's structure: its tables and views with their columns,
//! keys and approximate sizes, in the read-only transaction the executor opens.

use super::*;

/// Tables and views of every user schema (those of `public` by their bare name, others
/// as `schema.table`) that the connected role may read at all: a table
/// it cannot read would only produce permission errors. Partitions are left out
/// (their parent is listed). `reltuples` is -1 until the table is first analysed.
pub(super) const TABLES_SQL: &str = "\
SELECT CASE WHEN n.nspname = $1 THEN c.relname::text ELSE n.nspname::text || '.' || c.relname::text END, c.relkind::text, c.reltuples::float8 \
FROM pg_catalog.pg_class c \
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%' \
  AND c.relkind IN ('r', 'p', 'v', 'm', 'f') \
  AND NOT c.relispartition \
  AND (pg_catalog.has_table_privilege(c.oid, 'SELECT') \
       OR pg_catalog.has_any_column_privilege(c.oid, 'SELECT')) \
ORDER BY c.relname";

pub(super) const COLUMNS_SQL: &str = "\
SELECT CASE WHEN n.nspname = $1 THEN c.relname::text ELSE n.nspname::text || '.' || c.relname::text END, a.attname::text, \
       pg_catalog.format_type(a.atttypid, a.atttypmod), NOT a.attnotnull \
FROM pg_catalog.pg_attribute a \
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%' AND a.attnum > 0 AND NOT a.attisdropped \
ORDER BY c.relname, a.attnum";

/// Primary, unique and foreign keys, one row per key column in key order. A
/// referenced table outside the schema keeps its schema name.
pub(super) const KEYS_SQL: &str = "\
SELECT CASE WHEN n.nspname = $1 THEN c.relname::text ELSE n.nspname::text || '.' || c.relname::text END, con.conname::text, con.contype::text, a.attname::text, \
       CASE WHEN fn.nspname = $1 THEN fc.relname::text \
            ELSE fn.nspname::text || '.' || fc.relname::text END, \
       fa.attname::text \
FROM pg_catalog.pg_constraint con \
JOIN pg_catalog.pg_class c ON c.oid = con.conrelid \
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
CROSS JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord) \
JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum \
LEFT JOIN pg_catalog.pg_class fc ON fc.oid = con.confrelid \
LEFT JOIN pg_catalog.pg_namespace fn ON fn.oid = fc.relnamespace \
LEFT JOIN pg_catalog.pg_attribute fa \
       ON fa.attrelid = con.confrelid AND fa.attnum = con.confkey[k.ord] \
WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%' AND con.contype IN ('p', 'u', 'f') \
ORDER BY c.relname, con.conname, k.ord";

pub(super) async fn introspect(
    transaction: &Transaction<'_>,
) -> Result<Vec<TableSchema>, ExecFailure> {
    let fail = |error: tokio_postgres::Error| failure_from(&error);
    // The three catalog reads go out together (pipelined on the one connection), each
    // as one unnamed statement: one round trip for all of them instead of three per
    // query (parse, execute, close), which a cold `askdb mcp` start waits for.
    let schema: [(&(dyn ToSql + Sync), Type); 1] = [(&SCHEMA, Type::NAME)];
    let (table_rows, column_rows, key_rows) = tokio::try_join!(
        transaction.query_typed(TABLES_SQL, &schema),
        transaction.query_typed(COLUMNS_SQL, &schema),
        transaction.query_typed(KEYS_SQL, &schema),
    )
    .map_err(fail)?;
    let mut tables: BTreeMap<String, TableSchema> = BTreeMap::new();
    for row in table_rows {
        let name: String = row.try_get(0).map_err(fail)?;
        let kind: String = row.try_get(1).map_err(fail)?;
        let tuples: f64 = row.try_get(2).map_err(fail)?;
        // Views and never-analysed tables have no estimate.
        let row_count = (kind != "v" && tuples >= 0.0).then(|| tuples.round() as i64);
        tables.insert(
            name.clone(),
            TableSchema {
                name,
                columns: Vec::new(),
                primary_key: Vec::new(),
                unique: Vec::new(),
                foreign_keys: Vec::new(),
                row_count,
            },
        );
    }
    for row in column_rows {
        let table: String = row.try_get(0).map_err(fail)?;
        if let Some(schema) = tables.get_mut(&table) {
            schema.columns.push(ColumnSchema {
                name: row.try_get(1).map_err(fail)?,
                data_type: row.try_get(2).map_err(fail)?,
                nullable: row.try_get(3).map_err(fail)?,
            });
        }
    }
    // (table, constraint) -> (kind, columns, referenced table, referenced columns)
    type Key = (String, Vec<String>, Option<String>, Vec<String>);
    let mut keys: BTreeMap<(String, String), Key> = BTreeMap::new();
    for row in key_rows {
        let table: String = row.try_get(0).map_err(fail)?;
        let name: String = row.try_get(1).map_err(fail)?;
        let kind: String = row.try_get(2).map_err(fail)?;
        let column: String = row.try_get(3).map_err(fail)?;
        let target: Option<String> = row.try_get(4).map_err(fail)?;
        let target_column: Option<String> = row.try_get(5).map_err(fail)?;
        let entry = keys
            .entry((table, name))
            .or_insert_with(|| (kind, Vec::new(), target, Vec::new()));
        entry.1.push(column);
        if let Some(target_column) = target_column {
            entry.3.push(target_column);
        }
    }
    for ((table, _name), (kind, columns, target, target_columns)) in keys {
        let Some(schema) = tables.get_mut(&table) else {
            continue;
        };
        match kind.as_str() {
            "p" => schema.primary_key = columns,
            "u" => schema.unique.push(columns),
            "f" => {
                if let Some(references_table) = target {
                    schema.foreign_keys.push(ForeignKey {
                        columns,
                        references_table,
                        references_columns: target_columns,
                    });
                }
            }
            _ => {}
        }
    }
    Ok(tables.into_values().collect())
}
