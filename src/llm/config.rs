//! Which model askdb talks to, from the environment, and building the provider for it.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `ASKDB_PROVIDER` | `anthropic`, `openai` (any OpenAI-compatible server), `scripted` or `none` | `none` |
//! | `ASKDB_MODEL` | model name | `claude-sonnet-4-5` / `gpt-4.1-mini` / `scripted` |
//! | `ASKDB_BASE_URL` | API root (`http://127.0.0.1:PORT/v1` for a local server) | the provider's own |
//! | `ANTHROPIC_API_KEY`, `ANTHROPIC_API_KEYS` | key, and more keys comma-separated, tried in order | |
//! | `OPENAI_API_KEY`, `OPENAI_API_KEYS` | the same for OpenAI-compatible servers (optional for local ones) | |
//! | `ASKDB_SCRIPT` | the scripted provider's JSONL file | required for `scripted` |
//! | `ASKDB_SPEND_CAP_USD` | hard cap in dollars; calls that could pass it are refused | none |
//! | `ASKDB_SPEND_LEDGER` | JSONL file that keeps the spend across runs | in memory |
//! | `ASKDB_CACHE_DIR` | on-disk reply cache | off |
//! | `ASKDB_PRICES` | a prices TOML replacing the built-in `config/prices.toml` | built in |
//! | `ASKDB_MODEL_TIMEOUT_SECS` | per-attempt timeout | 300 |
//! | `ASKDB_MODEL_MAX_ATTEMPTS` | attempts per call (key switches not counted) | 4 |
//! | `ASKDB_MODEL_METERED` | `true`/`false`: whether calls cost money | true, except OpenAI-compatible servers on loopback and scripted replies |

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::anthropic::{self, AnthropicProvider};
use super::keys::{keys_from_env, ApiKey};
use super::openai::{self, OpenAiProvider};
use super::resilience::RetryPolicy;
use super::scripted::ScriptedProvider;
use super::{LlmError, Provider};

/// The kinds of provider askdb can talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProviderKind {
    #[serde(rename = "anthropic")]
    Anthropic,
    /// Any OpenAI-compatible chat-completions server.
    #[serde(rename = "openai")]
    OpenAi,
    #[serde(rename = "scripted")]
    Scripted,
    #[serde(rename = "none")]
    None,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::Scripted => "scripted",
            ProviderKind::None => "none",
        }
    }

    pub fn parse(text: &str) -> Result<ProviderKind, LlmError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "anthropic" => Ok(ProviderKind::Anthropic),
            "openai" | "openai-compatible" | "openai_compatible" => Ok(ProviderKind::OpenAi),
            "scripted" => Ok(ProviderKind::Scripted),
            "none" | "" => Ok(ProviderKind::None),
            other => Err(LlmError::Config(format!(
                "ASKDB_PROVIDER={other:?} is not a provider: use anthropic, openai, scripted or none"
            ))),
        }
    }
}

/// Everything needed to build a [`ModelClient`](super::ModelClient). Debug shows keys
/// only as fingerprints.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    pub model: String,
    pub base_url: String,
    pub keys: Vec<ApiKey>,
    pub script: Option<PathBuf>,
    pub spend_cap_usd: Option<f64>,
    pub ledger_file: Option<PathBuf>,
    pub cache_dir: Option<PathBuf>,
    pub prices_file: Option<PathBuf>,
    pub retry: RetryPolicy,
    /// None: decided by the provider (see the module table).
    pub metered: Option<bool>,
}

impl ProviderConfig {
    /// The defaults for a kind of provider: its usual model and base URL, no keys.
    pub fn for_kind(kind: ProviderKind) -> ProviderConfig {
        let (model, base_url) = match kind {
            ProviderKind::Anthropic => (anthropic::DEFAULT_MODEL, anthropic::DEFAULT_BASE_URL),
            ProviderKind::OpenAi => (openai::DEFAULT_MODEL, openai::DEFAULT_BASE_URL),
            ProviderKind::Scripted => ("scripted", ""),
            ProviderKind::None => ("", ""),
        };
        ProviderConfig {
            kind,
            model: model.to_string(),
            base_url: base_url.to_string(),
            keys: Vec::new(),
            script: None,
            spend_cap_usd: None,
            ledger_file: None,
            cache_dir: None,
            prices_file: None,
            retry: RetryPolicy::default(),
            metered: None,
        }
    }

    /// The configuration the process environment describes (see the module table).
    pub fn from_env() -> Result<ProviderConfig, LlmError> {
        ProviderConfig::from_lookup(|name| std::env::var(name).ok())
    }

    /// The configuration a set of variables describes; `lookup` returns a variable's
    /// value. Blank values count as unset.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<ProviderConfig, LlmError> {
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let kind = ProviderKind::parse(&get("ASKDB_PROVIDER").unwrap_or_default())?;
        let mut config = ProviderConfig::for_kind(kind);
        if let Some(model) = get("ASKDB_MODEL") {
            config.model = model.trim().to_string();
        }
        if let Some(base_url) = get("ASKDB_BASE_URL") {
            let base_url = base_url.trim().to_string();
            if !base_url.starts_with("http://") && !base_url.starts_with("https://") {
                return Err(LlmError::Config(format!(
                    "ASKDB_BASE_URL must start with http:// or https://, not {:?}",
                    crate::text::redact_password(&base_url)
                )));
            }
            config.base_url = base_url;
        }
        let key_lookup = |name: &str| get(name);
        config.keys = match kind {
            ProviderKind::Anthropic => keys_from_env("ANTHROPIC", &key_lookup),
            ProviderKind::OpenAi => keys_from_env("OPENAI", &key_lookup),
            ProviderKind::Scripted | ProviderKind::None => Vec::new(),
        };
        config.script = get("ASKDB_SCRIPT").map(PathBuf::from);
        config.spend_cap_usd = match get("ASKDB_SPEND_CAP_USD") {
            Some(text) => Some(parse_dollars(&text)?),
            None => None,
        };
        config.ledger_file = get("ASKDB_SPEND_LEDGER").map(PathBuf::from);
        config.cache_dir = get("ASKDB_CACHE_DIR").map(PathBuf::from);
        config.prices_file = get("ASKDB_PRICES").map(PathBuf::from);
        if let Some(text) = get("ASKDB_MODEL_TIMEOUT_SECS") {
            let seconds: f64 = text
                .trim()
                .parse()
                .ok()
                .filter(|s: &f64| s.is_finite() && *s > 0.0)
                .ok_or_else(|| {
                    LlmError::Config(format!(
                        "ASKDB_MODEL_TIMEOUT_SECS={text:?} is not a positive number of seconds"
                    ))
                })?;
            config.retry.timeout = Duration::from_secs_f64(seconds);
        }
        if let Some(text) = get("ASKDB_MODEL_MAX_ATTEMPTS") {
            config.retry.max_attempts = text
                .trim()
                .parse()
                .ok()
                .filter(|n: &u32| *n >= 1)
                .ok_or_else(|| {
                    LlmError::Config(format!(
                        "ASKDB_MODEL_MAX_ATTEMPTS={text:?} is not a whole number of at least 1"
                    ))
                })?;
        }
        if let Some(text) = get("ASKDB_MODEL_METERED") {
            config.metered = Some(match text.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" => true,
                "0" | "false" | "no" => false,
                _ => {
                    return Err(LlmError::Config(format!(
                        "ASKDB_MODEL_METERED={text:?}: use true or false"
                    )))
                }
            });
        }
        Ok(config)
    }

    /// The base URL without any password, for messages.
    pub fn display_base_url(&self) -> String {
        crate::text::redact_password(&self.base_url)
    }
}

fn parse_dollars(text: &str) -> Result<f64, LlmError> {
    text.trim()
        .trim_start_matches('$')
        .parse::<f64>()
        .ok()
        .filter(|dollars| dollars.is_finite() && *dollars >= 0.0)
        .ok_or_else(|| {
            LlmError::Config(format!(
                "ASKDB_SPEND_CAP_USD={text:?} is not an amount of dollars"
            ))
        })
}

/// Whether a URL points at this machine (localhost, 127.0.0.0/8, ::1).
pub fn is_loopback(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = if let Some(bracketed) = host_port.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    let host = host.to_ascii_lowercase();
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// The provider `config` describes.
pub fn build_provider(config: &ProviderConfig) -> Result<Arc<dyn Provider>, LlmError> {
    if config.model.trim().is_empty() && config.kind != ProviderKind::None {
        return Err(LlmError::Config("ASKDB_MODEL is empty".to_string()));
    }
    match config.kind {
        ProviderKind::Anthropic => Ok(Arc::new(AnthropicProvider::new(config)?)),
        ProviderKind::OpenAi => Ok(Arc::new(OpenAiProvider::new(config)?)),
        ProviderKind::Scripted => {
            let path = config.script.as_ref().ok_or_else(|| {
                LlmError::Config(
                    "the scripted provider needs ASKDB_SCRIPT=path/to/replies.jsonl".to_string(),
                )
            })?;
            Ok(Arc::new(
                ScriptedProvider::load(path, &config.model)?
                    .metered(config.metered.unwrap_or(false)),
            ))
        }
        ProviderKind::None => Err(LlmError::NotConfigured),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<ProviderConfig, LlmError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        ProviderConfig::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    fn nothing_set_means_no_provider() {
        let config = config(&[]).expect("valid");
        assert_eq!(config.kind, ProviderKind::None);
        assert!(matches!(
            build_provider(&config),
            Err(LlmError::NotConfigured)
        ));
    }

    #[test]
    fn a_local_openai_compatible_server_needs_no_key() {
        let config = config(&[
            ("ASKDB_PROVIDER", "openai"),
            ("ASKDB_BASE_URL", "http://127.0.0.1:8080/v1"),
            ("ASKDB_MODEL", "qwen"),
            ("ASKDB_SPEND_CAP_USD", "$2.50"),
            ("ASKDB_MODEL_TIMEOUT_SECS", "30"),
        ])
        .expect("valid");
        assert_eq!(config.model, "qwen");
        assert_eq!(config.spend_cap_usd, Some(2.5));
        assert_eq!(config.retry.timeout, Duration::from_secs(30));
        let provider = build_provider(&config).expect("builds");
        assert!(!provider.is_metered());
    }

    #[test]
    fn keys_are_read_for_the_chosen_provider_only() {
        let config = config(&[
            ("ASKDB_PROVIDER", "anthropic"),
            ("ANTHROPIC_API_KEYS", "a1,a2"),
            ("OPENAI_API_KEY", "o1"),
        ])
        .expect("valid");
        let secrets: Vec<&str> = config.keys.iter().map(ApiKey::expose).collect();
        assert_eq!(secrets, ["a1", "a2"]);
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("\"a1\"") && !shown.contains("a1,"),
            "{shown}"
        );
    }

    #[test]
    fn bad_values_are_named_in_the_error() {
        for (name, value) in [
            ("ASKDB_PROVIDER", "gemini"),
            ("ASKDB_SPEND_CAP_USD", "lots"),
            ("ASKDB_MODEL_MAX_ATTEMPTS", "0"),
            ("ASKDB_BASE_URL", "localhost:8080"),
        ] {
            let error = config(&[(name, value)]).expect_err(name).to_string();
            assert!(error.contains(name), "{error}");
        }
    }

    #[test]
    fn loopback_urls_are_recognised() {
        assert!(is_loopback("http://127.0.0.1:8080/v1"));
        assert!(is_loopback("http://localhost/v1"));
        assert!(is_loopback("http://[::1]:9000"));
        assert!(is_loopback("http://user:pw@127.0.0.2:1"));
        assert!(!is_loopback("https://api.openai.com/v1"));
        assert!(!is_loopback("http://127.example.com/v1"));
    }
}
