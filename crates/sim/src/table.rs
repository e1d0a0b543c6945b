//! The metadata table a LOADMETA miss walks (GPUArmor §4.2, Fig. 9): how many metadata
//! loads it takes to find an allocation among the live ones, for each organisation.
//! - A linked list, newest allocation at its head: the allocation's place from the head.
//! - A balanced binary search tree keyed by base address: the nodes a search visits.
//! - The "speed of light" oracle table: one load, always.
//!
//! A root pointer in no allocation walks the whole list, or a failed search's path.

use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Organisation {
    List,
    Bst,
    Oracle,
}

impl Organisation {
    /// Bytes of one load: list and tree nodes are 32 bytes (16 of metadata, two 8-byte
    /// links), the oracle's entries 16.
    pub fn node_bytes(self) -> u64 {
        match self {
            Organisation::List | Organisation::Bst => 32,
            Organisation::Oracle => 16,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Organisation::List => "list",
            Organisation::Bst => "bst",
            Organisation::Oracle => "oracle",
        }
    }
}

/// The live allocations.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// Live ids, ascending: ids grow with time, so the list's head is the largest.
    ids: Vec<u32>,
    /// Live bases, ascending (the tree's keys).
    bases: Vec<u64>,
    live: HashMap<u32, u64>,
}

impl Table {
    pub fn alloc(&mut self, id: u32, base: u64) {
        if id == 0 || self.live.contains_key(&id) {
            return;
        }
        self.live.insert(id, base);
        let i = self.ids.partition_point(|&x| x < id);
        self.ids.insert(i, id);
        let j = self.bases.partition_point(|&x| x < base);
        self.bases.insert(j, base);
    }

    pub fn free(&mut self, id: u32) {
        let Some(base) = self.live.remove(&id) else { return };
        if let Ok(i) = self.ids.binary_search(&id) {
            self.ids.remove(i);
        }
        if let Ok(j) = self.bases.binary_search(&base) {
            self.bases.remove(j);
        }
    }

    pub fn live(&self) -> usize {
        self.ids.len()
    }

    pub fn is_live(&self, id: u32) -> bool {
        self.live.contains_key(&id)
    }

    /// Loads a walk of `org` makes to find allocation `id` (0, or not live: the root
    /// pointer `addr` lies in no allocation the table holds), at least 1.
    pub fn loads(&self, org: Organisation, id: u32, addr: u64) -> u32 {
        let n = self.ids.len();
        let loads = match (org, self.live.get(&id)) {
            (Organisation::Oracle, _) => 1,
            (Organisation::List, Some(_)) => n - self.ids.partition_point(|&x| x < id),
            (Organisation::List, None) => n,
            (Organisation::Bst, Some(&base)) => search_path(&self.bases, base, true),
            (Organisation::Bst, None) => search_path(&self.bases, addr, false),
        };
        loads.max(1) as u32
    }
}

/// Nodes a search of a balanced tree over `keys` (sorted) visits: the tree is the one a
/// binary search over the array describes. `found`: `key` is among them (the search stops
/// at it); otherwise it goes down to a leaf.
fn search_path(keys: &[u64], key: u64, found: bool) -> usize {
    let (mut lo, mut hi, mut steps) = (0usize, keys.len(), 0usize);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        steps += 1;
        if found && keys[mid] == key {
            break;
        }
        if key < keys[mid] {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seven() -> Table {
        let mut t = Table::default();
        for id in 1..=7u32 {
            t.alloc(id, u64::from(id) * 0x1000);
        }
        t
    }

    /// Hand-worked: 7 allocations, ids 1-7 at 0x1000-0x7000.
    #[test]
    fn walk_lengths_by_organisation() {
        let t = seven();
        // List, newest (7) at the head: 7 is one load, 1 is seven.
        assert_eq!(t.loads(Organisation::List, 7, 0x7000), 1);
        assert_eq!(t.loads(Organisation::List, 1, 0x1000), 7);
        // Tree over bases 1..7 (root 4; 2, 6; 1, 3, 5, 7): depth 1, 2, 3.
        assert_eq!(t.loads(Organisation::Bst, 4, 0x4000), 1);
        assert_eq!(t.loads(Organisation::Bst, 6, 0x6000), 2);
        assert_eq!(t.loads(Organisation::Bst, 1, 0x1000), 3);
        // In no allocation: the whole list, a full path down the tree.
        assert_eq!(t.loads(Organisation::List, 0, 0x9_0000), 7);
        assert_eq!(t.loads(Organisation::Bst, 0, 0x9_0000), 3);
        assert_eq!(t.loads(Organisation::Oracle, 3, 0x3000), 1);
    }

    #[test]
    fn a_freed_allocation_leaves_the_walks() {
        let mut t = seven();
        t.free(7);
        assert_eq!(t.loads(Organisation::List, 1, 0x1000), 6);
        assert_eq!(t.loads(Organisation::List, 6, 0x6000), 1);
        assert!(!t.is_live(7));
        assert_eq!(t.loads(Organisation::List, 7, 0x7000), 6, "no longer found: the whole list");
        assert_eq!(t.live(), 6);
    }
}
