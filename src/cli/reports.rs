//! The reports commands return: each a `Serialize` value (what `--json` prints, stable)
//! with a text rendering of the same facts. Built here from library results, so the
//! binary never assembles JSON by hand.

use std::io::Write;

use serde::Serialize;

use crate::admin::SetupReport;
use crate::gate::{
    CheckedQuery, LimitAction, QueryOutcome, Refusal, RefusalReason, TableDescription, TableSummary,
};
use crate::llm::{LlmError, ModelClient, ModelReply, ProviderConfig};

/// Prints one line on stdout; a closed pipe (`| head`) ends the output quietly instead
/// of a panic.
pub fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{line}").is_err() {
        std::process::exit(0);
    }
}

pub fn tables_text(tables: &[TableSummary]) -> String {
    let rows: Vec<Vec<serde_json::Value>> = tables
        .iter()
        .map(|table| {
            vec![
                table.name.clone().into(),
                table.row_count.into(),
                table.description.clone().into(),
            ]
        })
        .collect();
    let columns = ["table", "rows", "description"].map(String::from);
    crate::text_table::render(&columns, &rows)
}

pub fn description_text(description: &TableDescription) -> String {
    let mut text = String::new();
    if !description.description.is_empty() {
        text.push_str(&format!("-- {}\n", description.description));
    }
    text.push_str(&description.create_table);
    text.push('\n');
    for column in &description.columns {
        if let Some(note) = &column.description {
            text.push_str(&format!("-- {}: {note}\n", column.name));
        }
    }
    text
}

pub fn outcome_text(outcome: &QueryOutcome) -> String {
    match outcome {
        QueryOutcome::Rows(result) => {
            let more = if result.truncated {
                " (reached the row cap; more rows may exist)"
            } else {
                ""
            };
            format!(
                "{}({} rows{more})\nran: {}\n",
                crate::text_table::render(&result.columns, &result.rows),
                result.row_count,
                result.sql
            )
        }
        QueryOutcome::Failed(error) => format!("error: {error}\nsql: {}\n", error.sql),
    }
}

/// `askdb sql check --json`: `{"ok": true, "sql", "limit", "tables"}` or
/// `{"ok": false, "reason", "message", "repairable"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SqlCheckReport {
    Accepted {
        ok: bool,
        sql: String,
        limit: LimitAction,
        tables: Vec<String>,
    },
    Refused {
        ok: bool,
        reason: RefusalReason,
        message: String,
        repairable: bool,
    },
}

impl SqlCheckReport {
    pub fn of(verdict: Result<CheckedQuery, Refusal>) -> SqlCheckReport {
        match verdict {
            Ok(checked) => SqlCheckReport::Accepted {
                ok: true,
                sql: checked.sql().to_string(),
                limit: checked.limit(),
                tables: checked.tables().to_vec(),
            },
            Err(refusal) => SqlCheckReport::Refused {
                ok: false,
                reason: refusal.reason,
                message: refusal.message,
                repairable: refusal.repairable,
            },
        }
    }

    pub fn is_ok(&self) -> bool {
        matches!(self, SqlCheckReport::Accepted { .. })
    }

    pub fn text(&self) -> String {
        match self {
            SqlCheckReport::Accepted { sql, .. } => format!("ok: {sql}\n"),
            SqlCheckReport::Refused {
                reason, message, ..
            } => format!("refused ({}): {message}\n", reason.as_str()),
        }
    }
}

/// One line of `askdb sql check --batch`: `{"ok", "reason", "sql"}`, plus `message`
/// when refused; `sql` is what would run, or the line as read when refused.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SqlCheckVerdict {
    pub ok: bool,
    pub reason: Option<RefusalReason>,
    pub sql: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl SqlCheckVerdict {
    pub fn of(line: &str, verdict: Result<CheckedQuery, Refusal>) -> SqlCheckVerdict {
        match verdict {
            Ok(checked) => SqlCheckVerdict {
                ok: true,
                reason: None,
                sql: checked.sql().to_string(),
                message: None,
            },
            Err(refusal) => SqlCheckVerdict {
                ok: false,
                reason: Some(refusal.reason),
                sql: line.to_string(),
                message: Some(refusal.message),
            },
        }
    }
}

/// One role of `askdb db setup`'s report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoleView {
    pub role: String,
    pub url: String,
    /// `generated`, or the environment variable the password came from.
    pub password_source: String,
    /// The only place a generated password is ever shown.
    pub generated_password: Option<String>,
    #[serde(skip)]
    purpose: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableRows {
    pub name: String,
    pub rows: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProofView {
    pub role: String,
    pub attempt: String,
    pub outcome: String,
}

/// One role of `askdb db setup`'s report: its URL without the password, and the
/// password itself only when setup generated it.
fn role_view(login: &crate::admin::RoleLogin, env: &str, purpose: &'static str) -> RoleView {
    RoleView {
        role: login.role.clone(),
        url: login.display_url(),
        password_source: if login.password_generated {
            "generated".to_string()
        } else {
            env.to_string()
        },
        generated_password: login
            .password_generated
            .then(|| login.password.expose().to_string()),
        purpose,
    }
}

/// `askdb db setup --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetupView {
    pub ok: bool,
    pub database: String,
    pub database_created: bool,
    pub tables: Vec<TableRows>,
    pub roles: Vec<RoleView>,
    pub proofs: Vec<ProofView>,
}

impl SetupView {
    pub fn of(report: &SetupReport) -> SetupView {
        use crate::admin::{LOG_PASSWORD_ENV, READ_ONLY_PASSWORD_ENV};
        let role = role_view;
        SetupView {
            ok: true,
            database: report.database.clone(),
            database_created: report.database_created,
            tables: report
                .tables
                .iter()
                .map(|(name, rows)| TableRows {
                    name: name.clone(),
                    rows: *rows,
                })
                .collect(),
            roles: vec![
                role(&report.read_only, READ_ONLY_PASSWORD_ENV, "--db"),
                role(&report.log, LOG_PASSWORD_ENV, "the query log"),
            ],
            proofs: report
                .proofs
                .iter()
                .map(|proof| ProofView {
                    role: proof.role.clone(),
                    attempt: proof.attempt.clone(),
                    outcome: proof.outcome.clone(),
                })
                .collect(),
        }
    }

    /// The same view with the shared state's role and proofs (PostgreSQL only).
    pub fn with_state(mut self, report: &crate::admin::StateSetupReport) -> SetupView {
        self.roles.push(role_view(
            &report.role,
            crate::admin::STATE_PASSWORD_ENV,
            "askdb serve --state-url",
        ));
        self.proofs
            .extend(report.proofs.iter().map(|proof| ProofView {
                role: proof.role.clone(),
                attempt: proof.attempt.clone(),
                outcome: proof.outcome.clone(),
            }));
        self
    }

    pub fn text(&self) -> String {
        let rows: usize = self.tables.iter().map(|table| table.rows).sum();
        let mut text = format!(
            "database {}: {}\n",
            self.database,
            if self.database_created {
                "created"
            } else {
                "already existed, refreshed"
            }
        );
        text.push_str(&format!(
            "demo tables: {} tables, {rows} rows, rebuilt from the deterministic generator\n",
            self.tables.len()
        ));
        text.push_str("query log: askdb_query_log (kept across runs)\nproofs passed:\n");
        for proof in &self.proofs {
            text.push_str(&format!(
                "  {}: {} -> {}\n",
                proof.role, proof.attempt, proof.outcome
            ));
        }
        for role in &self.roles {
            text.push_str(&format!(
                "{} URL (for {}): {}\n",
                role.role, role.purpose, role.url
            ));
            match &role.generated_password {
                Some(password) => text.push_str(&format!(
                    "  generated password for {} (shown once; store it, or set the variable and re-run): {password}\n",
                    role.role
                )),
                None => text.push_str(&format!(
                    "  password for {}: from {}\n",
                    role.role, role.password_source
                )),
            }
        }
        text
    }
}

/// `askdb model check --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCheckReport {
    pub ok: bool,
    pub provider: String,
    pub model: String,
    pub base_url: String,
    pub keys: Vec<String>,
    pub metered: bool,
    pub spend_cap_usd: Option<f64>,
    pub prices_as_of: String,
    pub cache_dir: Option<std::path::PathBuf>,
    /// The call's figures, at the top level of the JSON like the fields above.
    #[serde(flatten)]
    pub call: Option<CallView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The one call `model check` made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallView {
    pub reply: String,
    pub served_by: String,
    pub latency_ms: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub tokens_estimated: bool,
    pub cost_usd: f64,
    pub attempts: u32,
    pub from_cache: bool,
}

impl ModelCheckReport {
    pub fn of(
        config: &ProviderConfig,
        client: &ModelClient,
        outcome: &Result<ModelReply, LlmError>,
    ) -> ModelCheckReport {
        let provider = client.provider();
        ModelCheckReport {
            ok: outcome.is_ok(),
            provider: provider.name().to_string(),
            model: provider.model().to_string(),
            base_url: config.display_base_url(),
            keys: config.keys.iter().map(|key| key.to_string()).collect(),
            metered: provider.is_metered(),
            spend_cap_usd: config.spend_cap_usd,
            prices_as_of: client.prices_as_of().to_string(),
            cache_dir: config.cache_dir.clone(),
            call: outcome.as_ref().ok().map(|reply| CallView {
                reply: reply.text.clone(),
                served_by: reply.model.clone(),
                latency_ms: reply.latency.as_millis() as u64,
                input_tokens: reply.input_tokens,
                output_tokens: reply.output_tokens,
                tokens_estimated: reply.tokens_estimated,
                cost_usd: reply.cost_usd,
                attempts: reply.attempts,
                from_cache: reply.from_cache,
            }),
            error_kind: outcome.as_ref().err().map(|error| error.kind().to_string()),
            error: outcome.as_ref().err().map(|error| error.to_string()),
        }
    }

    pub fn text(&self) -> String {
        let mut text = format!("provider: {}\nmodel:    {}\n", self.provider, self.model);
        if !self.base_url.is_empty() {
            text.push_str(&format!("base URL: {}\n", self.base_url));
        }
        if !self.keys.is_empty() {
            text.push_str(&format!("keys:     {}\n", self.keys.join(", ")));
        }
        match self.spend_cap_usd {
            Some(cap) => text.push_str(&format!(
                "spend:    cap ${cap:.2}, prices as of {}\n",
                self.prices_as_of
            )),
            None => text.push_str(&format!(
                "spend:    no cap, prices as of {}\n",
                self.prices_as_of
            )),
        }
        match (&self.call, &self.error) {
            (Some(call), _) => {
                text.push_str(&format!(
                    "reply:    {:?} (from {})\n",
                    call.reply.trim(),
                    call.served_by
                ));
                text.push_str(&format!(
                    "call:     {} ms, {} input + {} output tokens{}, ${:.6}, {} attempt(s){}\n",
                    call.latency_ms,
                    call.input_tokens,
                    call.output_tokens,
                    if call.tokens_estimated {
                        " (estimated)"
                    } else {
                        ""
                    },
                    call.cost_usd,
                    call.attempts,
                    if call.from_cache {
                        ", from the cache"
                    } else {
                        ""
                    },
                ));
            }
            (None, Some(error)) => text.push_str(&format!(
                "call failed ({}): {error}\n",
                self.error_kind.as_deref().unwrap_or("unknown")
            )),
            (None, None) => {}
        }
        text
    }
}
