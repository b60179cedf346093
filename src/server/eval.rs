//! The latest committed evaluation summary for GET /api/eval: with `--eval-dir`, every
//! `*summary.json` below that folder; without it, the summaries built into the binary
//! when it was built. Below a folder, (`askdb eval publish` writes `<set>.summary.json`; a run
//! folder holds `summary.json`), the newest by its `generated_at` field, then by path. The file is served as the harness wrote it, byte
//! for byte, so the page shows exactly what is committed.

use std::path::{Path, PathBuf};

/// Folders deeper than this are not searched (runs sit a level or two down).
const MAX_DEPTH: usize = 6;

/// One summary file found.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryFile {
    /// Relative to the results folder, with `/` separators.
    pub relative_path: String,
    pub generated_at: String,
    pub bytes: Vec<u8>,
}

/// `summary.json` inside a run folder, `<set>.summary.json` as `askdb eval publish`
/// writes it.
fn is_summary_name(name: &str) -> bool {
    name.ends_with("summary.json")
}

fn collect(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        // Symbolic links are not followed: the folder is the project's own files.
        if kind.is_dir() {
            collect(&path, depth + 1, found);
        } else if kind.is_file()
            && path
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(is_summary_name)
        {
            found.push(path);
        }
    }
}

/// The newest summary below `dir`, or None when there is none (or no folder).
/// Files that are not JSON objects are skipped with a note on stderr.
pub fn latest_summary(dir: &Path) -> Option<SummaryFile> {
    let mut paths = Vec::new();
    collect(dir, 0, &mut paths);
    let candidates = paths.into_iter().filter_map(|path| {
        let bytes = std::fs::read(&path).ok()?;
        let relative_path = path
            .strip_prefix(dir)
            .unwrap_or(&path)
            .components()
            .map(|part| part.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        Some((relative_path, bytes))
    });
    newest(candidates)
}

/// The newest of the summaries built into the binary
/// ([`crate::eval::results::EMBEDDED_SUMMARIES`]): what an installed `askdb serve`
/// shows when no `--eval-dir` is given.
pub fn latest_embedded_summary() -> Option<SummaryFile> {
    newest(
        crate::eval::results::EMBEDDED_SUMMARIES
            .iter()
            .map(|(name, text)| (format!("evals/results/{name}"), text.as_bytes().to_vec())),
    )
}

/// The newest by `generated_at`, then by path, of (path, bytes) candidates.
fn newest(candidates: impl Iterator<Item = (String, Vec<u8>)>) -> Option<SummaryFile> {
    let mut best: Option<SummaryFile> = None;
    for (relative_path, bytes) in candidates {
        let value: serde_json::Value = match serde_json::from_slice(&bytes) {
            Ok(value @ serde_json::Value::Object(_)) => value,
            _ => {
                eprintln!("askdb serve: skipping {relative_path}: not a JSON object");
                continue;
            }
        };
        // "2026-11-29 20:24:06" and "2026-11-29T20:24:06Z" compare alike once the T is
        // a space.
        let generated_at = value
            .get("generated_at")
            .and_then(|stamp| stamp.as_str())
            .unwrap_or_default()
            .replace('T', " ");
        let candidate = SummaryFile {
            relative_path,
            generated_at,
            bytes,
        };
        let newer = match &best {
            None => true,
            Some(current) => {
                (&candidate.generated_at, &candidate.relative_path)
                    > (&current.generated_at, &current.relative_path)
            }
        };
        if newer {
            best = Some(candidate);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, relative: &str, text: &str) {
        let path = dir.join(relative);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn the_newest_summary_by_generated_at_wins_and_comes_back_verbatim() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        assert_eq!(latest_summary(root), None);
        assert_eq!(latest_summary(&root.join("missing")), None);
        write(
            root,
            "demo/run-b/summary.json",
            r#"{"set": "demo", "generated_at": "2026-11-29 10:00:00"}"#,
        );
        let newest = "{\n  \"set\": \"chinook\",   \"generated_at\": \"2026-11-30T09:00:00Z\"\n}\n";
        write(root, "chinook/run-a/summary.json", newest);
        write(
            root,
            "demo.summary.json",
            r#"{"set": "demo", "generated_at": "2026-11-30 08:00:00"}"#,
        );
        write(
            root,
            "guard_equivalence.json",
            r#"{"generated_at": "2099-01-01"}"#,
        );
        write(root, "broken/summary.json", "not json");
        let found = latest_summary(root).expect("found");
        assert_eq!(found.relative_path, "chinook/run-a/summary.json");
        assert_eq!(found.bytes, newest.as_bytes());
        write(
            root,
            "spider.summary.json",
            r#"{"set": "spider", "generated_at": "2026-12-01 08:00:00"}"#,
        );
        let found = latest_summary(root).expect("found");
        assert_eq!(found.relative_path, "spider.summary.json");
    }

    #[test]
    fn without_a_folder_the_summaries_built_into_the_binary_are_served() {
        let found = latest_embedded_summary().expect("summaries are embedded");
        assert!(found.relative_path.starts_with("evals/results/"));
        let value: serde_json::Value = serde_json::from_slice(&found.bytes).expect("JSON");
        assert!(value.get("modes").is_some(), "a run summary");
    }
}
