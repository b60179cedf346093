//! Verified examples in askdb's own PostgreSQL schema (`askdb_state`), shared by every
//! replica of `askdb serve` (decision 0080): an example saved on one replica is listed
//! by all, and a replacement (the same question confirmed again) is one transaction, so
//! no replica ever sees both the old and the new or neither. The answers people marked
//! wrong are kept beside them (`askdb_state.wrong_marks`, decision 0084), so a mark made
//! on one replica is counted by `askdb examples list --caused-wrong` for all. The same
//! behaviour as [`super::SqliteExampleStore`], whose tests this store runs too.

use deadpool_postgres::Pool;

use super::store::{lists_of, with_lists, ExampleStore, StoreFuture};
use super::wrong::{CheckedMark, WrongMark};
use super::{CheckedExample, Example, ExampleError};
use crate::state::schema;

/// The statements, in order.
pub const DDL: [&str; 5] = [
    schema::CREATE_SCHEMA,
    schema::EXAMPLES,
    schema::EXAMPLES_DATABASE_INDEX,
    schema::WRONG_MARKS,
    schema::WRONG_MARKS_DATABASE_INDEX,
];

/// What [`PostgresExampleStore::describe`] says.
const DESCRIPTION: &str = "postgres:askdb_state.examples";

fn fail(error: impl std::fmt::Display) -> ExampleError {
    ExampleError::Store {
        store: DESCRIPTION.to_string(),
        error: error.to_string(),
    }
}

/// Applies [`DDL`]: each statement creates only what is missing.
pub async fn ensure_tables(pool: &Pool) -> Result<(), ExampleError> {
    let client = pool.get().await.map_err(fail)?;
    for statement in DDL {
        client.batch_execute(statement).await.map_err(fail)?;
    }
    Ok(())
}

/// The store over one pool; its tables must exist ([`ensure_tables`]).
#[derive(Clone)]
pub struct PostgresExampleStore {
    pool: Pool,
}

impl PostgresExampleStore {
    pub fn new(pool: Pool) -> PostgresExampleStore {
        PostgresExampleStore { pool }
    }

    async fn list_now(&self, database: &str) -> Result<Vec<Example>, ExampleError> {
        let client = self.pool.get().await.map_err(fail)?;
        let rows = client
            .query(
                "SELECT id, database, question, sql, verified_by, verified_at, \
                 schema_fingerprint, tables, verified_against, notes, set_aside \
                 FROM askdb_state.examples WHERE database = $1 ORDER BY id",
                &[&database],
            )
            .await
            .map_err(fail)?;
        let mut examples = Vec::with_capacity(rows.len());
        for row in rows {
            let example = Example {
                id: row.get(0),
                database: row.get(1),
                question: row.get(2),
                sql: row.get(3),
                verified_by: row.get(4),
                verified_at: row.get(5),
                schema_fingerprint: row.get(6),
                tables: Vec::new(),
                notes: row.get(9),
                set_aside: row.get(10),
                verified_against: Vec::new(),
            };
            let (tables, against): (String, String) = (row.get(7), row.get(8));
            examples.push(with_lists(example, &tables, &against).map_err(fail)?);
        }
        Ok(examples)
    }

    async fn write_now(
        &self,
        database: &str,
        examples: &[CheckedExample],
        replacing: &[i64],
    ) -> Result<Vec<i64>, ExampleError> {
        let mut client = self.pool.get().await.map_err(fail)?;
        let transaction = client.transaction().await.map_err(fail)?;
        if !replacing.is_empty() {
            transaction
                .execute(
                    "DELETE FROM askdb_state.examples WHERE database = $1 AND id = ANY($2)",
                    &[&database, &replacing],
                )
                .await
                .map_err(fail)?;
        }
        let mut ids = Vec::with_capacity(examples.len());
        for checked in examples {
            let example = checked.example();
            let (tables, against) = lists_of(example).map_err(fail)?;
            let row = transaction
                .query_one(
                    "INSERT INTO askdb_state.examples (database, question, sql, verified_by, \
                     verified_at, schema_fingerprint, tables, verified_against, notes, \
                     set_aside) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
                    &[
                        &database,
                        &example.question,
                        &example.sql,
                        &example.verified_by,
                        &example.verified_at,
                        &example.schema_fingerprint,
                        &tables,
                        &against,
                        &example.notes,
                        &example.set_aside,
                    ],
                )
                .await
                .map_err(fail)?;
            ids.push(row.get(0));
        }
        transaction.commit().await.map_err(fail)?;
        Ok(ids)
    }

    async fn remove_now(&self, database: &str, id: i64) -> Result<bool, ExampleError> {
        let client = self.pool.get().await.map_err(fail)?;
        let removed = client
            .execute(
                "DELETE FROM askdb_state.examples WHERE database = $1 AND id = $2",
                &[&database, &id],
            )
            .await
            .map_err(fail)?;
        Ok(removed > 0)
    }

    async fn set_aside_now(
        &self,
        database: &str,
        id: i64,
        reason: &str,
    ) -> Result<(), ExampleError> {
        let client = self.pool.get().await.map_err(fail)?;
        client
            .execute(
                "UPDATE askdb_state.examples SET set_aside = $3 WHERE database = $1 AND id = $2",
                &[&database, &id, &reason],
            )
            .await
            .map_err(fail)?;
        Ok(())
    }
    async fn record_wrong_now(
        &self,
        database: &str,
        mark: &CheckedMark,
    ) -> Result<i64, ExampleError> {
        let mark = mark.mark();
        let client = self.pool.get().await.map_err(fail)?;
        let row = client
            .query_one(
                "INSERT INTO askdb_state.wrong_marks (database, question, sql, examples, \
                 marked_by, marked_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                &[
                    &database,
                    &mark.question,
                    &mark.sql,
                    &mark.examples,
                    &mark.marked_by,
                    &mark.marked_at,
                ],
            )
            .await
            .map_err(fail)?;
        Ok(row.get(0))
    }

    async fn wrong_marks_now(&self, database: &str) -> Result<Vec<WrongMark>, ExampleError> {
        let client = self.pool.get().await.map_err(fail)?;
        let rows = client
            .query(
                "SELECT id, database, question, sql, examples, marked_by, marked_at \
                 FROM askdb_state.wrong_marks WHERE database = $1 ORDER BY id",
                &[&database],
            )
            .await
            .map_err(fail)?;
        Ok(rows
            .iter()
            .map(|row| WrongMark {
                id: row.get(0),
                database: row.get(1),
                question: row.get(2),
                sql: row.get(3),
                examples: row.get(4),
                marked_by: row.get(5),
                marked_at: row.get(6),
            })
            .collect())
    }
}

impl ExampleStore for PostgresExampleStore {
    fn describe(&self) -> String {
        DESCRIPTION.to_string()
    }

    fn list<'a>(&'a self, database: &'a str) -> StoreFuture<'a, Vec<Example>> {
        Box::pin(self.list_now(database))
    }

    fn write<'a>(
        &'a self,
        database: &'a str,
        examples: &'a [CheckedExample],
        replacing: &'a [i64],
    ) -> StoreFuture<'a, Vec<i64>> {
        Box::pin(self.write_now(database, examples, replacing))
    }

    fn remove<'a>(&'a self, database: &'a str, id: i64) -> StoreFuture<'a, bool> {
        Box::pin(self.remove_now(database, id))
    }

    fn set_aside<'a>(&'a self, database: &'a str, id: i64, reason: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(self.set_aside_now(database, id, reason))
    }

    fn record_wrong<'a>(
        &'a self,
        database: &'a str,
        mark: &'a CheckedMark,
    ) -> StoreFuture<'a, i64> {
        Box::pin(self.record_wrong_now(database, mark))
    }

    fn wrong_marks<'a>(&'a self, database: &'a str) -> StoreFuture<'a, Vec<WrongMark>> {
        Box::pin(self.wrong_marks_now(database))
    }
}
