//! The example row-level security of `askdb db setup --example-rls USER=CITY`
//! (decision 0077): each signed-in user sees only the suppliers of one city. askdb sets
//! the signed-in user's name as the transaction-local `askdb.user` inside every
//! read-only transaction (`gate::user`); the database does the filtering.
//!
//! - `askdb_rls.user_city` maps a user to a city. Its schema is the administrator's:
//!   the read-only role has no access to it, and it is not the data schema, so askdb
//!   never lists it.
//! - `public.askdb_user_city()` returns the city of the user named by `askdb.user`
//!   (NULL when none is set or the user has no city). It is PL/pgSQL, so the planner
//!   never inlines it: the plan the guard judges shows this one call, which the demo's
//!   notes allow, rather than the setting and the mapping table, which the guard
//!   refuses. SECURITY DEFINER with a fixed search path, executable by the read-only
//!   role alone.
//! - The policy `askdb_city` on `suppliers`, for the read-only role: `city =
//!   askdb_user_city()`. With no user set, no supplier is visible (deny by default).
//!
//! The proof connects as the read-only role, sets each mapped user in a read-only
//! transaction and checks that exactly that city's suppliers come back, and that none
//! do with no user.

use tokio_postgres::Client;

use super::{connect_as, describe, quote_ident, run, Proof, RoleLogin, SetupError};

/// The function the example policy calls; the demo's notes allow the guard to see it.
pub use crate::demo::USER_CITY_FUNCTION;

/// The schema of the user-to-city mapping.
const RLS_SCHEMA: &str = "askdb_rls";

/// The table the example filters.
const FILTERED_TABLE: &str = "suppliers";

/// One user's city, from `USER=CITY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserCity {
    pub user: String,
    pub city: String,
}

impl std::str::FromStr for UserCity {
    type Err = String;

    fn from_str(text: &str) -> Result<UserCity, String> {
        match text.split_once('=') {
            Some((user, city)) if !user.trim().is_empty() && !city.trim().is_empty() => {
                Ok(UserCity {
                    user: user.trim().to_string(),
                    city: city.trim().to_string(),
                })
            }
            _ => Err(format!(
                "--example-rls {text:?} is not USER=CITY (for example ana=Pune)"
            )),
        }
    }
}

/// Creates (or refreshes) the mapping, the function and the policy; the mapping is
/// replaced by `mapping`. Runs after the demo tables are loaded (loading recreates
/// `suppliers`, and its policy with it).
pub async fn apply(
    client: &mut Client,
    read_only_role: &str,
    mapping: &[UserCity],
) -> Result<(), SetupError> {
    let role = quote_ident(read_only_role);
    let schema = quote_ident(RLS_SCHEMA);
    let table = quote_ident(FILTERED_TABLE);
    let transaction = client
        .transaction()
        .await
        .map_err(|error| super::step_error("start the example RLS transaction", &error))?;
    let statements = [
        format!("CREATE SCHEMA IF NOT EXISTS {schema}"),
        format!("REVOKE ALL ON SCHEMA {schema} FROM PUBLIC"),
        format!(
            "CREATE TABLE IF NOT EXISTS {schema}.user_city \
             (user_name text PRIMARY KEY, city text NOT NULL)"
        ),
        format!("REVOKE ALL ON {schema}.user_city FROM PUBLIC"),
        format!("DELETE FROM {schema}.user_city"),
        format!(
            "CREATE OR REPLACE FUNCTION public.{USER_CITY_FUNCTION}() RETURNS text \
             LANGUAGE plpgsql STABLE SECURITY DEFINER \
             SET search_path = pg_catalog, pg_temp AS $body$ \
             BEGIN RETURN (SELECT city FROM {schema}.user_city WHERE user_name = \
             NULLIF(current_setting('askdb.user', true), '')); END $body$"
        ),
        format!("REVOKE ALL ON FUNCTION public.{USER_CITY_FUNCTION}() FROM PUBLIC"),
        format!("GRANT EXECUTE ON FUNCTION public.{USER_CITY_FUNCTION}() TO {role}"),
        format!("ALTER TABLE public.{table} ENABLE ROW LEVEL SECURITY"),
        format!("DROP POLICY IF EXISTS askdb_city ON public.{table}"),
        format!(
            "CREATE POLICY askdb_city ON public.{table} FOR SELECT TO {role} \
             USING (city = public.{USER_CITY_FUNCTION}())"
        ),
    ];
    for sql in &statements {
        run(&transaction, "create the example row-level security", sql).await?;
    }
    for pair in mapping {
        transaction
            .execute(
                format!("INSERT INTO {schema}.user_city (user_name, city) VALUES ($1, $2)")
                    .as_str(),
                &[&pair.user, &pair.city],
            )
            .await
            .map_err(|error| super::step_error("map a user to a city", &error))?;
    }
    transaction
        .commit()
        .await
        .map_err(|error| super::step_error("commit the example row-level security", &error))
}

/// The cities of the suppliers the read-only role sees as `user` (None: no user set),
/// in a read-only transaction set up as askdb's executor sets it.
async fn cities_seen(client: &mut Client, user: Option<&str>) -> Result<Vec<String>, String> {
    let transaction = client
        .build_transaction()
        .read_only(true)
        .start()
        .await
        .map_err(|error| describe(&error))?;
    if let Some(user) = user {
        transaction
            .query(
                "SELECT pg_catalog.set_config('askdb.user', $1, true)",
                &[&user],
            )
            .await
            .map_err(|error| describe(&error))?;
    }
    let rows = transaction
        .query(
            format!(
                "SELECT DISTINCT city::text FROM {} ORDER BY 1",
                quote_ident(FILTERED_TABLE)
            )
            .as_str(),
            &[],
        )
        .await
        .map_err(|error| describe(&error))?;
    let _ = transaction.rollback().await;
    Ok(rows
        .iter()
        .filter_map(|row| row.try_get::<_, String>(0).ok())
        .collect())
}

/// Proves the example: each mapped user sees exactly its city's suppliers, and no user
/// sees none.
pub async fn prove(read_only: &RoleLogin, mapping: &[UserCity]) -> Result<Vec<Proof>, SetupError> {
    let mut client = connect_as(read_only).await?;
    let mut proofs = Vec::new();
    let mut cases: Vec<(Option<&str>, Vec<String>)> = mapping
        .iter()
        .map(|pair| (Some(pair.user.as_str()), vec![pair.city.clone()]))
        .collect();
    cases.push((None, Vec::new()));
    for (user, expected) in cases {
        let attempt = match user {
            Some(user) => format!("SELECT DISTINCT city FROM suppliers as askdb.user = {user:?}"),
            None => "SELECT DISTINCT city FROM suppliers with askdb.user unset".to_string(),
        };
        let seen = cities_seen(&mut client, user).await;
        let fail = |observed: String| SetupError::ProofFailed {
            role: read_only.role.clone(),
            attempt: attempt.clone(),
            expected: format!("the cities {expected:?}"),
            observed,
        };
        match seen {
            Ok(cities) if cities == expected => proofs.push(Proof {
                role: read_only.role.clone(),
                attempt: attempt.clone(),
                outcome: format!("saw the cities {cities:?} only"),
            }),
            Ok(cities) => return Err(fail(format!("it saw {cities:?}"))),
            Err(error) => return Err(fail(format!("it failed: {error}"))),
        }
    }
    Ok(proofs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_is_user_equals_city() {
        let pair: UserCity = "ana = Pune".parse().expect("parses");
        assert_eq!(
            pair,
            UserCity {
                user: "ana".into(),
                city: "Pune".into()
            }
        );
        for bad in ["ana", "=Pune", "ana=", ""] {
            assert!(bad.parse::<UserCity>().is_err(), "{bad}");
        }
    }
}
