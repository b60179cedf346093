//! The published summaries built into the binary, so an installed `askdb serve` shows
//! the evaluation card without the repository: one line for every
//! `evals/results/<name>.summary.json` (a test fails when one is missing).

/// The summaries published in this repository when the binary was built, so an
/// installed `askdb serve` can show its evaluation card without the source tree:
/// (file name, contents).
pub const EMBEDDED_SUMMARIES: [(&str, &str); 15] = [
    (
        "chinook.summary.json",
        include_str!("../../../evals/results/chinook.summary.json"),
    ),
    (
        "defog.summary.json",
        include_str!("../../../evals/results/defog.summary.json"),
    ),
    (
        "demo-ask.summary.json",
        include_str!("../../../evals/results/demo-ask.summary.json"),
    ),
    (
        "demo-examples.summary.json",
        include_str!("../../../evals/results/demo-examples.summary.json"),
    ),
    (
        "demo-serve.summary.json",
        include_str!("../../../evals/results/demo-serve.summary.json"),
    ),
    (
        "demo.summary.json",
        include_str!("../../../evals/results/demo.summary.json"),
    ),
    (
        "spider-ask.summary.json",
        include_str!("../../../evals/results/spider-ask.summary.json"),
    ),
    (
        "spider-examples.summary.json",
        include_str!("../../../evals/results/spider-examples.summary.json"),
    ),
    (
        "spider-mysql.summary.json",
        include_str!("../../../evals/results/spider-mysql.summary.json"),
    ),
    (
        "spider-report-ask.summary.json",
        include_str!("../../../evals/results/spider-report-ask.summary.json"),
    ),
    (
        "spider-report-examples.summary.json",
        include_str!("../../../evals/results/spider-report-examples.summary.json"),
    ),
    (
        "spider-report-mysql.summary.json",
        include_str!("../../../evals/results/spider-report-mysql.summary.json"),
    ),
    (
        "spider-report-serve.summary.json",
        include_str!("../../../evals/results/spider-report-serve.summary.json"),
    ),
    (
        "spider-report.summary.json",
        include_str!("../../../evals/results/spider-report.summary.json"),
    ),
    (
        "spider.summary.json",
        include_str!("../../../evals/results/spider.summary.json"),
    ),
];
