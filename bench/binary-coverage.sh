#!/usr/bin/env bash
# Issue 14's coverage target, on the GPU machine: programs whose kernels are machine code only
# (PyTorch's, cuBLAS's, XLA's) each run natively and under `gpusan run --mode check` (route
# auto: PTX where the kernel has it, the binary route elsewhere), each with fresh caches:
#   torch_mlp, torch_transformer   bench/binary/torch_steps.py (5 steps)
#   torch_compile                  bench/binary/coverage_programs.py compile
#   cublas_gemms                   bench/binary/coverage_programs.py gemms
#   jax                            bench/binary/coverage_programs.py jax (autotuning off)
#   jax_autotune                   the same with XLA's autotuning: judged without bit-identity,
#                                  since the autotuner keeps whichever candidate ran fastest
# Judged per program: every launch checked (the report's coverage), 0 errors, exit 0, and the
# result digest the program prints equal to the native run's (bit-identical).
#
#   bench/binary-coverage.sh DIR [OUT.json]   DIR: gpusan and libgpusan_inject.so
#
# Knobs: BINCOV_ONLY (regex of program names), BINCOV_RUN_S (limit per run, 240),
# BINCOV_ARGS (more `gpusan run` options, e.g. '--binary-kinds none'). Logs in
# $(dirname OUT)/binary-coverage-logs.tar.gz.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -lt 1 ] || ! dir=$(cd "$1" 2>/dev/null && pwd); then
  echo "usage: bench/binary-coverage.sh DIR [OUT.json]" >&2
  exit 2
fi
out=${2:-${OUT:-/tmp/gpusan-binary-coverage}/binary-coverage.json}
mkdir -p "$(dirname "$out")"
work=$(mktemp -d /tmp/gpusan-bincov.XXXXXX)
limit=${BINCOV_RUN_S:-240}
only=${BINCOV_ONLY:-.}
read -r -a extra <<<"${BINCOV_ARGS:-}"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export TORCHINDUCTOR_COMPILE_THREADS=1
t0=$(date +%s)
say() { echo "[binary-coverage +$(( $(date +%s) - t0 ))s] $*"; }

fresh() {  # ROOT: every cache under ROOT (a first run)
  local r=$1
  mkdir -p "$r"/{home,xdg,triton,inductor,cupy,nv,gpusan}
  chmod 700 "$r/gpusan"
  echo "HOME=$r/home XDG_CACHE_HOME=$r/xdg TRITON_CACHE_DIR=$r/triton TORCHINDUCTOR_CACHE_DIR=$r/inductor CUPY_CACHE_DIR=$r/cupy CUDA_CACHE_PATH=$r/nv GPUSAN_CACHE_DIR=$r/gpusan"
}

one() {  # NAME then the program's arguments to python3
  local name=$1; shift
  [[ "$name" =~ $only ]] || return 0
  local w=$work/$name
  mkdir -p "$w"
  say "$name: native"
  local s=$(date +%s%N)
  env $(fresh "$w/native") timeout -k 5 "$limit" python3 "$@" >"$w/native.out" 2>"$w/native.err"
  echo "$? $(( ($(date +%s%N) - s) / 1000000 ))" >"$w/native.rc"
  say "$name: gpusan"
  s=$(date +%s%N)
  env $(fresh "$w/gpusan") timeout -k 5 $((limit + 15)) "$dir/gpusan" run --mode check "${extra[@]}" \
    --timeout "$limit" --report-json "$w/report.json" -- python3 "$@" >"$w/gpusan.out" 2>"$w/gpusan.err"
  echo "$? $(( ($(date +%s%N) - s) / 1000000 ))" >"$w/gpusan.rc"
  say "$name: done"
}

cd "$repo" || exit 2
one torch_mlp bench/binary/torch_steps.py mlp --steps 5
one torch_transformer bench/binary/torch_steps.py transformer --steps 5
one cublas_gemms bench/binary/coverage_programs.py gemms
one jax bench/binary/coverage_programs.py jax
one jax_autotune bench/binary/coverage_programs.py jax --autotune
one torch_compile bench/binary/coverage_programs.py compile

python3 - "$work" "$out" "$dir" "${BINCOV_ARGS:-}" <<'PY'
import datetime, glob, json, os, subprocess, sys
work, out, d, extra = sys.argv[1:5]

def last_json(path):
    try:
        lines = [l for l in open(path, errors="replace") if l.startswith("{")]
        return json.loads(lines[-1]) if lines else {}
    except Exception:
        return {}

def rc_time(path):
    try:
        rc, t = open(path).read().split()
        return int(rc), round(float(t) / 1000, 2)
    except Exception:
        return None, None

rows = {}
for w in sorted(glob.glob(f"{work}/*/")):
    name = os.path.basename(w.rstrip("/"))
    n, g = last_json(f"{w}/native.out"), last_json(f"{w}/gpusan.out")
    nrc, nt = rc_time(f"{w}/native.rc")
    grc, gt = rc_time(f"{w}/gpusan.rc")
    row = {"native": {"rc": nrc, "wall_s": nt, "digest": n.get("digest")},
           "gpusan": {"rc": grc, "wall_s": gt, "digest": g.get("digest")}}
    try:
        rep = json.load(open(f"{w}/report.json"))
        cov = rep.get("coverage") or {}
        kernels = cov.get("kernels") or []
        by_route = {}
        for k in kernels:
            r = k.get("checked_by") or "unchecked"
            by_route[r] = by_route.get(r, 0) + 1
        row["gpusan"].update({
            "errors": (rep.get("summary") or {}).get("total"),
            "launches": (cov.get("totals") or {}).get("launches"),
            "checked_launches": (cov.get("totals") or {}).get("checked_launches"),
            "kernels": len(kernels), "kernels_by_route": by_route,
            "unchecked": [{"kernel": k.get("name"), "launches": k.get("launches"), "why": k.get("unchecked")}
                          for k in kernels if not k.get("checked_by")][:20],
            "by_kind": (rep.get("summary") or {}).get("by_kind")})
    except Exception as e:
        row["gpusan"]["report_error"] = repr(e)
        row["gpusan"]["stderr_tail"] = open(f"{w}/gpusan.err", errors="replace").read()[-1500:]
    gg = row["gpusan"]
    row["all_launches_checked"] = bool(gg.get("launches")) and gg.get("launches") == gg.get("checked_launches")
    row["silent"] = gg.get("errors") == 0
    row["bit_identical"] = bool(n.get("digest")) and n.get("digest") == g.get("digest")
    timing_chosen = name.endswith("_autotune")
    row["ok"] = (nrc == 0 and grc == 0 and row["all_launches_checked"] and row["silent"]
                 and (row["bit_identical"] or timing_chosen))
    if not row["ok"]:
        row["native"]["stderr_tail"] = open(f"{w}/native.err", errors="replace").read()[-800:]
        row["gpusan"].setdefault("stderr_tail", open(f"{w}/gpusan.err", errors="replace").read()[-1500:])
    rows[name] = row

def sh(c):
    try:
        return subprocess.run(c, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:
        return f"({e})"

doc = {"command": f"bench/binary-coverage.sh DIR  (BINCOV_ARGS='{extra}')",
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "gpu": sh("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader"),
       "gpusan": sh(f"{d}/gpusan --version"), "torch": sh("python3 -c 'import torch; print(torch.__version__)'"),
       "programs": rows, "ok": bool(rows) and all(r["ok"] for r in rows.values())}
json.dump(doc, open(out, "w"), indent=1)
for name, r in rows.items():
    g = r["gpusan"]
    print(f"{name:18s} ok={r['ok']} checked {g.get('checked_launches')}/{g.get('launches')} "
          f"kernels {g.get('kernels_by_route')} errors={g.get('errors')} identical={r['bit_identical']} "
          f"wall native {r['native']['wall_s']} s gpusan {g.get('wall_s')} s")
print("binary-coverage:", "ok" if doc["ok"] else "NOT ok", "→", out)
PY
rc=$?
tar czf "$(dirname "$out")/binary-coverage-logs.tar.gz" -C "$work" --exclude='native/*' --exclude='gpusan/*' . 2>/dev/null || true
exit $rc
