#!/usr/bin/env bash
# The reliability cases of issue 12, on the GPU machine, in one call: programs nobody here
# wrote the way they are written in the wild (a driver-API program loading an nvcc fatbin,
# CUDA graph memory nodes, 300 forked children with threads allocating, PyTorch
# `multiprocessing` with fork, SIGTERM mid-run, a user's RTLD_NEXT shim), each run natively
# and under `gpusan run`, each judged by its own script.
#
#   bench/reliability.sh DIR        DIR holds the prebuilt `gpusan` and `libgpusan_inject.so`
#
# Each bench/reliability/<case>.sh is called as
#   GPUSAN=DIR/gpusan WORK=<its own scratch> RESULT=<file> NVCC=nvcc bench/reliability/<case>.sh
# and writes one JSON object to RESULT ({"case", "ok", "expected", "native", "gpusan",
# "notes"}). This script gathers them into $OUT/reliability.json (and the logs into
# $OUT/reliability-logs.tar.gz) and prints one line per case. GPUSAN_RELIABILITY_ONLY: a
# regex of case names; GPUSAN_RELIABILITY_CASE_S: the limit of one case (default 120 s).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 1 ] || ! dir=$(cd "$1" 2>/dev/null && pwd); then
  echo "usage: bench/reliability.sh DIR   (DIR: the gpusan binary and libgpusan_inject.so)" >&2
  exit 2
fi
out=${OUT:-/tmp/gpusan-reliability-out}
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
export PYTHONUNBUFFERED=1
work=$(mktemp -d /tmp/gpusan-reliability.XXXXXX)
limit=${GPUSAN_RELIABILITY_CASE_S:-120}
only=${GPUSAN_RELIABILITY_ONLY:-.}
t0=$(date +%s)
results=()
for script in "$repo"/bench/reliability/*.sh; do
  name=$(basename "$script" .sh)
  [[ "$name" =~ $only ]] || continue
  mkdir -p "$work/$name"
  result="$work/$name/result.json"
  start=$(date +%s.%N)
  GPUSAN="$dir/gpusan" WORK="$work/$name" RESULT="$result" NVCC="${NVCC:-nvcc}" \
    timeout -k 5 "$limit" bash "$script" >"$work/$name/log.txt" 2>&1
  rc=$?
  secs=$(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" "$start")
  python3 - "$name" "$result" "$rc" "$secs" >"$work/$name/final.json" <<'PY'
import json, sys
name, path, rc, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
try:
    r = json.load(open(path))
except Exception as e:  # a case that wrote nothing (or garbage) failed
    r = {"case": name, "ok": False, "notes": f"no result ({type(e).__name__}: {e})"}
r.setdefault("case", name)
r["script_rc"] = rc
r["seconds"] = secs
if rc != 0:
    r["ok"] = False
    r["notes"] = (r.get("notes") or "") + f" [case script exited {rc}{' (timed out)' if rc in (124, 137) else ''}]"
print(json.dumps(r))
PY
  results+=("$work/$name/final.json")
  echo "[reliability +$(( $(date +%s) - t0 ))s] $name: $(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(('OK  ' if r.get('ok') else 'FAIL'), r.get('expected',''), '|', r.get('notes',''))" "$work/$name/final.json")"
done
python3 - "$out/reliability.json" "$dir" "${results[@]}" <<'PY'
import datetime, json, subprocess, sys
out, d, files = sys.argv[1], sys.argv[2], sys.argv[3:]
def sh(c):
    try:
        return subprocess.run(c, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:
        return f"({e})"
cases = [json.load(open(f)) for f in files]
doc = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "gpu": sh("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader"),
    "nvcc": sh("nvcc --version | tail -2 | head -1"),
    "gpusan": sh(f"{d}/gpusan --version"),
    "passed": sum(1 for c in cases if c.get("ok")),
    "total": len(cases),
    "cases": cases,
}
json.dump(doc, open(out, "w"), indent=1)
print(f"reliability: {doc['passed']}/{doc['total']} cases ok → {out}")
PY
# The logs only: what the cases built (extensions, executables, objects) would take the
# archive past what a device call brings back (16 MiB a file).
(cd "$work" && python3 - <<'PY' | tar -czf "$out/reliability-logs.tar.gz" --null -T - 2>/dev/null
import os, sys
for root, _, files in os.walk("."):
    for f in files:
        p = os.path.join(root, f)
        try:
            if not os.path.isfile(p) or os.path.islink(p) or os.path.getsize(p) > 1 << 20:
                continue
            with open(p, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    continue
        except OSError:
            continue
        sys.stdout.write(p + "\0")
PY
)
