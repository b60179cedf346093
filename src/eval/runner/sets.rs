//! The questions of a run: a set loaded by name (our golden sets, Spider, defog) with
//! its gold per dialect, and the seeded sample a run asks.

use crate::database::DatabaseUrl;
use crate::eval::external::{self, ExternalDialect};
use crate::eval::golden::{self, Expect};
use crate::eval::metrics::Expected;
use crate::gate::SqlDialect;

use super::{EvalError, EvalItem};

fn expected_of(expect: Expect) -> Expected {
    match expect {
        Expect::Answer => Expected::Answer,
        Expect::Decline => Expected::Refuse,
        Expect::Clarify => Expected::Clarify,
        Expect::RefuseOrClarify => Expected::RefuseOrClarify,
    }
}

fn dialect_of(db: &DatabaseUrl) -> SqlDialect {
    match db {
        DatabaseUrl::Postgres(_) => SqlDialect::Postgres,
        DatabaseUrl::Mysql(_) => SqlDialect::Mysql,
        _ => SqlDialect::Sqlite,
    }
}

/// Which questions of a set a run asks: all (`size` None), or `size` of them from a
/// shuffle seeded with `seed`, after skipping the shuffle's first `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sampling {
    pub size: Option<usize>,
    pub seed: u64,
    pub offset: usize,
}

impl Sampling {
    /// Every question of the set.
    pub fn all() -> Sampling {
        Sampling::default()
    }
}

/// Loads a set's questions. `db` overrides the database of the demo and Chinook sets
/// (a PostgreSQL URL switches their gold to the PostgreSQL dialect).
pub fn load_set(
    set: &str,
    db: Option<&DatabaseUrl>,
    sampling: Sampling,
    limit: Option<usize>,
) -> Result<Vec<EvalItem>, EvalError> {
    let data_dir =
        || crate::home::shared_data_dir().map_err(|missing| EvalError::Data(missing.to_string()));
    let mut items: Vec<EvalItem> = match set {
        "demo" | "chinook" => {
            let default_db = if set == "demo" {
                DatabaseUrl::Demo
            } else {
                DatabaseUrl::Sqlite(golden::chinook_sqlite_path(&data_dir()?))
            };
            let db = db.cloned().unwrap_or(default_db);
            let dialect = dialect_of(&db);
            golden::builtin(set)
                .map_err(|error| EvalError::Data(error.to_string()))?
                .into_iter()
                .map(|item| EvalItem {
                    golds: item
                        .gold_sql
                        .as_ref()
                        .map(|gold| vec![gold.for_dialect(dialect).to_string()])
                        .unwrap_or_default(),
                    id: item.id,
                    question: item.question,
                    category: item.category.as_str().to_string(),
                    expected: expected_of(item.expect),
                    ordered: item.ordered,
                    db: db.as_argument(),
                })
                .collect()
        }
        "spider" => {
            let dir = data_dir()?;
            // Spider's databases are its SQLite files, or their copies on a MySQL or
            // MariaDB server that `--db` names (`askdb eval copy-spider`).
            let server = match db {
                None => None,
                Some(DatabaseUrl::Mysql(server)) => Some(server.clone()),
                Some(other) => {
                    return Err(EvalError::Data(format!(
                        "Spider is asked on its SQLite files, or on their copies on a MySQL or \
                         MariaDB server (`askdb eval copy-spider`); --db {} is neither",
                        crate::text::redact_password(&other.as_argument())
                    )))
                }
            };
            external::load_spiderman(&dir)
                .map_err(|error| EvalError::Data(error.to_string()))?
                .into_iter()
                .map(|query| EvalItem {
                    golds: external::concrete_golds(&query),
                    db: match &server {
                        Some(server) => crate::admin::url_with_database(
                            server,
                            &external::spider_mysql_database(&query.db_name),
                        ),
                        None => format!(
                            "sqlite:{}",
                            external::spiderman_db_path(&dir, &query.db_name).display()
                        ),
                    },
                    id: query.id,
                    question: query.question,
                    category: query.db_name,
                    expected: Expected::Answer,
                    ordered: false,
                })
                .collect()
        }
        "defog" => {
            let dir = data_dir()?;
            external::load_defog(&dir, ExternalDialect::Sqlite)
                .map_err(|error| EvalError::Data(error.to_string()))?
                .into_iter()
                .map(|query| {
                    let question = match &query.instructions {
                        Some(instructions) => {
                            format!("{} ({})", query.question, instructions.trim())
                        }
                        None => query.question.clone(),
                    };
                    EvalItem {
                        golds: external::concrete_golds(&query),
                        db: format!(
                            "sqlite:{}",
                            external::defog_sqlite_path(&dir, &query.db_name).display()
                        ),
                        id: query.id,
                        question,
                        category: query.category.unwrap_or_else(|| query.db_name.clone()),
                        expected: Expected::Answer,
                        ordered: false,
                    }
                })
                .collect()
        }
        other => match other.strip_prefix("file:") {
            // A custom set: one EvalItem per line (the harness identity test uses it).
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|error| EvalError::Data(format!("cannot read {path}: {error}")))?;
                let mut items = Vec::new();
                for (number, line) in text
                    .lines()
                    .enumerate()
                    .filter(|(_, line)| !line.trim().is_empty())
                {
                    let item: EvalItem = serde_json::from_str(line).map_err(|error| {
                        EvalError::Data(format!("{path}, line {}: {error}", number + 1))
                    })?;
                    items.push(item);
                }
                items
            }
            None => return Err(EvalError::UnknownSet(other.to_string())),
        },
    };
    if let Some(size) = sampling.size {
        items = seeded_sample(items, size, sampling.seed, sampling.offset);
    }
    if let Some(limit) = limit {
        items.truncate(limit);
    }
    Ok(items)
}

/// A fixed random sample: a seeded shuffle (our own generator, stable across versions),
/// its first `offset` items skipped and the next `size` taken, then the chosen items
/// back in database order so prompt prefixes are reused. Samples of one seed at
/// offsets that do not overlap share no question.
pub fn seeded_sample(items: Vec<EvalItem>, size: usize, seed: u64, offset: usize) -> Vec<EvalItem> {
    let mut random = crate::rng::SplitMix64::new(seed);
    let mut indices: Vec<usize> = (0..items.len()).collect();
    for index in (1..indices.len()).rev() {
        let other = random.index(index + 1);
        indices.swap(index, other);
    }
    let mut chosen: Vec<usize> = indices.into_iter().skip(offset).take(size).collect();
    chosen.sort_by(|a, b| items[*a].db.cmp(&items[*b].db).then(a.cmp(b)));
    chosen
        .into_iter()
        .map(|index| items[index].clone())
        .collect()
}
