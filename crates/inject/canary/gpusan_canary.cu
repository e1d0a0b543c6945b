// Canary mode's device code: the update kernel, which writes canary bytes and entries, and
// the scan kernel, which checks them (`gpusan_abi::canary` is the reference of the layouts
// and of the canary's bytes). One file, so the writer and the scanner cannot disagree; its
// hash is held at compile time to the Rust one's vectors (`gpusan_canary_abi.h`, written by
// `crates/inject/build.rs` from `gpusan_abi::canary`), so a mismatch fails the build.
// Built by `crates/inject/build.rs` with the pinned nvcc (sm_90 SASS and compute_90 PTX)
// and embedded in the injected library (`routes/canary`), which launches both on a
// low-priority non-blocking stream of its own.
#include <stdint.h>

#include "gpusan_canary_abi.h"

struct Entry {
    uint64_t tail_start;
    uint32_t tail_len;
    uint32_t generation;
};
struct Command {
    uint32_t index;
    uint32_t flags;
    Entry entry;
    uint32_t cancelled;
    uint32_t pad;
};
struct ErrorRecord {
    uint32_t index;
    uint32_t generation;
    uint64_t address;
    uint32_t bad;
    uint32_t scan;
    uint8_t expected;
    uint8_t found;
    uint8_t pad[6];
    uint64_t gpu_ns;
};
static_assert(sizeof(Entry) == GPUSAN_CANARY_ENTRY_BYTES, "entry layout");
static_assert(sizeof(Command) == GPUSAN_CANARY_COMMAND_BYTES, "command layout");
static_assert(sizeof(ErrorRecord) == GPUSAN_CANARY_ERROR_RECORD_BYTES, "record layout");

// splitmix64's finalizer.
__host__ __device__ constexpr uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
__host__ __device__ constexpr uint64_t rotl29(uint64_t x) { return (x << 29) | (x >> 35); }
__host__ __device__ constexpr uint64_t canary_word(uint64_t secret, uint64_t word, uint64_t end) {
    return mix64(secret ^ word ^ rotl29(end));
}
GPUSAN_CANARY_VECTORS

__device__ __forceinline__ uint8_t canary_byte(uint64_t secret, uint64_t a, uint64_t end) {
    return (uint8_t)(canary_word(secret, a & ~7ull, end) >> (8 * (a & 7)));
}

// One allocation's canary, written as it is made (its entry comes later, by a command
// without bytes).
extern "C" __global__ void gpusan_canary_write(uint64_t secret, uint64_t start, uint32_t len) {
    volatile uint8_t *p = (volatile uint8_t *)start;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < len; i += gridDim.x * blockDim.x)
        p[i] = canary_byte(secret, start + i, start);
}

// One warp per command: the canary's bytes (when asked and not cancelled), then the entry.
// The cancel flag is the host's, in mapped memory: read just before writing, so an arm the
// program's pool already took back is not written over the block's next owner.
// The commands `warp`, `warp + warps`, … : a warp each (its lanes write the canary's bytes).
__device__ __forceinline__ void update_commands(uint64_t secret, Entry *entries, const Command *commands,
                                                uint32_t count, uint32_t warp, uint32_t warps) {
    uint32_t lane = threadIdx.x & 31;
    for (uint32_t c = warp; c < count; c += warps) {
        const volatile Command *cmd = commands + c;
        uint32_t cancelled = lane == 0 ? cmd->cancelled : 0;
        cancelled = __shfl_sync(0xffffffffu, cancelled, 0);
        Entry e;
        e.tail_start = cmd->entry.tail_start;
        e.tail_len = cmd->entry.tail_len;
        e.generation = cmd->entry.generation;
        uint32_t index = cmd->index;
        if (cancelled) {
            if (lane == 0) entries[index] = Entry{0, 0, 0};
            continue;
        }
        if (cmd->flags & GPUSAN_CANARY_WRITE_BYTES) {
            volatile uint8_t *p = (volatile uint8_t *)e.tail_start;
            for (uint32_t i = lane; i < e.tail_len; i += 32) p[i] = canary_byte(secret, e.tail_start + i, e.tail_start);
        }
        __syncwarp();
        if (lane == 0) entries[index] = e;
    }
}

extern "C" __global__ void gpusan_canary_update(uint64_t secret, Entry *entries, const Command *commands,
                                                uint32_t count) {
    update_commands(secret, entries, commands, count, (blockIdx.x * blockDim.x + threadIdx.x) >> 5,
                    (gridDim.x * blockDim.x) >> 5);
}

__device__ __forceinline__ void check_range(uint64_t secret, uint64_t start, uint64_t lo, uint64_t hi, uint32_t &bad,
                                            uint64_t &first_bad, uint8_t &expected, uint8_t &found) {
    for (uint64_t w = lo & ~7ull; w < hi; w += 8) {
        uint64_t have = *(const volatile uint64_t *)w;
        uint64_t want = canary_word(secret, w, start);
        uint64_t diff = have ^ want;
        if (!diff) continue;
        for (int b = 0; b < 8; b++) {
            uint64_t a = w + b;
            if (a < lo || a >= hi || !((diff >> (8 * b)) & 0xff)) continue;
            if (bad++ == 0) {
                first_bad = a;
                expected = (uint8_t)(want >> (8 * b));
                found = (uint8_t)(have >> (8 * b));
            }
        }
    }
}

// One thread per entry (entries are read coalesced; what is checked of a canary is at most
// 2 × GPUSAN_CANARY_EDGE_BYTES: its first and last bytes, gpusan_abi::canary::checked); a
// bad one claims and writes a record, stamped with %globaltimer. The entries `first`,
// `first + stride`, …: a thread each.
__device__ __forceinline__ void scan_entries(uint64_t secret, const Entry *entries, uint32_t count, uint8_t *errors,
                                             uint32_t scan, uint32_t first, uint32_t stride) {
    for (uint32_t i = first; i < count; i += stride) {
        Entry e = entries[i];
        if (e.tail_len == 0) continue;
        uint64_t start = e.tail_start, end = start + e.tail_len;
        uint32_t bad = 0;
        uint64_t first_bad = 0;
        uint8_t expected = 0, found = 0;
        if (e.tail_len <= 2 * GPUSAN_CANARY_EDGE_BYTES) {
            check_range(secret, start, start, end, bad, first_bad, expected, found);
        } else {
            check_range(secret, start, start, start + GPUSAN_CANARY_EDGE_BYTES, bad, first_bad, expected, found);
            check_range(secret, start, end - GPUSAN_CANARY_EDGE_BYTES, end, bad, first_bad, expected, found);
        }
        if (bad == 0) continue;
        // When the bad bytes were seen, on the clock the program's kernels read too: the
        // detection latency, GPU clock to GPU clock.
        uint64_t now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        uint32_t slot = atomicAdd((uint32_t *)errors, 1u);
        if (slot >= GPUSAN_CANARY_ERROR_CAPACITY) continue;
        ErrorRecord *r =
            (ErrorRecord *)(errors + GPUSAN_CANARY_ERRORS_HEADER_BYTES + slot * GPUSAN_CANARY_ERROR_RECORD_BYTES);
        r->index = i;
        r->generation = e.generation;
        r->address = first_bad;
        r->bad = bad;
        r->scan = scan;
        r->expected = expected;
        r->found = found;
        r->gpu_ns = now;
        __threadfence_system();
    }
}

extern "C" __global__ void gpusan_canary_scan(uint64_t secret, const Entry *entries, uint32_t count,
                                              uint8_t *errors, uint32_t scan) {
    scan_entries(secret, entries, count, errors, scan, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

// A small batch (at most GPUSAN_CANARY_BATCH_MAX_COMMANDS commands) in one launch, over
// any number of blocks: block b owns a run of `per` entries and the commands naming them.
// Each block copies the batch's commands from mapped host memory into shared memory in one
// coalesced read (rather than a read of host memory per field, command after command),
// applies its own, a warp each, then, once every warp of the block is past them, scans its
// entries; no block waits for another. The guard launches one block
// (`GPUSAN_CANARY_DIAG=wide_batch`: one per BLOCK_THREADS entries, so that no block holds
// an SM long; no faster for a PyTorch step on the H100, bench/results/h100-issue17 call
// 20). The cancel flag is read with the rest, just before the block writes
// (gpusan_abi::canary::BATCH_KERNEL).
extern "C" __global__ void gpusan_canary_batch(uint64_t secret, Entry *entries, const Command *commands,
                                               uint32_t ncommands, uint32_t count, uint8_t *errors, uint32_t scan) {
    __shared__ Command staged[GPUSAN_CANARY_BATCH_MAX_COMMANDS];
    if (ncommands > GPUSAN_CANARY_BATCH_MAX_COMMANDS) ncommands = GPUSAN_CANARY_BATCH_MAX_COMMANDS;
    uint32_t per = (count + gridDim.x - 1) / gridDim.x;
    uint32_t lo = blockIdx.x * per, hi = min(lo + per, count);
    const volatile uint64_t *src = (const volatile uint64_t *)commands;
    uint64_t *dst = (uint64_t *)staged;
    uint32_t words = ncommands * (uint32_t)(sizeof(Command) / 8);
    for (uint32_t w = threadIdx.x; w < words; w += blockDim.x) dst[w] = src[w];
    __syncthreads();
    uint32_t lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    for (uint32_t c = threadIdx.x >> 5; c < ncommands; c += warps) {
        const Command &cmd = staged[c];
        uint32_t index = cmd.index;
        if (index < lo || index >= hi) continue;
        if (cmd.cancelled) {
            if (lane == 0) entries[index] = Entry{0, 0, 0};
            continue;
        }
        Entry e = cmd.entry;
        if (cmd.flags & GPUSAN_CANARY_WRITE_BYTES) {
            volatile uint8_t *p = (volatile uint8_t *)e.tail_start;
            for (uint32_t i = lane; i < e.tail_len; i += 32) p[i] = canary_byte(secret, e.tail_start + i, e.tail_start);
        }
        __syncwarp();
        if (lane == 0) entries[index] = e;
    }
    __syncthreads();
    scan_entries(secret, entries, hi, errors, scan, lo + threadIdx.x, blockDim.x);
}
