//! `askdb serve` started as a user starts it, for the integration tests that talk to it
//! over HTTP or through a browser: a free port, its own data directory (also its working
//! directory, outside the source tree), only the askdb/model variables a test gives,
//! stderr kept for failure messages.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// `askdb serve` on a free port with its own data directory; killed on drop.
pub struct Server {
    child: Child,
    pub url: String,
    stderr: Arc<Mutex<String>>,
    _home: tempfile::TempDir,
}

impl Server {
    /// Starts the binary with only the given askdb/model/tracing variables: the
    /// developer's own ASKDB_*, OPENAI_*, ANTHROPIC_* and OTEL_* settings are removed.
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Server {
        let home = tempfile::tempdir().expect("temp dir");
        let mut command = Command::new(env!("CARGO_BIN_EXE_askdb"));
        for (name, _) in std::env::vars_os() {
            let Some(name) = name.to_str() else { continue };
            if ["ASKDB_", "OPENAI_", "ANTHROPIC_", "OTEL_"]
                .iter()
                .any(|prefix| name.starts_with(prefix))
            {
                command.env_remove(name);
            }
        }
        // Run from a folder outside the source tree, as an installed binary runs: the
        // server must find everything it serves in itself or its data directory.
        command
            .env("ASKDB_HOME", home.path())
            .current_dir(home.path())
            .arg("serve");
        // A free port on loopback, unless the test is about the address.
        if !args.contains(&"--addr") {
            command.args(["--addr", "127.0.0.1:0"]);
        }
        // The warm-up call would take a scripted reply or count as a fake model's call;
        // a test that is about the warm-up asks for it.
        if !args.contains(&"--warm-up") {
            command.args(["--warm-up", "false"]);
        }
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("askdb starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("stderr");
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(read) = err.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                if let Ok(mut text) = sink.lock() {
                    text.push_str(&String::from_utf8_lossy(&buffer[..read]));
                }
            }
        });
        let stdout = child.stdout.take().expect("stdout");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        let url = loop {
            match receiver.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    if let Some(url) = line.strip_prefix("askdb serve: listening on ") {
                        break url.trim().trim_end_matches('/').to_string();
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    panic!(
                        "askdb serve printed no address; stderr: {}",
                        stderr.lock().map(|text| text.clone()).unwrap_or_default()
                    );
                }
            }
        };
        Server {
            child,
            url,
            stderr,
            _home: home,
        }
    }

    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM, as a service manager stopping the server would.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM failed: {status}");
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The exit status once the process has ended, or None if it is still running
    /// after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let started = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if started.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's log once it contains `needle`, or as it stands after `limit`: a
    /// line is written while the response is already on its way, so a test that reads
    /// the log right after a response can see half a line.
    pub fn log_containing(&self, needle: &str, limit: Duration) -> String {
        let started = std::time::Instant::now();
        loop {
            let log = self.log();
            if log.contains(needle) || started.elapsed() > limit {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        self.stderr
            .lock()
            .map(|text| text.clone())
            .unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The HTTP client the tests talk to a server with: a minute per request.
pub fn http_client() -> reqwest::Client {
    askdb::llm::install_tls_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

/// GET `url`: the status and the JSON body (null when it is not JSON); panics when no
/// answer comes.
pub async fn get_json(
    http: &reqwest::Client,
    url: &str,
) -> (reqwest::StatusCode, serde_json::Value) {
    let response = http
        .get(url)
        .send()
        .await
        .unwrap_or_else(|error| panic!("GET {url} got no answer: {error}"));
    let status = response.status();
    (
        status,
        response.json().await.unwrap_or(serde_json::Value::Null),
    )
}

/// POST `body` as JSON to `url`: the status and the JSON body (null when it is not
/// JSON); panics when no answer comes.
pub async fn post_json(
    http: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
) -> (reqwest::StatusCode, serde_json::Value) {
    let response = http
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap_or_else(|error| panic!("POST {url} got no answer: {error}"));
    let status = response.status();
    (
        status,
        response.json().await.unwrap_or(serde_json::Value::Null),
    )
}

/// `127.0.0.1:PORT` where nothing listens: a port the system just handed out and took
/// back (a collector that is down, for the tests that must not depend on one).
pub fn closed_port_address() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address")
}
