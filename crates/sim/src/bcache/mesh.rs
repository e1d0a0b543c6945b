//! The on-chip network of BCache's tiled CMP (§IV-A): a 2-D mesh of routers, XY routing,
//! wormhole switching modelled at the head flit. A message of `flits` flits crossing a link
//! takes the link's first free stretch of `flits` cycles from when its head gets there, and
//! holds it; each hop costs the router's pipeline and the link. Each link keeps the stretches
//! reserved on it, so a message sent later in the program but earlier in time (a request
//! after another request's reply was scheduled) passes in the gaps. Deterministic: the same
//! messages in the same order give the same times.

/// A node's place: column `x`, row `y`; nodes are numbered row by row (`y * width + x`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub x: u32,
    pub y: u32,
}

/// The network's timing (the paper's Table II: a fixed 5-cycle pipelined router).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Timing {
    /// Cycles a head flit spends in each router it passes (the source's included).
    pub router: u64,
    /// Cycles on each link.
    pub link: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing { router: 5, link: 1 }
    }
}

/// A `width` × `height` mesh, with each link's next free cycle (one per direction).
#[derive(Clone, Debug)]
pub struct Mesh {
    pub width: u32,
    pub height: u32,
    pub timing: Timing,
    /// Per node, per outgoing direction (east, west, south, north): the stretches of cycles
    /// the link is reserved for, `(start, end)`, by start.
    busy: Vec<[std::collections::VecDeque<(u64, u64)>; 4]>,
    /// No message is sent before this cycle any more ([`Mesh::advance`]): stretches that end
    /// by then are dropped.
    watermark: u64,
    /// Cycles messages waited for busy links, in all.
    pub contention: u64,
    pub messages: u64,
}

impl Mesh {
    pub fn new(width: u32, height: u32, timing: Timing) -> Mesh {
        let busy = (0..width * height).map(|_| Default::default()).collect();
        Mesh { width, height, timing, busy, watermark: 0, contention: 0, messages: 0 }
    }

    pub fn nodes(&self) -> u32 {
        self.width * self.height
    }

    pub fn node(&self, id: u32) -> Node {
        Node { x: id % self.width, y: id / self.width }
    }

    pub fn id(&self, n: Node) -> u32 {
        n.y * self.width + n.x
    }

    /// Hops from `a` to `b` (the Manhattan distance: XY routing is minimal).
    pub fn hops(&self, a: u32, b: u32) -> u64 {
        let (p, q) = (self.node(a), self.node(b));
        u64::from(p.x.abs_diff(q.x) + p.y.abs_diff(q.y))
    }

    /// The latency of a message from `a` to `b` with no other traffic: each hop's router
    /// and link, the destination's router, and the flits behind the head.
    pub fn unloaded(&self, a: u32, b: u32, flits: u64) -> u64 {
        let h = self.hops(a, b);
        h * (self.timing.router + self.timing.link) + self.timing.router + flits.saturating_sub(1)
    }

    /// Sends `flits` flits from `a` to `b`, injected at cycle `at`: the cycle its last flit
    /// arrives. X first, then Y.
    pub fn send(&mut self, a: u32, b: u32, flits: u64, at: u64) -> u64 {
        self.messages += 1;
        let (mut p, q) = (self.node(a), self.node(b));
        let mut t = at;
        while p != q {
            let dir = if p.x < q.x {
                0
            } else if p.x > q.x {
                1
            } else if p.y < q.y {
                2
            } else {
                3
            };
            let here = self.id(p) as usize;
            t += self.timing.router;
            let start = self.reserve(here, dir, t, flits.max(1));
            self.contention += start - t;
            t = start + self.timing.link;
            match dir {
                0 => p.x += 1,
                1 => p.x -= 1,
                2 => p.y += 1,
                _ => p.y -= 1,
            }
        }
        t + self.timing.router + flits.saturating_sub(1)
    }
}

impl Mesh {
    /// The first cycle from `t` on when link `dir` of node `here` is free for `len` cycles,
    /// reserved.
    fn reserve(&mut self, here: usize, dir: usize, t: u64, len: u64) -> u64 {
        let watermark = self.watermark;
        let busy = &mut self.busy[here][dir];
        // Stretches are kept by start; those at the front that ended are forgotten (one that
        // ended behind a later-ending one stays a while: it only costs the search).
        while busy.front().is_some_and(|&(_, end)| end <= watermark) {
            busy.pop_front();
        }
        // Most often the link is free from `t` on: every reservation it holds ends by then.
        if busy.back().is_none_or(|&(_, end)| end <= t) {
            busy.push_back((t, t + len));
            return t;
        }
        let mut start = t;
        let mut at = busy.partition_point(|&(s, _)| s < start);
        // A stretch that began before `start` may still hold the link.
        if at > 0 && busy[at - 1].1 > start {
            start = busy[at - 1].1;
        }
        while at < busy.len() && busy[at].0 < start + len {
            start = start.max(busy[at].1);
            at += 1;
        }
        busy.insert(at, (start, start + len));
        start
    }

    /// No message will be sent before cycle `now` from here on: the links forget what
    /// ended by then.
    pub fn advance(&mut self, now: u64) {
        self.watermark = self.watermark.max(now);
    }
}

/// The average distance from `p` to every node of `cluster` (§IV-D's `AvgDist`).
pub fn avg_dist(p: Node, cluster: &[Node]) -> f64 {
    let sum: u32 = cluster.iter().map(|q| p.x.abs_diff(q.x) + p.y.abs_diff(q.y)).sum();
    f64::from(sum) / cluster.len().max(1) as f64
}

/// The node of `cluster` with the least average distance to the others (the first such in
/// row order): where a cluster's bounds node goes.
pub fn best_place(cluster: &[Node]) -> Node {
    let mut best = cluster[0];
    let mut best_d = f64::MAX;
    let mut sorted = cluster.to_vec();
    sorted.sort_by_key(|n| (n.y, n.x));
    for &n in &sorted {
        let d = avg_dist(n, cluster);
        if d < best_d - 1e-12 {
            best = n;
            best_d = d;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-worked on a 4×4 mesh, router 5, link 1: node 0 (0,0) to node 14 (2,3) is 5 hops;
    /// a 4-flit message: 5 × (5 + 1) + 5 + 3 = 38 cycles.
    #[test]
    fn an_unloaded_message_takes_its_hops_and_its_flits() {
        let mut m = Mesh::new(4, 4, Timing::default());
        assert_eq!(m.hops(0, 14), 5);
        assert_eq!(m.unloaded(0, 14, 4), 38);
        assert_eq!(m.send(0, 14, 4, 100), 138);
        assert_eq!(m.contention, 0);
        // To itself: its own router only.
        assert_eq!(m.unloaded(5, 5, 1), 5);
    }

    /// Two 4-flit messages injected together over the same first link: the second waits the
    /// first's 4 flits there.
    #[test]
    fn a_busy_link_delays_the_next_message() {
        let mut m = Mesh::new(4, 4, Timing::default());
        let first = m.send(0, 3, 4, 0);
        let second = m.send(0, 3, 4, 0);
        assert_eq!(first, m.unloaded(0, 3, 4));
        assert_eq!(second - first, 4);
        assert_eq!(m.contention, 4);
        // A message going the other way uses other links: no wait.
        let back = m.send(3, 0, 4, 0);
        assert_eq!(back, m.unloaded(3, 0, 4));
    }

    /// A message scheduled for later holds only its own cycles: one sent afterwards for an
    /// earlier time passes before it.
    #[test]
    fn a_later_reservation_does_not_block_an_earlier_message() {
        let mut m = Mesh::new(4, 4, Timing::default());
        let late = m.send(0, 1, 4, 1000);
        assert_eq!(late, 1000 + m.unloaded(0, 1, 4));
        assert_eq!(m.send(0, 1, 4, 0), m.unloaded(0, 1, 4));
        // One whose head reaches the link at 1003 would overlap the late one's [1005, 1009):
        // it waits for its end, 6 cycles.
        assert_eq!(m.send(0, 1, 4, 998), 1009 + 1 + 5 + 3);
        assert_eq!(m.contention, 6);
    }

    /// §IV-D: in a 2×2 cluster every node is as close (1.0 on average); in a 4×2 one the
    /// two middle columns are; in a 4×4 the four central nodes.
    #[test]
    fn the_bounds_node_goes_where_the_average_distance_is_least() {
        let cluster =
            |w: u32, h: u32| -> Vec<Node> { (0..h).flat_map(|y| (0..w).map(move |x| Node { x, y })).collect() };
        let c22 = cluster(2, 2);
        assert_eq!(avg_dist(Node { x: 0, y: 0 }, &c22), 1.0);
        assert_eq!(best_place(&c22), Node { x: 0, y: 0 });
        let c42 = cluster(4, 2);
        assert_eq!(avg_dist(Node { x: 1, y: 0 }, &c42), 1.5);
        assert_eq!(avg_dist(Node { x: 0, y: 0 }, &c42), 2.0);
        assert_eq!(best_place(&c42), Node { x: 1, y: 0 });
        assert_eq!(best_place(&cluster(4, 4)), Node { x: 1, y: 1 });
    }
}
