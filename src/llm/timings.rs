//! The model server's own clock for a call (llama.cpp's `timings`): prompt tokens read
//! and tokens written, each with its milliseconds, and the speeds read off them.

use serde::{Deserialize, Serialize};

/// What the model server says it spent on a call, by its own clock: the prompt tokens it
/// read (the ones its cache did not hold) and the tokens it generated, each with the
/// milliseconds they took. Two runs whose latencies differ can then be told apart: a
/// slower machine takes longer per token, a different prompt or reply has other counts.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerTimings {
    pub prompt_tokens_read: u64,
    pub prompt_ms: f64,
    pub generated_tokens: u64,
    pub generation_ms: f64,
    /// Of the generated tokens and milliseconds, those of calls that wrote one reply.
    /// Sampled candidates are decoded side by side, and on a few CPU cores each step of
    /// five replies takes several times one reply's, so the machine's speed is read from
    /// one-reply calls alone.
    #[serde(default)]
    pub one_reply_generated_tokens: u64,
    #[serde(default)]
    pub one_reply_generation_ms: f64,
}

impl ServerTimings {
    /// The sum of two calls' timings (a question's calls, a run's questions).
    pub fn plus(self, other: ServerTimings) -> ServerTimings {
        ServerTimings {
            prompt_tokens_read: self.prompt_tokens_read + other.prompt_tokens_read,
            prompt_ms: self.prompt_ms + other.prompt_ms,
            generated_tokens: self.generated_tokens + other.generated_tokens,
            generation_ms: self.generation_ms + other.generation_ms,
            one_reply_generated_tokens: self.one_reply_generated_tokens
                + other.one_reply_generated_tokens,
            one_reply_generation_ms: self.one_reply_generation_ms + other.one_reply_generation_ms,
        }
    }

    /// The sum over `timings`, or None when none was reported.
    pub fn total(timings: impl IntoIterator<Item = ServerTimings>) -> Option<ServerTimings> {
        timings.into_iter().reduce(ServerTimings::plus)
    }

    /// Milliseconds the server took per token in calls that wrote one reply (None
    /// without any): the machine's speed, comparable between runs whatever share of
    /// their questions sampled candidates.
    pub fn ms_per_generated_token(&self) -> Option<f64> {
        (self.one_reply_generated_tokens > 0)
            .then(|| self.one_reply_generation_ms / self.one_reply_generated_tokens as f64)
    }

    /// Milliseconds a step of calls that decoded several replies side by side (sampled
    /// candidates; llama.cpp counts the steps of the first reply): beside
    /// [`ServerTimings::ms_per_generated_token`], what a vote costs a token here. None
    /// without such calls, and without any one-reply call: every question's first call
    /// is one greedy reply, so timings with none were recorded before the two were told
    /// apart.
    pub fn ms_per_side_by_side_step(&self) -> Option<f64> {
        let steps = self
            .generated_tokens
            .saturating_sub(self.one_reply_generated_tokens);
        (steps > 0 && self.one_reply_generated_tokens > 0)
            .then(|| (self.generation_ms - self.one_reply_generation_ms).max(0.0) / steps as f64)
    }

    /// Milliseconds the server took per prompt token it read (None without any).
    pub fn ms_per_prompt_token(&self) -> Option<f64> {
        (self.prompt_tokens_read > 0).then(|| self.prompt_ms / self.prompt_tokens_read as f64)
    }
}
