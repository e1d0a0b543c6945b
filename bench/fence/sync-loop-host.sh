#!/usr/bin/env bash
# What a fenced tenant's launch-then-synchronize loop costs on the host (issue 18's
# standalone overhead for programs that wait for every kernel), on any machine: the fake
# driver of the tests, whose calls do almost nothing, so the difference between the program
# run natively and as a tenant of `gpusan serve` is the forwarding's round trips.
# ROUNDS runs each (default 5), alternating; medians. SPIN_US sets how long both sides watch
# for the other's frame before blocking (`gpusan serve --spin-us`, `GPUSAN_FENCE_SPIN_US`;
# unset: the default).
#
#   bench/fence/sync-loop-host.sh [DIR] [OUT.json] [N]   DIR: gpusan (default target/release)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$(cd "${1:-$repo/target/release}" && pwd)
out=${2:-${OUT:-/tmp}/sync-loop-host.json}
n=${3:-20000}
work=$(mktemp -d /tmp/gpusan-syncloop.XXXXXX)
trap 'kill "$manager" 2>/dev/null || true; rm -rf "$work"' EXIT
cc -O2 -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$work/libcuda.so.1" "$repo/crates/cli/tests/fake_cuda/libcuda.c"
ln -s libcuda.so.1 "$work/libcuda.so"
cc -O2 -o "$work/tenant" "$repo/crates/cli/tests/fake_cuda/tenant.c" -L"$work" -lcuda -ldl -Wl,-rpath,"$work"
"$dir/gpusan" serve --driver "$work/libcuda.so.1" --socket "$work/s.sock" ${SPIN_US:+--spin-us "$SPIN_US"} 2> "$work/manager.log" &
[ -n "${SPIN_US:-}" ] && export GPUSAN_FENCE_SPIN_US=$SPIN_US
manager=$!
for _ in $(seq 100); do "$dir/gpusan" serve --status --socket "$work/s.sock" > /dev/null 2>&1 && break; sleep 0.05; done
python3 - "$dir/gpusan" "$work" "$out" "$n" "${ROUNDS:-5}" "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'PY'
import json, statistics, subprocess, sys
gpusan, work, out, n, rounds, commit = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
tools = {"native": [], "tenant": [gpusan, "run", "--mode", "fence", "--fence-memory-log2", "26", "--server", f"{work}/s.sock", "--"]}
runs = {t: [] for t in tools}
for r in range(rounds):
    for t, prefix in (tools.items() if r % 2 == 0 else reversed(tools.items())):
        p = subprocess.run(prefix + [f"{work}/tenant", "syncloop", n], capture_output=True, text=True, timeout=300)
        line = [l for l in p.stdout.splitlines() if l.startswith("syncloop")]
        if p.returncode != 0 or not line:
            sys.exit(f"{t}: rc={p.returncode}\n{p.stdout}\n{p.stderr}")
        runs[t].append(float(line[-1].split("=")[1]))
med = {t: statistics.median(v) for t, v in runs.items()}
import os
doc = {"what": "ns per launch + synchronization of a fake-driver program, natively and as a fenced tenant "
               "(bench/fence/sync-loop-host.sh): the forwarding's host cost", "commit": commit, "iterations": int(n),
       "spin_us": os.environ.get("GPUSAN_FENCE_SPIN_US", "default"),
       "median_ns": med, "added_ns": round(med["tenant"] - med["native"], 1), "runs_ns": runs}
json.dump(doc, open(out, "w"), indent=1)
print(json.dumps({k: doc[k] for k in ("median_ns", "added_ns")}))
PY
