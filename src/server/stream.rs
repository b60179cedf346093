//! `POST /api/ask/stream`: the same question as `POST /api/ask` (same body, same checks,
//! same 4xx/503 answers before anything runs), answered as server-sent events while the
//! agent works:
//!
//! - `event: step`, one per [`AgentEvent`] as it happens: the event's JSON (`step`,
//!   `started_ms`, `elapsed_ms` where the step has one, its fields) with `summary`, the
//!   sentence [`super::steps::summary`] writes; a model call's prompt is left out;
//! - then exactly one of `event: result`, the same JSON `POST /api/ask` returns, or
//!   `event: error`, `{"error", "detail", "status"}`: what `POST /api/ask` would have
//!   answered with that status (the stream's own status is already 200 by then).
//!
//! The agent runs on its own task so that events flow while it works; when the client
//! goes away the stream is dropped and the task is aborted, as a dropped `POST /api/ask`
//! stops its agent.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_core::Stream;
use serde_json::json;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;

use super::access::SignedIn;
use super::api::{prepare_ask, run_ask, AskRequest, ClientIp};
use super::error::{ApiJson, AppError};
use super::steps;
use super::AppState;
use crate::agent::events::{AgentEvent, Observer};

/// Sends each event to the stream as it happens. Never blocks: the channel is
/// unbounded, and a client that is gone only makes the send fail.
struct Forward(UnboundedSender<Event>);

impl Observer for Forward {
    fn observe(&self, event: &AgentEvent) {
        let _ = self.0.send(step_event(event));
    }
}

fn step_event(event: &AgentEvent) -> Event {
    Event::default()
        .event("step")
        .data(steps::stream_json(event).to_string())
}

/// The `error` event: the body `POST /api/ask` would have sent, and its status.
fn error_event(error: &AppError) -> Event {
    error.log();
    let body = json!({
        "error": error.code(),
        "detail": error.detail(),
        "status": error.status().as_u16(),
    });
    Event::default().event("error").data(body.to_string())
}

/// The events, in order, until the agent's task ends; aborts the task when dropped.
struct Events {
    receiver: UnboundedReceiver<Event>,
    task: JoinHandle<()>,
}

impl Stream for Events {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.receiver.poll_recv(context).map(|event| event.map(Ok))
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// POST /api/ask/stream.
pub async fn ask_stream(
    State(state): State<AppState>,
    ClientIp(client): ClientIp,
    user: Option<Extension<SignedIn>>,
    ApiJson(request): ApiJson<AskRequest>,
) -> Result<Response, AppError> {
    let mut prepared = prepare_ask(&state, client, user, &request).await?;
    let (sender, receiver) = unbounded_channel();
    let task = tokio::spawn(async move {
        let observer = Forward(sender.clone());
        let last = match run_ask(&state, &mut prepared, &observer).await {
            Ok(result) => match serde_json::to_string(&result) {
                Ok(text) => Event::default().event("result").data(text),
                Err(error) => error_event(&AppError::Internal(format!("result: {error}"))),
            },
            Err(error) => error_event(&error),
        };
        let _ = sender.send(last);
        // The slot is given back here, when `prepared` goes, after the last event.
        drop(prepared);
    });
    let events = Events { receiver, task };
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response())
}
