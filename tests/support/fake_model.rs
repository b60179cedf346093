//! A small OpenAI-compatible model server for fault tests: it answers every chat
//! completion with one fixed reply, or accepts requests and never answers, and it can
//! be killed (listener and every open connection dropped at once) and started again on
//! the same port. It counts the chat completions it received, so a test can tell whether
//! askdb made a model call; any other path (llama.cpp's `/tokenize`, which askdb may ask
//! to count tokens, and which is not a model call) is answered 404 and not counted.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Every request gets this text as the assistant's reply.
    Answer(String),
    /// Read the request, then hold the connection open without a byte of reply.
    Hang,
}

pub struct FakeModel {
    pub port: u16,
    behaviour: Arc<Mutex<Behaviour>>,
    received: Arc<AtomicUsize>,
    /// Held requests whose client closed the connection: on llama.cpp's server a closed
    /// connection is what cancels the generation.
    abandoned: Arc<AtomicUsize>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl FakeModel {
    pub async fn start(behaviour: Behaviour) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let model = FakeModel {
            port,
            behaviour: Arc::new(Mutex::new(behaviour)),
            received: Arc::default(),
            abandoned: Arc::default(),
            tasks: Arc::default(),
        };
        model.serve(listener);
        model
    }

    /// The API root askdb is given (`ASKDB_BASE_URL`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Chat completions received so far (each is one model call attempt).
    pub fn received(&self) -> usize {
        self.received.load(Ordering::SeqCst)
    }

    /// Held requests the client gave up on by closing the connection.
    pub fn abandoned(&self) -> usize {
        self.abandoned.load(Ordering::SeqCst)
    }

    pub fn set(&self, behaviour: Behaviour) {
        if let Ok(mut current) = self.behaviour.lock() {
            *current = behaviour;
        }
    }

    /// Kills the server: the listener and every connection go at once, as when the
    /// process dies (clients see their connections closed, then refused).
    pub fn kill(&self) {
        if let Ok(mut tasks) = self.tasks.lock() {
            for task in tasks.drain(..) {
                task.abort();
            }
        }
    }

    /// Starts it again on the same port.
    pub async fn restart(&self) {
        let mut last_error = None;
        for _ in 0..50 {
            match TcpListener::bind(("127.0.0.1", self.port)).await {
                Ok(listener) => {
                    self.serve(listener);
                    return;
                }
                Err(error) => {
                    last_error = Some(error);
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
        panic!("cannot listen on port {} again: {last_error:?}", self.port);
    }

    fn serve(&self, listener: TcpListener) {
        let behaviour = Arc::clone(&self.behaviour);
        let received = Arc::clone(&self.received);
        let abandoned = Arc::clone(&self.abandoned);
        let tasks = Arc::clone(&self.tasks);
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let behaviour = Arc::clone(&behaviour);
                let received = Arc::clone(&received);
                let abandoned = Arc::clone(&abandoned);
                let connection = tokio::spawn(async move {
                    let _ = answer(stream, behaviour, received, abandoned).await;
                });
                if let Ok(mut list) = tasks.lock() {
                    list.push(connection);
                }
            }
        });
        if let Ok(mut list) = self.tasks.lock() {
            list.push(accept);
        }
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn answer(
    mut stream: TcpStream,
    behaviour: Arc<Mutex<Behaviour>>,
    received: Arc<AtomicUsize>,
    abandoned: Arc<AtomicUsize>,
) -> std::io::Result<()> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..read]);
        if let Some(position) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break position + 4;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    while buffer.len() < header_end + length {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let path = head
        .lines()
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .unwrap_or_default()
        .to_string();
    if !path.ends_with("/chat/completions") {
        let response = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
        stream.write_all(response.as_bytes()).await?;
        return stream.shutdown().await;
    }
    received.fetch_add(1, Ordering::SeqCst);
    let current = behaviour
        .lock()
        .map(|behaviour| behaviour.clone())
        .unwrap_or(Behaviour::Hang);
    match current {
        Behaviour::Hang => {
            // Until killed (the task is aborted) or the client gives up.
            loop {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => {
                        abandoned.fetch_add(1, Ordering::SeqCst);
                        return Ok(());
                    }
                    Ok(_) => {}
                }
            }
        }
        Behaviour::Answer(text) => {
            let body = json!({
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 1_741_569_952,
                "model": "fake-model",
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop"
                }],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
            })
            .to_string();
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(response.as_bytes()).await?;
            stream.shutdown().await
        }
    }
}
