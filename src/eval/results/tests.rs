//! The committed results and the documents generated from them, held to each other.

use super::*;

/// A copy of the repository's documents and committed results in a temporary folder,
/// for publishing into without touching the checkout.
pub(crate) fn scratch_repo() -> tempfile::TempDir {
    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("dir");
        for entry in std::fs::read_dir(from).expect("readable") {
            let path = entry.expect("entry").path();
            let name = path.file_name().expect("name");
            let target = to.join(name);
            if path.is_dir() && name == "runs" {
                // A checkout's own evaluation runs: not part of the documents.
                continue;
            } else if path.is_dir() {
                copy_tree(&path, &target);
            } else {
                std::fs::copy(&path, &target).expect("copied");
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = tempfile::tempdir().expect("temp dir");
    for dir in ["evals", "benches/results", "docs"] {
        copy_tree(&root.join(dir), &repo.path().join(dir));
    }
    std::fs::copy(root.join("README.md"), repo.path().join("README.md")).expect("readme");
    repo
}

/// Compares a document with its blocks regenerated from the committed files;
/// `ASKDB_UPDATE_SNAPSHOTS=1` rewrites it instead (after a bench, a script or a change
/// of layout wrote new figures).
fn assert_generated(document: &str, blocks: &[(&str, String)], how: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(document);
    let text = std::fs::read_to_string(&path).expect("document readable");
    let expected = replace_blocks(&text, blocks).expect("document has every block's markers");
    if std::env::var("ASKDB_UPDATE_SNAPSHOTS").is_ok_and(|value| value == "1") {
        std::fs::write(&path, &expected).expect("document written");
        return;
    }
    assert!(
        text == expected,
        "{document} differs from the committed results: {how}"
    );
}

#[test]
fn the_readme_results_table_is_generated_from_the_published_summaries() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert_generated(
        "README.md",
        &readme_blocks(root).expect("published summaries parse"),
        "run `askdb eval publish RUN`",
    );
}

#[test]
fn the_measured_document_is_generated_from_the_committed_results() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert_generated(
        MEASURED_DOC,
        &measured_blocks(root).expect("every result file parses"),
        "run `askdb eval publish RUN` or `askdb eval guard --write`, or after a bench \
         wrote benches/results/, `ASKDB_UPDATE_SNAPSHOTS=1 cargo test --lib eval::results`",
    );
}

#[test]
fn every_run_figures_file_is_in_the_measured_document() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let table =
        run_figures_block(&root.join(RESULTS_DIR).join("run-figures")).expect("run figures parse");
    for entry in std::fs::read_dir(root.join(RESULTS_DIR).join("run-figures"))
        .expect("run-figures exists")
        .filter_map(|entry| entry.ok())
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(
            table.contains(&format!("`{name}`")),
            "{name} is in the table"
        );
    }
}

#[test]
fn every_published_summary_is_embedded_in_the_binary() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(RESULTS_DIR);
    let mut published: Vec<String> = std::fs::read_dir(&dir)
        .expect("evals/results exists")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".summary.json"))
        .collect();
    published.sort();
    let embedded: Vec<&str> = EMBEDDED_SUMMARIES.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        published, embedded,
        "add the new summary to EMBEDDED_SUMMARIES"
    );
    for (name, text) in EMBEDDED_SUMMARIES {
        let on_disk = std::fs::read_to_string(dir.join(name)).expect("summary readable");
        assert_eq!(on_disk, text, "{name} is embedded as it is committed");
    }
}

#[test]
fn replace_block_keeps_the_markers_and_the_rest() {
    let doc = "a\n<!-- b -->\nold\n<!-- e -->\nz\n";
    let new = replace_block(doc, "<!-- b -->", "<!-- e -->", "new\n").expect("markers present");
    assert_eq!(new, "a\n<!-- b -->\nnew\n<!-- e -->\nz\n");
    assert!(replace_block("no markers", "<!-- b -->", "<!-- e -->", "x").is_err());
}

#[test]
fn the_committed_guard_results_have_no_discrepancy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let results: GuardResults = read_json(&root.join(GUARD_RESULTS)).expect("guard results parse");
    for report in &results.reports {
        assert!(
            report.discrepancies.is_empty(),
            "{} has discrepancies",
            report.set
        );
    }
}

#[test]
fn bench_reports_sit_under_the_document_headings() {
    let dir = std::env::temp_dir().join(format!("askdb-bench-block-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("x.md"), "# Title\n\ntext\n## Part\n").expect("written");
    let block = bench_report_block(&dir, "x.md").expect("block");
    assert_eq!(
        block,
        "From `benches/results/x.md`:\n\n### Title\n\ntext\n#### Part\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_published_run_never_carries_its_database_password() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("evals/results/spider.summary.json")).expect("read"),
    )
    .expect("a summary");
    summary["settings"]["db"] = serde_json::json!("mysql://root:pw0rd-x@127.0.0.1:3306/");
    let run = tempfile::tempdir().expect("run folder");
    std::fs::write(run.path().join("summary.json"), summary.to_string()).expect("written");
    std::fs::write(
        run.path().join("report.md"),
        "asked on mysql://root:pw0rd-x@127.0.0.1:3306/\n",
    )
    .expect("written");
    let repo = scratch_repo();
    let written = publish_run(run.path(), repo.path()).expect("published");
    assert!(
        written.ends_with("spider-mysql.summary.json"),
        "{}",
        written.display()
    );
    let published = std::fs::read_to_string(&written).expect("read");
    assert!(!published.contains("pw0rd"), "{published}");
    assert!(
        published.contains("mysql://root:***@127.0.0.1:3306/"),
        "{published}"
    );
    let report =
        std::fs::read_to_string(written.with_file_name("spider-mysql.report.md")).expect("report");
    assert!(!report.contains("pw0rd"), "{report}");
    let readme = std::fs::read_to_string(repo.path().join("README.md")).expect("readme");
    assert!(readme.contains("on MariaDB copies of the databases"));
}
