#!/usr/bin/env bash
# PTX front-end benchmark: parse and print speed (MB/s, one core) and peak memory
# (max RSS / input size) of gpusan-ptx on one large nvcc-generated PTX module.
#
# Usage: bench/ptx-frontend.sh [RUNS]        (default 5 timed runs per mode, after 1 warm-up)
# Environment: BENCH_PTX=FILE  benchmark this PTX file instead of the generated one.
#
# Steps, each idempotent:
#  1. the pinned CUDA toolchain (scripts/setup-toolchain.sh);
#  2. bench/work/big.cu from bench/ptx-frontend/big.cu.in + gen_big.py: ~2000 explicit
#     instantiations of templated GEMM / stencil / reduction / transpose kernels;
#  3. bench/work/big.ptx = nvcc -arch=sm_90 -ptx -O3 -lineinfo big.cu (≈85 MB; a few
#     minutes of one core; skipped when big.cu and nvcc are unchanged since last time);
#  4. the measuring program bench/ptx-frontend (its own workspace), --release;
#  5. `time`: best and median of RUNS runs per mode in one process; `mem`: one fresh
#     process per mode, peak RSS from /proc/self/status VmHWM (cross-checked with
#     /usr/bin/time -v when present);
#  6. bench/results/ptx_frontend.json.
# Targets: parse+print >= 100 MB/s, peak RSS <= 4x the input.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
runs=${1:-5}
work=bench/work
mkdir -p "$work" bench/results

# shellcheck disable=SC1090
source <(scripts/setup-toolchain.sh --env)

nvcc_flags=(-arch=sm_90 -ptx -O3 -lineinfo)
if [ -n "${BENCH_PTX:-}" ]; then
  ptx=$BENCH_PTX
  nvcc_s=null
else
  python3 bench/ptx-frontend/gen_big.py "$work/big.cu" >&2
  ptx=$work/big.ptx
  key=$( (sha256sum "$work/big.cu"; nvcc --version; echo "${nvcc_flags[*]}") | sha256sum | cut -c1-16)
  if [ -s "$ptx" ] && [ -f "$work/big.ptx.stamp" ] && [ "$(head -1 "$work/big.ptx.stamp")" = "$key" ]; then
    nvcc_s=$(sed -n 2p "$work/big.ptx.stamp")
    echo "bench: $ptx is up to date (nvcc took ${nvcc_s}s)" >&2
  else
    echo "bench: nvcc ${nvcc_flags[*]} $work/big.cu (a few minutes)" >&2
    t0=$(date +%s.%N)
    nvcc "${nvcc_flags[@]}" "$work/big.cu" -o "$ptx.tmp"
    t1=$(date +%s.%N)
    mv "$ptx.tmp" "$ptx"
    nvcc_s=$(python3 -c "print(round($t1 - $t0, 1))")
    printf '%s\n%s\n' "$key" "$nvcc_s" > "$work/big.ptx.stamp"
  fi
fi
size=$(stat -c %s "$ptx")
echo "bench: input $ptx, $size bytes" >&2

export CARGO_TARGET_DIR="$root/$work/target"
cargo build --release --quiet --manifest-path bench/ptx-frontend/Cargo.toml
bin=$CARGO_TARGET_DIR/release/ptx-frontend-bench

# Timings are only meaningful on an idle machine: wait (up to BENCH_WAIT_IDLE seconds,
# default 300) for the 1-minute load average to drop below 0.5, and record it.
waited=0
while [ "$waited" -lt "${BENCH_WAIT_IDLE:-300}" ] && python3 -c 'import os,sys; sys.exit(os.getloadavg()[0] < 0.5)'; do
  sleep 10
  waited=$((waited + 10))
done
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "bench: load average $load_before (waited ${waited}s for it to settle)" >&2
echo "bench: timing (best and median of $runs runs per mode, 1 thread)" >&2
timing=$("$bin" time "$ptx" "$runs")
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

mem=()
for mode in parse print parse_print stream; do
  if [ -x /usr/bin/time ]; then
    out=$(/usr/bin/time -v "$bin" mem "$mode" "$ptx" 2>"$work/time-$mode.txt")
    maxrss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time-$mode.txt")
  else
    out=$("$bin" mem "$mode" "$ptx")
    maxrss_kb=0
  fi
  mem+=("$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["time_v_max_rss_bytes"]=int(sys.argv[2] or 0)*1024; print(json.dumps(d))' "$out" "$maxrss_kb")")
  echo "bench: mem $mode: ${mem[-1]}" >&2
done

python3 - "$timing" "$ptx" "$nvcc_s" "$runs" "${nvcc_flags[*]}" "$load_before" "$load_after" "${mem[@]}" <<'EOF'
import datetime, hashlib, json, os, pathlib, platform, subprocess, sys
timing, ptx, nvcc_s, runs, flags, load_before, load_after, *mem = sys.argv[1:]
t = json.loads(timing)
def sh(*a):
    try:
        return subprocess.run(a, capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return None
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), None)
src = hashlib.sha256()
for p in sorted(pathlib.Path("crates/ptx/src").rglob("*.rs")):
    src.update(p.read_bytes())
mem = {m["mode"]: m for m in map(json.loads, mem)}
e2e = t["modes"]["parse_print"]["best_mb_per_s"]
rec = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "command": "bench/ptx-frontend.sh " + runs,
    "git_commit": sh("git", "rev-parse", "HEAD"),
    "git_dirty": bool(sh("git", "status", "--porcelain", "--untracked-files=no")),
    "crates_ptx_src_sha256": src.hexdigest()[:16],
    "machine": {"nproc": os.cpu_count(), "cpu": cpu, "os": platform.platform(), "rustc": sh("rustc", "--version")},
    "load_average_before_after_timing": [load_before, load_after],
    "input": {
        "path": ptx,
        "bytes": t["input_bytes"],
        "generator": "bench/ptx-frontend/gen_big.py + big.cu.in (template instantiation)",
        "nvcc_flags": flags,
        "nvcc": (sh("nvcc", "--version") or "").splitlines()[-1:],
        "nvcc_seconds": None if nvcc_s == "null" else float(nvcc_s),
        "items": t["items"],
        "functions": t["functions"],
        "body_statements": t["body_statements"],
    },
    "output_bytes": t["output_bytes"],
    "print_parse_idempotent": t["print_parse_idempotent"],
    "mb": "10^6 bytes",
    "threads": 1,
    "speed": t["modes"],
    "peak_rss": {
        m: {
            "peak_rss_bytes": d["peak_rss_bytes"],
            "ratio_to_input": d["peak_rss_ratio"],
            "ratio_to_input_above_baseline": d["peak_over_baseline_ratio"],
            "time_v_max_rss_bytes": d["time_v_max_rss_bytes"],
        }
        for m, d in mem.items()
    },
    "notes": {
        "parse": "source -> Module; the module is dropped outside the clock",
        "print": "Module -> String; parsed before the clock; its peak RSS includes that module",
        "parse_print": "parse, print, drop the module (the output string is dropped outside the clock)",
        "stream": "Items::new(src) one item at a time, write_item into one reused String cleared per item",
        "peak_rss": "VmHWM of a fresh process doing one run; includes the input text (1x) and the binary (~2 MB)",
    },
    "targets": {
        "parse_print_mb_per_s_min": 100,
        "peak_rss_ratio_max": 4,
        "parse_print_speed_met": e2e >= 100,
        "stream_speed_met": t["modes"]["stream"]["best_mb_per_s"] >= 100,
        "parse_print_memory_met": mem["parse_print"]["peak_rss_ratio"] <= 4,
        "stream_memory_met": mem["stream"]["peak_rss_ratio"] <= 4,
    },
}
out = pathlib.Path("bench/results/ptx_frontend.json")
out.write_text(json.dumps(rec, indent=2) + "\n")
print(json.dumps(rec["targets"]), file=sys.stderr)
print(f"bench: wrote {out}", file=sys.stderr)
EOF
