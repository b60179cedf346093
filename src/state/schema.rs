//! The shared state's tables: the schema `askdb_state` as a list of statements, each
//! `CREATE ... IF NOT EXISTS`, applied in order by `askdb db setup` (and by the tests on
//! their scratch databases). One `const` per table, so a table is added by appending a
//! constant and its line in [`STATEMENTS`], never by editing another's.

/// The schema every shared table lives in; the state role may use nothing else.
pub const SCHEMA: &str = "askdb_state";

pub const CREATE_SCHEMA: &str = "CREATE SCHEMA IF NOT EXISTS askdb_state";

/// The spend ledger's running totals: one row (`id` is always true), locked by every
/// reservation, settlement and release, so the cap check and the booking are one step
/// for all replicas. `numeric`, so millions of additions and subtractions never drift.
pub const SPEND_TOTAL: &str = "CREATE TABLE IF NOT EXISTS askdb_state.spend_total (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    spent_usd numeric NOT NULL DEFAULT 0,
    reserved_usd numeric NOT NULL DEFAULT 0,
    calls bigint NOT NULL DEFAULT 0
)";

/// One model call: reserved at its worst case before the call, settled with its real
/// cost after, or expired (never settled by its replica: counted at its worst case).
/// A call that failed has no row.
pub const SPEND_ENTRIES: &str = "CREATE TABLE IF NOT EXISTS askdb_state.spend_entries (
    id bigserial PRIMARY KEY,
    replica text NOT NULL,
    purpose text NOT NULL,
    estimate_usd numeric NOT NULL,
    status text NOT NULL DEFAULT 'reserved' CHECK (status IN ('reserved', 'settled', 'expired')),
    reserved_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    cost_usd numeric,
    provider text,
    model text,
    input_tokens bigint,
    output_tokens bigint,
    settled_at timestamptz
)";

/// Every reservation looks for expired ones while holding the totals' lock: this index
/// keeps that to the few reservations open, however long the ledger's history grows.
pub const SPEND_OPEN_RESERVATIONS: &str = "CREATE INDEX IF NOT EXISTS spend_entries_open \
     ON askdb_state.spend_entries (expires_at) WHERE status = 'reserved'";

/// The askers' token buckets (`limits::Asker` as text: `user:NAME` or `address:IP`).
pub const RATE_BUCKETS: &str = "CREATE TABLE IF NOT EXISTS askdb_state.rate_buckets (
    asker text PRIMARY KEY,
    tokens double precision NOT NULL,
    updated_at timestamptz NOT NULL
)";

/// The page's sign-in sessions, by the SHA-256 of the cookie's value.
pub const SESSIONS: &str = "CREATE TABLE IF NOT EXISTS askdb_state.sessions (
    digest text PRIMARY KEY,
    user_name text NOT NULL,
    expires_at timestamptz NOT NULL
)";

/// Users whose tokens were revoked (`askdb users revoke NAME --state-url ...`): every
/// replica refuses them, whatever its own copy of the users says.
pub const REVOKED_USERS: &str = "CREATE TABLE IF NOT EXISTS askdb_state.revoked_users (
    user_name text PRIMARY KEY,
    revoked_at timestamptz NOT NULL DEFAULT now()
)";

/// The users `askdb serve` signs in, shared by replicas (decision 0083): what
/// `users.json` holds, a row each, in the order they were added (`id`). Only the
/// token's SHA-256 is kept. A revoked user keeps its row, so its name stays taken.
pub const USERS: &str = "CREATE TABLE IF NOT EXISTS askdb_state.users (\
     id bigint GENERATED ALWAYS AS IDENTITY UNIQUE, \
     name text PRIMARY KEY, \
     token_sha256 text NOT NULL CHECK (token_sha256 ~ '^[0-9a-f]{64}$'), \
     created text NOT NULL, \
     revoked text, \
     policy text)";

/// One row an example; `tables` and `verified_against` as JSON text, as the SQLite
/// store keeps them.
pub const EXAMPLES: &str = "CREATE TABLE IF NOT EXISTS askdb_state.examples (\
     id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, \
     database text NOT NULL, \
     question text NOT NULL, \
     sql text NOT NULL, \
     verified_by text NOT NULL, \
     verified_at text NOT NULL, \
     schema_fingerprint text NOT NULL, \
     tables text NOT NULL, \
     verified_against text NOT NULL, \
     notes text, \
     set_aside text)";

/// Every read is one database's examples.
pub const EXAMPLES_DATABASE_INDEX: &str = "CREATE INDEX IF NOT EXISTS examples_database \
     ON askdb_state.examples (database, id)";

/// One row for each answer a person marked wrong: the question, the SQL that ran, the ids
/// of the verified examples the answer used (what `askdb examples list --caused-wrong`
/// counts), who marked it and when (`YYYY-MM-DD HH:MM:SS` UTC, as examples keep time).
pub const WRONG_MARKS: &str = "CREATE TABLE IF NOT EXISTS askdb_state.wrong_marks (\
     id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, \
     database text NOT NULL, \
     question text NOT NULL, \
     sql text, \
     examples bigint[] NOT NULL, \
     marked_by text NOT NULL, \
     marked_at text NOT NULL)";

/// Every read is one database's marks.
pub const WRONG_MARKS_DATABASE_INDEX: &str = "CREATE INDEX IF NOT EXISTS wrong_marks_database \
     ON askdb_state.wrong_marks (database, id)";

/// One row a conversation: its owner (NULL: nobody's), the next turn's number, when it
/// was last asked, and the lease of a question answering on it.
pub const CONVERSATIONS: &str = "CREATE TABLE IF NOT EXISTS askdb_state.conversations (\
     id text PRIMARY KEY, \
     owner text, \
     next_number integer NOT NULL, \
     last_used timestamptz NOT NULL, \
     lease_until timestamptz)";

/// The turns kept, as JSON (`agent::conversation::Turn`), at most the store's
/// `turns_kept` a conversation; gone with their conversation.
pub const CONVERSATION_TURNS: &str = "CREATE TABLE IF NOT EXISTS askdb_state.conversation_turns (\
     conversation_id text NOT NULL \
     REFERENCES askdb_state.conversations (id) ON DELETE CASCADE, \
     number integer NOT NULL, \
     turn text NOT NULL, \
     PRIMARY KEY (conversation_id, number))";

/// The idlest conversation is looked for by its last use.
pub const CONVERSATIONS_LAST_USED_INDEX: &str =
    "CREATE INDEX IF NOT EXISTS conversations_last_used \
     ON askdb_state.conversations (last_used)";

/// Every statement, in the order they are applied.
pub const STATEMENTS: &[&str] = &[
    CREATE_SCHEMA,
    SPEND_TOTAL,
    SPEND_ENTRIES,
    SPEND_OPEN_RESERVATIONS,
    RATE_BUCKETS,
    SESSIONS,
    REVOKED_USERS,
    // The users themselves (decision 0083).
    USERS,
    // The replicas' verified examples and conversations (decision 0080).
    EXAMPLES,
    EXAMPLES_DATABASE_INDEX,
    CONVERSATIONS,
    CONVERSATION_TURNS,
    CONVERSATIONS_LAST_USED_INDEX,
    // Answers marked wrong and the examples they used (decision 0084).
    WRONG_MARKS,
    WRONG_MARKS_DATABASE_INDEX,
];

/// A table every replica needs, looked for when a replica connects: its absence means
/// `askdb db setup` has not made the schema.
pub const PROBE_TABLE: &str = "askdb_state.spend_total";

/// Every table a replica reads or writes, looked for before `askdb serve --state-url`
/// listens: a state made by an older `askdb db setup` is told to run it again at start,
/// not found lacking by a request (a Wrong mark, a conversation) hours later.
pub const REPLICA_TABLES: [&str; 10] = [
    PROBE_TABLE,
    "askdb_state.spend_entries",
    "askdb_state.rate_buckets",
    "askdb_state.sessions",
    "askdb_state.revoked_users",
    "askdb_state.users",
    EXAMPLES_TABLE,
    WRONG_MARKS_TABLE,
    "askdb_state.conversations",
    "askdb_state.conversation_turns",
];

/// The verified examples' table, looked for by `askdb examples --state-url`.
pub const EXAMPLES_TABLE: &str = "askdb_state.examples";

/// The answers marked wrong, looked for by `askdb examples --state-url ... list
/// --caused-wrong`: a state made before decision 0084 lacks it.
pub const WRONG_MARKS_TABLE: &str = "askdb_state.wrong_marks";
