#!/usr/bin/env bash
# Runs on the GPU machine (issue 18): a `gpusan serve` manager on the GPU and N tenants of
# it at once, each an unmodified driver-API program (bench/injection/driver_ptx.cpp: loads
# PTX, launches, copies back, prints OK when its numbers are right) under
# `gpusan run --mode fence`. Then the containment example (crates/serve/examples/
# containment.rs: fenced wild stores at another tenant's buffer, checksummed, and the
# unfenced control). Writes $OUT/fence-tenants.json and $OUT/containment.json.
#
#   bench/fence/tenants.sh DIR [N]    DIR: gpusan, libgpusan_inject.so, containment
set -uo pipefail
dir=$(cd "$1" && pwd)
n=${2:-4}
out=${OUT:-/tmp/out}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
nvcc -O2 -o "$work/driver_ptx" "$repo/bench/injection/driver_ptx.cpp" -lcuda || exit 1
"$dir/gpusan" serve --socket "$work/s.sock" 2> "$work/manager.log" &
manager=$!
for _ in $(seq 100); do "$dir/gpusan" serve --status --socket "$work/s.sock" >/dev/null 2>&1 && break; sleep 0.1; done
start=$(date +%s.%N)
pids=()
for i in $(seq "$n"); do
  "$dir/gpusan" run --mode fence --server "$work/s.sock" --fence-memory-log2 28 --report-json "$work/t$i.json" -- \
    "$work/driver_ptx" > "$work/t$i.out" 2>&1 &
  pids+=($!)
done
rcs=()
for p in "${pids[@]}"; do wait "$p"; rcs+=($?); done
end=$(date +%s.%N)
# The manager sees the last tenants' disconnects a moment after they exit.
for _ in $(seq 50); do
  "$dir/gpusan" serve --status --socket "$work/s.sock" > "$work/status.txt" 2>&1
  grep -q "^0 tenant" "$work/status.txt" && break
  sleep 0.1
done
kill "$manager"; wait "$manager" 2>/dev/null
# Natively, for comparison: the same program, alone.
native_start=$(date +%s.%N); "$work/driver_ptx" > "$work/native.out" 2>&1; native_rc=$?; native_end=$(date +%s.%N)
python3 - "$work" "$n" "$start" "$end" "$native_start" "$native_end" "$native_rc" "${rcs[@]}" > "$out/fence-tenants.json" <<'PY'
import json, os, sys
work, n, start, end, ns, ne, nrc = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:7]), int(sys.argv[7])
rcs = [int(x) for x in sys.argv[8:]]
tenants = []
for i in range(1, n + 1):
    text = open(os.path.join(work, f"t{i}.out"), errors="replace").read()
    rep = {}
    try:
        rep = json.load(open(os.path.join(work, f"t{i}.json")))
    except Exception:
        pass
    tenants.append({"rc": rcs[i - 1], "ok": "OK" in text and rcs[i - 1] == 0, "output_tail": text[-600:],
                    "notes": rep.get("notes", [])[:6]})
print(json.dumps({"what": "a gpusan serve manager and N concurrent fenced tenants (driver_ptx.cpp under gpusan run --mode fence)",
                  "tenants": tenants, "all_ok": all(t["ok"] for t in tenants), "wall_s": round(end - start, 3),
                  "native": {"rc": nrc, "ok": "OK" in open(os.path.join(work, "native.out"), errors="replace").read(),
                             "wall_s": round(ne - ns, 3)},
                  "status_after": open(os.path.join(work, "status.txt")).read(),
                  "manager_log": open(os.path.join(work, "manager.log"), errors="replace").read()[-3000:]}, indent=1))
PY
echo "fence tenants: $(python3 -c "import json;d=json.load(open('$out/fence-tenants.json'));print('all_ok', d['all_ok'], 'wall', d['wall_s'])")"
timeout 60 "$dir/containment" > "$out/containment.json" 2> "$work/containment.err"
echo "containment rc=$? $(head -c 300 "$work/containment.err")"
