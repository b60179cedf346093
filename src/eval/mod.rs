//! Evaluation: golden sets and external benchmarks.

pub mod external;
pub mod guard_check;
