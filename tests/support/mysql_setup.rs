//! A test's own MySQL/MariaDB database and user names for `askdb db setup`, dropped when
//! the test ends, pass or fail (users are server-wide, so every name is unique). For
//! the library's unit tests (included with `#[path]` from `src/lib.rs`). The server is
//! `ASKDB_TEST_MYSQL_URL`, else the development and CI server at 127.0.0.1:3306 as root;
//! when it cannot be reached a test says SKIPPED and passes, except under CI.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use crate::admin::{self, Password, RoleSpec, SetupOptions};
use crate::ci::skip_or_fail;

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn server_url() -> String {
    std::env::var("ASKDB_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/".to_string())
}

/// A database and two users of one test's own, dropped when it ends.
pub struct MysqlSetup {
    pub admin: String,
    pub database: String,
    pub users: [String; 2],
}

impl MysqlSetup {
    pub async fn new(test: &str) -> Option<MysqlSetup> {
        let admin = server_url();
        if let Err(error) = mysql_async::Conn::from_url(admin.as_str()).await {
            skip_or_fail(test, &format!("no MySQL server at {admin}: {error}"));
            return None;
        }
        let tag = format!(
            "{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|since| since.subsec_nanos() % 10_000)
                .unwrap_or(0)
        );
        Some(MysqlSetup {
            admin,
            database: format!("askdb_t_setup_{tag}"),
            // MySQL keeps user names to 32 characters.
            users: [format!("askdb_ro_{tag}"), format!("askdb_log_{tag}")],
        })
    }

    pub fn options(&self, passwords: Option<(&str, &str)>) -> SetupOptions {
        let spec = |name: &str, password: Option<&str>| RoleSpec {
            name: name.to_string(),
            password: password.map(Password::new),
        };
        SetupOptions {
            admin_url: self.admin.clone(),
            database: self.database.clone(),
            read_only_role: spec(&self.users[0], passwords.map(|p| p.0)),
            log_role: spec(&self.users[1], passwords.map(|p| p.1)),
            example_rls: Vec::new(),
        }
    }

    pub async fn admin(&self) -> mysql_async::Conn {
        mysql_async::Conn::from_url(format!("{}{}", self.admin, self.database).as_str())
            .await
            .expect("admin connects to the test's database")
    }
}

impl Drop for MysqlSetup {
    fn drop(&mut self) {
        let admin = self.admin.clone();
        let database = self.database.clone();
        let users = self.users.clone();
        // On a thread of its own: the test's runtime may be shutting down.
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            let names: Vec<&str> = users.iter().map(String::as_str).collect();
            let _ = runtime.block_on(admin::remove_mysql_setup(&admin, &database, &names));
        })
        .join();
    }
}
