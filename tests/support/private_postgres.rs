//! A PostgreSQL server of a test's own: `initdb` into a temporary folder, started with
//! `pg_ctl` on a free loopback port with trust authentication, restarted or stopped
//! by the test, and removed when dropped. The machine's shared server is never touched,
//! so a test may restart this one while other work uses that one.
//!
//! PostgreSQL refuses to run as root, so under root the folder is given to the
//! `postgres` OS user and the tools run through `runuser -u postgres`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

pub struct PrivatePostgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    pub port: u16,
    as_postgres: bool,
}

/// The newest PostgreSQL bin folder with initdb and pg_ctl, or None.
fn find_bin() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
        .collect();
    // Versions are folder names; the longest then largest name is the newest.
    candidates.sort_by_key(|path| (path.as_os_str().len(), path.clone()));
    candidates.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

impl PrivatePostgres {
    /// Starts a fresh server, or says why it cannot (no initdb, no postgres user).
    pub fn start() -> Result<PrivatePostgres, String> {
        let bin = find_bin().ok_or("no initdb/pg_ctl under /usr/lib/postgresql/*/bin")?;
        let as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("askdb-private-pg-")
            .tempdir()
            .map_err(|error| format!("temp dir: {error}"))?;
        if as_postgres {
            let chown = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(dir.path())
                .output()
                .map_err(|error| format!("chown: {error}"))?;
            if !chown.status.success() {
                return Err(format!(
                    "cannot give the folder to the postgres user: {}",
                    String::from_utf8_lossy(&chown.stderr)
                ));
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .map_err(|error| format!("no free port: {error}"))?;
        let server = PrivatePostgres {
            bin,
            dir,
            port,
            as_postgres,
        };
        let data = server.data();
        server.run_checked(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        let options = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c full_page_writes=off -c max_connections=40",
            server.dir.path().display()
        );
        let log = server.dir.path().join("server.log").display().to_string();
        server.run_checked(
            "pg_ctl",
            &[
                "-D", &data, "-l", &log, "-o", &options, "-w", "-t", "60", "start",
            ],
        )?;
        Ok(server)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn run(&self, tool: &str, args: &[&str]) -> std::io::Result<Output> {
        let program = self.bin.join(tool);
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&program);
            command
        } else {
            Command::new(&program)
        };
        // Run from a folder the postgres user can read.
        command
            .args(args)
            .current_dir(self.dir.path())
            .stdin(std::process::Stdio::null())
            .output()
    }

    fn run_checked(&self, tool: &str, args: &[&str]) -> Result<(), String> {
        let output = self
            .run(tool, args)
            .map_err(|error| format!("{tool}: {error}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{tool} {}: {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }

    /// The superuser's URL.
    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A fast restart (sessions are terminated, as when an operator restarts the
    /// server); returns once the server accepts connections again.
    pub fn restart(&self) -> Result<(), String> {
        let data = self.data();
        // The log file again: without it the new server would hold pg_ctl's output
        // pipes open and the restart would never seem to finish.
        let log = self.dir.path().join("server.log").display().to_string();
        self.run_checked(
            "pg_ctl",
            &[
                "-D", &data, "-l", &log, "-m", "fast", "-w", "-t", "60", "restart",
            ],
        )
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self.run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
        // Give the postmaster a moment to release its files before the folder goes.
        std::thread::sleep(Duration::from_millis(100));
    }
}
