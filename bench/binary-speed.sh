#!/usr/bin/env bash
# Where the binary route's time goes (issue 14), on the GPU machine, in one call (~3 min):
# bench/binary_speed.cu built machine-code-only (-gencode arch=compute_90,code=sm_90, no PTX)
# runs four kernels of different access densities (saxpy: memory bound, 3 accesses a
# thread; compute: 8192 FMAs per 2 accesses; gemm: tiled through shared memory; reduce:
# grid-stride loads, a shared-memory tree, an atomic a block) and 4000 one-thread launches
# (tiny); bench/binary_speed_cublas.cu runs a cuBLAS SGEMM (big machine-code-only modules
# loaded lazily at the first call). Each under:
#   native      the program alone
#   unpatched   gpusan run --mode check --route ptx (nothing patched in SASS-only code:
#               gpusan's own launch path and allocation tracking)
#   empty       gpusan run --mode check --route binary, GPUSAN_BINARY_PATCH=empty (the API's
#               trampoline at every global access, a patch that returns at once)
#   global      gpusan run --mode check --route binary --binary-kinds none (global and generic
#               accesses only, or GPUSAN_BINSPEED_KINDS: what the other kinds' patches add is
#               full - global)
#   full        gpusan run --mode check --route binary (gpusan's judgement, every access kind)
#   cs          compute-sanitizer --tool memcheck
# Kernel times are the programs' own CUDA-event medians (median again over rounds).
#
#   Usage: bench/binary-speed.sh DIR_WITH_GPUSAN   (DIR: gpusan + libgpusan_inject.so)
#
# Writes $OUT/binary-speed.json: per kernel the times, ratios to native, the API's floor
# (empty / native), gpusan's share ((full - empty) / native), ns per access (the program's
# count of global accesses a launch) of the trampoline and of the judgement, first-launch
# costs, compute-sanitizer over full; per launch (tiny) each tool's microseconds; cuBLAS's
# first call and steady GEMM, and the route's own counters (binary_patch_us: the API's
# patching calls; binary_first_launch_us: params blocks); outputs identical to native's, 0
# errors. Also $OUT/binary-speed-logs.tar.gz. Knobs: OUT, NVCC, COMPUTE_SANITIZER,
# GPUSAN_BINSPEED_ROUNDS (2), GPUSAN_BINSPEED_BUDGET_S (200: no run starts after it).
set -uo pipefail
t0=$(date +%s)
budget=${GPUSAN_BINSPEED_BUDGET_S:-200}
rounds=${GPUSAN_BINSPEED_ROUNDS:-2}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 1 ] || ! dir=$(cd "$1" 2>/dev/null && pwd); then
  echo "usage: bench/binary-speed.sh DIR_WITH_GPUSAN" >&2
  exit 2
fi
out=${OUT:-/tmp/gpusan-binary-speed-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/gpusan-binary-speed.XXXXXX)
mkdir -p "$work/logs"
export PATH="/usr/local/cuda/bin:$PATH"
nvcc=${NVCC:-nvcc}
cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/compute-sanitizer/compute-sanitizer)}
export GPUSAN_CACHE_DIR="$work/cache"
sass=(-O2 -gencode arch=compute_90,code=sm_90)

builds=()
"$nvcc" "${sass[@]}" -o "$work/binary_speed" "$repo/bench/binary_speed.cu" >"$work/logs/build.log" 2>&1 \
  && builds+=(binary_speed)
"$nvcc" "${sass[@]}" -o "$work/binary_speed_cublas" "$repo/bench/binary_speed_cublas.cu" -lcublas \
  >"$work/logs/build_cublas.log" 2>&1 && builds+=(binary_speed_cublas)

# label = program.tool.round; every run's stdout, stderr, exit code and (gpusan) report kept.
run() {  # program tool round
  local prog=$1 tool=$2 round=$3 label="$1.$2.$3"
  local cmd=("$work/$prog")
  [ "$prog" = binary_speed ] && cmd+=(all)
  if [ $(($(date +%s) - t0)) -gt "$budget" ]; then echo "skipped (budget)" >"$work/logs/$label.err"; return; fi
  case $tool in
    native) ;;
    unpatched) cmd=("$dir/gpusan" run --mode check --route ptx --report-json "$work/logs/$label.json" -- "${cmd[@]}") ;;
    empty) cmd=(env GPUSAN_BINARY_PATCH=empty "$dir/gpusan" run --mode check --route binary
                --report-json "$work/logs/$label.json" -- "${cmd[@]}") ;;
    global) cmd=("$dir/gpusan" run --mode check --route binary --binary-kinds "${GPUSAN_BINSPEED_KINDS:-none}"
                 --report-json "$work/logs/$label.json" -- "${cmd[@]}") ;;
    full) cmd=("$dir/gpusan" run --mode check --route binary --report-json "$work/logs/$label.json" -- "${cmd[@]}") ;;
    cs) cmd=("$cs" --tool memcheck --print-limit 10 --error-exitcode 0 "${cmd[@]}") ;;
  esac
  timeout 120 "${cmd[@]}" >"$work/logs/$label.out" 2>"$work/logs/$label.err"
  echo "$?" >"$work/logs/$label.rc"
}
for prog in "${builds[@]}"; do
  for r in $(seq 1 "$rounds"); do
    for tool in native unpatched empty global full; do run "$prog" "$tool" "$r"; done
  done
  [ -x "$cs" ] && run "$prog" cs 1
done

python3 - "$work/logs" "$out/binary-speed.json" "${builds[*]}" <<'PY'
import glob, json, math, os, re, statistics, sys
logs, path, builds = sys.argv[1], sys.argv[2], sys.argv[3].split()
TOOLS = ["native", "unpatched", "empty", "global", "full", "cs"]
runs = {}
for f in sorted(glob.glob(f"{logs}/*.out")):
    label = os.path.basename(f)[:-4]
    prog, tool, rnd = label.split(".")
    text = open(f, errors="replace").read()
    r = {"rc": int(open(f"{logs}/{label}.rc").read()) if os.path.exists(f"{logs}/{label}.rc") else None,
         "finished": re.search(r"^ok$", text, re.M) is not None, "kernels": {}, "checksums": {}}
    for m in re.finditer(r"^(\w+) first_ms=([0-9.]+) kernel_ms=([0-9.]+) accesses=([0-9.]+)$", text, re.M):
        r["kernels"][m.group(1)] = {"first_ms": float(m.group(2)), "kernel_ms": float(m.group(3)),
                                    "accesses": float(m.group(4))}
    for m in re.finditer(r"^checksum (\w+)=(\S+)$", text, re.M):
        r["checksums"][m.group(1)] = float(m.group(2))
    rep = f"{logs}/{label}.json"
    if os.path.exists(rep):
        try:
            j = json.load(open(rep))
            r["errors"] = j["summary"]["total"]
            r["counters"] = {k: v for k, v in j.get("counters", {}).items() if k.startswith("binary_")}
            r["routes"] = sorted({k.get("checked_by") or "unchecked: " + str(k.get("unchecked"))
                                  for k in j.get("coverage", {}).get("kernels", [])})
        except Exception as e:
            r["report_error"] = str(e)
    if tool == "cs":
        m = re.search(r"ERROR SUMMARY: (\d+) error", text + open(f"{logs}/{label}.err", errors="replace").read())
        r["errors"] = int(m.group(1)) if m else None
    if r["rc"] != 0 or not r["finished"]:
        r["stderr"] = open(f"{logs}/{label}.err", errors="replace").read()[-600:]
    runs.setdefault(prog, {}).setdefault(tool, []).append(r)

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

result = {"case": "binary_speed", "kernels": {}, "runs": runs}
problems = []
for prog, by_tool in runs.items():
    names = sorted({k for rs in by_tool.values() for r in rs for k in r["kernels"]})
    native_sums = (by_tool.get("native") or [{}])[0].get("checksums", {})
    for tool, rs in by_tool.items():
        for r in rs:
            if not r["finished"]:
                problems.append(f"{prog}/{tool}: did not finish (rc {r['rc']})")
            if tool != "cs" and r.get("errors"):
                problems.append(f"{prog}/{tool}: {r['errors']} errors on a clean program")
            for k, v in r["checksums"].items():
                want = native_sums.get(k)
                # The reduction's block atomics add in any order: not bit-identical.
                tol = 1e-3 * abs(want) if k == "reduce" and want is not None else 0
                if want is not None and abs(v - want) > tol:
                    problems.append(f"{prog}/{tool}: checksum {k} {v} != native {want}")
    for name in names:
        t = {tool: med([r["kernels"].get(name, {}).get("kernel_ms") for r in rs]) for tool, rs in by_tool.items()}
        first = {tool: med([r["kernels"].get(name, {}).get("first_ms") for r in rs]) for tool, rs in by_tool.items()}
        acc = med([r["kernels"].get(name, {}).get("accesses") for rs in by_tool.values() for r in rs])
        n = t.get("native")
        k = {"kernel_ms": t, "first_ms": first, "accesses_per_launch": acc}
        if n:
            k["ratio_to_native"] = {tool: round(v / n, 2) for tool, v in t.items() if v}
            if t.get("empty") and t.get("full"):
                k["api_floor_x"] = round(t["empty"] / n, 2)
                k["gpusan_share_x"] = round((t["full"] - t["empty"]) / n, 2)
            if t.get("global") and t.get("full"):
                k["other_kinds_share_x"] = round((t["full"] - t["global"]) / n, 2)
            if acc and name not in ("tiny", "cublas"):
                # Cost per access over the whole GPU (throughput, not latency).
                k["ns_per_access"] = {tool: round((v - n) * 1e6 / acc, 4) for tool, v in t.items()
                                      if v and tool != "native"}
            if name == "tiny":
                k["us_per_launch"] = {tool: round(v * 1000, 2) for tool, v in t.items() if v}
        if t.get("cs") and t.get("full"):
            k["cs_over_full"] = round(t["cs"] / t["full"], 2)
        if first.get("native") is not None:
            k["first_launch_extra_ms"] = {tool: round(v - first["native"], 2) for tool, v in first.items()
                                          if v is not None and tool != "native"}
        counters = [r.get("counters") for r in by_tool.get("full", []) if r.get("counters")]
        if counters:
            k["route_counters_full"] = counters[0]
        routes = sorted({x for r in by_tool.get("full", []) for x in r.get("routes", [])})
        k["routes_full"] = routes
        result["kernels"][name] = k
ratios = [v["ratio_to_native"]["full"] for n, v in result["kernels"].items()
          if n not in ("tiny", "cublas") and v.get("ratio_to_native", {}).get("full")]
if ratios:
    result["geomean_full_x"] = round(math.exp(sum(map(math.log, ratios)) / len(ratios)), 2)
floors = [v["api_floor_x"] for n, v in result["kernels"].items() if v.get("api_floor_x") and n not in ("tiny", "cublas")]
if floors:
    result["geomean_api_floor_x"] = round(math.exp(sum(map(math.log, floors)) / len(floors)), 2)
result["built"] = builds
result["problems"] = problems
result["ok"] = not problems and "binary_speed" in builds and bool(ratios)
json.dump(result, open(path, "w"), indent=1)
print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1)[:6000])
PY
rc=$?
tar czf "$out/binary-speed-logs.tar.gz" -C "$work" logs 2>/dev/null
echo "binary-speed: exit $rc after $(( $(date +%s) - t0 )) s; outputs in $out"
exit "$rc"
