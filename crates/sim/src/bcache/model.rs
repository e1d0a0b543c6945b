//! The two designs the paper compares for fetching bounds information (§IV, §V-A), each a
//! miss path over the mesh of [`super::mesh`], timed message by message:
//!
//! - **HardBound** with a directory (MSI): a core's L1 bounds cache (write-back), the L2
//!   banked over every node (the block's home is `block % nodes`), the directory at the
//!   home. A read miss goes to the home; a block another core holds modified is fetched
//!   from it; else from the home's L2, else from memory. A write needs the block modified
//!   here: the home invalidates the other copies first.
//! - **BCache**: a write-through L1 bounds cache; four bounds nodes, each the closest of its
//!   cluster (§IV-D), with an L2 bounds slice and a 4-bit duplication vector per block,
//!   joined by their own 2×2 bounds network. A miss asks its cluster's bounds node; that
//!   one asks the other three over the bounds network, then memory. A write goes through
//!   to the bounds node, which invalidates the other bounds nodes' copies, and they their
//!   clusters' L1 copies.
//! - **BCache-3D** (§IV-E): the same, with the bounds nodes on a second layer one hop (a
//!   through-silicon via) above every node.
//!
//! A miss's latency is split as the paper's Fig. 9 splits it: the request (to the home or
//! the bounds node), the lookup (directory and owner, or the other bounds nodes), memory,
//! and the data's transfer to the requestor.
//!
//! **Read-only data** (§IV-F, Fig. 10) goes through the L1 bounds cache too. In BCache, an
//! L2 bounds slice then holds a block without duplicates: its home is the bounds node
//! `block % 4`. A miss goes to the core's own bounds node over the mesh, on to the home
//! over the bounds network, and back the same way. In HardBound it is any block of the
//! shared L2 ([`Machine::read_only`]).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::cache::{Cache, Geometry};
use super::mesh::{best_place, Mesh, Node, Timing};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Design {
    HardBound,
    BCache,
    #[serde(rename = "bcache3d")]
    BCache3d,
}

impl Design {
    pub fn name(self) -> &'static str {
        match self {
            Design::HardBound => "hardbound",
            Design::BCache => "bcache",
            Design::BCache3d => "bcache3d",
        }
    }
}

/// The paper's Table II (its CMP cache simulator's rows) by default. Table II also lists an
/// 80-cycle directory access, for the full-system simulator (Simics/FeS2); the cache
/// simulator's rows give the L2's 4 cycles only, so the directory, beside each L2 slice,
/// costs nothing more by default (`directory_cycles`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub width: u32,
    pub height: u32,
    pub network: Timing,
    pub l1: Geometry,
    pub l1_cycles: u64,
    /// HardBound's L2 slice per node.
    pub l2_slice: Geometry,
    /// BCache's L2 bounds slice per bounds node.
    pub bounds_slice: Geometry,
    pub l2_cycles: u64,
    pub directory_cycles: u64,
    /// BCache: a bounds store whose block no bounds node holds fetches it from memory first
    /// (as HardBound's write miss does); off, the bounds node takes the record without its
    /// block. The paper does not say which.
    #[serde(default)]
    pub write_fetch: bool,
    pub memory_cycles: u64,
    /// Flits of a data message (a 64-byte block in 16-byte flits, and its head).
    pub data_flits: u64,
}

impl Config {
    pub fn mesh(width: u32, height: u32) -> Config {
        Config {
            width,
            height,
            network: Timing::default(),
            l1: Geometry { bytes: 1024, ways: 4, block: 64 },
            l1_cycles: 2,
            l2_slice: Geometry { bytes: 128 << 10, ways: 4, block: 64 },
            bounds_slice: Geometry { bytes: 256 << 10, ways: 4, block: 64 },
            l2_cycles: 4,
            directory_cycles: 0,
            write_fetch: false,
            memory_cycles: 300,
            data_flits: 5,
        }
    }
}

/// Cycles of a miss, in the paper's four parts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub request: u64,
    pub lookup: u64,
    pub memory: u64,
    pub transfer: u64,
}

impl Latency {
    pub fn total(&self) -> u64 {
        self.request + self.lookup + self.memory + self.transfer
    }
}

/// What a run counted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub accesses: u64,
    pub writes: u64,
    pub l1_hits: u64,
    pub misses: u64,
    /// Sums over misses.
    pub latency: Latency,
    pub memory_accesses: u64,
    pub invalidations: u64,
    pub network_messages: u64,
    pub network_contention: u64,
}

impl Stats {
    /// Average cycles per miss, in total and by part.
    pub fn average(&self) -> (f64, [f64; 4]) {
        let n = self.misses.max(1) as f64;
        let l = &self.latency;
        (l.total() as f64 / n, [l.request as f64 / n, l.lookup as f64 / n, l.memory as f64 / n, l.transfer as f64 / n])
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Line {
    Shared,
    Modified,
}

pub struct Machine {
    design: Design,
    config: Config,
    mesh: Mesh,
    /// BCache: the 2×2 network joining the bounds nodes.
    bounds_net: Mesh,
    l1: Vec<Cache>,
    /// HardBound: each node's L2 slice; BCache: each bounds node's bounds slice.
    l2: Vec<Cache>,
    /// HardBound's directory: per block, each core's copy.
    directory: HashMap<u64, Vec<(u32, Line)>, std::hash::BuildHasherDefault<ahash::AHasher>>,
    /// BCache: the bounds nodes (mesh ids) and each node's cluster (an index into them).
    bounds_nodes: Vec<u32>,
    cluster: Vec<usize>,
    /// HardBound: the other copies of the block a miss is for (kept to save an allocation
    /// per miss).
    others: Vec<(u32, Line)>,
    pub stats: Stats,
}

impl Machine {
    pub fn new(design: Design, config: Config) -> Machine {
        let mesh = Mesh::new(config.width, config.height, config.network);
        let nodes = mesh.nodes();
        // Four clusters, the mesh's quarters; each one's bounds node where its average
        // distance is least.
        let (cw, ch) = ((config.width / 2).max(1), (config.height / 2).max(1));
        let mut bounds_nodes = Vec::new();
        let mut cluster = vec![0usize; nodes as usize];
        for (k, (ox, oy)) in [(0, 0), (cw, 0), (0, ch), (cw, ch)].into_iter().enumerate() {
            let members: Vec<Node> = (oy..(oy + ch).min(config.height))
                .flat_map(|y| (ox..(ox + cw).min(config.width)).map(move |x| Node { x, y }))
                .collect();
            if members.is_empty() {
                continue;
            }
            for m in &members {
                cluster[mesh.id(*m) as usize] = bounds_nodes.len();
            }
            let _ = k;
            bounds_nodes.push(mesh.id(best_place(&members)));
        }
        let l2 = match design {
            Design::HardBound => (0..nodes).map(|_| Cache::new(config.l2_slice)).collect(),
            _ => bounds_nodes.iter().map(|_| Cache::new(config.bounds_slice)).collect(),
        };
        Machine {
            design,
            config,
            bounds_net: Mesh::new(2, 2, config.network),
            mesh,
            l1: (0..nodes).map(|_| Cache::new(config.l1)).collect(),
            l2,
            directory: HashMap::default(),
            bounds_nodes,
            cluster,
            others: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// The bounds nodes' mesh ids (BCache).
    pub fn bounds_nodes(&self) -> &[u32] {
        &self.bounds_nodes
    }

    /// Each bounds node's place and its cluster's average distance to it (§IV-D, Fig. 7),
    /// beside the average distance to the cluster's corner (where a naive placement puts
    /// it).
    pub fn placement(&self) -> Vec<(Node, f64, f64)> {
        self.bounds_nodes
            .iter()
            .enumerate()
            .map(|(k, &b)| {
                let members: Vec<Node> = (0..self.mesh.nodes())
                    .filter(|&n| self.cluster[n as usize] == k)
                    .map(|n| self.mesh.node(n))
                    .collect();
                let corner = members.iter().copied().min_by_key(|n| (n.y, n.x)).unwrap_or(Node { x: 0, y: 0 });
                let at = self.mesh.node(b);
                (at, super::mesh::avg_dist(at, &members), super::mesh::avg_dist(corner, &members))
            })
            .collect()
    }

    /// Core `core` reads (or writes) the bounds information at `addr` at cycle `at`: the
    /// cycle it is done.
    /// No message will be sent before cycle `now` any more: the links forget what ended by
    /// then.
    fn advance(&mut self, now: u64) {
        self.mesh.advance(now);
        self.bounds_net.advance(now);
    }

    /// Accesses must come in the order of `at` (each message they send is at `at` or later).
    pub fn access(&mut self, core: u32, addr: u64, write: bool, at: u64) -> u64 {
        self.advance(at);
        self.stats.accesses += 1;
        self.stats.writes += u64::from(write);
        let block = addr / self.config.l1.block;
        let done = match self.design {
            Design::HardBound => self.hardbound(core, block, write, at),
            Design::BCache | Design::BCache3d => self.bcache(core, block, write, at),
        };
        self.stats.network_messages = self.mesh.messages + self.bounds_net.messages;
        self.stats.network_contention = self.mesh.contention + self.bounds_net.contention;
        done
    }

    /// Core `core` reads read-only data at `addr` at cycle `at` (in the order of `at`): the
    /// cycle it is done.
    pub fn read_only(&mut self, core: u32, addr: u64, at: u64) -> u64 {
        if self.design == Design::HardBound {
            return self.access(core, addr, false, at);
        }
        self.advance(at);
        self.stats.accesses += 1;
        let c = self.config;
        let block = addr / c.l1.block;
        if self.l1[core as usize].lookup(block) {
            self.stats.l1_hits += 1;
            return at + c.l1_cycles;
        }
        let k = self.cluster[core as usize];
        let bn = self.bounds_nodes[k];
        let home = (block % self.bounds_nodes.len() as u64) as usize;
        let t0 = at + c.l1_cycles;
        let t1 = self.bounds_hop(core, bn, 1, t0);
        let mut l = Latency { request: t1 - t0, ..Latency::default() };
        let asked = if home == k { t1 } else { self.bounds_net.send(k as u32, home as u32, 1, t1) };
        let mut t = asked + c.l2_cycles;
        if !self.l2[home].lookup(block) {
            l.memory = c.memory_cycles;
            self.stats.memory_accesses += 1;
            t += c.memory_cycles;
            self.l2[home].insert(block);
        }
        let back = if home == k { t } else { self.bounds_net.send(home as u32, k as u32, c.data_flits, t) };
        l.lookup = back - t1 - l.memory;
        let arrived = self.bounds_hop(bn, core, c.data_flits, back);
        l.transfer = arrived - back;
        self.l1[core as usize].insert(block);
        self.miss(l);
        arrived
    }

    /// A message between a node and a bounds node sent at `t`: over the mesh, or (BCache-3D)
    /// one vertical hop to the layer above; the cycle its last flit arrives.
    fn bounds_hop(&mut self, from: u32, to: u32, flits: u64, t: u64) -> u64 {
        if self.design == Design::BCache3d {
            let n = self.mesh.timing;
            t + n.router + n.link + n.router + flits.saturating_sub(1)
        } else {
            self.mesh.send(from, to, flits, t)
        }
    }

    fn miss(&mut self, l: Latency) {
        self.stats.misses += 1;
        let s = &mut self.stats.latency;
        s.request += l.request;
        s.lookup += l.lookup;
        s.memory += l.memory;
        s.transfer += l.transfer;
    }

    fn hardbound(&mut self, core: u32, block: u64, write: bool, at: u64) -> u64 {
        let c = self.config;
        let in_l1 = self.l1[core as usize].lookup(block);
        // The block's directory entry, looked up once for the whole miss (the fields are
        // borrowed apart: the mesh, the caches and the entry).
        let entry = self.directory.entry(block).or_default();
        let mine = entry.iter().find(|(n, _)| *n == core).map(|(_, l)| *l);
        if in_l1 && mine.is_some() && (!write || mine == Some(Line::Modified)) {
            self.stats.l1_hits += 1;
            return at + c.l1_cycles;
        }
        let home = (block % u64::from(self.mesh.nodes())) as u32;
        let t0 = at + c.l1_cycles;
        let t1 = self.mesh.send(core, home, 1, t0);
        let mut l = Latency { request: t1 - t0, ..Latency::default() };
        let mut t = t1 + c.directory_cycles;
        let others = &mut self.others;
        others.clear();
        others.extend(entry.iter().copied().filter(|(n, _)| *n != core));
        let owner = others.iter().find(|(_, s)| *s == Line::Modified).map(|(n, _)| *n);
        let data_from = if let Some(o) = owner {
            // The owner sends the block; it keeps a shared copy (or none, for a write).
            let forwarded = self.mesh.send(home, o, 1, t);
            l.lookup = forwarded - t1;
            t = forwarded + c.l1_cycles;
            self.l2[home as usize].insert(block);
            o
        } else if self.l2[home as usize].lookup(block) {
            l.lookup = c.directory_cycles + c.l2_cycles;
            t += c.l2_cycles;
            home
        } else {
            l.lookup = c.directory_cycles + c.l2_cycles;
            t += c.l2_cycles + c.memory_cycles;
            l.memory = c.memory_cycles;
            self.stats.memory_accesses += 1;
            self.l2[home as usize].insert(block);
            home
        };
        if write {
            // The other copies are invalidated (in parallel; the data waits for the last ack).
            let mut last = t;
            for &(n, _) in others.iter() {
                let inv = self.mesh.send(home, n, 1, t);
                self.l1[n as usize].invalidate(block);
                self.stats.invalidations += 1;
                last = last.max(self.mesh.send(n, home, 1, inv));
            }
            l.lookup += last - t;
            t = last;
        }
        let arrived = self.mesh.send(data_from, core, c.data_flits, t);
        l.transfer = arrived - t;
        if write {
            entry.clear();
            entry.push((core, Line::Modified));
        } else {
            for e in entry.iter_mut() {
                e.1 = Line::Shared;
            }
            if mine.is_none() {
                entry.push((core, Line::Shared));
            }
        }
        if let Some(evicted) = self.l1[core as usize].insert(block) {
            if let Some(v) = self.directory.get_mut(&evicted) {
                v.retain(|(n, _)| *n != core);
            }
        }
        self.miss(l);
        arrived
    }

    fn bcache(&mut self, core: u32, block: u64, write: bool, at: u64) -> u64 {
        let c = self.config;
        let k = self.cluster[core as usize];
        let bn = self.bounds_nodes[k];
        if write {
            // Write-through: the block goes to the bounds node, which invalidates every
            // other copy (bounds nodes, then their clusters' L1s).
            self.l1[core as usize].insert(block);
            let t0 = at + c.l1_cycles;
            let t1 = self.bounds_hop(core, bn, c.data_flits, t0);
            let mut done = t1 + c.l2_cycles;
            let mut memory = 0;
            if c.write_fetch && !self.l2[k].holds(block) {
                match (0..self.bounds_nodes.len()).find(|&j| j != k && self.l2[j].holds(block)) {
                    Some(j) => {
                        let asked = self.bounds_net.send(k as u32, j as u32, 1, done);
                        done = self.bounds_net.send(j as u32, k as u32, c.data_flits, asked + c.l2_cycles);
                    }
                    None => {
                        memory = c.memory_cycles;
                        done += memory;
                        self.stats.memory_accesses += 1;
                    }
                }
            }
            self.l2[k].insert(block);
            for j in 0..self.bounds_nodes.len() {
                if j == k || !self.l2[j].holds(block) {
                    continue;
                }
                let other = self.bounds_nodes[j];
                let inv = self.bounds_net.send(k as u32, j as u32, 1, done);
                self.l2[j].invalidate(block);
                self.stats.invalidations += 1;
                for n in 0..self.mesh.nodes() {
                    if self.cluster[n as usize] == j && self.l1[n as usize].invalidate(block) {
                        self.bounds_hop(other, n, 1, inv);
                        self.stats.invalidations += 1;
                    }
                }
            }
            // The writer's own cluster's other L1 copies.
            for n in 0..self.mesh.nodes() {
                if n != core && self.cluster[n as usize] == k && self.l1[n as usize].invalidate(block) {
                    self.bounds_hop(bn, n, 1, done);
                    self.stats.invalidations += 1;
                }
            }
            self.miss(Latency { request: t1 - t0, lookup: done - t1 - memory, memory, ..Latency::default() });
            return done;
        }
        if self.l1[core as usize].lookup(block) {
            self.stats.l1_hits += 1;
            return at + c.l1_cycles;
        }
        let t0 = at + c.l1_cycles;
        let t1 = self.bounds_hop(core, bn, 1, t0);
        let mut l = Latency { request: t1 - t0, ..Latency::default() };
        let mut t = t1 + c.l2_cycles;
        if self.l2[k].lookup(block) {
            l.lookup = c.l2_cycles;
        } else {
            // Ask the other bounds nodes; the nearest holder sends the block.
            let holders: Vec<usize> =
                (0..self.bounds_nodes.len()).filter(|&j| j != k && self.l2[j].holds(block)).collect();
            let nearest = holders.iter().copied().min_by_key(|&j| self.bounds_net.hops(k as u32, j as u32));
            match nearest {
                Some(j) => {
                    let asked = self.bounds_net.send(k as u32, j as u32, 1, t);
                    self.l2[j].lookup(block);
                    t = self.bounds_net.send(j as u32, k as u32, c.data_flits, asked + c.l2_cycles);
                    l.lookup = t - t1;
                }
                None => {
                    // Every other bounds node says no: the last answer decides. The asks go
                    // out together; the answers come back in the order they leave (the
                    // links are reserved in time order).
                    let others: Vec<u32> = (0..self.bounds_nodes.len() as u32).filter(|&j| j != k as u32).collect();
                    let mut answers: Vec<(u64, u32)> =
                        others.iter().map(|&j| (self.bounds_net.send(k as u32, j, 1, t) + c.l2_cycles, j)).collect();
                    answers.sort_unstable();
                    let mut last = t;
                    for (at, j) in answers {
                        last = last.max(self.bounds_net.send(j, k as u32, 1, at));
                    }
                    l.lookup = last - t1;
                    l.memory = c.memory_cycles;
                    self.stats.memory_accesses += 1;
                    t = last + c.memory_cycles;
                }
            }
            self.l2[k].insert(block);
        }
        let arrived = self.bounds_hop(bn, core, c.data_flits, t);
        l.transfer = arrived - t;
        self.l1[core as usize].insert(block);
        self.miss(l);
        arrived
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4×4, Table II. Core 3 (3,0) misses on a block no one has; its bounds node is node 2
    /// (2,0), one hop. Request 1 hop: 5 + 1 + 5 = 11. Lookup: L2 (4), then the three other
    /// bounds nodes asked over the 2×2 bounds network and their no's back; the farthest
    /// (diagonal, 2 hops) answers last: 17 there, one more cycle because its ask leaves on
    /// the same link as the ask to node 0 (X first), 4 in its L2, 17 back: 4 + 39 = 43.
    /// Memory 300. Transfer 1 hop, 5 flits: 15.
    #[test]
    fn a_bcache_miss_to_memory_by_hand() {
        let mut m = Machine::new(Design::BCache, Config::mesh(4, 4));
        assert_eq!(m.bounds_nodes(), &[0, 2, 8, 10], "the paper's Fig. 5(b)");
        let done = m.access(3, 0x4000, false, 0);
        let s = &m.stats;
        assert_eq!(s.latency, Latency { request: 11, lookup: 43, memory: 300, transfer: 15 });
        assert_eq!(done, 2 + 11 + 43 + 300 + 15);
        // Node 7 (3,1), same cluster: its bounds node has it now.
        let t = m.access(7, 0x4000, false, 1000);
        assert_eq!(t - 1000, 2 + 17 + 4 + 21, "2 hops there and back, L2 hit");
        // Node 11 (3,2), another cluster: its bounds node (10) gets it from node 2 over the
        // bounds network (1 hop: 11 there, 4, 15 back) instead of memory.
        let before = m.stats.memory_accesses;
        m.access(11, 0x4000, false, 2000);
        assert_eq!(m.stats.memory_accesses, before);
        assert_eq!(m.stats.misses, 3);
    }

    /// With `write_fetch`, a bounds store to a block no bounds node holds waits for memory;
    /// one another bounds node holds comes over the bounds network; without it, neither.
    #[test]
    fn a_bcache_store_fetches_its_block_only_with_write_fetch() {
        let cfg = Config::mesh(4, 4);
        let mut plain = Machine::new(Design::BCache, cfg);
        let mut fetch = Machine::new(Design::BCache, Config { write_fetch: true, ..cfg });
        let (a, b) = (plain.access(0, 0x4000, true, 0), fetch.access(0, 0x4000, true, 0));
        assert_eq!(b - a, cfg.memory_cycles);
        assert_eq!((plain.stats.memory_accesses, fetch.stats.memory_accesses), (0, 1));
        assert_eq!(fetch.stats.latency.memory, cfg.memory_cycles);
        // Core 15's bounds node is another one: the block comes from core 0's over the bounds
        // network, not from memory.
        let t = fetch.access(15, 0x4000, true, 10_000);
        assert!(t - 10_000 < cfg.memory_cycles, "{}", t - 10_000);
        assert_eq!(fetch.stats.memory_accesses, 1);
    }

    #[test]
    fn a_hardbound_miss_goes_to_the_blocks_home() {
        let mut m = Machine::new(Design::HardBound, Config::mesh(4, 4));
        // Block 0x4000 / 64 = 256, home 256 % 16 = 0. Core 15 (3,3): 6 hops.
        m.access(15, 0x4000, false, 0);
        let l = m.stats.latency;
        assert_eq!(l.request, 6 * 6 + 5);
        assert_eq!(l.lookup, 4);
        assert_eq!(l.memory, 300);
        assert_eq!(l.transfer, 6 * 6 + 5 + 4);
        // A second read by core 15 hits its L1.
        m.access(15, 0x4000, false, 1000);
        assert_eq!(m.stats.l1_hits, 1);
        // Core 1 writes it: core 15's copy is invalidated; core 15 misses again.
        m.access(1, 0x4000, true, 2000);
        assert_eq!(m.stats.invalidations, 1);
        m.access(15, 0x4000, false, 3000);
        assert_eq!(m.stats.l1_hits, 1);
        assert_eq!(m.stats.memory_accesses, 1, "the owner's copy, not memory");
    }

    /// Read-only block 0x4000 / 64 = 256: home bounds node 256 % 4 = 0 (node 0). Core 3's
    /// own is node 2 (index 1): 1 mesh hop (11), 1 bounds-network hop there (11), L2 4 and
    /// memory 300, back 1 hop with 5 flits (15), then the mesh (15).
    #[test]
    fn read_only_data_lives_at_one_home_bounds_node() {
        let mut m = Machine::new(Design::BCache, Config::mesh(4, 4));
        m.read_only(3, 0x4000, 0);
        assert_eq!(m.stats.latency, Latency { request: 11, lookup: 11 + 4 + 15, memory: 300, transfer: 15 });
        // Another cluster's core finds it at the same home: no second copy, no memory.
        m.read_only(15, 0x4000, 1000);
        assert_eq!(m.stats.memory_accesses, 1);
        assert!(m.l2[0].holds(256) && !m.l2[3].holds(256));
    }

    /// Fig. 7's placements: the middle of each quarter of the mesh.
    #[test]
    fn bounds_nodes_sit_where_their_clusters_are_nearest() {
        let m = Machine::new(Design::BCache, Config::mesh(16, 8));
        let p = m.placement();
        // 8×4 clusters: the best node is one of the middle ones, 3.0 hops from its cluster
        // on average (2.0 across, 1.0 down); a corner is 5.0.
        assert_eq!(p[0].0, Node { x: 3, y: 1 });
        assert_eq!((p[0].1, p[0].2), (3.0, 5.0));
        assert!(p.iter().all(|&(_, best, corner)| best < corner));
    }

    #[test]
    fn three_d_reaches_every_bounds_node_in_one_hop() {
        let mut flat = Machine::new(Design::BCache, Config::mesh(16, 8));
        let mut stacked = Machine::new(Design::BCache3d, Config::mesh(16, 8));
        flat.access(127, 0x100, false, 0);
        stacked.access(127, 0x100, false, 0);
        assert_eq!(stacked.stats.latency.request, 11, "one vertical hop");
        assert!(flat.stats.latency.request > stacked.stats.latency.request * 2);
    }
}
