#!/usr/bin/env bash
# What the check pass costs in machine resources: every corpus kernel (tests/corpus/ptx,
# tests/corpus/triton) assembled by the pinned ptxas (-v, the .target's sm_90/sm_90a)
# before and after `check`; per kernel registers, spill stores/loads and stack frame, and
# the median and max increase. No GPU needed.
#
# Usage: bench/check-registers.sh            → bench/results/check-registers.json
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck disable=SC1090
source <(scripts/setup-toolchain.sh --env)
cargo build --release --quiet -p gpusan-cli
bin=${CARGO_TARGET_DIR:-target}/release/gpusan
out=bench/results/check-registers.json
mkdir -p bench/results

"$bin" ptx regs --pass check --ptxas "$(command -v ptxas)" -o "$out.tmp" tests/corpus/ptx/*.ptx tests/corpus/triton/*.ptx

python3 - "$out.tmp" "$out" <<'PY'
import datetime, json, subprocess, sys
src, dst = sys.argv[1:]
doc = json.load(open(src))
def sh(*a):
    return subprocess.run(a, capture_output=True, text=True).stdout.strip()
head = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "command": "bench/check-registers.sh",
    "git_commit": sh("git", "rev-parse", "HEAD"),
    "git_dirty": bool(sh("git", "status", "--porcelain", "--untracked-files=no")),
}
# nvcc -G code is unoptimized (every value keeps its register), so it is summarized apart
# from optimized builds (corpus suffixes: .G / .O3 / .lineinfo; Triton's own PTX).
def group(path):
    if "/triton/" in path:
        return "triton"
    for s in ("G", "O3", "lineinfo"):
        if path.endswith(f".{s}.ptx"):
            return {"G": "nvcc_debug_G"}.get(s, f"nvcc_{s}")
    return "other"
def median(v):
    v = sorted(v)
    n = len(v)
    return 0 if n == 0 else (v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2)
groups = {}
for k in doc["kernels"]:
    groups.setdefault(group(k["file"]), []).append(k)
doc["summary_by_build"] = {
    g: {
        "kernels": len(ks),
        "median_register_increase": median([k["register_increase"] for k in ks]),
        "max_register_increase": max(k["register_increase"] for k in ks),
        "median_register_ratio": round(median([k["after"]["registers"] / max(1, k["before"]["registers"]) for k in ks]), 3),
        "kernels_with_new_spills": sum(
            k["after"]["spill_stores"] + k["after"]["spill_loads"] > k["before"]["spill_stores"] + k["before"]["spill_loads"]
            for k in ks
        ),
    }
    for g, ks in sorted(groups.items())
}
json.dump({**head, **doc}, open(dst, "w"), indent=2)
open(dst, "a").write("\n")
print(json.dumps({"all": doc["summary"], **doc["summary_by_build"]}, indent=2), file=sys.stderr)
PY
rm -f "$out.tmp"
echo "bench: wrote $out" >&2
