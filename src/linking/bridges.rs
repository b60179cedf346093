//! The foreign-key graph: which tables connect the chosen ones (customers and products
//! need bills and bill_items between them), and the join path the unknown-column
//! repair hands the model.
//!
//! Edges are read from the cards' CREATE TABLE text (`FOREIGN KEY (a) REFERENCES t (b)`),
//! which carries the referenced column; a card whose text lacks a key the card lists in
//! `references` gets the referenced column guessed (same name, else the first column
//! ending in "id").

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::linking::cards::TableCard;

/// One foreign-key column pair: `table.column` references `ref_table.ref_column`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ForeignKeyEdge {
    pub table: String,
    pub column: String,
    pub ref_table: String,
    pub ref_column: String,
}

/// Parses `FOREIGN KEY (a, b) REFERENCES t (x, y)` out of one line.
fn parse_foreign_key(line: &str) -> Option<(Vec<String>, String, Vec<String>)> {
    let upper = line.to_uppercase();
    let start = upper.find("FOREIGN KEY")? + "FOREIGN KEY".len();
    let list = |text: &str| -> Option<(Vec<String>, usize)> {
        let open = text.find('(')?;
        let close = open + text[open..].find(')')?;
        let names = text[open + 1..close]
            .split(',')
            .map(|name| name.trim().trim_matches('"').to_lowercase())
            .collect();
        Some((names, close + 1))
    };
    let (columns, used) = list(&line[start..])?;
    let rest = &line[start + used..];
    let references = rest.to_uppercase().find("REFERENCES")? + "REFERENCES".len();
    let rest = rest[references..].trim_start();
    let name_end = rest.find(['(', ' ', ',']).unwrap_or(rest.len());
    let table = rest[..name_end].trim().trim_matches('"').to_lowercase();
    let ref_columns = list(&rest[name_end..]).map(|(names, _)| names);
    Some((columns, table, ref_columns.unwrap_or_default()))
}

/// The foreign keys of a set of cards, with table names spelled as the cards spell them.
pub fn edges_from_cards(cards: &[TableCard]) -> Vec<ForeignKeyEdge> {
    let by_lower: BTreeMap<String, &TableCard> = cards
        .iter()
        .map(|card| (card.table.to_lowercase(), card))
        .collect();
    let mut edges = BTreeSet::new();
    for card in cards {
        let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
        for line in card.text.lines() {
            let Some((columns, ref_table, ref_columns)) = parse_foreign_key(line) else {
                continue;
            };
            let Some(target) = by_lower.get(&ref_table) else {
                continue;
            };
            for (position, column) in columns.iter().enumerate() {
                let ref_column = ref_columns
                    .get(position)
                    .cloned()
                    .unwrap_or_else(|| guess_ref_column(column, target));
                seen.insert((column.clone(), ref_table.clone()));
                edges.insert(ForeignKeyEdge {
                    table: card.table.clone(),
                    column: column.clone(),
                    ref_table: target.table.clone(),
                    ref_column,
                });
            }
        }
        for (column, ref_table) in &card.references {
            let key = (column.to_lowercase(), ref_table.to_lowercase());
            if seen.contains(&key) {
                continue;
            }
            if let Some(target) = by_lower.get(&key.1) {
                edges.insert(ForeignKeyEdge {
                    table: card.table.clone(),
                    column: key.0.clone(),
                    ref_table: target.table.clone(),
                    ref_column: guess_ref_column(&key.0, target),
                });
            }
        }
    }
    edges.into_iter().collect()
}

fn guess_ref_column(column: &str, target: &TableCard) -> String {
    if target.columns.iter().any(|c| c == column) {
        return column.to_string();
    }
    target
        .columns
        .iter()
        .find(|c| c.ends_with("id"))
        .or_else(|| target.columns.first())
        .cloned()
        .unwrap_or_else(|| column.to_string())
}

/// The undirected foreign-key graph over table positions.
#[derive(Debug, Clone, Default)]
pub struct FkGraph {
    /// Per table: (neighbour, edge index), self references left out.
    adjacency: Vec<Vec<(usize, usize)>>,
    pub edges: Vec<ForeignKeyEdge>,
}

impl FkGraph {
    /// `position` maps a lower-cased table name to its position in the index.
    pub fn new(
        tables: usize,
        edges: Vec<ForeignKeyEdge>,
        position: &BTreeMap<String, usize>,
    ) -> FkGraph {
        let mut adjacency = vec![Vec::new(); tables];
        for (index, edge) in edges.iter().enumerate() {
            let from = position.get(&edge.table.to_lowercase());
            let to = position.get(&edge.ref_table.to_lowercase());
            if let (Some(&from), Some(&to)) = (from, to) {
                if from != to {
                    adjacency[from].push((to, index));
                    adjacency[to].push((from, index));
                }
            }
        }
        for neighbours in &mut adjacency {
            neighbours.sort_unstable();
        }
        FkGraph { adjacency, edges }
    }

    /// How many distinct tables a table joins to: hub tables are the likelier fill.
    pub fn degree(&self, table: usize) -> usize {
        let neighbours: BTreeSet<usize> = self.adjacency[table].iter().map(|(n, _)| *n).collect();
        neighbours.len()
    }

    /// The shortest path from any table of `sources` to `target`, as the sequence of
    /// (table, edge) steps after the source; neighbours are tried in `preference`
    /// order so that among equally short paths the one through likelier tables wins.
    /// Only tables for which `allowed` holds are walked through.
    pub fn shortest_path(
        &self,
        sources: &BTreeSet<usize>,
        target: usize,
        preference: &[usize],
        allowed: &dyn Fn(usize) -> bool,
    ) -> Option<Vec<(usize, usize)>> {
        if sources.contains(&target) {
            return Some(Vec::new());
        }
        let rank: BTreeMap<usize, usize> = preference
            .iter()
            .enumerate()
            .map(|(rank, table)| (*table, rank))
            .collect();
        let mut parent: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
        let mut visited: BTreeSet<usize> = sources.clone();
        let mut queue: VecDeque<usize> = sources.iter().copied().collect();
        while let Some(here) = queue.pop_front() {
            let mut neighbours = self.adjacency[here].clone();
            neighbours.sort_by_key(|(table, edge)| {
                (
                    rank.get(table).copied().unwrap_or(usize::MAX),
                    *table,
                    *edge,
                )
            });
            for (next, edge) in neighbours {
                if visited.contains(&next) || !(next == target || allowed(next)) {
                    continue;
                }
                visited.insert(next);
                parent.insert(next, (here, edge));
                if next == target {
                    let mut path = Vec::new();
                    let mut at = target;
                    while let Some(&(from, edge)) = parent.get(&at) {
                        path.push((at, edge));
                        at = from;
                    }
                    path.reverse();
                    return Some(path);
                }
                queue.push_back(next);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_key_lines_parse_with_and_without_columns() {
        assert_eq!(
            parse_foreign_key("  FOREIGN KEY (cust_id) REFERENCES customers (cust_id),"),
            Some((
                vec!["cust_id".to_string()],
                "customers".to_string(),
                vec!["cust_id".to_string()]
            ))
        );
        assert_eq!(
            parse_foreign_key("FOREIGN KEY (a, b) REFERENCES t"),
            Some((
                vec!["a".to_string(), "b".to_string()],
                "t".to_string(),
                vec![]
            ))
        );
        assert_eq!(parse_foreign_key("  PRIMARY KEY (x)"), None);
    }
}
