//! The error taxonomy: every database error and guard refusal becomes one
//! [`ErrorType`], chosen from the database's own error code (SQLSTATE for PostgreSQL,
//! result code and message for SQLite, the server's error number for MySQL and MariaDB). The agent picks its repair strategy from this
//! type alone, so this module is the single place where a code gets its meaning.

use serde::{Deserialize, Serialize};

/// The kind of failure, as the agent and the evaluation harness see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum ErrorType {
    SyntaxError,
    UnknownColumn,
    UnknownTable,
    AmbiguousColumn,
    UnknownFunction,
    TypeMismatch,
    GroupingError,
    WindowingError,
    CardinalityViolation,
    DivisionByZero,
    Timeout,
    PermissionDenied,
    ReadOnlyViolation,
    /// Refused by the guard before reaching the database.
    Rejected,
    /// The database could not be reached or the connection dropped: infrastructure,
    /// not a fault of the query.
    ConnectionError,
    /// Every connection to the database was in use and none came free in time, so
    /// nothing ran: askdb is overloaded, the query is not at fault; try again.
    Busy,
    Unknown,
}

impl ErrorType {
    /// Every type, for exhaustive checks (a repairable type must have a repair).
    pub const ALL: [ErrorType; 17] = [
        ErrorType::SyntaxError,
        ErrorType::UnknownColumn,
        ErrorType::UnknownTable,
        ErrorType::AmbiguousColumn,
        ErrorType::UnknownFunction,
        ErrorType::TypeMismatch,
        ErrorType::GroupingError,
        ErrorType::WindowingError,
        ErrorType::CardinalityViolation,
        ErrorType::DivisionByZero,
        ErrorType::Timeout,
        ErrorType::PermissionDenied,
        ErrorType::ReadOnlyViolation,
        ErrorType::Rejected,
        ErrorType::ConnectionError,
        ErrorType::Busy,
        ErrorType::Unknown,
    ];

    /// Whether the agent may try to repair a query that failed this way. A permission
    /// or read-only failure is the event to see, not to hide, so it is never repaired;
    /// a guard refusal is repairable only for some reasons (see
    /// [`crate::gate::guard::RefusalReason::repairable`]).
    pub fn repairable(self) -> bool {
        match self {
            ErrorType::SyntaxError
            | ErrorType::UnknownColumn
            | ErrorType::UnknownTable
            | ErrorType::AmbiguousColumn
            | ErrorType::UnknownFunction
            | ErrorType::TypeMismatch
            | ErrorType::GroupingError
            | ErrorType::WindowingError
            | ErrorType::CardinalityViolation
            | ErrorType::DivisionByZero
            | ErrorType::Timeout
            | ErrorType::Rejected => true,
            ErrorType::PermissionDenied
            | ErrorType::ReadOnlyViolation
            | ErrorType::ConnectionError
            | ErrorType::Busy
            | ErrorType::Unknown => false,
        }
    }

    /// The snake_case name used in JSON and in prompts.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::SyntaxError => "syntax_error",
            ErrorType::UnknownColumn => "unknown_column",
            ErrorType::UnknownTable => "unknown_table",
            ErrorType::AmbiguousColumn => "ambiguous_column",
            ErrorType::UnknownFunction => "unknown_function",
            ErrorType::TypeMismatch => "type_mismatch",
            ErrorType::GroupingError => "grouping_error",
            ErrorType::WindowingError => "windowing_error",
            ErrorType::CardinalityViolation => "cardinality_violation",
            ErrorType::DivisionByZero => "division_by_zero",
            ErrorType::Timeout => "timeout",
            ErrorType::PermissionDenied => "permission_denied",
            ErrorType::ReadOnlyViolation => "read_only_violation",
            ErrorType::Rejected => "rejected",
            ErrorType::ConnectionError => "connection_error",
            ErrorType::Busy => "busy",
            ErrorType::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for ErrorType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Maps a PostgreSQL SQLSTATE to its error type.
pub fn from_sqlstate(sqlstate: &str) -> ErrorType {
    match sqlstate {
        "42601" => ErrorType::SyntaxError,
        "42703" => ErrorType::UnknownColumn,
        "42P01" => ErrorType::UnknownTable,
        "42702" | "42725" => ErrorType::AmbiguousColumn,
        "42883" => ErrorType::UnknownFunction,
        "42804" | "42846" | "22P02" | "22007" | "22008" | "42P18" => ErrorType::TypeMismatch,
        "42803" => ErrorType::GroupingError,
        "42P20" => ErrorType::WindowingError,
        "21000" => ErrorType::CardinalityViolation,
        "22012" => ErrorType::DivisionByZero,
        "57014" => ErrorType::Timeout,
        "42501" => ErrorType::PermissionDenied,
        "25006" => ErrorType::ReadOnlyViolation,
        // Class 08: connection exceptions; 57P01..57P03: the server is going away.
        code if code.starts_with("08") => ErrorType::ConnectionError,
        "57P01" | "57P02" | "57P03" => ErrorType::ConnectionError,
        _ => ErrorType::Unknown,
    }
}

/// Maps a MySQL or MariaDB error number to its error type. The number, not the SQLSTATE,
/// decides: MySQL reports most query errors as SQLSTATE 42000 or HY000, and an
/// ambiguous column as 23000, a constraint class.
pub fn from_mysql(code: u16) -> ErrorType {
    match code {
        // ER_PARSE_ERROR, ER_SYNTAX_ERROR, ER_NONUNIQ_TABLE (an alias used twice), and
        // ER_NOT_SUPPORTED_YET: a construct this server does not accept (MariaDB's LIMIT
        // in an IN subquery), which its message names; as with a parse error, the repair
        // is the same meaning written another way.
        1064 | 1149 | 1066 | 1235 => ErrorType::SyntaxError,
        // ER_BAD_FIELD_ERROR.
        1054 => ErrorType::UnknownColumn,
        // ER_NO_SUCH_TABLE, ER_UNKNOWN_TABLE, ER_BAD_TABLE_ERROR.
        1146 | 1109 | 1051 => ErrorType::UnknownTable,
        // ER_NON_UNIQ_ERROR.
        1052 => ErrorType::AmbiguousColumn,
        // ER_SP_DOES_NOT_EXIST (an unknown function), ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT,
        // ER_FUNC_INEXISTENT_NAME_COLLISION.
        1305 | 1582 | 1630 => ErrorType::UnknownFunction,
        // Incorrect values for a type (ER_TRUNCATED_WRONG_VALUE, ..._FOR_FIELD,
        // ER_WRONG_VALUE, ER_WRONG_VALUE_FOR_TYPE, ER_DATA_OUT_OF_RANGE) and collations
        // that cannot be compared (ER_CANT_AGGREGATE_2COLLATIONS, _3COLLATIONS,
        // _NCOLLATIONS).
        1292 | 1366 | 1525 | 1411 | 1690 | 1267 | 1270 | 1271 => ErrorType::TypeMismatch,
        // ER_WRONG_FIELD_WITH_GROUP, ER_WRONG_GROUP_FIELD, ER_INVALID_GROUP_FUNC_USE,
        // ER_MIX_OF_GROUP_FUNC_AND_FIELDS, ER_NON_GROUPING_FIELD_USED.
        1055 | 1056 | 1111 | 1140 | 1463 => ErrorType::GroupingError,
        // MariaDB's ER_WRONG_PLACEMENT_OF_WINDOW_FUNCTION, MySQL's
        // ER_WINDOW_INVALID_WINDOW_FUNC_USE.
        4015 | 3593 => ErrorType::WindowingError,
        // ER_SUBQUERY_NO_1_ROW, ER_OPERAND_COLUMNS.
        1242 | 1241 => ErrorType::CardinalityViolation,
        // ER_DIVISION_BY_ZERO (a SELECT returns NULL instead; strict writes raise it).
        1365 => ErrorType::DivisionByZero,
        // MariaDB's ER_STATEMENT_TIMEOUT (max_statement_time), MySQL's ER_QUERY_TIMEOUT
        // (MAX_EXECUTION_TIME), ER_QUERY_INTERRUPTED (KILL QUERY), ER_LOCK_WAIT_TIMEOUT.
        1969 | 3024 | 1317 | 1205 => ErrorType::Timeout,
        // Table, column, database, global privilege and routine access denied; login
        // refused; an option such as secure_file_priv preventing the statement.
        1142 | 1143 | 1044 | 1045 | 1227 | 1370 | 1290 => ErrorType::PermissionDenied,
        // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION.
        1792 => ErrorType::ReadOnlyViolation,
        // ER_CON_COUNT_ERROR: every connection of the server is in use.
        1040 => ErrorType::Busy,
        // The server shutting down or the connection killed (ER_SERVER_SHUTDOWN,
        // MariaDB's ER_CONNECTION_KILLED), and the client's own codes for a server it
        // cannot reach or lost (CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR,
        // CR_SERVER_GONE_ERROR, CR_SERVER_LOST).
        1053 | 1927 | 2002 | 2003 | 2006 | 2013 => ErrorType::ConnectionError,
        _ => ErrorType::Unknown,
    }
}

/// SQLite's primary result codes that the taxonomy distinguishes (the low byte of the
/// extended code).
pub mod sqlite_codes {
    pub const PERM: i32 = 3;
    pub const BUSY: i32 = 5;
    pub const LOCKED: i32 = 6;
    pub const READONLY: i32 = 8;
    pub const INTERRUPT: i32 = 9;
    pub const CANTOPEN: i32 = 14;
    pub const MISMATCH: i32 = 20;
    pub const AUTH: i32 = 23;
}

/// Maps a SQLite result code and message to its error type. SQLite reports most
/// query errors as the generic SQLITE_ERROR, so the message decides among them.
pub fn from_sqlite(primary_code: i32, message: &str) -> ErrorType {
    use sqlite_codes::*;
    match primary_code {
        INTERRUPT => return ErrorType::Timeout,
        READONLY => return ErrorType::ReadOnlyViolation,
        AUTH | PERM => return ErrorType::PermissionDenied,
        MISMATCH => return ErrorType::TypeMismatch,
        CANTOPEN => return ErrorType::ConnectionError,
        BUSY | LOCKED => return ErrorType::Unknown,
        _ => {}
    }
    let message = message.to_ascii_lowercase();
    let has = |needle: &str| message.contains(needle);
    if has("no such column") {
        ErrorType::UnknownColumn
    } else if has("no such table") {
        ErrorType::UnknownTable
    } else if has("ambiguous column name") {
        ErrorType::AmbiguousColumn
    } else if has("no such function") || has("wrong number of arguments to function") {
        ErrorType::UnknownFunction
    } else if has("misuse of window function") || has("window function") {
        ErrorType::WindowingError
    } else if has("misuse of aggregate")
        || has("group by clause is required")
        || has("aggregate functions are not allowed")
        || has("not an aggregate")
    {
        ErrorType::GroupingError
    } else if has("sub-select returns") || has("row value misused") {
        ErrorType::CardinalityViolation
    } else if has("datatype mismatch") {
        ErrorType::TypeMismatch
    } else if has("not authorized") || (has("access to") && has("is prohibited")) {
        ErrorType::PermissionDenied
    } else if has("readonly database") || has("read-only") {
        ErrorType::ReadOnlyViolation
    } else if has("interrupted") {
        ErrorType::Timeout
    } else if has("syntax error")
        || has("incomplete input")
        || has("unrecognized token")
        || has("near \"")
    {
        ErrorType::SyntaxError
    } else {
        ErrorType::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_of_the_architecture_table_map_to_their_types() {
        let cases = [
            ("42601", ErrorType::SyntaxError),
            ("42703", ErrorType::UnknownColumn),
            ("42P01", ErrorType::UnknownTable),
            ("42702", ErrorType::AmbiguousColumn),
            ("42883", ErrorType::UnknownFunction),
            ("42804", ErrorType::TypeMismatch),
            ("22P02", ErrorType::TypeMismatch),
            ("22007", ErrorType::TypeMismatch),
            ("22008", ErrorType::TypeMismatch),
            ("42803", ErrorType::GroupingError),
            ("42P20", ErrorType::WindowingError),
            ("21000", ErrorType::CardinalityViolation),
            ("22012", ErrorType::DivisionByZero),
            ("57014", ErrorType::Timeout),
            ("42501", ErrorType::PermissionDenied),
            ("25006", ErrorType::ReadOnlyViolation),
            ("08006", ErrorType::ConnectionError),
            ("XX000", ErrorType::Unknown),
        ];
        for (code, expected) in cases {
            assert_eq!(from_sqlstate(code), expected, "SQLSTATE {code}");
        }
    }

    /// Each number as MariaDB 10.11 raised it for a statement of that kind (the server's
    /// own words in the comment), mapped to the type PostgreSQL's SQLSTATE gives.
    #[test]
    fn mysql_error_numbers_map_to_the_same_types_as_sqlstates() {
        let cases = [
            (1064, ErrorType::SyntaxError), // You have an error in your SQL syntax
            (1235, ErrorType::SyntaxError), // This version of MariaDB doesn't yet support 'LIMIT & IN/ALL/ANY/SOME subquery'
            (1054, ErrorType::UnknownColumn), // Unknown column 'c' in 'SELECT'
            (1146, ErrorType::UnknownTable), // Table 'db.nope' doesn't exist
            (1052, ErrorType::AmbiguousColumn), // Column 'a' in SELECT is ambiguous
            (1305, ErrorType::UnknownFunction), // FUNCTION db.nofn does not exist
            (1582, ErrorType::UnknownFunction), // Incorrect parameter count ... 'ROUND'
            (1525, ErrorType::TypeMismatch), // Incorrect DATE value: '2020-13-45'
            (1055, ErrorType::GroupingError), // 'db.t.b' isn't in GROUP BY
            (1111, ErrorType::GroupingError), // Invalid use of group function
            (4015, ErrorType::WindowingError), // Window function is allowed only in SELECT ...
            (1242, ErrorType::CardinalityViolation), // Subquery returns more than 1 row
            (1241, ErrorType::CardinalityViolation), // Operand should contain 1 column(s)
            (1969, ErrorType::Timeout),     // ... interrupted (max_statement_time exceeded)
            (1317, ErrorType::Timeout),     // Query execution was interrupted
            (1142, ErrorType::PermissionDenied), // SELECT command denied to user ...
            (1143, ErrorType::PermissionDenied), // SELECT command denied ... for column
            (1792, ErrorType::ReadOnlyViolation), // Cannot execute statement in a READ ONLY transaction
            (1066, ErrorType::SyntaxError),       // Not unique table/alias: 'x'
            (2013, ErrorType::ConnectionError),   // Lost connection to server during query
            (1040, ErrorType::Busy),              // Too many connections
            (9999, ErrorType::Unknown),
        ];
        for (code, expected) in cases {
            assert_eq!(from_mysql(code), expected, "MySQL error {code}");
        }
        assert!(!from_mysql(1142).repairable());
        assert!(!from_mysql(1792).repairable());
    }

    #[test]
    fn permission_and_read_only_failures_are_never_repairable() {
        assert!(!ErrorType::PermissionDenied.repairable());
        assert!(!ErrorType::ReadOnlyViolation.repairable());
        assert!(!ErrorType::Unknown.repairable());
        assert!(!ErrorType::ConnectionError.repairable());
        assert!(ErrorType::SyntaxError.repairable());
    }

    #[test]
    fn sqlite_messages_map_to_the_same_types_as_sqlstates() {
        let cases = [
            (1, "no such column: cust_nme", ErrorType::UnknownColumn),
            (1, "no such table: bill", ErrorType::UnknownTable),
            (
                1,
                "ambiguous column name: status",
                ErrorType::AmbiguousColumn,
            ),
            (
                1,
                "no such function: date_trunc",
                ErrorType::UnknownFunction,
            ),
            (1, "near \"FROM\": syntax error", ErrorType::SyntaxError),
            (1, "incomplete input", ErrorType::SyntaxError),
            (1, "misuse of aggregate: sum()", ErrorType::GroupingError),
            (
                1,
                "misuse of window function row_number()",
                ErrorType::WindowingError,
            ),
            (
                1,
                "sub-select returns 2 columns - expected 1",
                ErrorType::CardinalityViolation,
            ),
            (9, "interrupted", ErrorType::Timeout),
            (
                8,
                "attempt to write a readonly database",
                ErrorType::ReadOnlyViolation,
            ),
            (23, "not authorized", ErrorType::PermissionDenied),
            (1, "not authorized", ErrorType::PermissionDenied),
            (20, "datatype mismatch", ErrorType::TypeMismatch),
            (1, "something new", ErrorType::Unknown),
        ];
        for (code, message, expected) in cases {
            assert_eq!(from_sqlite(code, message), expected, "{message}");
        }
    }

    #[test]
    fn json_names_match_as_str() {
        for error_type in ErrorType::ALL {
            let json = serde_json::to_string(&error_type).expect("serialises");
            assert_eq!(json, format!("\"{}\"", error_type.as_str()));
        }
    }
}
