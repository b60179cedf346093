//! SQL text for the demo tables in each dialect, as pure functions: CREATE TABLE,
//! parameterised and literal INSERTs, and the PostgreSQL sequence reset that explicit
//! serial ids need. Loaders (SQLite here, PostgreSQL and MySQL in `admin`) only execute
//! this text.

use super::tables::{ColumnDef, ColumnType, TableDef};
use super::value::DemoValue;
use super::DemoTable;

/// Which SQL dialect to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DdlDialect {
    Sqlite,
    Postgres,
    /// MySQL and MariaDB (InnoDB).
    Mysql,
}

/// `CREATE TABLE name (...)` without a trailing semicolon. Keys and foreign keys are
/// declared inline on SQLite and PostgreSQL. MySQL parses an inline `REFERENCES` and
/// ignores it, so its foreign keys are table constraints after the columns (the schema
/// cards' join paths come from them).
pub fn create_table_sql(def: &TableDef, dialect: DdlDialect) -> String {
    let mut lines: Vec<String> = def
        .columns
        .iter()
        .map(|c| format!("    {}", column_sql(c, dialect)))
        .collect();
    if dialect == DdlDialect::Mysql {
        lines.extend(def.columns.iter().filter_map(|c| {
            c.references.map(|(table, target)| {
                format!("    FOREIGN KEY ({}) REFERENCES {table}({target})", c.name)
            })
        }));
    }
    format!("CREATE TABLE {} (\n{}\n)", def.name, lines.join(",\n"))
}

fn column_sql(column: &ColumnDef, dialect: DdlDialect) -> String {
    let mut parts = vec![column.name.to_string(), type_sql(column.ty, dialect)];
    let serial = column.ty == ColumnType::Serial;
    // A serial (or SQLite's INTEGER PRIMARY KEY rowid alias) is never NULL already;
    // other keys need NOT NULL spelled out because SQLite allows NULL in them.
    if !column.nullable && !serial {
        parts.push("NOT NULL".to_string());
    }
    if column.primary_key {
        parts.push("PRIMARY KEY".to_string());
    }
    if column.unique {
        parts.push("UNIQUE".to_string());
    }
    if let Some((table, target)) = column.references {
        if dialect != DdlDialect::Mysql {
            parts.push(format!("REFERENCES {table}({target})"));
        }
    }
    parts.join(" ")
}

/// The column type as the dialect spells it. SQLite gets the affinity that holds the
/// generator's values: INTEGER for serials and booleans (0/1), TEXT for strings and
/// ISO dates, NUMERIC for decimals (written as REAL). NUMERIC affinity turns a whole
/// amount such as 12.0 into INTEGER 12 on storage; it still compares equal to 12.00, so
/// result comparators must compare numbers by value, not by storage class.
pub fn type_sql(ty: ColumnType, dialect: DdlDialect) -> String {
    match dialect {
        DdlDialect::Postgres => match ty {
            ColumnType::Serial => "serial".to_string(),
            ColumnType::Int => "integer".to_string(),
            ColumnType::Varchar(n) => format!("varchar({n})"),
            ColumnType::Text => "text".to_string(),
            ColumnType::Numeric(p, s) => format!("numeric({p},{s})"),
            ColumnType::Bool => "boolean".to_string(),
            ColumnType::Date => "date".to_string(),
            ColumnType::Timestamp => "timestamp".to_string(),
        },
        // DATETIME, not TIMESTAMP: MySQL's TIMESTAMP converts through the session's
        // time zone and ends in 2038. BOOLEAN is TINYINT(1), read back as 0/1.
        DdlDialect::Mysql => match ty {
            ColumnType::Serial => "INT AUTO_INCREMENT".to_string(),
            ColumnType::Int => "INT".to_string(),
            ColumnType::Varchar(n) => format!("VARCHAR({n})"),
            ColumnType::Text => "TEXT".to_string(),
            ColumnType::Numeric(p, s) => format!("DECIMAL({p},{s})"),
            ColumnType::Bool => "BOOLEAN".to_string(),
            ColumnType::Date => "DATE".to_string(),
            ColumnType::Timestamp => "DATETIME".to_string(),
        },
        DdlDialect::Sqlite => match ty {
            ColumnType::Serial | ColumnType::Int | ColumnType::Bool => "INTEGER".to_string(),
            ColumnType::Varchar(_) | ColumnType::Text | ColumnType::Date => "TEXT".to_string(),
            ColumnType::Timestamp => "TEXT".to_string(),
            ColumnType::Numeric(_, _) => "NUMERIC".to_string(),
        },
    }
}

/// `INSERT INTO name (cols) VALUES (?1, ...)` for SQLite, `($1, ...)` for
/// PostgreSQL or `(?, ...)` for MySQL, one placeholder per column in definition order.
pub fn insert_sql(def: &TableDef, dialect: DdlDialect) -> String {
    let placeholders: Vec<String> = (1..=def.columns.len())
        .map(|i| match dialect {
            DdlDialect::Sqlite => format!("?{i}"),
            DdlDialect::Postgres => format!("${i}"),
            DdlDialect::Mysql => "?".to_string(),
        })
        .collect();
    format!(
        "INSERT INTO {} ({}) VALUES ({})",
        def.name,
        column_list(def),
        placeholders.join(", ")
    )
}

/// The table's rows as literal multi-row INSERT statements of at most
/// `rows_per_statement` rows each (at least one): the simplest way to load a backend
/// without binding numerics or dates as parameters.
pub fn insert_values_sql(
    table: &DemoTable,
    dialect: DdlDialect,
    rows_per_statement: usize,
) -> Vec<String> {
    let columns = column_list(&table.def);
    table
        .rows
        .chunks(rows_per_statement.max(1))
        .map(|chunk| {
            let tuples: Vec<String> = chunk
                .iter()
                .map(|row| {
                    let cells: Vec<String> = row.iter().map(|v| v.sql_literal(dialect)).collect();
                    format!("({})", cells.join(", "))
                })
                .collect();
            format!(
                "INSERT INTO {} ({}) VALUES\n{}",
                table.def.name,
                columns,
                tuples.join(",\n")
            )
        })
        .collect()
}

/// After rows with explicit serial ids are loaded, PostgreSQL's sequence still starts
/// at 1 and the next default insert would collide; this moves it past the largest id.
/// None for SQLite (INTEGER PRIMARY KEY follows max(rowid) by itself), MySQL
/// (AUTO_INCREMENT moves past the largest id inserted) and for tables without a serial
/// column.
pub fn sequence_reset_sql(def: &TableDef, dialect: DdlDialect) -> Option<String> {
    if dialect != DdlDialect::Postgres {
        return None;
    }
    let column = def.columns.iter().find(|c| c.ty == ColumnType::Serial)?;
    Some(format!(
        "SELECT setval(pg_get_serial_sequence('{table}', '{col}'), \
         COALESCE((SELECT MAX({col}) FROM {table}), 0) + 1, false)",
        table = def.name,
        col = column.name
    ))
}

fn column_list(def: &TableDef) -> String {
    def.columns
        .iter()
        .map(|c| c.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Cells in a row, checked against a definition: used by tests and by loaders that want
/// to fail early with a readable message rather than a driver error.
pub fn check_row(def: &TableDef, row: &[DemoValue]) -> Result<(), String> {
    if row.len() != def.columns.len() {
        return Err(format!(
            "{}: row has {} cells, table has {} columns",
            def.name,
            row.len(),
            def.columns.len()
        ));
    }
    for (column, value) in def.columns.iter().zip(row) {
        let fits = match (column.ty, value) {
            (_, DemoValue::Null) => column.nullable,
            (ColumnType::Serial | ColumnType::Int, DemoValue::Int(_)) => true,
            (ColumnType::Varchar(n), DemoValue::Text(s)) => s.chars().count() <= usize::from(n),
            (ColumnType::Text, DemoValue::Text(_)) => true,
            (ColumnType::Numeric(p, s), DemoValue::Decimal { scaled, scale }) => {
                *scale == s && scaled.unsigned_abs() < 10u64.pow(u32::from(p))
            }
            (ColumnType::Bool, DemoValue::Bool(_)) => true,
            (ColumnType::Date, DemoValue::Date(d)) => d.len() == 10,
            (ColumnType::Timestamp, DemoValue::Timestamp(t)) => t.len() == 19,
            _ => false,
        };
        if !fits {
            return Err(format!(
                "{}.{}: value {value:?} does not fit {:?}{}",
                def.name,
                column.name,
                column.ty,
                if column.nullable { "" } else { " NOT NULL" }
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tables::table_defs;
    use super::*;

    fn def(name: &str) -> TableDef {
        table_defs()
            .into_iter()
            .find(|d| d.name == name)
            .expect("table exists")
    }

    #[test]
    fn bills_ddl_in_both_dialects() {
        assert_eq!(
            create_table_sql(&def("bills"), DdlDialect::Postgres),
            "CREATE TABLE bills (\n    bill_id serial PRIMARY KEY,\n    \
             bill_no varchar(20) NOT NULL UNIQUE,\n    \
             cust_id integer REFERENCES customers(cust_id),\n    \
             emp_id integer NOT NULL REFERENCES employees(emp_id),\n    \
             txn_dt timestamp NOT NULL,\n    total_amt numeric(12,2) NOT NULL,\n    \
             status varchar(12) NOT NULL\n)"
        );
        assert_eq!(
            create_table_sql(&def("bills"), DdlDialect::Sqlite),
            "CREATE TABLE bills (\n    bill_id INTEGER PRIMARY KEY,\n    \
             bill_no TEXT NOT NULL UNIQUE,\n    \
             cust_id INTEGER REFERENCES customers(cust_id),\n    \
             emp_id INTEGER NOT NULL REFERENCES employees(emp_id),\n    \
             txn_dt TEXT NOT NULL,\n    total_amt NUMERIC NOT NULL,\n    \
             status TEXT NOT NULL\n)"
        );
        assert_eq!(
            create_table_sql(&def("store_settings"), DdlDialect::Sqlite),
            "CREATE TABLE store_settings (\n    setting_key TEXT NOT NULL PRIMARY KEY,\n    \
             setting_value TEXT\n)"
        );
    }

    #[test]
    fn mysql_ddl_puts_foreign_keys_in_table_constraints() {
        assert_eq!(
            create_table_sql(&def("bills"), DdlDialect::Mysql),
            "CREATE TABLE bills (\n    bill_id INT AUTO_INCREMENT PRIMARY KEY,\n    \
             bill_no VARCHAR(20) NOT NULL UNIQUE,\n    \
             cust_id INT,\n    \
             emp_id INT NOT NULL,\n    \
             txn_dt DATETIME NOT NULL,\n    total_amt DECIMAL(12,2) NOT NULL,\n    \
             status VARCHAR(12) NOT NULL,\n    \
             FOREIGN KEY (cust_id) REFERENCES customers(cust_id),\n    \
             FOREIGN KEY (emp_id) REFERENCES employees(emp_id)\n)"
        );
        assert_eq!(
            insert_sql(&def("categories"), DdlDialect::Mysql),
            "INSERT INTO categories (cat_id, cat_name) VALUES (?, ?)"
        );
        assert!(sequence_reset_sql(&def("categories"), DdlDialect::Mysql).is_none());
    }

    #[test]
    fn inserts_and_sequences() {
        let cats = def("categories");
        assert_eq!(
            insert_sql(&cats, DdlDialect::Postgres),
            "INSERT INTO categories (cat_id, cat_name) VALUES ($1, $2)"
        );
        assert_eq!(
            insert_sql(&cats, DdlDialect::Sqlite),
            "INSERT INTO categories (cat_id, cat_name) VALUES (?1, ?2)"
        );
        assert!(sequence_reset_sql(&cats, DdlDialect::Sqlite).is_none());
        assert!(sequence_reset_sql(&def("bill_archive"), DdlDialect::Postgres).is_none());
        let reset = sequence_reset_sql(&cats, DdlDialect::Postgres).expect("serial");
        assert!(reset.contains("pg_get_serial_sequence('categories', 'cat_id')"));
        let table = DemoTable {
            def: cats,
            rows: vec![
                vec![DemoValue::Int(1), DemoValue::Text("Plumbing".into())],
                vec![DemoValue::Int(2), DemoValue::Text("Electrical".into())],
                vec![DemoValue::Int(3), DemoValue::Text("O'Brien".into())],
            ],
        };
        let sql = insert_values_sql(&table, DdlDialect::Postgres, 2);
        assert_eq!(sql.len(), 2);
        assert_eq!(
            sql[0],
            "INSERT INTO categories (cat_id, cat_name) VALUES\n(1, 'Plumbing'),\n(2, 'Electrical')"
        );
        assert_eq!(
            sql[1],
            "INSERT INTO categories (cat_id, cat_name) VALUES\n(3, 'O''Brien')"
        );
    }
}
