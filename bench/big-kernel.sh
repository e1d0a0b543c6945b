#!/usr/bin/env bash
# Time and peak memory of `gpusan instrument` on one very large kernel (the chain example:
# N blocks, each a guarded branch around a global load and store) at 10,000 and 50,000
# blocks, medians of RUNS runs each (wall seconds and peak RSS by `/usr/bin/time -f %M`).
# Issue 12's bar: 50,000 blocks in at most 3 x 5 = 15 times the time of 10,000, and under
# 1 GB. With BASE=<gpusan binary of another build> that build is measured too, in the same
# sitting, one run of each build after the other.
#
# Usage: [BASE=/path/to/old/gpusan] bench/big-kernel.sh [RUNS]   → bench/results/big-kernel.json
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
runs=${1:-3}
work=bench/work/big-kernel
mkdir -p "$work" bench/results
cargo build --release --quiet -p gpusan-cli -p gpusan-passes --example chain
target=${CARGO_TARGET_DIR:-target}
bin=$target/release/gpusan
for n in 10000 50000; do
  "$target/release/examples/chain" "$n" > "$work/chain$n.ptx"
done

python3 - "$bin" "${BASE:-}" "$runs" "$work" <<'PY' > bench/results/big-kernel.json
import json, statistics, subprocess, sys

new, base, runs, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
builds = {"new": new} | ({"base": base} if base else {})

def once(binary, n):
    r = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", binary, "instrument", f"{work}/chain{n}.ptx", "-o", f"{work}/out{n}.ptx"],
        check=True, capture_output=True, text=True)
    seconds, kb = r.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kb) * 1024

samples = {b: {n: [] for n in (10000, 50000)} for b in builds}
for _ in range(runs):
    for n in (10000, 50000):
        for b, binary in builds.items():
            samples[b][n].append(once(binary, n))

result = {"runs": runs, "bar": {"time_ratio_max": 15, "peak_rss_50k_max_bytes": 10**9}}
for b in builds:
    m = {n: {"seconds": statistics.median(s for s, _ in samples[b][n]),
             "peak_rss_bytes": int(statistics.median(k for _, k in samples[b][n])),
             "samples": [{"seconds": s, "peak_rss_bytes": k} for s, k in samples[b][n]]}
         for n in (10000, 50000)}
    ratio = m[50000]["seconds"] / m[10000]["seconds"]
    result[b] = {"blocks_10000": m[10000], "blocks_50000": m[50000],
                 "time_ratio_50k_over_10k": round(ratio, 2),
                 "memory_ratio_50k_over_10k": round(m[50000]["peak_rss_bytes"] / m[10000]["peak_rss_bytes"], 2),
                 "ok": ratio <= 15 and m[50000]["peak_rss_bytes"] < 10**9}
print(json.dumps(result, indent=2))
PY
cat bench/results/big-kernel.json
python3 -c 'import json,sys; sys.exit(0 if json.load(open("bench/results/big-kernel.json"))["new"]["ok"] else 1)'
