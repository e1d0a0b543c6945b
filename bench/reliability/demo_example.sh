#!/usr/bin/env bash
# The README's demo on the GPU (issue 16): scripts/demo.sh's GPU path, exactly as a user
# runs it (examples/planted/overflow.cu built with `nvcc -g -lineinfo`, run natively, then
# under `gpusan run`), with this run's gpusan. The planted bug: thread 256 of `scale`
# writes out[256], one float past a 1024-byte allocation, into the live allocation next to
# it. Expected: gpusan reports one out-of-bounds write in scale at overflow.cu's marked
# line, by thread (0,0,0) of block (2,0,0), 0 bytes past the end of the 1024-byte
# allocation; the demo exits 0. compute-sanitizer (when found) is run on the same binary
# for the record: it is expected to miss the write where the allocations are adjacent.
#
# RESULT carries the full JSON report (`report`) and where and when it was recorded
# (`about`): the demo shows them on machines without a GPU. To commit them:
#   jq .report  reliability-case.json > examples/planted/recorded-h100.report.json
#   jq -r .about reliability-case.json > examples/planted/recorded-h100.about
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$WORK"
export GPUSAN_CACHE_DIR="$WORK/cache"
GPUSAN_DEMO_GPU=1 GPUSAN="$GPUSAN" NVCC="$NVCC" GPUSAN_DEMO_ARCH=sm_90 GPUSAN_DEMO_WORK="$WORK/demo" \
  GPUSAN_DEMO_REPORT_JSON="$WORK/report.json" timeout 50 "$repo/scripts/demo.sh" >demo.out 2>demo.err
echo $? >demo.rc
cs=$(command -v compute-sanitizer || true)
for d in "$(dirname "$(command -v "$NVCC" 2>/dev/null || echo /x/x)")" "${CUDA_HOME:-/usr/local/cuda}/bin" \
         /usr/local/cuda/bin; do
  [ -z "$cs" ] && [ -x "$d/compute-sanitizer" ] && cs="$d/compute-sanitizer"
done
if [ -n "$cs" ] && [ -x demo/overflow ]; then
  (cd demo && timeout 40 "$cs" --tool memcheck ./overflow) >cs.out 2>&1
  echo $? >cs.rc
fi
about_gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
nvcc_version=$("$NVCC" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo "unknown commit")

python3 - "$RESULT" "$repo/examples/planted/overflow.cu" "$about_gpu" "$nvcc_version" "$commit" <<'PY'
import datetime, json, re, sys
out, src, gpu, nvcc, commit = sys.argv[1:6]
def read(f):
    try: return open(f, errors="replace").read()
    except OSError: return ""
line = next(i for i, l in enumerate(open(src), 1) if "the write gpusan reports" in l)
try:
    report = json.load(open("report.json"))
except Exception as e:
    report = None
    error = str(e)
text = read("demo.out") + read("demo.err")
native = text.split("== The example natively", 1)[-1].split("== The example under gpusan", 1)[0]
errors = (report or {}).get("errors") or []
found = None
for e in errors:
    d = (e.get("report") or e).get("details") or {}
    if d.get("kernel", "").startswith("scale"):
        found = d
        break
facts = {
    "demo_rc": int(read("demo.rc") or -1),
    "kinds": sorted(((report or {}).get("summary") or {}).get("by_kind") or {}),
    "total": ((report or {}).get("summary") or {}).get("total"),
    "kernel": found and found.get("kernel"),
    "thread": found and found.get("thread"),
    "block": found and found.get("block"),
    "source": found and found.get("source"),
    "allocation_size": found and ((found.get("nearest") or {}).get("allocation") or {}).get("size"),
    "text_names_line": f"overflow.cu:{line}" in text,
    "native_output": native.strip()[-300:],
}
cs = None
if read("cs.rc"):
    m = re.search(r"ERROR SUMMARY: (\d+) error", read("cs.out"))
    cs = {"rc": int(read("cs.rc")), "errors": int(m.group(1)) if m else None, "tail": read("cs.out")[-600:]}
checks = {
    "demo_ok": facts["demo_rc"] == 0,
    "one_oob_write": facts["kinds"] == ["out_of_bounds_write"] and facts["total"] == 1,
    "in_scale_at_the_line": (facts["kernel"] or "").startswith("scale(")
                             and (facts["source"] or {}).get("line") == line and facts["text_names_line"],
    "thread_256": facts["thread"] == [0, 0, 0] and facts["block"] == [2, 0, 0],
    "past_the_1024_byte_out": facts["allocation_size"] == 1024,
}
date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
about = (f"on {gpu or 'a GPU machine'} ({nvcc or 'nvcc'}) on {date} by bench/reliability/demo_example.sh "
         f"(gpusan at {commit})")
result = {
    "case": "demo_example",
    "ok": all(checks.values()),
    "expected": f"scripts/demo.sh on the GPU: one out-of-bounds write in scale at overflow.cu:{line} by thread "
                "(0,0,0) of block (2,0,0), past the 1024-byte allocation; compute-sanitizer for the record",
    "gpusan": facts,
    "compute_sanitizer": cs,
    "checks": checks,
    "about": about,
    "report": report,
    "notes": "" if report is not None else f"no report.json ({error}); demo output: {text[-1500:]}",
}
if not result["ok"] and report is not None:
    result["notes"] = f"demo output: {text[-2000:]}"
json.dump(result, open(out, "w"), indent=1)
PY
