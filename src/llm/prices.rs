//! Model prices, dated: the table behind every cost in askdb. The built-in table is
//! `config/prices.toml`, embedded at build time; `ASKDB_PRICES` names a file that
//! replaces it. Prices are dollars per million tokens.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::LlmError;

const BUILT_IN_PRICES: &str = include_str!("../../config/prices.toml");

/// One model's prices in dollars per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPrice {
    pub provider: String,
    /// Matches every model whose name starts with it.
    pub prefix: String,
    pub input: f64,
    pub output: f64,
    /// Prompt tokens written to the provider's cache; the input price when absent.
    #[serde(default)]
    pub cache_write: Option<f64>,
    /// Prompt tokens read from the provider's cache; the input price when absent.
    #[serde(default)]
    pub cache_read: Option<f64>,
}

impl ModelPrice {
    /// The price of an unmetered model (a local server, a script): nothing.
    pub fn free(provider: &str, model: &str) -> ModelPrice {
        ModelPrice {
            provider: provider.to_string(),
            prefix: model.to_string(),
            input: 0.0,
            output: 0.0,
            cache_write: None,
            cache_read: None,
        }
    }

    /// Dollars for a call. `input_tokens` counts every prompt token, the cached ones
    /// included; those are billed at their own rates.
    pub fn cost(
        &self,
        input_tokens: u64,
        output_tokens: u64,
        cache_read_tokens: u64,
        cache_write_tokens: u64,
    ) -> f64 {
        let per_token = |per_million: f64| per_million / 1_000_000.0;
        let uncached = input_tokens.saturating_sub(cache_read_tokens + cache_write_tokens);
        uncached as f64 * per_token(self.input)
            + cache_read_tokens as f64 * per_token(self.cache_read.unwrap_or(self.input))
            + cache_write_tokens as f64 * per_token(self.cache_write.unwrap_or(self.input))
            + output_tokens as f64 * per_token(self.output)
    }
}

/// A dated price table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceTable {
    /// When these prices were read off the providers' pricing pages (YYYY-MM-DD).
    pub prices_as_of: String,
    #[serde(default, rename = "model")]
    pub models: Vec<ModelPrice>,
}

impl PriceTable {
    /// The table embedded from `config/prices.toml`.
    pub fn built_in() -> Result<PriceTable, LlmError> {
        PriceTable::parse(BUILT_IN_PRICES, "the built-in config/prices.toml")
    }

    /// A table from a TOML file of the same shape as `config/prices.toml`.
    pub fn load(path: &Path) -> Result<PriceTable, LlmError> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            LlmError::Config(format!(
                "cannot read prices file {}: {error}",
                path.display()
            ))
        })?;
        PriceTable::parse(&text, &format!("prices file {}", path.display()))
    }

    pub fn parse(text: &str, origin: &str) -> Result<PriceTable, LlmError> {
        let table: PriceTable = toml::from_str(text)
            .map_err(|error| LlmError::Config(format!("{origin} is not valid: {error}")))?;
        if table.prices_as_of.trim().is_empty() {
            return Err(LlmError::Config(format!(
                "{origin} has no prices_as_of date: prices without a date cannot be trusted"
            )));
        }
        for price in &table.models {
            let rates = [
                Some(price.input),
                Some(price.output),
                price.cache_read,
                price.cache_write,
            ];
            if rates
                .into_iter()
                .flatten()
                .any(|rate| !rate.is_finite() || rate < 0.0)
            {
                return Err(LlmError::Config(format!(
                    "{origin}: a price of {} {:?} is negative or not a number",
                    price.provider, price.prefix
                )));
            }
        }
        Ok(table)
    }

    /// The price of `model` from `provider`: the entry with the longest matching prefix.
    pub fn find(&self, provider: &str, model: &str) -> Option<&ModelPrice> {
        self.models
            .iter()
            .filter(|price| price.provider == provider && model.starts_with(&price.prefix))
            .max_by_key(|price| price.prefix.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_table_parses_and_is_dated() {
        let table = PriceTable::built_in().expect("built-in prices parse");
        assert_eq!(table.prices_as_of.len(), "YYYY-MM-DD".len());
        assert!(table
            .find("anthropic", "claude-sonnet-4-5-20250929")
            .is_some());
        assert!(table.find("openai", "gpt-4o-mini-2024-07-18").is_some());
        assert!(table.find("openai", "qwen2.5-coder").is_none());
    }

    #[test]
    fn the_longest_prefix_wins() {
        let table = PriceTable::built_in().expect("built-in prices parse");
        let mini = table.find("openai", "gpt-4o-mini").expect("priced");
        assert_eq!(mini.prefix, "gpt-4o-mini");
        let full = table.find("openai", "gpt-4o-2024-08-06").expect("priced");
        assert_eq!(full.prefix, "gpt-4o");
    }

    #[test]
    fn cached_tokens_are_billed_at_their_own_rates() {
        let price = ModelPrice {
            provider: "anthropic".into(),
            prefix: "m".into(),
            input: 3.0,
            output: 15.0,
            cache_write: Some(3.75),
            cache_read: Some(0.30),
        };
        // 1M prompt tokens: 600k uncached, 300k read, 100k written; 100k output.
        let cost = price.cost(1_000_000, 100_000, 300_000, 100_000);
        let expected = 0.6 * 3.0 + 0.3 * 0.30 + 0.1 * 3.75 + 0.1 * 15.0;
        assert!((cost - expected).abs() < 1e-9, "{cost} vs {expected}");
    }

    #[test]
    fn a_table_without_a_date_is_refused() {
        assert!(PriceTable::parse("prices_as_of = \"\"", "test").is_err());
        assert!(PriceTable::parse(
            "prices_as_of = \"2025-01-01\"\n[[model]]\nprovider = \"x\"\nprefix = \"y\"\ninput = -1.0\noutput = 1.0\n",
            "test"
        )
        .is_err());
    }
}
