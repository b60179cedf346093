//! Why the guard refused a statement: the stable reason codes, the refusal with words a
//! model can act on, and whether a regenerated query could succeed.

use super::*;

/// Why the guard refused a statement. The JSON name is the stable reason code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalReason {
    EmptyStatement,
    TooLong,
    ParseError,
    MultipleStatements,
    NotAQuery,
    DataModifyingCte,
    SelectInto,
    LockingClause,
    DeniedFunction,
    SystemCatalog,
    UnknownTable,
    RestrictedColumn,
    /// A qualified column the relation does not have, such as attribute notation on a
    /// whole row (`c.to_jsonb`).
    UnknownColumn,
    /// A cast to a type that is not an ordinary scalar (reg* types, oid, row types).
    DeniedType,
    /// A literal size argument over the bound (`repeat('x', 50000000)`).
    TooLarge,
    /// The re-rendered text would not parse back to the checked tree.
    UnsafeRendering,
    /// A checked query presented to a gate whose policy did not check it.
    ForeignPolicy,
    /// The database's own resolution of the statement (its plan, or what it reads as it
    /// is prepared) could not be read, so it could not be verified.
    UnreadableResolution,
    /// A MySQL executable comment or optimizer hint (`/*! ... */`, `/*+ ... */`): the
    /// server runs what a parser skipping comments never sees.
    ExecutableComment,
    /// A MySQL user variable read or assigned (`@a`, `@a := 1`): session state.
    SessionVariable,
}

impl RefusalReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::EmptyStatement => "empty_statement",
            RefusalReason::TooLong => "too_long",
            RefusalReason::ParseError => "parse_error",
            RefusalReason::MultipleStatements => "multiple_statements",
            RefusalReason::NotAQuery => "not_a_query",
            RefusalReason::DataModifyingCte => "data_modifying_cte",
            RefusalReason::SelectInto => "select_into",
            RefusalReason::LockingClause => "locking_clause",
            RefusalReason::DeniedFunction => "denied_function",
            RefusalReason::SystemCatalog => "system_catalog",
            RefusalReason::UnknownTable => "unknown_table",
            RefusalReason::RestrictedColumn => "restricted_column",
            RefusalReason::UnknownColumn => "unknown_column",
            RefusalReason::DeniedType => "denied_type",
            RefusalReason::TooLarge => "too_large",
            RefusalReason::UnsafeRendering => "unsafe_rendering",
            RefusalReason::ForeignPolicy => "foreign_policy",
            RefusalReason::UnreadableResolution => "unreadable_resolution",
            RefusalReason::ExecutableComment => "executable_comment",
            RefusalReason::SessionVariable => "session_variable",
        }
    }
}

/// A refusal with a message the model can act on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    pub reason: RefusalReason,
    pub message: String,
    /// Whether a regenerated query could reasonably succeed. Writes, locks, denied
    /// functions and hidden tables are never repaired: the intent itself is refused.
    pub repairable: bool,
}

impl Refusal {
    pub(super) fn new(reason: RefusalReason, message: impl Into<String>) -> Self {
        let repairable = matches!(
            reason,
            RefusalReason::ParseError
                | RefusalReason::MultipleStatements
                | RefusalReason::SystemCatalog
                | RefusalReason::UnknownTable
                | RefusalReason::RestrictedColumn
                | RefusalReason::TooLong
                | RefusalReason::UnknownColumn
                | RefusalReason::TooLarge
                | RefusalReason::UnsafeRendering
                | RefusalReason::UnreadableResolution
        );
        Refusal {
            reason,
            message: message.into(),
            repairable,
        }
    }

    /// A [`CheckedQuery`] presented to a gate whose policy did not check it.
    pub(crate) fn foreign_policy() -> Self {
        Refusal::new(
            RefusalReason::ForeignPolicy,
            "this query was checked for another database; check it again on this one",
        )
    }

    /// The database compiled the statement but what it resolved to could not be read.
    pub(crate) fn unreadable_resolution(why: &str) -> Self {
        Refusal::new(
            RefusalReason::UnreadableResolution,
            format!("the database's plan of this statement could not be verified ({why}); write it more plainly"),
        )
    }

    /// A table the database does not know, named where the parser check does not look:
    /// the words of any unknown table; never repaired when the policy hides it.
    pub(crate) fn missing_table(name: &str, policy: &GuardPolicy) -> Self {
        if policy.is_hidden(name) {
            return Refusal::hidden_table(name);
        }
        Refusal::new(
            RefusalReason::UnknownTable,
            format!("table \"{name}\" does not exist; use only the tables in the schema"),
        )
    }

    /// The database would not plan the statement for want of a privilege on `relation`:
    /// the guard's words for what that relation is to the policy (a restricted column of
    /// a visible table, or a table that does not exist for callers), or None when the
    /// relation is one the policy allows whole (then the database's own error stands).
    pub(crate) fn for_denied_relation(relation: &str, policy: &GuardPolicy) -> Option<Self> {
        if !policy.is_visible(relation) {
            return Some(Refusal::missing_table(relation, policy));
        }
        policy
            .restricted_columns(relation)
            .is_some_and(|columns| !columns.is_empty())
            .then(|| restricted_refusal(&format!("a restricted column of {relation}")))
    }

    /// The database's plan of the statement is larger than any plan of a query over the
    /// data: it carries a constant the planner folded from the statement's own values.
    pub(crate) fn plan_too_large(bytes: u64, limit: u64) -> Self {
        Refusal::new(
            RefusalReason::TooLarge,
            format!("the statement builds values too large to check: its plan is {bytes} bytes, the limit is {limit}; compute smaller values"),
        )
    }

    pub(super) fn hidden_table(name: &str) -> Self {
        // Same words as any unknown table, so the refusal does not reveal that the
        // table exists; only the repair decision differs.
        let mut refusal = Refusal::new(
            RefusalReason::UnknownTable,
            format!("table \"{name}\" does not exist; use only the tables in the schema"),
        );
        refusal.repairable = false;
        refusal
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason.as_str(), self.message)
    }
}

pub(super) fn unlisted_function_refusal(name: &str) -> Refusal {
    Refusal::new(
        RefusalReason::DeniedFunction,
        format!("function {name}() is not allowed: a query may use only the functions of ordinary analysis (aggregates, window, math, string, date/time, JSON and array functions); compute the answer with those"),
    )
}

pub(super) fn denied_type_refusal(name: &str) -> Refusal {
    Refusal::new(
        RefusalReason::DeniedType,
        format!("a cast to {name} is not allowed: only ordinary scalar types (numbers, text, dates and times, booleans, JSON, arrays of them) may be cast to; reg* types, oid and row types are refused"),
    )
}

pub(super) fn denied_function_refusal(name: &str) -> Refusal {
    Refusal::new(
        RefusalReason::DeniedFunction,
        format!("function {name}() is not allowed: it can sleep, read files, change settings or reach outside the query"),
    )
}

pub(super) fn restricted_refusal(what: &str) -> Refusal {
    Refusal::new(
        RefusalReason::RestrictedColumn,
        format!("{what} is restricted and cannot be read; select only the columns you need, leaving restricted ones out (COUNT(*) is allowed)"),
    )
}
