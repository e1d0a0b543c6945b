//! Canary mode's host side, as plain logic the injected library drives (its guard thread
//! and the allocation hooks) and tests run without a GPU: per context, the host's copy of
//! the entry array the scan kernel reads (`gpusan_abi::canary`), how it grows and is
//! compacted, which commands bring the device's copy up to date before each scan, and
//! which of a scan's records still mean something when they are read.
//!
//! The array is append-only between compactions (GMOD's byte arrays): an arm takes the
//! next slot, a disarm empties its slot, and once a quarter of the slots are empty the live
//! entries are moved to the front (every slot rewritten by the next batch). A batch is
//! taken only after the previous scan finished and its records were read ([`Arrays::record`]),
//! so a record's index always names a slot of the layout that scan read.
//!
//! **Reuse races.** A scan launched before an entry was disarmed may read bytes that the
//! memory's next owner wrote (a pool hands a freed block out at once). Every arm gets a
//! generation of its own; a record counts only if its slot still holds that generation,
//! armed ([`Verdict::Dropped`] otherwise). An arm handed to the device and disarmed before
//! the update kernel is known to have run is cancelled in place ([`Disarmed::cancel`]): the
//! kernel reads the flag just before it writes, so it does not write a canary into memory
//! already handed out again.

use std::collections::{BTreeMap, HashMap};

/// The arrays' maps are keyed by slots and addresses and touched at every pool block's
/// allocation and free: a fast hash, not SipHash.
type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<ahash::AHasher>>;

use gpusan_abi::canary::{self as abi, Command, Entry, ErrorRecord, COMMAND_WRITE_BYTES};

/// Slots an array has at first.
pub const INITIAL_CAPACITY: u32 = 1024;
/// Arrays shorter than this are never compacted (not worth a rewrite).
const COMPACT_MIN: usize = 256;

/// What a slot waits for from the next batches ([`Arrays::state`]).
#[derive(Clone, Copy, Debug, Default)]
struct SlotState {
    /// The slot's command for the next batch: a later one replaces it, since only the
    /// slot's last state matters. Listed in `pending_slots` while set.
    pending: Option<Command>,
    /// The program's stream its arm (pending or held back) waits for ([`Tail::stream`]).
    waiting: Option<Waiting>,
    /// An arm a batch held back for its stream (the slot emptied on the device meanwhile):
    /// looked at again each batch without being sorted with the new commands (a training
    /// step's thousands of tensors wait for its synchronization).
    deferred: Option<Command>,
    /// In `deferred_slots`.
    listed_deferred: bool,
    /// The generation of its arm in the batch handed out last, and where its command sits
    /// in it.
    in_flight: Option<(u32, usize)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    /// `tail_len == 0`: empty.
    entry: Entry,
    key: u64,
}

/// A canary to write: past the end of an allocation the host knows by `key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    pub key: u64,
    /// The allocation's requested end: the canary's first byte.
    pub start: u64,
    pub len: u32,
    /// The program's stream the memory is the allocation's from (a pool block's): the
    /// canary may be written only after the work queued there before it was handed out
    /// (the pool's last user of the memory may still be running). `None`: at once.
    pub stream: Option<u64>,
    /// The caller's synchronization clock when the memory was handed out: a
    /// synchronization of `stream` begun later ([`StreamWaits::synced`]) means that work is
    /// done.
    pub at: u64,
}

/// An arm waiting for the work queued on a program's stream before it was handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Waiting {
    stream: u64,
    at: u64,
    /// The batch number when it was armed.
    since: u32,
}

/// How a batch treats the arms that wait for a program's stream ([`Arrays::take_batch_with`]).
pub struct StreamWaits<'a> {
    /// A capture is under way: nothing may go to the program's streams, so an arm that
    /// would need an event there stays pending.
    pub capturing: bool,
    /// Whether the program synchronized `stream` in a call begun after clock `at` (the
    /// arm's [`Tail::at`]): its bytes can be written at once, with no event of gpusan's
    /// in the program's stream.
    pub synced: &'a dyn Fn(u64, u64) -> bool,
    /// Batches an arm waits for such a synchronization before it is written after an
    /// event of gpusan's recorded in the stream instead (0: at once).
    pub patience: u32,
}

/// When an array grows and is compacted ([`Arrays::with_sizes`]).
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Slots an array has at first.
    pub initial_capacity: u32,
    /// Arrays shorter than this are never compacted.
    pub compact_min: usize,
}

impl Default for Sizes {
    fn default() -> Self {
        Sizes { initial_capacity: INITIAL_CAPACITY, compact_min: COMPACT_MIN }
    }
}

/// One context's entry array, as the host keeps it.
#[derive(Debug)]
pub struct Arrays {
    sizes: Sizes,
    slots: Vec<Slot>,
    index: FastMap<u64, u32>,
    /// Canaries by their first byte, armed ones and those kept intact: memory given back,
    /// or a pool block handed out over others, disarms or forgets what lies in it. One map
    /// for both: a pool block's free turns its entry from armed to intact in place, and its
    /// next allocation looks there once (a training step's tensors, thousands a step).
    starts: BTreeMap<u64, AtStart>,
    /// The longest canary in `starts` (how far below a range a canary reaching into it
    /// starts).
    longest: u32,
    live: usize,
    next_generation: u32,
    /// What each slot waits for from the next batches (as long as `slots`): its command,
    /// the stream its arm waits for, an arm held back, its place in the batch in flight.
    /// Kept beside the slot rather than in maps keyed by it: a pool block's allocation and
    /// free touch all of them, thousands of times a training step.
    state: Vec<SlotState>,
    /// Slots with a command for the next batch, each once.
    pending_slots: Vec<u32>,
    /// Slots that held an arm back (some may have been rearmed or disarmed since: their
    /// `deferred` is empty then), each once.
    deferred_slots: Vec<u32>,
    /// Slots holding an arm back now.
    deferred_live: usize,
    /// Every slot must be written again (compaction moved them, or a new array replaces the
    /// old one).
    rewrite: bool,
    /// Slots with an arm in the batch handed out last.
    in_flight_slots: Vec<u32>,
    /// Slots of the device's array (0 before the first batch: allocated with it).
    device_capacity: u32,
    scans: u32,
    /// Empty slots, reused by the next arms: a pool's churn (a tensor freed, another handed
    /// out, thousands of times a step) then keeps the array its size instead of growing it
    /// until a compaction rewrites every slot.
    free: Vec<u32>,
}

/// What starts at an address ([`Arrays::starts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AtStart {
    /// The canary of this key, armed.
    Armed(u64),
    /// The canary of a pool block taken back, this long, its bytes last known written and
    /// not overwritten: a block handed out again at the same place and size (a training
    /// loop's tensors, step after step) has its canary in memory already, armed at once
    /// with nothing to write and no stream to wait for.
    Intact(u32),
}

/// What the device must do before the next scan ([`Arrays::take_batch`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// Slots the device array must have: a larger array than it has means a new one
    /// (every live slot is among the commands then).
    pub capacity: u32,
    pub commands: Vec<Command>,
    /// Slots the scan reads, from 0.
    pub count: u32,
    /// The scan's number, carried by its records.
    pub scan: u32,
    /// The program's streams whose work so far the commands must wait for.
    pub streams: Vec<u64>,
}

/// A disarmed entry's arm command, handed to the device but not known to have run: the
/// caller sets its `cancelled` flag in the batch's command buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Disarmed {
    pub entry: Entry,
    pub cancel: Option<usize>,
    /// Its bytes are known written (an arm written at allocation time, or whose batch ran
    /// uncancelled): a check of them means something.
    pub written: bool,
}

/// What a scan's record means now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The canary of the allocation `key` is overwritten.
    Overwritten { key: u64, entry: Entry },
    /// The slot was disarmed or reused since the scan was launched: its memory may be
    /// another allocation's now.
    Dropped,
}

impl Default for Arrays {
    fn default() -> Self {
        Arrays::with_sizes(Sizes::default())
    }
}

impl Arrays {
    /// Arrays that grow from `sizes.initial_capacity` slots and are compacted from
    /// `sizes.compact_min` (small sizes let tests reach growth and compaction).
    pub fn with_sizes(sizes: Sizes) -> Arrays {
        Arrays {
            sizes,
            slots: Vec::new(),
            index: FastMap::default(),
            starts: BTreeMap::new(),
            longest: 0,
            live: 0,
            next_generation: 1,
            state: Vec::new(),
            pending_slots: Vec::new(),
            deferred_slots: Vec::new(),
            deferred_live: 0,
            rewrite: false,
            in_flight_slots: Vec::new(),
            device_capacity: 0,
            scans: 0,
            free: Vec::new(),
        }
    }
    /// Arms a canary: its entry (and its bytes, unless `written`: the caller wrote them
    /// already, before any later scan) is written by the next batch, before the next scan.
    /// A key armed already is disarmed first.
    pub fn arm(&mut self, tail: Tail, written: bool) -> u32 {
        if self.index.contains_key(&tail.key) {
            self.disarm(tail.key);
        }
        let generation = self.next_generation;
        // 0 never names an arm (an empty slot of a new array reads 0).
        self.next_generation = self.next_generation.wrapping_add(1).max(1);
        let entry = Entry { tail_start: tail.start, tail_len: tail.len, generation };
        // A slot emptied earlier takes it; its pending command, if any, is replaced below
        // (only a slot's last state matters), and a scan's record of its old arm no longer
        // counts (the generation differs).
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Slot { entry, key: tail.key };
                i
            }
            None => {
                self.slots.push(Slot { entry, key: tail.key });
                self.state.push(SlotState::default());
                self.slots.len() as u32 - 1
            }
        };
        self.index.insert(tail.key, i);
        // An intact canary starting there is forgotten: this arm's bytes are what counts.
        self.starts.insert(tail.start, AtStart::Armed(tail.key));
        self.longest = self.longest.max(tail.len);
        self.live += 1;
        let flags = if written { 0 } else { COMMAND_WRITE_BYTES };
        let command = Command { index: i, flags, entry, ..Command::default() };
        self.take_deferred(i);
        self.set_pending(i, command);
        self.state[i as usize].waiting = match (tail.stream, written) {
            (Some(stream), false) => Some(Waiting { stream, at: tail.at, since: self.scans }),
            _ => None,
        };
        generation
    }

    /// Disarms the canary of `key`, if armed: the device's entry is emptied by the next
    /// batch, and an arm not yet written is not written at all.
    pub fn disarm(&mut self, key: u64) -> Option<Disarmed> {
        let d = self.disarm_slot(key)?;
        if self.starts.get(&d.entry.tail_start) == Some(&AtStart::Armed(key)) {
            self.starts.remove(&d.entry.tail_start);
        }
        Some(d)
    }

    /// A pool took the block of `key` back: disarmed as [`Arrays::disarm`] does, and its
    /// canary kept intact where its bytes are known written ([`Arrays::take_intact`] finds
    /// it when the block is handed out again there).
    pub fn take_back(&mut self, key: u64) -> Option<Disarmed> {
        let d = self.disarm_slot(key)?;
        let start = d.entry.tail_start;
        if let std::collections::btree_map::Entry::Occupied(mut o) = self.starts.entry(start) {
            if *o.get() == AtStart::Armed(key) {
                if d.written && d.entry.tail_len != 0 {
                    o.insert(AtStart::Intact(d.entry.tail_len));
                } else {
                    o.remove();
                }
            }
        }
        Some(d)
    }

    /// Empties `key`'s slot (its entry in `starts` is the caller's).
    fn disarm_slot(&mut self, key: u64) -> Option<Disarmed> {
        let i = self.index.remove(&key)?;
        let slot = self.slots.get_mut(i as usize)?;
        let entry = slot.entry;
        slot.entry = Entry::default();
        self.free.push(i);
        self.live -= 1;
        let st = &mut self.state[i as usize];
        let cancel = match st.in_flight {
            Some((generation, at)) if generation == entry.generation => {
                st.in_flight = None;
                Some(at)
            }
            _ => None,
        };
        st.waiting = None;
        let pending_bytes = st.pending.is_some_and(|c| c.flags & COMMAND_WRITE_BYTES != 0);
        let held_back = self.take_deferred(i).is_some();
        self.set_pending(i, Command { index: i, entry: Entry::default(), ..Command::default() });
        Some(Disarmed { entry, cancel, written: !pending_bytes && !held_back && cancel.is_none() })
    }

    /// Sets slot `i`'s command for the next batch.
    fn set_pending(&mut self, i: u32, command: Command) {
        let st = &mut self.state[i as usize];
        if st.pending.replace(command).is_none() {
            self.pending_slots.push(i);
        }
    }

    /// Holds slot `i`'s arm back for its stream.
    fn set_deferred(&mut self, i: u32, command: Command) {
        let st = &mut self.state[i as usize];
        if st.deferred.replace(command).is_none() {
            self.deferred_live += 1;
        }
        if !st.listed_deferred {
            st.listed_deferred = true;
            self.deferred_slots.push(i);
        }
    }

    /// Slot `i`'s arm held back, if any, no longer held (its list entry goes at the next batch).
    fn take_deferred(&mut self, i: u32) -> Option<Command> {
        let c = self.state[i as usize].deferred.take();
        if c.is_some() {
            self.deferred_live -= 1;
        }
        c
    }

    /// No arm of the batch handed out last can be cancelled any more.
    fn clear_in_flight(&mut self) {
        for i in self.in_flight_slots.drain(..) {
            if let Some(st) = self.state.get_mut(i as usize) {
                st.in_flight = None;
            }
        }
    }

    /// Disarms every canary with a byte in `[lo, hi)`, and forgets the intact ones there:
    /// memory given back to the driver (no scan may read it after), or handed out again by
    /// a pool, which the program may write. The keys and their disarms.
    pub fn disarm_range(&mut self, lo: u64, hi: u64) -> Vec<(u64, Disarmed)> {
        let from = lo.saturating_sub(u64::from(self.longest));
        let mut armed = Vec::new();
        let mut intact = Vec::new();
        for (&start, at) in self.starts.range(from..hi) {
            match *at {
                AtStart::Armed(key) => {
                    let len =
                        self.index.get(&key).and_then(|&i| self.slots.get(i as usize)).map_or(0, |s| s.entry.tail_len);
                    if start + u64::from(len) > lo {
                        armed.push(key);
                    }
                }
                AtStart::Intact(len) => {
                    if start + u64::from(len) > lo {
                        intact.push(start);
                    }
                }
            }
        }
        for start in intact {
            self.starts.remove(&start);
        }
        armed.into_iter().filter_map(|k| self.disarm(k).map(|d| (k, d))).collect()
    }

    /// Keeps the canary `entry`, disarmed with its bytes known written ([`Disarmed::written`])
    /// and not reported overwritten, as in memory (unless another canary is armed there).
    pub fn keep_intact(&mut self, entry: Entry) {
        if entry.tail_len != 0 {
            let at = self.starts.entry(entry.tail_start).or_insert(AtStart::Intact(entry.tail_len));
            if let AtStart::Intact(len) = at {
                *len = entry.tail_len;
            }
            self.longest = self.longest.max(entry.tail_len);
        }
    }

    /// Whether a canary of exactly `len` bytes at `start` is in memory ([`Arrays::take_back`],
    /// [`Arrays::keep_intact`]); it is forgotten either way (the caller arms it, or the
    /// memory is another's now).
    pub fn take_intact(&mut self, start: u64, len: u32) -> bool {
        match self.starts.entry(start) {
            std::collections::btree_map::Entry::Occupied(o) => match *o.get() {
                AtStart::Intact(kept) => {
                    o.remove();
                    kept == len
                }
                AtStart::Armed(_) => false,
            },
            std::collections::btree_map::Entry::Vacant(_) => false,
        }
    }

    /// Whether `key` is armed.
    pub fn is_armed(&self, key: u64) -> bool {
        self.index.contains_key(&key)
    }

    /// Armed canaries.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Slots in use, live or empty (what a scan reads).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The batch of the next scan, after the previous one's records were read: compacts
    /// when a quarter of the slots are empty, grows the array when full. With
    /// `hold_streamed` (a stream capture is under way: gpusan must not touch the program's
    /// streams), arms that wait for a stream stay pending, their slots written empty.
    pub fn take_batch(&mut self, hold_streamed: bool) -> Batch {
        self.take_batch_with(StreamWaits { capturing: hold_streamed, synced: &|_, _| false, patience: 0 })
    }

    /// [`Arrays::take_batch`], where an arm waiting for a stream is written at once if the
    /// program synchronized the stream since, and otherwise waits for that up to
    /// `waits.patience` batches before it is written after an event in the stream (which
    /// costs the program: an event of another thread's in its stream).
    pub fn take_batch_with(&mut self, waits: StreamWaits) -> Batch {
        self.clear_in_flight();
        let empty = self.slots.len() - self.live;
        if self.slots.len() >= self.sizes.compact_min && empty * 4 >= self.slots.len() {
            self.compact();
        }
        let needed = (self.slots.len() as u32).max(self.sizes.initial_capacity);
        let capacity = if needed > self.device_capacity { needed.next_power_of_two() } else { self.device_capacity };
        if capacity != self.device_capacity {
            self.rewrite = true;
        }
        let mut commands: Vec<Command> = if self.rewrite {
            // Every slot from its host copy; an arm still pending or held back keeps its
            // bytes to write. Empty slots too: a new array's memory is not zeroed.
            let mut all = Vec::with_capacity(self.slots.len());
            for (i, (s, st)) in self.slots.iter().zip(self.state.iter_mut()).enumerate() {
                let held = st.pending.take().or(st.deferred.take());
                st.listed_deferred = false;
                let written = held.is_none_or(|c| c.flags & COMMAND_WRITE_BYTES == 0);
                let flags = if written || s.entry.tail_len == 0 { 0 } else { COMMAND_WRITE_BYTES };
                all.push(Command { index: i as u32, flags, entry: s.entry, ..Command::default() });
            }
            self.pending_slots.clear();
            self.deferred_slots.clear();
            self.deferred_live = 0;
            all
        } else {
            let state = &mut self.state;
            self.pending_slots.drain(..).filter_map(|i| state[i as usize].pending.take()).collect()
        };
        let mut streams = Vec::new();
        // Whether an arm waiting for `w` is held back another batch. Written now, it waits
        // for an event in its stream (named in `streams`) unless the program synchronized
        // the stream since.
        let scans = self.scans;
        let hold = |w: Waiting, streams: &mut Vec<u64>| {
            if (waits.synced)(w.stream, w.at) {
                false
            } else if waits.capturing || scans.wrapping_sub(w.since) < waits.patience {
                true
            } else {
                if !streams.contains(&w.stream) {
                    streams.push(w.stream);
                }
                false
            }
        };
        // Held-back arms first: those whose stream was synchronized since, or whose
        // patience ran out, join this batch.
        let mut ready = Vec::new();
        let mut still = Vec::new();
        for i in std::mem::take(&mut self.deferred_slots) {
            let st = &mut self.state[i as usize];
            let Some(c) = st.deferred else {
                st.listed_deferred = false;
                continue;
            };
            if st.waiting.is_some_and(|w| hold(w, &mut streams)) {
                still.push(i);
                continue;
            }
            st.waiting = None;
            st.deferred = None;
            st.listed_deferred = false;
            self.deferred_live -= 1;
            ready.push(c);
        }
        self.deferred_slots = still;
        for c in &mut commands {
            if c.flags & COMMAND_WRITE_BYTES == 0 {
                continue; // an empty slot, or a rewrite of an arm written already
            }
            let i = c.index;
            let Some(w) = self.state[i as usize].waiting else { continue };
            if hold(w, &mut streams) {
                // Held back: its slot is emptied on the device until it is written.
                let held = std::mem::replace(c, Command { index: i, ..Command::default() });
                self.set_deferred(i, held);
            } else {
                self.state[i as usize].waiting = None;
            }
        }
        commands.extend(ready);
        commands.sort_by_key(|c| c.index);
        for (at, c) in commands.iter().enumerate() {
            if c.flags & COMMAND_WRITE_BYTES != 0 {
                self.state[c.index as usize].in_flight = Some((c.entry.generation, at));
                self.in_flight_slots.push(c.index);
            }
        }
        self.rewrite = false;
        self.device_capacity = capacity;
        self.scans = self.scans.wrapping_add(1);
        Batch { capacity, commands, count: self.slots.len() as u32, scan: self.scans, streams }
    }

    /// Whether the next batch would change nothing on the device (no arm, disarm, rewrite
    /// or compaction waits): only a scan of the same canaries.
    pub fn unchanged(&self) -> bool {
        let empty = self.slots.len() - self.live;
        self.pending_slots.is_empty()
            && self.deferred_live == 0
            && !self.rewrite
            && !(self.slots.len() >= self.sizes.compact_min && empty * 4 >= self.slots.len())
    }

    /// Moves the live slots to the front, in their order: every slot is written again.
    fn compact(&mut self) {
        let slots = std::mem::take(&mut self.slots);
        let state = std::mem::take(&mut self.state);
        self.free.clear();
        self.index.clear();
        self.pending_slots.clear();
        self.deferred_slots.clear();
        self.deferred_live = 0;
        self.in_flight_slots.clear();
        for (s, st) in slots.into_iter().zip(state) {
            if s.entry.tail_len == 0 {
                continue;
            }
            let i = self.slots.len() as u32;
            self.index.insert(s.key, i);
            self.slots.push(s);
            self.state.push(SlotState::default());
            // An arm whose bytes are still to write (pending or held back) stays so, at its
            // new slot, waiting for the same stream.
            let unwritten = st.pending.or(st.deferred).is_some_and(|c| c.flags & COMMAND_WRITE_BYTES != 0);
            if unwritten {
                self.set_pending(
                    i,
                    Command { index: i, flags: COMMAND_WRITE_BYTES, entry: s.entry, ..Default::default() },
                );
                self.state[i as usize].waiting = st.waiting;
            }
        }
        self.rewrite = true;
    }

    /// The last batch ran (its scan is done): its arms are written, nothing to cancel.
    pub fn batch_done(&mut self) {
        self.clear_in_flight();
    }

    /// What a record of the last batch's scan means now (the layout has not changed since:
    /// batches are taken only after the records were read).
    pub fn record(&self, r: &ErrorRecord) -> Verdict {
        match self.slots.get(r.index as usize) {
            Some(s)
                if s.entry.tail_len != 0
                    && s.entry.generation == r.generation
                    && r.address.wrapping_sub(s.entry.tail_start) < u64::from(s.entry.tail_len) =>
            {
                Verdict::Overwritten { key: s.key, entry: s.entry }
            }
            _ => Verdict::Dropped,
        }
    }

    /// Bytes the host and the device keep for the arrays (host slots and index, device
    /// slots): what canary mode costs beside the canaries themselves.
    pub fn bytes(&self) -> (u64, u64) {
        let host = self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.state.capacity() * std::mem::size_of::<SlotState>()
            + self.index.capacity() * (std::mem::size_of::<(u64, u32)>() + 1);
        (host as u64, u64::from(self.device_capacity) * abi::ENTRY_BYTES as u64)
    }
}

/// The slack of a pool block that holds its canary: `[base + size, base + round_up(size +
/// padded, 512))` for the pools that hand out 512-byte multiples at 512-aligned addresses
/// (PyTorch's caching allocator, CuPy's `MemoryPool`), when the pool was asked for `padded`
/// bytes more than `size` (gpusan's PyTorch shim in canary mode); why none otherwise.
pub fn pool_slack(
    source: crate::pool_blocks::PoolSource,
    base: u64,
    size: u64,
    padded: u64,
) -> Result<u32, &'static str> {
    use crate::pool_blocks::PoolSource;
    const ROUND: u64 = 512;
    match source {
        PoolSource::Torch | PoolSource::CupyPool => {}
        PoolSource::CupyPinned => return Err("host memory"),
        PoolSource::Nvtx => return Err("NVTX region (its slack is not known)"),
        PoolSource::Other => return Err("pool block of an unknown pool (its rounding is not known)"),
    }
    if !base.is_multiple_of(ROUND) {
        return Err("pool block not at the pool's alignment");
    }
    let Some(asked) = size.checked_add(padded) else { return Err("pool block past the address space") };
    let slack = asked.next_multiple_of(ROUND) - size;
    if slack == 0 {
        return Err("size is a multiple of the pool's rounding");
    }
    Ok(slack as u32)
}

/// The bytes of a canary as the device code writes them ([`abi::canary_byte`]); the host's
/// own check of a canary it can read, and the tests'.
pub fn expected(secret: u64, start: u64, len: u32) -> impl Iterator<Item = u8> {
    (start..start + u64::from(len)).map(move |a| abi::canary_byte(secret, a, start))
}

/// The first byte of `found` (the canary's bytes from `start`) that differs, how many do,
/// and the expected and found byte there: what the scan kernel records.
pub fn compare(secret: u64, start: u64, found: &[u8]) -> Option<(u64, u32, u8, u8)> {
    let mut first = None;
    let mut bad = 0u32;
    for (i, (&f, e)) in found.iter().zip(expected(secret, start, found.len() as u32)).enumerate() {
        if f != e {
            bad += 1;
            first.get_or_insert((start + i as u64, e, f));
        }
    }
    first.map(|(a, e, f)| (a, bad, e, f))
}

/// Reads the error buffer's records (`bytes`: the whole buffer, as mapped): how many the
/// scans claimed, and those stored.
pub fn read_records(bytes: &[u8]) -> (u32, Vec<ErrorRecord>) {
    let Some(count) = bytes.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])) else {
        return (0, Vec::new());
    };
    let stored = (count as usize).min(abi::ERROR_CAPACITY);
    let records = (0..stored)
        .filter_map(|i| {
            let at = abi::ERRORS_HEADER_BYTES + i * abi::ERROR_RECORD_BYTES;
            let b = bytes.get(at..at + abi::ERROR_RECORD_BYTES)?;
            let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
            let u64_at = |o: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&b[o..o + 8]);
                u64::from_le_bytes(w)
            };
            Some(ErrorRecord {
                index: u32_at(0),
                generation: u32_at(4),
                address: u64_at(8),
                bad: u32_at(16),
                scan: u32_at(20),
                expected: b[24],
                found: b[25],
                _pad: [0; 6],
                gpu_ns: u64_at(32),
            })
        })
        .collect();
    (count, records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(key: u64) -> Tail {
        Tail { key, start: 0x10_0000 + key * 0x1000 + 100, len: 32, stream: None, at: 0 }
    }

    fn record_of(a: &Arrays, key: u64, batch_slot: u32) -> ErrorRecord {
        let s = a.slots[batch_slot as usize];
        assert_eq!(s.key, key);
        ErrorRecord {
            index: batch_slot,
            generation: s.entry.generation,
            address: s.entry.tail_start + 3,
            ..Default::default()
        }
    }

    #[test]
    fn an_arm_is_written_with_its_bytes_then_scanned() {
        let mut a = Arrays::default();
        let g = a.arm(tail(1), false);
        let b = a.take_batch(false);
        assert_eq!(b.capacity, INITIAL_CAPACITY);
        assert_eq!(b.count, 1);
        assert_eq!(b.commands.len(), 1);
        assert_eq!(b.commands[0].flags, COMMAND_WRITE_BYTES);
        assert_eq!(b.commands[0].entry.generation, g);
        assert_eq!(a.take_batch(false).commands, vec![], "nothing new: nothing to write");
    }

    #[test]
    fn a_record_of_a_live_entry_is_a_finding_and_of_a_disarmed_one_is_dropped() {
        let mut a = Arrays::default();
        a.arm(tail(1), false);
        a.arm(tail(2), false);
        a.take_batch(false);
        let r1 = record_of(&a, 1, 0);
        let r2 = record_of(&a, 2, 1);
        assert!(matches!(a.record(&r1), Verdict::Overwritten { key: 1, .. }));
        a.disarm(2);
        assert_eq!(a.record(&r2), Verdict::Dropped, "disarmed after the scan was launched");
        // Rearmed at once (a pool hands the block out again): a new generation, still dropped.
        a.arm(tail(2), false);
        assert_eq!(a.record(&r2), Verdict::Dropped);
        let outside = ErrorRecord { address: r1.address + 64, ..r1 };
        assert_eq!(a.record(&outside), Verdict::Dropped, "an address outside the canary is no record of it");
    }

    #[test]
    fn an_arm_disarmed_before_its_batch_is_never_written() {
        let mut a = Arrays::default();
        a.arm(tail(1), false);
        let d = a.disarm(1).unwrap();
        assert_eq!(d.cancel, None);
        assert!(!d.written, "never written: no check before its free");
        let b = a.take_batch(false);
        assert!(b.commands.iter().all(|c| c.flags & COMMAND_WRITE_BYTES == 0), "{b:?}");
    }

    #[test]
    fn an_arm_disarmed_while_its_batch_is_in_flight_is_cancelled_in_place() {
        let mut a = Arrays::default();
        a.arm(tail(7), false);
        a.arm(tail(8), false);
        let b = a.take_batch(false);
        let at = b.commands.iter().position(|c| c.entry.tail_start == tail(8).start).unwrap();
        assert_eq!(a.disarm(8).unwrap().cancel, Some(at));
        a.batch_done();
        let d = a.disarm(7).unwrap();
        assert_eq!((d.cancel, d.written), (None, true), "its batch ran: written, the next batch empties the slot");
    }

    #[test]
    fn an_arm_written_by_its_allocation_goes_out_as_an_entry_only() {
        let mut a = Arrays::default();
        a.arm(tail(1), true);
        assert!(a.disarm(1).unwrap().written, "written at allocation time: checked before its free");
        a.arm(tail(2), true);
        let b = a.take_batch(false);
        let arms: Vec<_> = b.commands.iter().filter(|c| c.entry.tail_len != 0).collect();
        assert_eq!(arms.len(), 1);
        assert_eq!(arms[0].flags, 0, "its bytes are the allocation's to write, not the batch's");
        let d = a.disarm(2).unwrap();
        assert_eq!((d.cancel, d.written), (None, true));
    }

    #[test]
    fn a_pool_blocks_arm_waits_for_its_stream_and_is_held_while_a_capture_runs() {
        let mut a = Arrays::default();
        a.arm(Tail { stream: Some(0x77), ..tail(1) }, false);
        let held = a.take_batch(true);
        assert_eq!(held.streams, Vec::<u64>::new(), "nothing of the program's streams is touched");
        assert_eq!(held.count, 1);
        assert_eq!(held.commands, vec![Command { index: 0, ..Command::default() }], "its slot written empty");
        let b = a.take_batch(false);
        assert_eq!(b.streams, vec![0x77]);
        assert_eq!(b.commands.len(), 1);
        assert_eq!(b.commands[0].flags, COMMAND_WRITE_BYTES);
        assert_eq!(a.take_batch(false).streams, Vec::<u64>::new(), "waited for once");
    }

    #[test]
    fn a_pool_blocks_arm_is_written_at_once_after_a_synchronization_else_after_its_patience() {
        let waits = |synced_after: Option<u64>| {
            move |stream: u64, at: u64| stream == 0x77 && synced_after.is_some_and(|s| s > at)
        };
        let mut a = Arrays::default();
        a.arm(Tail { stream: Some(0x77), at: 10, ..tail(1) }, false);
        a.arm(Tail { stream: Some(0x88), at: 11, ..tail(2) }, false);
        // A synchronization of 0x77 begun before the arm says nothing of it.
        let not_yet = waits(Some(5));
        let b = a.take_batch_with(StreamWaits { capturing: false, synced: &not_yet, patience: 3 });
        assert_eq!(b.streams, Vec::<u64>::new(), "no event in the program's streams yet");
        assert!(b.commands.iter().all(|c| c.flags == 0), "held: slots written empty: {:?}", b.commands);
        let synced = waits(Some(12));
        let b = a.take_batch_with(StreamWaits { capturing: false, synced: &synced, patience: 3 });
        assert_eq!(b.streams, Vec::<u64>::new(), "0x77 was synchronized: no event needed");
        let written: Vec<u64> =
            b.commands.iter().filter(|c| c.flags == COMMAND_WRITE_BYTES).map(|c| c.entry.tail_start).collect();
        assert_eq!(written, vec![tail(1).start], "the synchronized stream's arm only");
        let b = a.take_batch_with(StreamWaits { capturing: false, synced: &synced, patience: 3 });
        assert_eq!(b.streams, Vec::<u64>::new(), "0x88 held a third batch");
        let b = a.take_batch_with(StreamWaits { capturing: false, synced: &synced, patience: 3 });
        assert_eq!(b.streams, vec![0x88], "three batches waited: an event in the stream after all");
        assert_eq!(b.commands.iter().filter(|c| c.flags == COMMAND_WRITE_BYTES).count(), 1);
        assert!(a.unchanged(), "nothing left to write");
    }

    /// The device as the batches leave it, against the host's arms, over any sequence of
    /// arms (written or not, waiting for a stream or not), disarms and batches: no slot the
    /// scan reads ever holds a canary that is not armed (a stale one would be reported as
    /// overwritten), an armed canary's bytes are written before its entry is scanned, and
    /// after a batch with every stream synchronized every armed canary is on the device.
    #[test]
    fn the_device_never_scans_a_canary_that_is_not_armed() {
        use proptest::prelude::*;
        #[derive(Debug, Clone)]
        enum Op {
            Arm { key: u64, stream: bool, written: bool },
            Disarm { key: u64 },
            Batch { synced: bool },
        }
        let op = prop_oneof![
            (0u64..40, any::<bool>(), any::<bool>()).prop_map(|(key, stream, written)| Op::Arm {
                key,
                stream,
                written
            }),
            (0u64..40).prop_map(|key| Op::Disarm { key }),
            any::<bool>().prop_map(|synced| Op::Batch { synced }),
        ];
        let garbage = Entry { tail_start: 1, tail_len: 1, generation: u32::MAX };
        proptest!(ProptestConfig::with_cases(300), |(ops in proptest::collection::vec(op, 1..300))| {
            // Small arrays: the sequences grow and compact them.
            let mut a = Arrays::with_sizes(Sizes { initial_capacity: 4, compact_min: 8 });
            let mut device: Vec<Entry> = Vec::new();
            let mut bytes_written: std::collections::HashSet<u32> = Default::default();
            // key -> (entry generation, bytes known written by the caller)
            let mut armed: HashMap<u64, u32> = HashMap::new();
            for op in ops {
                match op {
                    Op::Arm { key, stream, written } => {
                        let t = Tail { stream: stream.then_some(0x77), at: 1, ..tail(key) };
                        let g = a.arm(t, written);
                        if written {
                            bytes_written.insert(g);
                        }
                        armed.insert(key, g);
                    }
                    Op::Disarm { key } => {
                        a.disarm(key);
                        armed.remove(&key);
                    }
                    Op::Batch { synced } => {
                        let yes = |_: u64, _: u64| true;
                        let no = |_: u64, _: u64| false;
                        let b = a.take_batch_with(StreamWaits {
                            capturing: false,
                            synced: if synced { &yes } else { &no },
                            patience: 3,
                        });
                        if b.capacity as usize != device.len() {
                            device = vec![garbage; b.capacity as usize]; // a new array: not zeroed
                        }
                        let mut named = std::collections::HashSet::new();
                        for c in &b.commands {
                            prop_assert!(named.insert(c.index), "slot {} named twice in one batch", c.index);
                            // The batch kernel's blocks each apply the commands of the slots
                            // they scan: one past the scanned slots would be applied by none.
                            prop_assert!(c.index < b.count, "slot {} past the {} scanned", c.index, b.count);
                        }
                        for c in &b.commands {
                            if c.flags & COMMAND_WRITE_BYTES != 0 {
                                bytes_written.insert(c.entry.generation);
                            }
                            device[c.index as usize] = c.entry;
                        }
                        a.batch_done();
                        let live: std::collections::HashSet<u32> = armed.values().copied().collect();
                        for (slot, e) in device.iter().enumerate().take(b.count as usize) {
                            if e.tail_len == 0 {
                                continue;
                            }
                            prop_assert!(live.contains(&e.generation), "slot {slot} scans a canary not armed: {e:?}");
                            prop_assert!(bytes_written.contains(&e.generation), "slot {slot} scanned before its bytes: {e:?}");
                        }
                        if synced {
                            let on_device: std::collections::HashSet<u32> =
                                device.iter().take(b.count as usize).map(|e| e.generation).collect();
                            for (key, g) in &armed {
                                prop_assert!(on_device.contains(g), "armed key {key} (generation {g}) not on the device");
                            }
                        }
                    }
                }
            }
        });
    }

    /// An arm held back for its stream costs a batch nothing after its first: its slot is
    /// emptied once, then it waits outside the commands until its stream is synchronized;
    /// a disarm meanwhile drops it.
    #[test]
    fn an_arm_held_back_is_emptied_once_then_waits_outside_the_batches() {
        let not_yet = |_: u64, _: u64| false;
        let synced = |_: u64, _: u64| true;
        fn held(synced: &dyn Fn(u64, u64) -> bool) -> StreamWaits<'_> {
            StreamWaits { capturing: false, synced, patience: 100 }
        }
        let mut a = Arrays::default();
        a.arm(Tail { stream: Some(0x77), at: 1, ..tail(1) }, false);
        a.arm(Tail { stream: Some(0x77), at: 1, ..tail(2) }, false);
        let b = a.take_batch_with(held(&not_yet));
        assert_eq!(b.commands.len(), 2);
        assert!(b.commands.iter().all(|c| c.entry.tail_len == 0), "slots emptied: {:?}", b.commands);
        for _ in 0..5 {
            assert!(a.take_batch_with(held(&not_yet)).commands.is_empty(), "a held arm came back into a batch");
        }
        assert!(!a.unchanged(), "held arms are work left");
        let d = a.disarm(2).unwrap();
        assert!(!d.written, "its bytes were never written");
        let b = a.take_batch_with(held(&synced));
        let written: Vec<u64> =
            b.commands.iter().filter(|c| c.flags == COMMAND_WRITE_BYTES).map(|c| c.entry.tail_start).collect();
        assert_eq!(written, vec![tail(1).start], "the arm still armed, written once its stream is synchronized");
        assert!(a.take_batch_with(held(&synced)).commands.is_empty());
    }

    #[test]
    fn compaction_keeps_pending_arms_and_the_streams_they_wait_for() {
        let mut a = Arrays::default();
        for k in 0..400 {
            a.arm(tail(k), false);
        }
        a.take_batch(false);
        // Armed before the disarms: it takes a new slot (an empty one is reused), which the
        // compaction moves.
        a.arm(Tail { stream: Some(0x55), ..tail(1000) }, false);
        for k in 0..200 {
            a.disarm(k);
        }
        let b = a.take_batch(false);
        assert_eq!(b.count, 201);
        assert_eq!(b.streams, vec![0x55]);
        let arm = b.commands.iter().find(|c| c.entry.tail_start == tail(1000).start).unwrap();
        assert_eq!((arm.index, arm.flags), (200, COMMAND_WRITE_BYTES), "moved, bytes still to write");
        let moved = b.commands.iter().find(|c| c.entry.tail_start == tail(200).start).unwrap();
        assert_eq!((moved.index, moved.flags), (0, 0), "written already: the entry only");
    }

    /// A pool's churn: a canary disarmed, another armed, many times over. The emptied slot
    /// is reused, so the array keeps its size and no batch rewrites every slot; a scan's
    /// record of the slot's old arm does not count for the new one.
    #[test]
    fn churn_reuses_emptied_slots_and_never_rewrites_the_array() {
        let mut a = Arrays::default();
        for k in 0..400 {
            a.arm(tail(k), false);
        }
        a.take_batch(false);
        for round in 0..10u64 {
            for k in 0..300 {
                a.disarm(round * 1000 + k);
                a.arm(tail(round * 1000 + 1000 + k), false);
            }
            let b = a.take_batch(false);
            assert_eq!(b.count, 400, "round {round}: the array grew");
            assert!(b.commands.len() <= 300, "round {round}: every slot rewritten ({})", b.commands.len());
        }
        assert_eq!(a.live(), 400);
    }

    #[test]
    fn a_quarter_empty_array_is_compacted_and_rewritten() {
        let mut a = Arrays::default();
        for k in 0..400 {
            a.arm(tail(k), false);
        }
        a.take_batch(false);
        for k in 0..100 {
            a.disarm(k * 4);
        }
        let b = a.take_batch(false);
        assert_eq!(b.count, 300);
        assert_eq!(a.slots(), 300);
        assert_eq!(b.commands.len(), 300, "every live slot rewritten, no bytes");
        assert!(b.commands.iter().all(|c| c.flags == 0 && c.entry.tail_len != 0));
        for (i, c) in b.commands.iter().enumerate() {
            assert_eq!(c.index, i as u32);
        }
        // A record of the new layout names the moved entry.
        let r = record_of(&a, 1, 0);
        assert!(matches!(a.record(&r), Verdict::Overwritten { key: 1, .. }));
    }

    #[test]
    fn a_full_array_grows_by_doubling_and_keeps_pending_arms_bytes() {
        let mut a = Arrays::default();
        for k in 0..INITIAL_CAPACITY as u64 {
            a.arm(tail(k), false);
        }
        assert_eq!(a.take_batch(false).capacity, INITIAL_CAPACITY);
        a.arm(tail(5000), false);
        let b = a.take_batch(false);
        assert_eq!(b.capacity, 2 * INITIAL_CAPACITY);
        assert_eq!(b.commands.len(), INITIAL_CAPACITY as usize + 1, "the new array gets every slot");
        let with_bytes: Vec<_> = b.commands.iter().filter(|c| c.flags & COMMAND_WRITE_BYTES != 0).collect();
        assert_eq!(with_bytes.len(), 1);
        assert_eq!(with_bytes[0].entry.tail_start, tail(5000).start);
    }

    #[test]
    fn a_range_given_back_disarms_every_canary_reaching_into_it() {
        let mut a = Arrays::default();
        a.arm(Tail { key: 1, start: 1000, len: 100, stream: None, at: 0 }, false);
        a.arm(Tail { key: 2, start: 2000, len: 10, stream: None, at: 0 }, false);
        a.arm(Tail { key: 3, start: 3000, len: 10, stream: None, at: 0 }, false);
        let gone: Vec<u64> = a.disarm_range(1050, 2005).into_iter().map(|(k, _)| k).collect();
        assert_eq!(gone, vec![1, 2]);
        assert!(a.is_armed(3));
        assert!(a.disarm_range(3010, 4000).is_empty(), "ends where the range starts");
    }

    #[test]
    fn generations_are_never_zero_and_differ() {
        let mut a = Arrays { next_generation: u32::MAX, ..Arrays::default() };
        let g1 = a.arm(tail(1), false);
        let g2 = a.arm(tail(2), false);
        assert_eq!((g1, g2), (u32::MAX, 1));
    }

    #[test]
    fn compare_finds_the_first_bad_byte_and_counts_them() {
        let secret = 0x5eed;
        let start = 0x7000_0000_0003;
        let mut bytes: Vec<u8> = expected(secret, start, 40).collect();
        assert_eq!(compare(secret, start, &bytes), None);
        bytes[5] ^= 0xff;
        bytes[9] = bytes[9].wrapping_add(1);
        let e = abi::canary_byte(secret, start + 5, start);
        assert_eq!(compare(secret, start, &bytes), Some((start + 5, 2, e, e ^ 0xff)));
    }

    #[test]
    fn records_are_read_as_the_kernel_writes_them() {
        let mut buf = vec![0u8; abi::ERRORS_BYTES];
        buf[..4].copy_from_slice(&3u32.to_le_bytes());
        let at = abi::ERRORS_HEADER_BYTES + abi::ERROR_RECORD_BYTES;
        let r = ErrorRecord {
            index: 4,
            generation: 9,
            address: 0xabc,
            bad: 2,
            scan: 7,
            expected: 1,
            found: 2,
            _pad: [0; 6],
            gpu_ns: 0x1234_5678_9abc_def0,
        };
        // SAFETY: ErrorRecord is repr(C) plain data of exactly ERROR_RECORD_BYTES.
        let raw: [u8; abi::ERROR_RECORD_BYTES] = unsafe { std::mem::transmute(r) };
        buf[at..at + abi::ERROR_RECORD_BYTES].copy_from_slice(&raw);
        let (count, records) = read_records(&buf);
        assert_eq!(count, 3);
        assert_eq!(records.len(), 3);
        assert_eq!(records[1], r);
    }

    #[test]
    fn the_arrays_cost_at_most_32_bytes_of_device_memory_per_live_canary_at_scale() {
        let mut a = Arrays::default();
        for k in 0..20_000 {
            a.arm(tail(k), false);
        }
        a.take_batch(false);
        let (_, device) = a.bytes();
        assert!(device / 20_000 <= 32, "{device}");
    }

    #[test]
    fn a_padded_pool_blocks_slack_reaches_past_its_rounding() {
        use crate::pool_blocks::PoolSource;
        assert_eq!(pool_slack(PoolSource::Torch, 0x1000, 4096, 0), Err("size is a multiple of the pool's rounding"));
        assert_eq!(pool_slack(PoolSource::Torch, 0x1000, 4096, 32), Ok(512), "asked for 4128: a block of 4608");
        assert_eq!(pool_slack(PoolSource::Torch, 0x1000, 4000, 32), Ok(96), "4032 rounds to 4096, as 4000 does");
        assert_eq!(pool_slack(PoolSource::Torch, 0x1000, 4000, 0), Ok(96));
        assert_eq!(pool_slack(PoolSource::Torch, 0x1000, u64::MAX - 8, 32), Err("pool block past the address space"));
        assert!(pool_slack(PoolSource::Nvtx, 0x1000, 4096, 32).is_err(), "only the pools whose rounding is known");
    }

    #[test]
    fn a_block_handed_out_again_where_it_was_finds_its_canary_in_memory() {
        let mut a = Arrays::default();
        let t = Tail { stream: Some(0x77), ..tail(1) };
        a.arm(t, false);
        a.take_batch(false);
        a.take_batch(false); // the arm's batch ran
        let d = a.take_back(1).unwrap();
        assert!(d.written);
        assert!(!a.is_armed(1));
        assert!(!a.take_intact(t.start, 16), "another length: not the canary in memory");
        a.keep_intact(d.entry);
        assert!(a.take_intact(t.start, t.len));
        assert!(!a.take_intact(t.start, t.len), "taken once");
        // Memory handed out over it, or given back, forgets it.
        a.keep_intact(d.entry);
        a.disarm_range(t.start - 100, t.start + 1);
        assert!(!a.take_intact(t.start, t.len));
        a.keep_intact(d.entry);
        a.disarm_range(t.start + u64::from(t.len), t.start + 1000);
        assert!(a.take_intact(t.start, t.len), "a range past it leaves it");
    }

    #[test]
    fn a_block_taken_back_before_its_canary_was_written_keeps_nothing() {
        let mut a = Arrays::default();
        let t = Tail { stream: Some(0x77), ..tail(1) };
        a.arm(t, false);
        let d = a.take_back(1).unwrap();
        assert!(!d.written, "its batch never ran");
        assert!(!a.take_intact(t.start, t.len), "bytes never written are not in memory");
        assert_eq!(a.take_back(1), None, "taken back once");
    }

    #[test]
    fn an_arm_where_a_canary_was_kept_intact_replaces_it_and_reaches_ranges() {
        let mut a = Arrays::default();
        a.arm(tail(1), true);
        a.take_back(1).unwrap();
        // Another allocation's canary armed at the same first byte (its bytes are its own).
        a.arm(Tail { key: 2, ..tail(1) }, true);
        assert!(!a.take_intact(tail(1).start, tail(1).len), "the arm replaced what was kept");
        assert!(a.is_armed(2), "take_intact leaves an armed canary alone");
        let gone = a.disarm_range(tail(1).start + 1, tail(1).start + 2);
        assert_eq!(gone.iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec![2], "a canary reaching into the range");
        assert_eq!(a.live(), 0);
    }
}
