//! Sets of integers as sorted runs `[start, end)`: the representation
//! [`crate::dataflow::BitSet`] takes over a large domain. Dataflow facts of a large
//! function are per block, so a dense set costs blocks × domain bits however few
//! members it has; a long chain of blocks (50,000 in one kernel) then needs gigabytes
//! and quadratic time. Facts of real code are few members (live registers) or long
//! stretches of consecutive ones (definitions reaching down a chain), which runs hold in
//! a few pairs each.
//!
//! Runs are kept canonical (sorted, disjoint, never adjacent), so two sets are equal
//! exactly when their runs are.

pub(crate) type Runs = Vec<(u32, u32)>;

/// Adds `i`; whether it was absent.
pub(crate) fn insert(runs: &mut Runs, i: u32) -> bool {
    // The first run that ends at or after `i`: `i` is in it, just past it, or before it.
    let p = runs.partition_point(|r| r.1 < i);
    if let Some(&(s, e)) = runs.get(p) {
        if s <= i && i < e {
            return false;
        }
        if e == i {
            runs[p].1 = i + 1;
            if runs.get(p + 1).is_some_and(|n| n.0 == i + 1) {
                runs[p].1 = runs[p + 1].1;
                runs.remove(p + 1);
            }
            return true;
        }
        if s == i + 1 {
            runs[p].0 = i;
            return true;
        }
    }
    runs.insert(p, (i, i + 1));
    true
}

/// Removes `i`; whether it was present.
pub(crate) fn remove(runs: &mut Runs, i: u32) -> bool {
    let p = runs.partition_point(|r| r.1 <= i);
    let Some(&(s, e)) = runs.get(p) else { return false };
    if s > i {
        return false;
    }
    match (s == i, e == i + 1) {
        (true, true) => {
            runs.remove(p);
        }
        (true, false) => runs[p].0 = i + 1,
        (false, true) => runs[p].1 = i,
        (false, false) => {
            runs[p].1 = i;
            runs.insert(p + 1, (i + 1, e));
        }
    }
    true
}

pub(crate) fn contains(runs: &Runs, i: u32) -> bool {
    let p = runs.partition_point(|r| r.1 <= i);
    runs.get(p).is_some_and(|r| r.0 <= i)
}

/// Appends `[s, e)` to canonical runs that end at or before `s`, merging when adjacent.
fn push(out: &mut Runs, s: u32, e: u32) {
    if s >= e {
        return;
    }
    match out.last_mut() {
        Some(last) if last.1 >= s => last.1 = last.1.max(e),
        _ => out.push((s, e)),
    }
}

/// `a ∪ b`.
pub(crate) fn union(a: &Runs, b: &Runs) -> Runs {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = if j == b.len() || (i < a.len() && a[i].0 <= b[j].0) {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        push(&mut out, next.0, next.1);
    }
    out
}

/// `a ∩ b`.
pub(crate) fn intersection(a: &Runs, b: &Runs) -> Runs {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (s, e) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
        push(&mut out, s, e);
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// `a − b`.
pub(crate) fn difference(a: &Runs, b: &Runs) -> Runs {
    let mut out = Vec::with_capacity(a.len());
    let mut j = 0;
    for &(s, e) in a {
        let mut s = s;
        while j < b.len() && b[j].1 <= s {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].0 < e {
            push(&mut out, s, b[k].0.min(e));
            s = s.max(b[k].1);
            k += 1;
        }
        push(&mut out, s, e);
    }
    out
}

pub(crate) fn count(runs: &Runs) -> usize {
    runs.iter().map(|&(s, e)| (e - s) as usize).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn of(set: &BTreeSet<u32>) -> Runs {
        let mut r = Runs::new();
        set.iter().for_each(|&i| push(&mut r, i, i + 1));
        r
    }

    proptest::proptest! {
        /// Every operation agrees with a `BTreeSet` and leaves the runs canonical.
        #[test]
        fn runs_behave_as_a_set(
            a in proptest::collection::btree_set(0u32..200, 0..60),
            b in proptest::collection::btree_set(0u32..200, 0..60),
            ops in proptest::collection::vec((proptest::bool::ANY, 0u32..200), 0..60),
        ) {
            let (ra, rb) = (of(&a), of(&b));
            proptest::prop_assert_eq!(union(&ra, &rb), of(&a.union(&b).copied().collect()));
            proptest::prop_assert_eq!(intersection(&ra, &rb), of(&a.intersection(&b).copied().collect()));
            proptest::prop_assert_eq!(difference(&ra, &rb), of(&a.difference(&b).copied().collect()));
            let (mut r, mut s) = (ra.clone(), a.clone());
            for (add, i) in ops {
                let changed = if add { insert(&mut r, i) } else { remove(&mut r, i) };
                proptest::prop_assert_eq!(changed, if add { s.insert(i) } else { s.remove(&i) });
                proptest::prop_assert_eq!(&r, &of(&s));
                proptest::prop_assert_eq!(contains(&r, i), s.contains(&i));
            }
            proptest::prop_assert_eq!(count(&r), s.len());
        }
    }
}
