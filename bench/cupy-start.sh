#!/usr/bin/env bash
# Start-to-finish time of a CuPy program that readies and launches 50 distinct kernels
# (bench/cupy_start.py), natively and under `gpusan run --mode check`, first run (every cache
# empty: CuPy's, the driver's JIT cache, gpusan's) and cached run (the caches the first left);
# medians of 3 (CUPY_START_REPS), in one sitting (issue 13: instrumenting through NVRTC must add no more per
# kernel than the existing PTX route). Two routes: `nvrtc` (RawKernel: NVRTC straight to a
# cubin, CuPy's on-disk cache) and `ptx` (the same 50 kernels compiled by nvcc -ptx beforehand,
# untimed, and loaded as PTX modules: gpusan's PTX-at-load route).
#
#   bench/cupy-start.sh DIR [OUT.json]   DIR: the gpusan binary and libgpusan_inject.so;
#                                        OUT.json defaults to $OUT/cupy-start.json
#
# Each run has a limit (CUPY_START_RUN_S, default 120 s); a failed run is recorded with its
# output's tail and left out of the median. gpusan runs write --report-json: the coverage of
# each says how many of the 50 kernels were checked, and by which route. About 2 minutes.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 1 ] || ! dir=$(cd "$1" 2>/dev/null && pwd); then
  echo "usage: bench/cupy-start.sh DIR [OUT.json]   (DIR: the gpusan binary and libgpusan_inject.so)" >&2
  exit 2
fi
out=${2:-${OUT:-/tmp/gpusan-cupystart-out}/cupy-start.json}
mkdir -p "$(dirname "$out")"
cd "$repo" || exit 2
work=$(mktemp -d /tmp/gpusan-cupystart.XXXXXX)
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
nvcc=${NVCC:-nvcc}

# The PTX route's input, untimed: one PTX file per kernel.
mkdir -p "$work/ptx"
ptx_ok=1
for i in $(seq 0 49); do
  python3 bench/cupy_start.py --source "$i" >"$work/ptx/k$i.cu"
done
if ! (cd "$work/ptx" && ls k*.cu | xargs -P 8 -I{} sh -c 'timeout 60 '"$nvcc"' -ptx -arch=compute_90 {} -o $(basename {} .cu).ptx') \
    >"$work/nvcc.log" 2>&1; then
  ptx_ok=0
  echo "[cupy-start] nvcc -ptx failed: the ptx route is skipped ($(tail -2 "$work/nvcc.log" | tr '\n' ' '))"
fi

python3 - "$out" "$dir/gpusan" "$work" "$ptx_ok" "${CUPY_START_RUN_S:-120}" <<'PY'
import datetime, json, os, statistics, subprocess, sys, time
out, gpusan, work, ptx_ok, limit = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", float(sys.argv[5])
N = 50
doc = {"command": "bench/cupy-start.sh DIR", "kernels": N, "unit": f"seconds, process start to end (median of {os.environ.get('CUPY_START_REPS', '3')})",
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "runs": []}
CACHES = {"HOME": "home", "XDG_CACHE_HOME": "xdg", "CUPY_CACHE_DIR": "cupy", "CUDA_CACHE_PATH": "nv",
          "GPUSAN_CACHE_DIR": "gpusan"}

def env_for(root):
    env = dict(os.environ)
    env.pop("GPUSAN_PROGRAM_CACHES", None)
    for k, v in CACHES.items():
        os.makedirs(os.path.join(root, v), exist_ok=True)
        env[k] = os.path.join(root, v)
    os.chmod(os.path.join(root, "gpusan"), 0o700)
    return env

def coverage(report):
    try:
        d = json.load(open(report))
    except Exception as e:
        return {"problem": repr(e)[:200]}
    cov = d.get("coverage") if isinstance(d.get("coverage"), dict) else {}
    ks = [k for k in cov.get("kernels") or [] if isinstance(k, dict) and str(k.get("name", "")).startswith("k")]
    routes = {}
    for k in ks:
        r = k.get("checked_by") or ("unchecked: " + str(k.get("unchecked")))
        routes[r] = routes.get(r, 0) + 1
    return {"program_kernels_listed": len(ks), "routes": routes, "by_kind": (d.get("summary") or {}).get("by_kind")}

def one(route, tool, phase, rep, root):
    prog = [sys.executable, "bench/cupy_start.py"] + (["--ptx", os.path.join(work, "ptx")] if route == "ptx" else [])
    report = os.path.join(root, f"report-{phase}.json")
    cmd = prog if tool == "native" else [gpusan, "run", "--mode", "check", "--report-json", report, "--"] + prog
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env_for(root), capture_output=True, text=True, timeout=limit)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, text = 124, str(e.stdout or "")[-500:]
    except OSError as e:
        rc, text = 127, str(e)
    s = round(time.monotonic() - t, 3)
    ok = rc == 0 and "cupy-start done" in text
    run = {"route": route, "tool": tool, "phase": phase, "rep": rep, "seconds": s, "ok": ok, "rc": rc}
    if not ok:
        run["tail"] = text[-600:]
    if tool == "gpusan":
        run["coverage"] = coverage(report)
    doc["runs"].append(run)
    print(f"[cupy-start] {route:5s} {tool:6s} {phase:6s} rep {rep}: {s:7.2f} s {'ok' if ok else 'FAILED rc %s' % rc}", flush=True)

routes = ["nvrtc"] + (["ptx"] if ptx_ok else [])
if not ptx_ok:
    doc["ptx_route"] = "skipped: nvcc -ptx failed (see the log)"
reps = int(os.environ.get("CUPY_START_REPS", "3"))
for rep in range(1, reps + 1):
    for route in routes:
        for tool in ("native", "gpusan"):
            root = os.path.join(work, f"{route}-{tool}-{rep}")
            one(route, tool, "first", rep, root)
            one(route, tool, "cached", rep, root)
            json.dump(doc, open(out, "w"), indent=1)  # what is done so far, should the call be cut short

med = {}
for route in routes:
    for tool in ("native", "gpusan"):
        for phase in ("first", "cached"):
            xs = [r["seconds"] for r in doc["runs"] if (r["route"], r["tool"], r["phase"]) == (route, tool, phase) and r["ok"]]
            med[f"{route}_{tool}_{phase}"] = {"median": statistics.median(xs) if xs else None, "samples": xs,
                                             "failures": sum(1 for r in doc["runs"] if (r["route"], r["tool"], r["phase"]) == (route, tool, phase) and not r["ok"])}
doc["medians"] = med
added = {}
for route in routes:
    for phase in ("first", "cached"):
        g, n = med[f"{route}_gpusan_{phase}"]["median"], med[f"{route}_native_{phase}"]["median"]
        if g is not None and n is not None:
            added[f"{route}_{phase}"] = {"added_per_kernel_ms": round((g - n) / N * 1000, 2), "ratio": round(g / n, 3)}
            # Each rep runs native then gpusan back to back: their difference, rep by rep,
            # is less at the mercy of the machine's drift than the difference of medians.
            secs = {(r["tool"], r["rep"]): r["seconds"] for r in doc["runs"]
                    if (r["route"], r["phase"]) == (route, phase) and r["ok"]}
            pairs = [(secs[("gpusan", k)] - secs[("native", k)]) / N * 1000 for k in range(1, reps + 1)
                     if ("gpusan", k) in secs and ("native", k) in secs]
            if pairs:
                added[f"{route}_{phase}"]["paired_added_per_kernel_ms"] = {
                    "median": round(statistics.median(pairs), 2), "samples": [round(x, 2) for x in pairs]}
doc["added"] = added
if "nvrtc_first" in added and "ptx_first" in added:
    doc["nvrtc_vs_ptx_first"] = {"nvrtc_added_per_kernel_ms": added["nvrtc_first"]["added_per_kernel_ms"],
                                 "ptx_added_per_kernel_ms": added["ptx_first"]["added_per_kernel_ms"],
                                 "nvrtc_no_more_than_ptx": added["nvrtc_first"]["added_per_kernel_ms"] <= added["ptx_first"]["added_per_kernel_ms"]}
if "nvrtc_cached" in added and "ptx_cached" in added:
    doc["nvrtc_vs_ptx_cached"] = {"nvrtc_added_per_kernel_ms": added["nvrtc_cached"]["added_per_kernel_ms"],
                                  "ptx_added_per_kernel_ms": added["ptx_cached"]["added_per_kernel_ms"],
                                  "nvrtc_no_more_than_ptx": added["nvrtc_cached"]["added_per_kernel_ms"] <= added["ptx_cached"]["added_per_kernel_ms"]}
json.dump(doc, open(out, "w"), indent=1)
print(json.dumps({k: doc.get(k) for k in ("medians", "added", "nvrtc_vs_ptx_first", "nvrtc_vs_ptx_cached")}, indent=1))
PY
