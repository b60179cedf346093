//! The per-user side of `askdb serve` (decision 0076): for each policy its users have, a
//! gate narrowed once at start ([`Gate::narrowed`]), an agent over that gate once a model
//! is ready, a rate limiter at the policy's own pace (per user), and what each of its
//! users has spent against the policy's share of the spend cap. A request is served
//! through the view of the user it signed in as; a user whose policy was not loaded at
//! start (added since) is refused, never served through the wider gate.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use super::access::SignedIn;
use super::error::AppError;
use super::limits::RateLimiter;
use crate::agent::{Agent, AgentError};
use crate::gate::{Gate, PolicyError, UserPolicy};
use crate::llm::ModelClient;

/// One policy, ready to serve its users.
pub struct Policed {
    pub name: String,
    pub gate: Gate,
    /// The policy's own pace per user; None: the server's.
    rate: Option<RateLimiter<String>>,
    /// The share of the spend cap each of its users may spend.
    spend_share: Option<f64>,
    /// Dollars each user of this policy spent since the server started.
    spent: Mutex<HashMap<String, f64>>,
}

/// Every policy of the server's users, and their agents.
#[derive(Default)]
pub struct Team {
    by_policy: BTreeMap<String, Policed>,
    /// Replaced whole when a model becomes ready (the local model).
    agents: RwLock<BTreeMap<String, Arc<Agent>>>,
}

impl Team {
    /// Narrows `gate` by each policy, once. `asks_per_minute` is the server's; `spend_cap`
    /// the model's cap when a model is configured (None: no model, so no share to check).
    pub fn build(
        gate: &Gate,
        policies: &BTreeMap<String, UserPolicy>,
        asks_per_minute: u32,
        spend_cap: Option<Option<f64>>,
    ) -> Result<Team, PolicyError> {
        let mut by_policy = BTreeMap::new();
        for (name, policy) in policies {
            let narrowed = gate.narrowed(name, policy)?;
            if let Some(cap) = spend_cap {
                policy.check_server_limits(name, asks_per_minute, cap)?;
            } else {
                policy.check_server_limits(name, asks_per_minute, Some(f64::INFINITY))?;
            }
            by_policy.insert(
                name.clone(),
                Policed {
                    name: name.clone(),
                    gate: narrowed,
                    rate: policy.asks_per_minute.map(RateLimiter::new),
                    spend_share: policy.spend_share,
                    spent: Mutex::new(HashMap::new()),
                },
            );
        }
        Ok(Team {
            by_policy,
            agents: RwLock::new(BTreeMap::new()),
        })
    }

    /// Builds one agent per policy over its narrowed gate (the schema cards and index
    /// the policy's users see), replacing any built before. They use no verified
    /// examples: the examples' recheck sets aside, for every user, what fails the gate
    /// it runs through, and a narrowed gate would set aside what only this policy hides.
    pub async fn build_agents(&self, client: &ModelClient) -> Result<(), AgentError> {
        let mut agents = BTreeMap::new();
        for (name, policed) in &self.by_policy {
            let agent = Agent::new(policed.gate.clone(), client.clone()).await?;
            agents.insert(name.clone(), Arc::new(agent));
        }
        match self.agents.write() {
            Ok(mut slot) => *slot = agents,
            Err(poisoned) => *poisoned.into_inner() = agents,
        }
        Ok(())
    }

    /// The policy a signed-in user is served under: None for no user or a user without
    /// a policy (the notes alone); Err for a policy this server did not load (added
    /// since, or unreadable at start with shared users): such a user is refused, never
    /// served under the notes alone, which would be wider than the policy.
    pub fn policed(&self, user: Option<&SignedIn>) -> Result<Option<&Policed>, AppError> {
        let Some(SignedIn {
            name,
            policy: Some(policy),
        }) = user
        else {
            return Ok(None);
        };
        self.by_policy
            .get(policy)
            .map(Some)
            .ok_or_else(|| AppError::PolicyNotLoaded {
                user: name.clone(),
                policy: policy.clone(),
            })
    }

    /// A loaded policy by its name.
    pub fn policed_by_name(&self, policy: Option<&str>) -> Option<&Policed> {
        self.by_policy.get(policy?)
    }

    /// The agent of a policy, once a model is ready.
    pub fn agent(&self, policy: &str) -> Option<Arc<Agent>> {
        let agents = match self.agents.read() {
            Ok(agents) => agents,
            Err(poisoned) => poisoned.into_inner(),
        };
        agents.get(policy).cloned()
    }
}

impl Policed {
    /// Takes a question from `user`'s budget under this policy: its own pace, then its
    /// share of `cap` (what the user spent so far must be below it).
    pub fn admit(&self, user: &str, cap: Option<f64>, now: Instant) -> Result<(), AppError> {
        if let Some(rate) = &self.rate {
            rate.check(user.to_string(), now)
                .map_err(|retry_after| AppError::RateLimited { retry_after })?;
        }
        if let (Some(share), Some(cap)) = (self.spend_share, cap) {
            let spent = self.spent_by(user);
            if spent >= share * cap {
                return Err(AppError::SpendCapReached);
            }
        }
        Ok(())
    }

    /// Adds what a question of `user` cost.
    pub fn record_spend(&self, user: &str, cost_usd: f64) {
        if !cost_usd.is_finite() || cost_usd <= 0.0 {
            return;
        }
        let mut spent = self
            .spent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *spent.entry(user.to_string()).or_default() += cost_usd;
    }

    fn spent_by(&self, user: &str) -> f64 {
        let spent = self
            .spent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        spent.get(user).copied().unwrap_or(0.0)
    }
}
