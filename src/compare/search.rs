//! The column-mapping search of rule 4: a backtracking search for an injective mapping
//! from gold columns to predicted columns under which the rows agree, capped in steps.

use super::cell::{Cell, Table};

pub(super) enum SearchResult {
    Found,
    NotFound,
    CapReached,
}

/// Backtracking search for an injective mapping from gold columns to predicted columns.
pub(super) struct Search<'a> {
    gold: &'a Table,
    predicted: &'a Table,
    candidates: &'a [Vec<usize>],
    ordered: bool,
    /// Gold columns in the order they are assigned: fewest candidates first, so the
    /// constrained choices prune the tree early.
    order: Vec<usize>,
    /// Predicted column chosen for each gold column in `order`, so far.
    chosen: Vec<usize>,
    /// For each predicted column, the first predicted column with the very same values in
    /// the very same rows: such twins are interchangeable, so trying one of them suffices.
    twin_of: Vec<usize>,
    used: Vec<bool>,
    steps: usize,
    max_steps: usize,
}

impl<'a> Search<'a> {
    pub(super) fn new(
        gold: &'a Table,
        predicted: &'a Table,
        candidates: &'a [Vec<usize>],
        ordered: bool,
        max_steps: usize,
    ) -> Self {
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.sort_by_key(|&index| (candidates[index].len(), index));
        let column = |index: usize| predicted.rows.iter().map(move |row| &row[index]);
        let twin_of = (0..predicted.width)
            .map(|index| {
                (0..index)
                    .find(|&earlier| column(earlier).eq(column(index)))
                    .unwrap_or(index)
            })
            .collect();
        Search {
            gold,
            predicted,
            candidates,
            ordered,
            order,
            chosen: Vec::new(),
            twin_of,
            used: vec![false; predicted.width],
            steps: 0,
            max_steps,
        }
    }

    pub(super) fn run(&mut self) -> SearchResult {
        if self.order.is_empty() {
            // No gold columns (only possible with a malformed gold): rows are all empty and
            // the counts already agree.
            return SearchResult::Found;
        }
        self.extend()
    }

    fn extend(&mut self) -> SearchResult {
        let depth = self.chosen.len();
        if depth == self.order.len() {
            return SearchResult::Found;
        }
        let gold_column = self.order[depth];
        let mut tried_twins: Vec<usize> = Vec::new();
        for &candidate in &self.candidates[gold_column] {
            if self.used[candidate] || tried_twins.contains(&self.twin_of[candidate]) {
                continue;
            }
            tried_twins.push(self.twin_of[candidate]);
            self.steps += 1;
            if self.steps > self.max_steps {
                return SearchResult::CapReached;
            }
            self.chosen.push(candidate);
            if self.projection_matches() {
                self.used[candidate] = true;
                match self.extend() {
                    SearchResult::NotFound => {}
                    other => return other,
                }
                self.used[candidate] = false;
            }
            self.chosen.pop();
        }
        SearchResult::NotFound
    }

    /// Whether the gold rows and the predicted rows agree on the columns assigned so far.
    /// A full match implies a match on every subset of columns, so a failure here prunes.
    fn projection_matches(&self) -> bool {
        let gold_columns = &self.order[..self.chosen.len()];
        let project = |table: &'a Table, columns: &[usize]| -> Vec<Vec<&'a Cell>> {
            table
                .rows
                .iter()
                .map(|row| columns.iter().map(|&index| &row[index]).collect())
                .collect()
        };
        let mut gold_rows = project(self.gold, gold_columns);
        let mut predicted_rows = project(self.predicted, &self.chosen);
        if !self.ordered {
            gold_rows.sort();
            predicted_rows.sort();
        }
        gold_rows == predicted_rows
    }
}
