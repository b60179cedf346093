//! The spend ledger shared by replicas: [`PgLedger`], the PostgreSQL side of
//! [`crate::llm::SharedSpend`]. Every step is one transaction that first locks the one
//! row of `askdb_state.spend_total`, so reservations from every replica are taken one
//! at a time against the same totals: the cap is passed by no more than what one
//! reservation's estimate misjudged. A reservation its replica never settled (killed
//! mid-call) expires after [`PgLedger::new`]'s time to live and moves from reserved to
//! spent at its worst case: an overcount, never an undercount.

use std::time::Duration;

use super::{SharedState, StateError};
use crate::llm::{BoxFuture, LedgerEntry, LlmError, Purpose, SharedSpend, SpendTotals};

/// The shared ledger over one state database.
#[derive(Debug, Clone)]
pub struct PgLedger {
    state: SharedState,
    /// Who made a reservation (host and process), so a figure can be traced to a
    /// replica.
    replica: String,
    /// How long a reservation may stay unsettled before it counts as spent: longer
    /// than any question may take.
    reservation_ttl: Duration,
}

fn ledger_error(error: StateError) -> LlmError {
    LlmError::Ledger(format!(
        "{error}; the call was not made, because a call the ledger cannot count is never made"
    ))
}

/// Takes the totals row's lock (creating the row the first time) and moves
/// reservations past their time into spent. Returns the totals as they now stand.
async fn lock_totals(
    transaction: &tokio_postgres::Transaction<'_>,
) -> Result<SpendTotals, StateError> {
    transaction
        .execute(
            "INSERT INTO askdb_state.spend_total (id) VALUES (true) ON CONFLICT (id) DO NOTHING",
            &[],
        )
        .await?;
    transaction
        .execute(
            "SELECT 1 FROM askdb_state.spend_total WHERE id FOR UPDATE",
            &[],
        )
        .await?;
    transaction
        .execute(
            "WITH expired AS (
                 UPDATE askdb_state.spend_entries SET status = 'expired'
                 WHERE status = 'reserved' AND expires_at < now()
                 RETURNING estimate_usd)
             UPDATE askdb_state.spend_total SET
                 spent_usd = spent_usd + (SELECT coalesce(sum(estimate_usd), 0) FROM expired),
                 reserved_usd = reserved_usd - (SELECT coalesce(sum(estimate_usd), 0) FROM expired),
                 calls = calls + (SELECT count(*) FROM expired)
             WHERE id",
            &[],
        )
        .await?;
    let row = transaction
        .query_one(
            "SELECT spent_usd::float8, reserved_usd::float8, calls FROM askdb_state.spend_total WHERE id",
            &[],
        )
        .await?;
    Ok(SpendTotals {
        spent_usd: row.get(0),
        reserved_usd: row.get(1),
        calls: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
    })
}

impl PgLedger {
    pub fn new(state: SharedState, reservation_ttl: Duration) -> PgLedger {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".to_string());
        PgLedger {
            state,
            replica: format!("{host}:{}", std::process::id()),
            reservation_ttl,
        }
    }

    async fn try_reserve(
        &self,
        cap_usd: Option<f64>,
        estimate_usd: f64,
        purpose: Purpose,
    ) -> Result<Result<i64, SpendTotals>, StateError> {
        let mut client = self.state.pool().get().await?;
        let transaction = client.transaction().await?;
        let totals = lock_totals(&transaction).await?;
        if let Some(cap_usd) = cap_usd {
            let committed = totals.spent_usd + totals.reserved_usd;
            // The same rule as the ledger in memory: at the cap even a free call waits.
            if committed >= cap_usd || committed + estimate_usd > cap_usd {
                transaction.commit().await?;
                return Ok(Err(totals));
            }
        }
        let ttl_secs = self.reservation_ttl.as_secs_f64();
        let id: i64 = transaction
            .query_one(
                "INSERT INTO askdb_state.spend_entries (replica, purpose, estimate_usd, expires_at)
                 VALUES ($1, $2, $3::float8::numeric, now() + make_interval(secs => $4))
                 RETURNING id",
                &[&self.replica, &purpose.as_str(), &estimate_usd, &ttl_secs],
            )
            .await?
            .get(0);
        transaction
            .execute(
                "UPDATE askdb_state.spend_total SET reserved_usd = reserved_usd + $1::float8::numeric WHERE id",
                &[&estimate_usd],
            )
            .await?;
        transaction.commit().await?;
        Ok(Ok(id))
    }

    async fn try_settle(&self, id: i64, entry: &LedgerEntry) -> Result<(), StateError> {
        let mut client = self.state.pool().get().await?;
        let transaction = client.transaction().await?;
        lock_totals(&transaction).await?;
        let input_tokens = i64::try_from(entry.input_tokens).unwrap_or(i64::MAX);
        let output_tokens = i64::try_from(entry.output_tokens).unwrap_or(i64::MAX);
        // The status before the update says what the estimate was counted as.
        let row = transaction
            .query_opt(
                "UPDATE askdb_state.spend_entries AS e SET status = 'settled', cost_usd = $2::float8::numeric,
                     provider = $3, model = $4, input_tokens = $5, output_tokens = $6,
                     settled_at = now()
                 FROM (SELECT id, status FROM askdb_state.spend_entries WHERE id = $1 FOR UPDATE) AS before
                 WHERE e.id = before.id AND before.status IN ('reserved', 'expired')
                 RETURNING before.status, e.estimate_usd::float8",
                &[
                    &id,
                    &entry.cost_usd,
                    &entry.provider,
                    &entry.model,
                    &input_tokens,
                    &output_tokens,
                ],
            )
            .await?;
        if let Some(row) = row {
            let status: String = row.get(0);
            let estimate: f64 = row.get(1);
            // Reserved: the estimate leaves reserved and the cost joins spent. Expired:
            // the estimate was already counted as spent (and as a call); the real cost
            // replaces it.
            let (reserved_delta, spent_delta, calls) = if status == "reserved" {
                (estimate, entry.cost_usd, 1_i64)
            } else {
                (0.0, entry.cost_usd - estimate, 0)
            };
            transaction
                .execute(
                    "UPDATE askdb_state.spend_total SET
                         reserved_usd = reserved_usd - $1::float8::numeric,
                         spent_usd = spent_usd + $2::float8::numeric,
                         calls = calls + $3
                     WHERE id",
                    &[&reserved_delta, &spent_delta, &calls],
                )
                .await?;
        }
        transaction.commit().await?;
        Ok(())
    }

    async fn try_release(&self, id: i64) -> Result<(), StateError> {
        let mut client = self.state.pool().get().await?;
        let transaction = client.transaction().await?;
        lock_totals(&transaction).await?;
        // Only a reservation still in flight is given back; an expired one stays spent.
        let released = transaction
            .query_opt(
                "DELETE FROM askdb_state.spend_entries WHERE id = $1 AND status = 'reserved'
                 RETURNING estimate_usd::float8",
                &[&id],
            )
            .await?;
        if let Some(row) = released {
            let estimate: f64 = row.get(0);
            transaction
                .execute(
                    "UPDATE askdb_state.spend_total SET reserved_usd = reserved_usd - $1::float8::numeric WHERE id",
                    &[&estimate],
                )
                .await?;
        }
        transaction.commit().await?;
        Ok(())
    }

    async fn try_totals(&self) -> Result<SpendTotals, StateError> {
        let mut client = self.state.pool().get().await?;
        let transaction = client.transaction().await?;
        let totals = lock_totals(&transaction).await?;
        transaction.commit().await?;
        Ok(totals)
    }
}

impl SharedSpend for PgLedger {
    fn reserve(
        &self,
        cap_usd: Option<f64>,
        estimate_usd: f64,
        purpose: Purpose,
    ) -> BoxFuture<'_, Result<i64, LlmError>> {
        Box::pin(async move {
            match self.try_reserve(cap_usd, estimate_usd, purpose).await {
                Ok(Ok(id)) => Ok(id),
                Ok(Err(totals)) => Err(LlmError::SpendCapReached {
                    cap_usd: cap_usd.unwrap_or(0.0),
                    spent_usd: totals.spent_usd,
                    reserved_usd: totals.reserved_usd,
                    estimate_usd,
                }),
                Err(error) => Err(ledger_error(error)),
            }
        })
    }

    fn settle<'a>(
        &'a self,
        id: i64,
        entry: &'a LedgerEntry,
    ) -> BoxFuture<'a, Result<(), LlmError>> {
        Box::pin(async move { self.try_settle(id, entry).await.map_err(ledger_error) })
    }

    fn release(&self, id: i64) -> BoxFuture<'_, Result<(), LlmError>> {
        Box::pin(async move { self.try_release(id).await.map_err(ledger_error) })
    }

    fn totals(&self) -> BoxFuture<'_, Result<SpendTotals, LlmError>> {
        Box::pin(async move { self.try_totals().await.map_err(ledger_error) })
    }
}
