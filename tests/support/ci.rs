//! When a test that needs something from outside runs, skips or fails: the one
//! definition, shared by the library's unit tests (included with `#[path]`) and the
//! integration tests (`tests/support`).
//!
//! - Under CI (`CI` set and not empty) every test runs, and a missing server, tool or
//!   download fails the test.
//! - Outside CI, a missing PostgreSQL or Python makes the test say SKIPPED (with what is
//!   missing) and pass, and the tests that download or start something heavy (the local
//!   model, Chromium and Node.js packages, the MCP clients) run only when
//!   `ASKDB_TEST_EXTERNAL=1` asks for them, so a first `cargo test` finishes in minutes.

#![allow(dead_code)]

use std::io::Write;

/// The variable that asks for the heavy tests outside CI.
pub const EXTERNAL_TESTS_VARIABLE: &str = "ASKDB_TEST_EXTERNAL";

/// Whether this run is CI: `CI` set to anything but the empty string.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|value| !value.is_empty())
}

/// Whether tests that download or start heavy components run: always in CI, else when
/// `ASKDB_TEST_EXTERNAL=1`.
pub fn external_tests_wanted() -> bool {
    in_ci() || std::env::var(EXTERNAL_TESTS_VARIABLE).is_ok_and(|value| value == "1")
}

/// Says SKIPPED on the process's stderr (the harness captures `eprintln!` of passing
/// tests, and a skip must be seen), or panics under CI, where nothing may be skipped.
pub fn skip_or_fail(test: &str, why: &str) {
    assert!(!in_ci(), "{test}: {why} (required in CI)");
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// For a test that downloads or starts heavy components: true when it should run;
/// otherwise it says SKIPPED with the variable to set.
pub fn wants_external(test: &str, what: &str) -> bool {
    if external_tests_wanted() {
        return true;
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: it needs {what}; set {EXTERNAL_TESTS_VARIABLE}=1 to run it"
    );
    false
}
