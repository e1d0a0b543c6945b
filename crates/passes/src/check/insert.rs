//! Putting the check pass's new statements into a body: each insertion names a point by
//! its path in the body as it was, and every statement list is rebuilt once with all of
//! its insertions (one `Vec::splice` per insertion moved the list's tail each time, which
//! made instrumenting a long block quadratic).

use gpusan_ptx::ast::Statement;

use super::plan::Insertion;
use super::sitecode::SlowPath;

/// Puts every insertion into `body` (paths of the body as it was), then the slow paths of
/// `tail` after everything else at its end, and returns the number of instructions added.
/// Each statement list is rebuilt once with all of its insertions, rather than moving its
/// tail once per insertion. At one point the LOADMETA goes first, then group checks, then
/// the access's check; insertions of one kind at one point go in the reverse of their order
/// in `insertions` (as when each was spliced in at that point in turn).
///
/// The tail becomes statements only here, written straight into the rebuilt body's room:
/// as statements made beforehand it was as large as the body and alive beside it.
pub(super) fn insert_all(body: &mut Vec<Statement>, insertions: Vec<Insertion>, tail: Vec<SlowPath>) -> u32 {
    let mut inserted = 0;
    let mut tail = tail;
    let tail_len: usize = tail.iter().map(SlowPath::len).sum();
    let mut insertions: Vec<(usize, Insertion)> = insertions.into_iter().enumerate().collect();
    // Inner and later lists before the lists holding them: a rebuilt list moves its blocks,
    // but the paths into them only use indices of the lists above.
    insertions.sort_by(|(sa, a), (sb, b)| {
        let (ia, pa) = a.at.split_last().unwrap();
        let (ib, pb) = b.at.split_last().unwrap();
        pb.cmp(pa).then(ia.cmp(ib)).then(a.order.cmp(&b.order)).then(sb.cmp(sa))
    });
    let mut rest = insertions.as_mut_slice();
    while let Some(((_, first), _)) = rest.split_first() {
        let parents = first.at[..first.at.len() - 1].to_vec();
        let n = rest.iter().take_while(|(_, i)| i.at[..i.at.len() - 1] == parents).count();
        let (group, later) = std::mem::take(&mut rest).split_at_mut(n);
        let list = list_at_mut(body, &parents);
        let mut added: usize = group.iter().map(|(_, i)| i.stmts.len()).sum();
        if parents.is_empty() {
            added += tail_len;
        }
        let old = std::mem::take(list);
        let old_len = old.len();
        let mut new = Vec::with_capacity(old_len + added);
        let mut group = group.iter_mut().peekable();
        let mut put = |new: &mut Vec<Statement>, ins: &mut Insertion| {
            inserted += ins.stmts.iter().filter(|s| matches!(s, Statement::Inst(_))).count() as u32;
            // Moved out and freed at once, not when every insertion is done: the inserted
            // code of a large kernel is most of its instrumented size, held twice otherwise.
            new.extend(std::mem::take(&mut ins.stmts));
        };
        for (k, s) in old.into_iter().enumerate() {
            while let Some((_, ins)) = group.next_if(|(_, i)| *i.at.last().unwrap() as usize == k) {
                put(&mut new, ins);
            }
            new.push(s);
        }
        for (_, ins) in group {
            assert_eq!(*ins.at.last().unwrap() as usize, old_len, "an insertion point past the end of its list");
            put(&mut new, ins);
        }
        if parents.is_empty() {
            inserted += put_tail(&mut new, &mut tail);
        }
        *list = new;
        rest = later;
    }
    if !tail.is_empty() {
        // No insertion in the top-level list.
        body.reserve_exact(tail_len);
        inserted += put_tail(body, &mut tail);
    }
    inserted
}

/// The slow paths of `tail`, each freed as it is written: the tail's own memory goes back
/// as the body grows.
fn put_tail(new: &mut Vec<Statement>, tail: &mut Vec<SlowPath>) -> u32 {
    let start = new.len();
    for slow in std::mem::take(tail) {
        slow.emit_into(new);
    }
    new[start..].iter().filter(|s| matches!(s, Statement::Inst(_))).count() as u32
}

fn list_at_mut<'a>(body: &'a mut Vec<Statement>, parents: &[u32]) -> &'a mut Vec<Statement> {
    let mut list = body;
    for &i in parents {
        match &mut list[i as usize] {
            Statement::Block(b) => list = b,
            _ => unreachable!("a path's parents are blocks"),
        }
    }
    list
}

#[cfg(test)]
mod tests {
    use gpusan_ptx::ast::{Instruction, Span};

    use super::*;

    fn label(name: &str) -> Statement {
        Statement::Label(name.into(), Span::NONE)
    }

    fn ins(at: &[u32], order: u8, name: &str) -> Insertion {
        // A label to tell insertions apart, and an instruction to count.
        Insertion {
            at: at.to_vec(),
            order,
            stmts: vec![label(name), Statement::Inst(Instruction::new("ret", &[], vec![]))],
        }
    }

    /// What the pass did before: each insertion spliced in, later points first.
    fn splice_each(body: &mut Vec<Statement>, mut insertions: Vec<Insertion>) -> u32 {
        insertions.sort_by(|a, b| b.at.cmp(&a.at).then(b.order.cmp(&a.order)));
        let mut inserted = 0;
        for i in insertions {
            inserted += i.stmts.iter().filter(|s| matches!(s, Statement::Inst(_))).count() as u32;
            let (idx, parents) = i.at.split_last().unwrap();
            let idx = *idx as usize;
            list_at_mut(body, parents).splice(idx..idx, i.stmts);
        }
        inserted
    }

    #[test]
    fn all_at_once_is_each_spliced_in_turn() {
        let body = vec![
            label("a"),
            label("b"),
            Statement::Block(vec![label("c"), Statement::Block(vec![label("d")]), label("e")]),
            label("f"),
        ];
        let insertions = || {
            vec![
                ins(&[0], 2, "check0"),
                ins(&[0], 0, "meta0"),
                ins(&[0], 1, "group0"),
                ins(&[0], 0, "meta0b"),
                ins(&[0], 2, "check0b"),
                ins(&[2], 0, "before_block"),
                ins(&[2, 1], 2, "in_block"),
                ins(&[2, 1, 0], 0, "inner"),
                ins(&[2, 1, 1], 1, "inner_end"),
                ins(&[2, 3], 0, "block_end"),
                ins(&[4], 2, "body_end"),
                ins(&[1], 1, "b1"),
            ]
        };
        let (mut want, mut got) = (body.clone(), body);
        let n = splice_each(&mut want, insertions());
        assert_eq!(insert_all(&mut got, insertions(), Vec::new()), n);
        assert_eq!(n, 12);
        assert_eq!(got, want);
    }

    #[test]
    #[should_panic(expected = "past the end")]
    fn a_point_past_the_end_is_refused() {
        insert_all(&mut vec![label("a")], vec![ins(&[2], 0, "x")], Vec::new());
    }
}
