#!/usr/bin/env bash
# How fast the check pass instruments PTX (parse + verify + pass + verify + print, one
# core, MB of input per second; target >= 20 MB/s): on a generated module (gen_big.py's
# first BENCH_LIMIT instantiations, default 200, about 7.5 MB; the full 2000 are 84 MB and
# take nvcc minutes) and on the whole corpus, stage by stage (`gpusan ptx speed`), plus
# `gpusan instrument` end to end (process, file read and write). With perf installed, the
# share of the pass's known hot spots in a sampled profile.
#
# Usage: bench/instrument-speed.sh [RUNS]   → bench/results/instrument-speed.json
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
runs=${1:-3}
limit=${BENCH_LIMIT:-200}
work=bench/work
mkdir -p "$work" bench/results
# shellcheck disable=SC1090
source <(scripts/setup-toolchain.sh --env)

# Replaced only when it changes, so the PTX below is not rebuilt (nvcc takes a while) on
# every run.
python3 bench/ptx-frontend/gen_big.py "$work/big$limit.cu.new" --limit "$limit" >&2
if cmp -s "$work/big$limit.cu.new" "$work/big$limit.cu"; then
  rm "$work/big$limit.cu.new"
else
  mv "$work/big$limit.cu.new" "$work/big$limit.cu"
fi
ptx=$work/big$limit.ptx
if [ ! -s "$ptx" ] || [ "$work/big$limit.cu" -nt "$ptx" ]; then
  echo "bench: nvcc -arch=sm_90 -ptx -O3 -lineinfo $work/big$limit.cu" >&2
  nvcc -arch=sm_90 -ptx -O3 -lineinfo "$work/big$limit.cu" -o "$ptx.tmp"
  mv "$ptx.tmp" "$ptx"
fi

cargo build --release --quiet -p gpusan-cli
bin=${CARGO_TARGET_DIR:-target}/release/gpusan

"$bin" ptx speed --pass check --runs "$runs" "$ptx" > "$work/speed-big.json"
"$bin" ptx speed --pass check --runs "$runs" tests/corpus/ptx/*.ptx tests/corpus/triton/*.ptx > "$work/speed-corpus.json"

# End to end, as a build runs it: best of RUNS.
e2e=$(python3 - "$bin" "$ptx" "$runs" <<'PY'
import subprocess, sys, time
bin, ptx, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
best = min(
    (lambda t0: (subprocess.run([bin, "instrument", ptx, "-o", "/dev/null"], check=True, stderr=subprocess.DEVNULL), time.perf_counter() - t0)[1])(time.perf_counter())
    for _ in range(runs)
)
print(best)
PY
)

profile=null
if command -v perf >/dev/null; then
  perf record -q -F 999 --call-graph dwarf,16384 -o "$work/instrument.perf" "$bin" ptx speed --runs 1 "$ptx" >/dev/null 2>&1 || true
  perf report -i "$work/instrument.perf" --children --stdio -g none 2>/dev/null > "$work/instrument.perf.txt" || true
  profile=$work/instrument.perf.txt
fi

python3 - "$work/speed-big.json" "$work/speed-corpus.json" "$e2e" "$ptx" "$limit" "$runs" "$profile" <<'PY'
import datetime, json, os, pathlib, re, subprocess, sys
big, corpus, e2e, ptx, limit, runs, profile = sys.argv[1:]
big, corpus = json.load(open(big)), json.load(open(corpus))
def sh(*a):
    return subprocess.run(a, capture_output=True, text=True).stdout.strip()
def stages(s, total):
    return {k: {"seconds": round(v, 4), "share": round(v / total, 3)} for k, v in s.items()}
hot = None
if profile != "null" and os.path.exists(profile):
    # Inclusive share of samples per function of interest (perf report --children).
    wanted = {
        "check pass (all)": "gpusan_passes::check::instrument_function",
        "check: snippet text to statements (line cache, new lines parsed)": "gpusan_passes::check::snippet::Cache::parse_into",
        "check: error-record writers (templates filled)": "gpusan_passes::check::report_record_into",
        "check: reaching definitions": "gpusan_ptx::dataflow::reaching_defs",
        # Inlined into instrument_function: perf names it without its path.
        "check: insertions (each statement list rebuilt once)": "insert_all",
        "check: control-flow graph": "gpusan_ptx::cfg::Cfg::build",
        "verify: control-flow check (no graph)": "gpusan_ptx::cfg::Cfg::check",
        "verify (input and output)": "gpusan_passes::verify::verify",
        "verify: scope lookup per name": "gpusan_passes::verify::FunctionChecker::resolves",
        "parse (input)": "gpusan_ptx::parser::parse",
        "print": "gpusan_ptx::printer::print",
        "page faults (fresh memory for the instrumented tree)": "asm_exc_page_fault",
    }
    text = open(profile).read().splitlines()
    hot = {}
    for label, sym in wanted.items():
        for line in text:
            m = re.match(r"\s+([\d.]+)%\s+[\d.]+%\s+\S+\s+\S+\s+\[[.k]\]\s+(.*)$", line)
            if m and m.group(2).strip().removesuffix(" (inlined)") == sym:
                hot[label] = float(m.group(1)) / 100
                break
b = big["files"][0]
rec = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "command": f"BENCH_LIMIT={limit} bench/instrument-speed.sh {runs}",
    "git_commit": sh("git", "rev-parse", "HEAD"),
    "git_dirty": bool(sh("git", "status", "--porcelain", "--untracked-files=no")),
    "machine": {"nproc": os.cpu_count(), "load_average": open("/proc/loadavg").read().split()[:3]},
    "pass": "check",
    "mb": "10^6 bytes of input PTX",
    "threads": 1,
    "target_mb_per_s": 20,
    "generated": {
        "path": ptx,
        "generator": f"bench/ptx-frontend/gen_big.py --limit {limit} (first {limit} instantiations: tiled GEMMs); nvcc -arch=sm_90 -ptx -O3 -lineinfo",
        "bytes": b["bytes"],
        "sites": b["sites"],
        "best_seconds": round(b["best_seconds"], 4),
        "mb_per_s": round(b["mb_per_s"], 2),
        "parse_pass_print_mb_per_s": round(b["bytes"] / 1e6 / (b["best_stages"]["parse"] + b["best_stages"]["pass"] + b["best_stages"]["print"]), 2),
        "stages": stages(b["best_stages"], b["best_seconds"]),
        "gpusan_instrument_end_to_end_seconds": round(float(e2e), 4),
        "gpusan_instrument_end_to_end_mb_per_s": round(b["bytes"] / 1e6 / float(e2e), 2),
    },
    "corpus": {
        "files": len(corpus["files"]),
        "bytes": corpus["total_bytes"],
        "best_seconds": round(corpus["total_best_seconds"], 4),
        "mb_per_s": round(corpus["total_mb_per_s"], 2),
        "stages": stages(corpus["total_stages"], corpus["total_best_seconds"]),
        "slowest_files_mb_per_s": sorted(
            ({"file": f["file"], "bytes": f["bytes"], "mb_per_s": round(f["mb_per_s"], 2)} for f in corpus["files"]),
            key=lambda f: f["mb_per_s"],
        )[:5],
    },
    "profile_inclusive_share": hot,
    "target_met": b["mb_per_s"] >= 20 and corpus["total_mb_per_s"] >= 20,
}
out = pathlib.Path("bench/results/instrument-speed.json")
out.write_text(json.dumps(rec, indent=2) + "\n")
print(json.dumps({k: rec[k] for k in ("generated", "corpus", "profile_inclusive_share", "target_met")}, indent=2), file=sys.stderr)
print(f"bench: wrote {out}", file=sys.stderr)
PY
