//! The timeline's layout: a lane per fiber, a row per request. A branch's lane sits right of
//! its parent's (lanes in depth-first lineage order), and rows keep causality: a fiber's
//! requests go down its lane in order, a branch starts no higher than its parent had got
//! when it forked, and a parent resumes below everything its branches asked.

use std::collections::HashMap;

/// Where each request goes.
pub struct Placed {
    /// The lanes' lineages, left to right.
    pub lanes: Vec<String>,
    /// Each request's (lane, row), in the order given.
    pub rows: Vec<(usize, usize)>,
}

/// A lineage's sort key: `0/1.2/0.3` is `[(1, 2), (0, 3)]`, so parents come before their
/// branches and branches in fork, then branch order.
fn key(lineage: &str) -> Vec<(u64, u64)> {
    lineage
        .split('/')
        .skip(1)
        .map(|p| {
            let (f, b) = p.split_once('.').unwrap_or((p, "0"));
            (f.parse().unwrap_or(u64::MAX), b.parse().unwrap_or(u64::MAX))
        })
        .collect()
}

/// Whether `lineage` descends from `ancestor`.
fn descends(lineage: &str, ancestor: &str) -> bool {
    lineage.len() > ancestor.len()
        && lineage.starts_with(ancestor)
        && lineage.as_bytes()[ancestor.len()] == b'/'
}

/// Lays out requests asked by the fibers `lineages` (in the order asked).
pub fn place<'a>(lineages: impl Iterator<Item = &'a str>) -> Placed {
    let asked: Vec<&str> = lineages.collect();
    let mut lanes: Vec<String> = asked.iter().map(|l| l.to_string()).collect();
    lanes.sort_by_key(|l| key(l));
    lanes.dedup();
    let index: HashMap<&str, usize> = lanes
        .iter()
        .enumerate()
        .map(|(i, l)| (l.as_str(), i))
        .collect();
    // The first free row of each lane that has asked something.
    let mut next: HashMap<&str, usize> = HashMap::new();
    let mut rows = Vec::with_capacity(asked.len());
    for lineage in &asked {
        let mut row = match next.get(lineage) {
            Some(r) => *r,
            // A new branch starts where its nearest ancestor that asked something had got.
            None => next
                .iter()
                .filter(|(l, _)| descends(lineage, l))
                .max_by_key(|(l, _)| l.len())
                .map_or(0, |(_, r)| *r),
        };
        // A fiber goes on below what its branches asked.
        for (l, r) in &next {
            if descends(l, lineage) {
                row = row.max(*r);
            }
        }
        next.insert(lineage, row + 1);
        rows.push((index[lineage], row));
    }
    Placed { lanes, rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branches_sit_beside_their_parent_and_the_parent_resumes_below_them() {
        let asked = [
            "0",
            "0/0.0",
            "0/0.1",
            "0/0.0",
            "0/0.1",
            "0/0.1",
            "0",
            "0/1.0",
            "0/1.0/0.1",
            "0",
        ];
        let p = place(asked.into_iter());
        assert_eq!(p.lanes, ["0", "0/0.0", "0/0.1", "0/1.0", "0/1.0/0.1"]);
        assert_eq!(
            p.rows,
            [
                (0, 0),
                (1, 1),
                (2, 1),
                (1, 2),
                (2, 2),
                (2, 3),
                (0, 4),
                (3, 5),
                (4, 6),
                (0, 7),
            ]
        );
    }

    #[test]
    fn lanes_sort_numerically_not_as_text() {
        let p = place(["0/0.10", "0/0.2", "0"].into_iter());
        assert_eq!(p.lanes, ["0", "0/0.2", "0/0.10"]);
    }
}
