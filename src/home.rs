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

/// The external data folder (`../shared/data` from the project root), or
/// `$ASKDB_SHARED_DATA` when set. Returns a message naming the path tried when missing.
pub fn shared_data_dir() -> Result<PathBuf, String> {
    let dir = match non_empty_env("ASKDB_SHARED_DATA") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("shared")
            .join("data"),
    };
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(format!(
            "external data not found at {}: run scripts/fetch-data.sh or set ASKDB_SHARED_DATA",
            dir.display()
        ))
    }
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}
