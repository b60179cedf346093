//! `askdb db setup`: prepares a PostgreSQL database for askdb in one idempotent
//! command, then proves the result (MySQL and MariaDB: `admin/mysql.rs`, the same
//! promise in that engine's terms). It owns:
//!
//! - the database (created when missing) and the demo tables, dropped and recreated
//!   with the rows of the same deterministic generator as the SQLite demo, in one
//!   transaction, so every run leaves identical data;
//! - the query-log table `askdb_query_log` (kept across runs: it is history);
//! - the read-only role (`askdb_ro`): LOGIN, CONNECT, USAGE on `public`, SELECT on the
//!   demo tables only (restricted columns left out by column grants), default
//!   privileges so re-seeding keeps it working, `default_transaction_read_only = on`,
//!   a role-level statement timeout, `track_activities = off` (so no askdb_ro session
//!   can read another's statements in pg_stat_activity), and no access at all to the
//!   query log;
//! - the log role (`askdb_log`): LOGIN, CONNECT, USAGE on `public`, INSERT on the
//!   query log and USAGE on its sequence, nothing else;
//! - the shared state of several `askdb serve` replicas (`admin/state.rs`): the schema
//!   `askdb_state` and the role `askdb_state` that may use only it;
//! - the proof: it connects as each role, with the very URL it reports, and tries what
//!   the role must not be able to do. A wrong grant fails setup loudly.
//!
//! This is an administrator's tool, not a route for questions: it connects with the
//! admin URL directly and never through the gate. Passwords come from the caller (the
//! CLI reads `ASKDB_RO_PASSWORD` and `ASKDB_LOG_PASSWORD`) or are generated from the
//! operating system's randomness; they never appear in errors, logs or `Debug` output.

mod dump;
mod load;
mod mysql;
mod mysql_copy;
mod mysql_proof;
mod proof;
mod rls;
mod state;

use std::fmt;
use std::io::Read;
use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::{Client, Config, NoTls};

use crate::sql_text::quote_ident;
use crate::text::redact_password;
pub use dump::{drop_database, load_dump_into_database, url_reachable, url_with_database};
use load::load_demo;
pub use mysql::{mysql_reachable, remove_mysql_setup};
pub use mysql_copy::{copy_sqlite_into_mysql, drop_mysql_database, CopyReport};
pub use proof::prove_roles;
pub use rls::{UserCity, USER_CITY_FUNCTION};
pub use state::{setup_state, StateSetupReport, DEFAULT_STATE_ROLE, STATE_PASSWORD_ENV};

/// The database the CLI sets up unless told otherwise.
pub const DEFAULT_DATABASE: &str = "askdb_demo";
/// The read-only role the CLI creates.
pub const DEFAULT_READ_ONLY_ROLE: &str = "askdb_ro";
/// The log-writing role the CLI creates.
pub const DEFAULT_LOG_ROLE: &str = "askdb_log";
/// Where the CLI reads the read-only role's password, when set.
pub const READ_ONLY_PASSWORD_ENV: &str = "ASKDB_RO_PASSWORD";
/// Where the CLI reads the log role's password, when set.
pub const LOG_PASSWORD_ENV: &str = "ASKDB_LOG_PASSWORD";

/// The read-only role's statement timeout, set on the role itself so it holds even
/// for a client that never sets one.
pub const ROLE_STATEMENT_TIMEOUT: Duration = crate::gate::DEFAULT_STATEMENT_TIMEOUT;

/// Length of generated passwords (letters and digits: about 143 bits).
const PASSWORD_LENGTH: usize = 24;

/// Rows per literal INSERT statement while loading.
const ROWS_PER_INSERT: usize = 500;

/// How long to wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// PostgreSQL's limit on identifier length, in bytes.
const MAX_IDENTIFIER_BYTES: usize = 63;

/// Why setup failed. No variant ever holds a password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    #[error("the admin URL {url} is not usable: {reason}")]
    BadAdminUrl { url: String, reason: String },
    #[error("{what} {name:?} is not a usable name: {reason}")]
    BadName {
        what: &'static str,
        name: String,
        reason: String,
    },
    #[error("the password of role {role} is not usable: {reason}")]
    BadPassword { role: String, reason: String },
    #[error("cannot generate a password: {0}")]
    Random(#[source] std::io::Error),
    #[error("cannot connect to {url}: {message}")]
    Connect { url: String, message: String },
    #[error("setup failed while trying to {step}: {message}{}", sqlstate_suffix(.sqlstate))]
    Step {
        step: String,
        sqlstate: Option<String>,
        message: String,
    },
    #[error(
        "proof failed for role {role}: `{attempt}` should have been {expected}, but {observed}; \
         the role's privileges are wrong, do not use it"
    )]
    ProofFailed {
        role: String,
        attempt: String,
        expected: String,
        observed: String,
    },
}

fn sqlstate_suffix(sqlstate: &Option<String>) -> String {
    sqlstate
        .as_ref()
        .map(|code| format!(" (SQLSTATE {code})"))
        .unwrap_or_default()
}

/// A password. `Debug` and `Display` never show it; [`Password::expose`] does, for the
/// one place that must (the one-time print of a generated password).
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn new(text: impl Into<String>) -> Self {
        Password(text.into())
    }

    /// A fresh password of letters and digits from the operating system's randomness.
    pub fn generate() -> Result<Self, SetupError> {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        // Bytes at or above the largest multiple of the alphabet size are discarded,
        // so every character is equally likely.
        let limit = (256 / ALPHABET.len() * ALPHABET.len()) as u8;
        let mut random = std::fs::File::open("/dev/urandom").map_err(SetupError::Random)?;
        let mut text = String::with_capacity(PASSWORD_LENGTH);
        let mut buffer = [0u8; 64];
        while text.len() < PASSWORD_LENGTH {
            random.read_exact(&mut buffer).map_err(SetupError::Random)?;
            for byte in buffer {
                if byte < limit && text.len() < PASSWORD_LENGTH {
                    text.push(char::from(ALPHABET[usize::from(byte) % ALPHABET.len()]));
                }
            }
        }
        Ok(Password(text))
    }

    /// The secret itself. Print it only where the user asked to see it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(***)")
    }
}

impl fmt::Display for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// One role to create: its name and, optionally, its password (generated if None).
#[derive(Debug, Clone)]
pub struct RoleSpec {
    pub name: String,
    pub password: Option<Password>,
}

impl RoleSpec {
    pub fn new(name: impl Into<String>) -> Self {
        RoleSpec {
            name: name.into(),
            password: None,
        }
    }
}

/// What to set up.
#[derive(Debug, Clone)]
pub struct SetupOptions {
    /// A superuser (or a role with CREATEDB and CREATEROLE) URL, any database.
    pub admin_url: String,
    /// The database to create or refresh.
    pub database: String,
    pub read_only_role: RoleSpec,
    pub log_role: RoleSpec,
    /// The example row-level security to create (`--example-rls USER=CITY`, decision
    /// 0077): each user sees only its city's suppliers. Empty: none.
    pub example_rls: Vec<UserCity>,
}

impl SetupOptions {
    /// The CLI's defaults: roles `askdb_ro` and `askdb_log`, passwords generated.
    pub fn new(admin_url: impl Into<String>, database: impl Into<String>) -> Self {
        SetupOptions {
            admin_url: admin_url.into(),
            database: database.into(),
            read_only_role: RoleSpec::new(DEFAULT_READ_ONLY_ROLE),
            log_role: RoleSpec::new(DEFAULT_LOG_ROLE),
            example_rls: Vec::new(),
        }
    }
}

/// A role ready to use: its name, password and the URL that logs in as it. `Debug`
/// shows the URL redacted.
#[derive(Clone)]
pub struct RoleLogin {
    pub role: String,
    pub password: Password,
    /// True when setup generated the password (the caller has never seen it).
    pub password_generated: bool,
    url: String,
}

impl fmt::Debug for RoleLogin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RoleLogin")
            .field("role", &self.role)
            .field("password", &self.password)
            .field("password_generated", &self.password_generated)
            .field("url", &self.display_url())
            .finish()
    }
}

impl RoleLogin {
    /// The URL with the password: for connecting, never for printing.
    pub fn connection_url(&self) -> &str {
        &self.url
    }

    /// The URL with the password replaced by `***`.
    pub fn display_url(&self) -> String {
        redact_password(&self.url)
    }
}

/// One proof that a role cannot do what it must not (or can do what it must).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proof {
    pub role: String,
    pub attempt: String,
    /// What happened, e.g. "refused with SQLSTATE 42501 (permission denied for table bills)".
    pub outcome: String,
}

/// What setup did.
#[derive(Debug, Clone)]
pub struct SetupReport {
    pub database: String,
    /// False when the database already existed.
    pub database_created: bool,
    /// Each demo table with the rows loaded into it, in load order.
    pub tables: Vec<(String, usize)>,
    pub read_only: RoleLogin,
    pub log: RoleLogin,
    pub proofs: Vec<Proof>,
}

/// Creates or refreshes everything, then proves both roles. Safe to run again: the
/// demo tables are rebuilt identically, the roles and grants are re-applied (and any
/// drift removed), the query log is kept.
pub async fn setup(options: &SetupOptions) -> Result<SetupReport, SetupError> {
    check_name("database", &options.database)?;
    check_name("role", &options.read_only_role.name)?;
    check_name("role", &options.log_role.name)?;
    if options.read_only_role.name == options.log_role.name {
        return Err(SetupError::BadName {
            what: "role",
            name: options.log_role.name.clone(),
            reason: "the read-only role and the log role must be different roles".to_string(),
        });
    }
    if mysql::is_mysql_url(&options.admin_url) {
        if !options.example_rls.is_empty() {
            // MySQL and MariaDB have no row-level security: a user's rows could not be
            // kept from another's, so the example is refused rather than half made.
            return Err(SetupError::BadAdminUrl {
                url: crate::text::redact_password(&options.admin_url),
                reason: "--example-rls needs PostgreSQL's row-level security, which MySQL \
                         and MariaDB do not have"
                    .to_string(),
            });
        }
        return mysql::setup(options).await;
    }
    let admin_config = parse_admin_url(&options.admin_url)?;
    if admin_config
        .get_user()
        .is_some_and(|user| user == options.read_only_role.name || user == options.log_role.name)
    {
        return Err(SetupError::BadName {
            what: "role",
            name: admin_config.get_user().unwrap_or_default().to_string(),
            reason: "the admin URL logs in as one of the roles being created".to_string(),
        });
    }
    let read_only = login_for(
        &options.admin_url,
        &options.read_only_role,
        &options.database,
    )?;
    let log = login_for(&options.admin_url, &options.log_role, &options.database)?;

    // Cluster-wide objects: the database and the roles.
    let admin = connect(&admin_config, &options.admin_url).await?;
    let database_created = ensure_database(&admin, &options.database).await?;
    for login in [&read_only, &log] {
        ensure_role(&admin, login, &options.database).await?;
    }
    set_read_only_role_defaults(&admin, &read_only.role).await?;
    drop(admin);

    // Objects inside the database.
    let mut in_database = admin_config.clone();
    in_database.dbname(&options.database);
    let mut client = connect(&in_database, &options.admin_url).await?;
    let tables = load_demo(&mut client, &options.database, &read_only.role, &log.role).await?;
    // Row estimates for list_tables; outside the load transaction so they describe
    // the committed rows.
    let names: Vec<String> = tables.iter().map(|(name, _)| quote_ident(name)).collect();
    run(
        &client,
        "analyse the demo tables",
        &format!("ANALYZE {}", names.join(", ")),
    )
    .await?;
    if !options.example_rls.is_empty() {
        rls::apply(&mut client, &read_only.role, &options.example_rls).await?;
    }
    drop(client);

    let mut proofs = prove_roles(&read_only, &log).await?;
    if !options.example_rls.is_empty() {
        proofs.extend(rls::prove(&read_only, &options.example_rls).await?);
    }
    Ok(SetupReport {
        database: options.database.clone(),
        database_created,
        tables,
        read_only,
        log,
        proofs,
    })
}

fn check_name(what: &'static str, name: &str) -> Result<(), SetupError> {
    let reason = if name.is_empty() {
        Some("it is empty".to_string())
    } else if name.len() > MAX_IDENTIFIER_BYTES {
        Some(format!(
            "it is longer than PostgreSQL's {MAX_IDENTIFIER_BYTES}-byte limit"
        ))
    } else if name.chars().any(char::is_control) {
        Some("it contains control characters".to_string())
    } else if name.to_lowercase().starts_with("pg_") {
        Some("names starting with pg_ are reserved by PostgreSQL".to_string())
    } else {
        None
    };
    match reason {
        Some(reason) => Err(SetupError::BadName {
            what,
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

fn parse_admin_url(url: &str) -> Result<Config, SetupError> {
    let shown = redact_password(url);
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(SetupError::BadAdminUrl {
            url: shown,
            reason: "it must start with postgres://, postgresql://, mysql:// or mariadb://"
                .to_string(),
        });
    }
    let mut config = Config::from_str(url).map_err(|error| SetupError::BadAdminUrl {
        url: shown,
        reason: describe(&error),
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    Ok(config)
}

/// The role's login: its password (given or generated) and a URL built from the admin
/// URL with the role's user, password and the database.
fn login_for(admin_url: &str, spec: &RoleSpec, database: &str) -> Result<RoleLogin, SetupError> {
    let (password, password_generated) = match &spec.password {
        Some(password) => (password.clone(), false),
        None => (Password::generate()?, true),
    };
    if password.expose().is_empty() || password.expose().contains('\0') {
        return Err(SetupError::BadPassword {
            role: spec.name.clone(),
            reason: "it is empty or contains a NUL character".to_string(),
        });
    }
    let url = role_url(admin_url, &spec.name, &password, database).ok_or_else(|| {
        SetupError::BadAdminUrl {
            url: redact_password(admin_url),
            reason: "cannot build a role URL from it".to_string(),
        }
    })?;
    Ok(RoleLogin {
        role: spec.name.clone(),
        password,
        password_generated,
        url,
    })
}

/// `scheme://user:password@hosts/database?params`, from the admin URL's scheme, hosts
/// and parameters.
pub(crate) fn role_url(
    admin_url: &str,
    user: &str,
    password: &Password,
    database: &str,
) -> Option<String> {
    let (scheme, rest) = admin_url.split_once("://")?;
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let hosts = authority
        .rsplit_once('@')
        .map_or(authority, |(_, hosts)| hosts);
    let query = tail.find('?').map_or("", |index| &tail[index..]);
    Some(format!(
        "{scheme}://{}:{}@{hosts}/{}{query}",
        percent_encode(user),
        percent_encode(password.expose()),
        percent_encode(database)
    ))
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn percent_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// A string literal; with standard_conforming_strings (the default since 9.1)
/// backslashes are literal and only quotes need doubling.
fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn describe(error: &dyn std::error::Error) -> String {
    crate::text::error_chain(error)
}

async fn connect(config: &Config, url_for_messages: &str) -> Result<Client, SetupError> {
    let mut shown = redact_password(url_for_messages);
    if let Some(database) = config.get_dbname() {
        shown = format!("{shown} (database {database})");
    }
    let (client, connection) =
        config
            .connect(NoTls)
            .await
            .map_err(|error| SetupError::Connect {
                url: shown,
                message: describe(&error),
            })?;
    // The connection task ends by itself when the client is dropped.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

async fn connect_as(login: &RoleLogin) -> Result<Client, SetupError> {
    let config = Config::from_str(login.connection_url()).map_err(|error| SetupError::Connect {
        url: login.display_url(),
        message: describe(&error),
    })?;
    let mut config = config;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    connect(&config, login.connection_url()).await
}

fn step_error(step: &str, error: &tokio_postgres::Error) -> SetupError {
    match error.as_db_error() {
        Some(db) => SetupError::Step {
            step: step.to_string(),
            sqlstate: Some(db.code().code().to_string()),
            message: db.message().to_string(),
        },
        None => SetupError::Step {
            step: step.to_string(),
            sqlstate: None,
            message: describe(error),
        },
    }
}

/// Runs one statement as a setup step. The statement text never goes into the error
/// (some carry passwords); the step's description does.
async fn run<C: tokio_postgres::GenericClient>(
    client: &C,
    step: &str,
    sql: &str,
) -> Result<u64, SetupError> {
    client
        .execute(sql, &[])
        .await
        .map_err(|error| step_error(step, &error))
}

async fn ensure_database(admin: &Client, database: &str) -> Result<bool, SetupError> {
    let exists = admin
        .query_opt(
            "SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1",
            &[&database],
        )
        .await
        .map_err(|error| step_error("look up the database", &error))?
        .is_some();
    if exists {
        return Ok(false);
    }
    match admin
        .execute(
            format!("CREATE DATABASE {}", quote_ident(database)).as_str(),
            &[],
        )
        .await
    {
        Ok(_) => Ok(true),
        // Someone else created it in the meantime: it exists, which is all we need.
        Err(error) if error.code().is_some_and(|code| code.code() == "42P04") => Ok(false),
        Err(error) => Err(step_error("create the database", &error)),
    }
}

/// Creates the role or resets an existing one to exactly LOGIN with this password:
/// no superuser, no role creation, no inherited or granted memberships.
async fn ensure_role(admin: &Client, login: &RoleLogin, database: &str) -> Result<(), SetupError> {
    let role = quote_ident(&login.role);
    let exists = admin
        .query_opt(
            "SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1",
            &[&login.role],
        )
        .await
        .map_err(|error| step_error("look up the roles", &error))?
        .is_some();
    let verb = if exists { "ALTER" } else { "CREATE" };
    let attributes =
        "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS";
    // PASSWORD takes no bind parameter; the literal is quoted, and the statement text
    // never reaches an error message.
    let sql = format!(
        "{verb} ROLE {role} {attributes} PASSWORD {}",
        quote_literal(login.password.expose())
    );
    run(
        admin,
        &format!("{} role {}", verb.to_lowercase(), login.role),
        &sql,
    )
    .await?;
    // Memberships would lend the role other roles' privileges (pg_write_all_data...).
    let granted: Vec<String> = admin
        .query(
            "SELECT r.rolname::text FROM pg_catalog.pg_auth_members m \
             JOIN pg_catalog.pg_roles r ON r.oid = m.roleid \
             JOIN pg_catalog.pg_roles u ON u.oid = m.member \
             WHERE u.rolname = $1",
            &[&login.role],
        )
        .await
        .map_err(|error| step_error("look up role memberships", &error))?
        .iter()
        .filter_map(|row| row.try_get::<_, String>(0).ok())
        .collect();
    for parent in granted {
        run(
            admin,
            &format!("remove {} from role {parent}", login.role),
            &format!("REVOKE {} FROM {role}", quote_ident(&parent)),
        )
        .await?;
    }
    // A per-database setting would override the role-wide ones set below.
    run(
        admin,
        &format!("reset {}'s settings in the database", login.role),
        &format!(
            "ALTER ROLE {role} IN DATABASE {} RESET ALL",
            quote_ident(database)
        ),
    )
    .await?;
    Ok(())
}

async fn set_read_only_role_defaults(admin: &Client, role: &str) -> Result<(), SetupError> {
    let quoted = quote_ident(role);
    run(
        admin,
        &format!("make {role} read-only by default"),
        &format!("ALTER ROLE {quoted} SET default_transaction_read_only = on"),
    )
    .await?;
    run(
        admin,
        &format!("set {role}'s statement timeout"),
        &format!(
            "ALTER ROLE {quoted} SET statement_timeout = {}",
            ROLE_STATEMENT_TIMEOUT.as_millis()
        ),
    )
    .await?;
    // PostgreSQL shows every role its own sessions' statements in pg_stat_activity, so
    // one askdb_ro session could read what another is running (another user's
    // question's SQL). Sessions that do not track their activity show none.
    run(
        admin,
        &format!("stop {role}'s sessions publishing their statements"),
        &format!("ALTER ROLE {quoted} SET track_activities = off"),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_urls_keep_hosts_and_parameters_and_encode_credentials() {
        let password = Password::new("p@ss:w/rd");
        assert_eq!(
            role_url(
                "postgres://postgres:secret@127.0.0.1:5432/postgres?connect_timeout=5",
                "askdb_ro",
                &password,
                "askdb_demo"
            )
            .as_deref(),
            Some("postgres://askdb_ro:p%40ss%3Aw%2Frd@127.0.0.1:5432/askdb_demo?connect_timeout=5")
        );
        assert_eq!(
            role_url("postgresql://db.example", "r", &Password::new("x"), "d").as_deref(),
            Some("postgresql://r:x@db.example/d")
        );
        let parsed = Config::from_str(
            &role_url("postgres://h:5433/x", "r", &password, "d").expect("builds"),
        )
        .expect("parses");
        assert_eq!(parsed.get_user(), Some("r"));
        assert_eq!(parsed.get_password(), Some("p@ss:w/rd".as_bytes()));
        assert_eq!(parsed.get_dbname(), Some("d"));
    }

    #[test]
    fn generated_passwords_are_long_alphanumeric_and_different() {
        let first = Password::generate().expect("random");
        let second = Password::generate().expect("random");
        assert_eq!(first.expose().len(), PASSWORD_LENGTH);
        assert!(first.expose().chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(first, second);
        assert_eq!(format!("{first:?}"), "Password(***)");
        assert_eq!(first.to_string(), "***");
    }

    #[test]
    fn names_and_urls_are_checked_without_echoing_passwords() {
        assert!(check_name("database", "").is_err());
        assert!(check_name("role", "pg_monitor").is_err());
        assert!(check_name("role", &"x".repeat(64)).is_err());
        assert!(check_name("role", "askdb_ro").is_ok());
        let error = parse_admin_url("mysql://root:hunter2@h/db").expect_err("not postgres");
        let text = error.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("***"), "{text}");
    }
}
