//! Execution-guided selection: several candidate queries for one question have each run
//! through the gate; the answer is the one most of them agree on. Candidates are grouped
//! by result-set equality ([`crate::compare::canonical_key`]: the same rows up to row and
//! column order), not by SQL text, so two different queries with the same answer vote
//! together. Only candidates that returned rows vote; failures never do.
//!
//! Ties: the larger group wins; between groups of one size, one with rows beats one
//! without (an empty result is the weaker claim); then the group holding the earliest
//! candidate wins (the first candidate is the greedy one when there is one). The chosen
//! candidate is the group's earliest.

use std::collections::BTreeMap;

use crate::compare::{canonical_key, ResultSet};
use crate::gate::QueryResult;

/// A candidate that ran and returned rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Voter<'a> {
    /// Its place among the candidates (0 first).
    pub index: usize,
    pub result: &'a QueryResult,
}

/// What the vote decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vote {
    /// The index of the chosen candidate.
    pub chosen: usize,
    /// How many voters gave the chosen answer.
    pub agreeing: usize,
    /// How many candidates returned rows.
    pub voters: usize,
    /// Sizes of the answer groups, largest first.
    pub groups: Vec<usize>,
}

/// The answer most voters agree on, or None when no candidate returned rows.
pub fn choose(voters: &[Voter<'_>]) -> Option<Vote> {
    // key -> (members in candidate order, the group's result has rows)
    let mut groups: BTreeMap<String, (Vec<usize>, bool)> = BTreeMap::new();
    for voter in voters {
        let set = ResultSet::from(voter.result);
        let has_rows = !super::empty::looks_empty(&voter.result.rows);
        let group = groups
            .entry(canonical_key(&set))
            .or_insert_with(|| (Vec::new(), has_rows));
        group.0.push(voter.index);
    }
    let mut ranked: Vec<(Vec<usize>, bool)> = groups.into_values().collect();
    for (members, _) in &mut ranked {
        members.sort_unstable();
    }
    ranked.sort_by(|(a, a_rows), (b, b_rows)| {
        b.len()
            .cmp(&a.len())
            .then(b_rows.cmp(a_rows))
            .then(a.first().cmp(&b.first()))
    });
    let (best, _) = ranked.first()?;
    Some(Vote {
        chosen: *best.first()?,
        agreeing: best.len(),
        voters: voters.len(),
        groups: ranked.iter().map(|(members, _)| members.len()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::LimitAction;
    use serde_json::{json, Value};

    fn result(columns: &[&str], rows: Vec<Vec<Value>>) -> QueryResult {
        QueryResult {
            ok: true,
            sql: "SELECT".to_string(),
            columns: columns.iter().map(|name| name.to_string()).collect(),
            row_count: rows.len(),
            rows,
            truncated: false,
            limit: LimitAction::Capped(200),
            tables: Vec::new(),
            elapsed_ms: 0,
        }
    }

    fn vote(results: &[&QueryResult]) -> Option<Vote> {
        let voters: Vec<Voter<'_>> = results
            .iter()
            .enumerate()
            .map(|(index, result)| Voter { index, result })
            .collect();
        choose(&voters)
    }

    #[test]
    fn the_largest_group_of_equal_results_wins_whatever_the_sql_or_column_order() {
        let a = result(&["n"], vec![vec![json!(3)]]);
        let b = result(&["name", "n"], vec![vec![json!("x"), json!(4)]]);
        let b_reordered = result(&["n", "name"], vec![vec![json!(4.0), json!("x")]]);
        let decided = vote(&[&a, &b, &b_reordered]).expect("a vote");
        assert_eq!(decided.chosen, 1, "the earliest of the winning group");
        assert_eq!(decided.agreeing, 2);
        assert_eq!(decided.groups, vec![2, 1]);
        assert_eq!(decided.voters, 3);
    }

    #[test]
    fn ties_go_to_rows_over_nothing_then_to_the_earliest_candidate() {
        let empty = result(&["n"], vec![]);
        let three = result(&["n"], vec![vec![json!(3)]]);
        let four = result(&["n"], vec![vec![json!(4)]]);
        assert_eq!(vote(&[&empty, &three]).map(|v| v.chosen), Some(1));
        assert_eq!(vote(&[&four, &three]).map(|v| v.chosen), Some(0));
        assert_eq!(vote(&[&three, &four]).map(|v| v.chosen), Some(0));
        // A majority of empty answers still wins: nothing may be the answer.
        assert_eq!(vote(&[&three, &empty, &empty]).map(|v| v.chosen), Some(1));
        assert_eq!(vote(&[]), None);
    }
}
