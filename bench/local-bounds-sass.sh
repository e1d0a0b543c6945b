#!/usr/bin/env bash
# What bounding local arrays one by one costs in machine code, against bounding the whole
# frame: each local-heavy program (the local cases of tests/cases and the layouts of
# crates/passes/tests/fixtures/check/local_layouts.cu) compiled by the pinned nvcc (-O3
# -arch=sm_90 -lineinfo, as the GPU suite builds them), instrumented by `gpusan instrument
# --local-bounds frame` and `--local-bounds object`, assembled by the pinned ptxas, and its
# SASS instructions counted per kernel, its callees included (`cuobjdump -sass` lists them
# under it), NOPs left out. A third build, `object_no_word`, is the object build with the
# records' object word (`abi::record::FrameObject`, written only when an error is reported)
# replaced by 0: the difference splits the cost between the bounds and the report's words.
# Static counts, no GPU needed.
#
# Usage: bench/local-bounds-sass.sh          → bench/results/local-bounds-sass.json
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck disable=SC1090
source <(scripts/setup-toolchain.sh --env)
cargo build --release --quiet -p gpusan-cli
bin=${CARGO_TARGET_DIR:-target}/release/gpusan
out=${OUT:-bench/results/local-bounds-sass.json}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

sources=(tests/cases/check_*local*.cu crates/passes/tests/fixtures/check/local_layouts.cu)
for src in "${sources[@]}"; do
  name=$(basename "$src" .cu)
  nvcc -O3 -arch=sm_90 -lineinfo -Itests/cases -ptx -o "$work/$name.ptx" "$src" 2>/dev/null
  ptxas -arch=sm_90 -o "$work/$name.native.cubin" "$work/$name.ptx"
  for bounds in frame object; do
    "$bin" instrument --local-bounds "$bounds" -o "$work/$name.$bounds.ptx" "$work/$name.ptx" 2>/dev/null
    ptxas -arch=sm_90 -o "$work/$name.$bounds.cubin" "$work/$name.$bounds.ptx"
  done
  sed -E 's/(st\.global\.u64[[:space:]]+\[%__gs_r\+24\],[[:space:]]*)[1-9][0-9]*;/\10;/' \
    "$work/$name.object.ptx" >"$work/$name.object_no_word.ptx"
  ptxas -arch=sm_90 -o "$work/$name.object_no_word.cubin" "$work/$name.object_no_word.ptx"
done

python3 - "$work" "$out" "${sources[@]}" <<'PY'
import datetime, json, os, re, subprocess, sys
work, out, sources = sys.argv[1], sys.argv[2], sys.argv[3:]
def sh(*a):
    return subprocess.run(a, capture_output=True, text=True).stdout.strip()
def count(cubin):
    """SASS instructions per function, NOPs aside."""
    text = sh("cuobjdump", "-sass", cubin)
    per, fn = {}, None
    for line in text.splitlines():
        m = re.match(r"\s+Function : (\S+)", line)
        if m:
            fn = m.group(1)
            per[fn] = 0
            continue
        if fn and re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+", line) and " NOP" not in line:
            per[fn] += 1
    return per
programs = {}
builds = ("native", "frame", "object", "object_no_word")
total = {b: 0 for b in builds}
for src in sources:
    name = os.path.basename(src)[:-3]
    counts = {b: count(f"{work}/{name}.{b}.cubin") for b in builds}
    fns = {}
    for fn in counts["native"]:
        row = {b: counts[b].get(fn, 0) for b in counts}
        fns[fn] = row
        for b in row:
            total[b] += row[b]
    programs[name] = fns
frame_extra = total["frame"] - total["native"]
object_extra = total["object"] - total["native"]
doc = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "command": "bench/local-bounds-sass.sh",
    "git_commit": sh("git", "rev-parse", "HEAD"),
    "git_dirty": bool(sh("git", "status", "--porcelain", "--untracked-files=no")),
    "build": "nvcc -O3 -arch=sm_90 -lineinfo -ptx; gpusan instrument --local-bounds B; ptxas -arch=sm_90",
    "count": "cuobjdump -sass instructions per function, NOPs aside",
    "total": total,
    "extra_over_native": {"frame": frame_extra, "object": object_extra},
    "object_over_frame": total["object"] - total["frame"],
    "of_which_bounds": total["object_no_word"] - total["frame"],
    "of_which_record_words": total["object"] - total["object_no_word"],
    "programs": programs,
}
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
print(f"native {total['native']}, frame {total['frame']} (+{frame_extra}), object {total['object']} (+{object_extra}); "
      f"object over frame: {doc['object_over_frame']} ({doc['of_which_bounds']} bounds, "
      f"{doc['of_which_record_words']} record words)")
for name, fns in programs.items():
    for fn, row in fns.items():
        print(f"  {name} {fn}: native {row['native']}, frame {row['frame']}, object {row['object']}")
PY
