//! Evaluation: golden sets and external benchmarks.

pub mod example_retrieval;
pub mod external;
pub mod flags;
pub mod gate;
pub mod golden;
pub mod guard_check;
pub mod metrics;
pub mod pool;
pub mod results;
pub mod runner;
pub mod sparc;
