#!/usr/bin/env bash
# Real PyTorch work with the caching allocator ON and gpusan's pool hooks on (issue 15): it
# must stay silent under `gpusan run --mode check` and give bit-identical results to the
# native run. torch_real_pools.py `train` (an MLP fed by a DataLoader with 2 forked workers,
# a Transformer encoder), `compile` (torch.compile'd model: Inductor's Triton kernels through
# gpusan's ptxas route) and `threads` (4 host threads, each with its own stream), each one
# process, natively and under gpusan check, all six at once. Facts, per part:
# - both exit 0 with the same digest (SHA-256 of every loss and every final parameter's
#   bytes: exact equality);
# - gpusan's report: 0 errors; its coverage (kernels and launches checked, unchecked by
#   reason; Triton kernels among them for `compile`); no "tensor bounds are off" line;
# - the pool hooks ran: pool blocks in the device table (`device_table_peak_pool_blocks`),
#   and what they cost there: `device_table_bytes_per_pool_block` <= 32;
# - the seconds of each run and the ratio gpusan/native.
# TORCHINDUCTOR_COMPILE_THREADS=1 for both runs: Inductor compiles in the process rather
# than in a pool of workers, so the case's time is the compile's, not the pool's start.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
export GPUSAN_CACHE_DIR="$WORK/cache"
mkdir -p "$GPUSAN_CACHE_DIR" && chmod 700 "$GPUSAN_CACHE_DIR"
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_NO_CUDA_MEMORY_CACHING PYTORCH_ALLOC_CONF
export TORCHINDUCTOR_COMPILE_THREADS=1 PYTHONUNBUFFERED=1
limit=${TRP_TIMEOUT:-110}
py="$here/torch_real_pools.py"
parts="train compile threads"
if ! timeout 60 python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  python3 - "$RESULT" <<'PY'
import json, sys
json.dump({"case": "torch_real_pools", "ok": False, "skipped": "no PyTorch with a CUDA device here",
           "expected": "real PyTorch work under gpusan check with the caching allocator on: silent, bit-identical",
           "native": None, "gpusan": None, "notes": "skipped: no PyTorch with a CUDA device"}, open(sys.argv[1], "w"), indent=1)
PY
  exit 0
fi
run() {  # label, then the command; in the background
  local label=$1; shift
  ( t0=$(date +%s.%N)
    timeout -k 5 "$limit" "$@" >"$label.out" 2>"$label.err"
    echo "$? $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),2))" "$t0")" >"$label.rc" ) &
}
for p in $parts; do
  # Each run its own Inductor and Triton caches: gpusan's run compiles its kernels itself.
  TORCHINDUCTOR_CACHE_DIR="$WORK/inductor-native-$p" TRITON_CACHE_DIR="$WORK/triton-native-$p" \
    run "native_$p" python3 "$py" "$p"
  TORCHINDUCTOR_CACHE_DIR="$WORK/inductor-check-$p" TRITON_CACHE_DIR="$WORK/triton-check-$p" \
    run "check_$p" "$GPUSAN" run --mode check --report-json "$WORK/check_$p.json" -- python3 "$py" "$p"
done
wait
python3 - "$RESULT" $parts <<'PY'
import json, os, sys
path, parts = sys.argv[1], sys.argv[2:]
ok, notes, native, gpusan = True, [], {}, {}


def need(cond, what):
    global ok
    if not cond:
        ok = False
        notes.append(what)


def run(label):
    if not os.path.exists(label + ".rc"):
        return {"rc": None}
    rc, secs = open(label + ".rc").read().split()
    out = open(label + ".out", errors="replace").read()
    err = open(label + ".err", errors="replace").read()
    lines = [l for l in out.splitlines() if l.startswith("{")]
    r = {"rc": int(rc), "seconds": float(secs), "program": None, "stderr_tail": err[-600:],
         "gpusan_lines": [l for l in err.splitlines() if l.startswith("gpusan:")][:8]}
    try:
        r["program"] = json.loads(lines[-1])
    except Exception:
        pass
    return r


def report(label):
    try:
        rep = json.load(open(label + ".json"))
    except Exception as e:
        notes.append(f"{label}: no report ({e})")
        return None
    cov = (rep.get("coverage") or {})
    totals = cov.get("totals") or {}
    triton = [k for k in cov.get("kernels", []) if k.get("name", "").startswith("triton_")]
    c = rep.get("counters", {})
    return {"total": rep["summary"]["total"], "by_kind": rep["summary"]["by_kind"],
            "errors": [e.get("kind") for e in rep.get("errors", [])][:10],
            "coverage": {"kernels": totals.get("kernels"), "launches": totals.get("launches"),
                         "checked_kernels": totals.get("checked_kernels"),
                         "checked_launches": totals.get("checked_launches"),
                         "unchecked": totals.get("unchecked"),
                         "triton_kernels": len(triton),
                         "triton_checked": sum(1 for k in triton if k.get("checked_by"))},
            "pool_table": {k: v for k, v in c.items() if k.startswith("device_table")},
            "unchecked_modules": rep.get("unchecked_modules"), "notes": rep.get("notes", []),
            "cuda_processes": rep.get("cuda_processes")}


for p in parts:
    n, g = run(f"native_{p}"), run(f"check_{p}")
    need(n["rc"] == 0 and n["program"], f"native {p}: rc {n['rc']}: {n.get('stderr_tail', '')[-300:]}")
    need(g["rc"] == 0 and g["program"], f"check {p}: rc {g['rc']}: {g.get('stderr_tail', '')[-300:]}")
    rep = report(f"check_{p}")
    g["report"] = rep
    nd = (n.get("program") or {}).get("digest")
    gd = (g.get("program") or {}).get("digest")
    g["same_digest"] = bool(nd) and nd == gd
    need(g["same_digest"], f"{p}: digests differ (native {nd}, gpusan {gd})")
    if n.get("seconds") and g.get("seconds"):
        g["time_ratio"] = round(g["seconds"] / n["seconds"], 2)
    need(rep is not None and rep["total"] == 0, f"{p}: gpusan found {rep and rep['total']} errors {rep and rep['by_kind']}")
    need(not any("tensor bounds are off" in l for l in g.get("gpusan_lines", [])), f"{p}: {g.get('gpusan_lines')}")
    if rep is not None:
        table = rep["pool_table"]
        need(table.get("device_table_peak_pool_blocks", 0) > 0,
             f"{p}: no pool block reached the device table (hooks off?): {table}")
        per = table.get("device_table_bytes_per_pool_block")
        need(per is not None and per <= 32, f"{p}: device table bytes per pool block {per} (target <= 32)")
        need((rep["coverage"]["checked_kernels"] or 0) > 0, f"{p}: no kernel checked: {rep['coverage']}")
        if p == "compile":
            need(rep["coverage"]["triton_checked"] > 0, f"compile: no Triton kernel checked: {rep['coverage']}")
    native[p], gpusan[p] = n, g
per_block = [((gpusan[p].get("report") or {}).get("pool_table") or {}).get("device_table_bytes_per_pool_block") for p in parts]
json.dump({"case": "torch_real_pools", "ok": ok,
           "expected": "caching allocator on, pool hooks on: a DataLoader-fed MLP (2 forked workers) and a Transformer "
                       "encoder, a torch.compile'd model, 4 threads with their own streams: under gpusan check 0 errors, "
                       "digests of losses and final parameters identical to native, pool blocks in the device table at "
                       "<= 32 bytes each, coverage and time recorded",
           "native": native, "gpusan": gpusan,
           "summary": {p: {"same_digest": gpusan[p].get("same_digest"),
                           "errors": (gpusan[p].get("report") or {}).get("total"),
                           "checked_kernels": ((gpusan[p].get("report") or {}).get("coverage") or {}).get("checked_kernels"),
                           "kernels": ((gpusan[p].get("report") or {}).get("coverage") or {}).get("kernels"),
                           "native_s": native[p].get("seconds"), "gpusan_s": gpusan[p].get("seconds"),
                           "device_table_bytes_per_pool_block": b}
                       for p, b in zip(parts, per_block)},
           "notes": "; ".join(notes)}, open(path, "w"), indent=1)
PY
