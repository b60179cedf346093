//! Where askdb keeps its files: the data directory (`ASKDB_HOME` overrides it) and the
//! location of the external benchmark data shared beside the project.

use std::path::{Path, PathBuf};

/// askdb's data directory: `$ASKDB_HOME` when set, else `$XDG_DATA_HOME/askdb`, else
/// `$HOME/.local/share/askdb`, else `./.askdb-home` as a last resort.
pub fn data_dir() -> PathBuf {
    if let Some(dir) = non_empty_env("ASKDB_HOME") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = non_empty_env("XDG_DATA_HOME") {
        return Path::new(&dir).join("askdb");
    }
    if let Some(home) = non_empty_env("HOME") {
        return Path::new(&home).join(".local").join("share").join("askdb");
    }
    PathBuf::from(".askdb-home")
}

/// The external benchmark data was not where askdb looked.
#[derive(Debug, thiserror::Error)]
#[error("external data not found at {}: run scripts/fetch-data.sh, or set ASKDB_SHARED_DATA", .0.display())]
pub struct SharedDataMissing(pub PathBuf);

/// The external data folder: `$ASKDB_SHARED_DATA` when set, else `../shared/data` from
/// the working directory (the repository's root, where the evaluation commands and the
/// tests run). A runtime path, never the source tree the binary was built from.
pub fn shared_data_dir() -> Result<PathBuf, SharedDataMissing> {
    let dir = match non_empty_env("ASKDB_SHARED_DATA") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new("..").join("shared").join("data"),
    };
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(SharedDataMissing(dir))
    }
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}
