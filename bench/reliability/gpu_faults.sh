#!/usr/bin/env bash
# GPU faults are findings (issue 13 item 3): a kernel that traps, asserts, writes far out of
# bounds or reads misaligned is reported as `kernel_fault` (the CUDA error, the kernels, the
# stacks) in api mode, where nothing is instrumented, with the program's own error passing
# through unchanged and --error-exitcode applying; a fault learnt only by cudaStreamQuery /
# cudaEventQuery polling, or never learnt (exit 0), is found too; in check mode a checked
# kernel's out-of-bounds write recorded before another kernel's trap is reported though the
# program aborts. Also records what the H100 returns natively for each scenario.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
"$NVCC" -arch=sm_90 -lineinfo -o prog "$here/gpu_faults.cu" >build.log 2>&1 || {
  python3 -c 'import json,sys; json.dump({"case": "gpu_faults", "ok": False, "notes": "nvcc failed: " + open("build.log").read()[-400:]}, open(sys.argv[1], "w"))' "$RESULT"
  exit 0
}
scenarios="sync abort illegal misaligned assert query event_query unchecked"
for s in $scenarios; do
  timeout 20 ./prog "$s" >"native-$s.out" 2>"native-$s.err"; echo $? >"native-$s.rc"
  for mode in api check; do
    timeout 40 "$GPUSAN" run --mode "$mode" --error-exitcode 99 --report-json "$mode-$s.json" -- ./prog "$s" \
      >"$mode-$s.out" 2>"$mode-$s.err"
    echo $? >"$mode-$s.rc"
  done
done
python3 - "$RESULT" $scenarios <<'PY'
import json, sys
path, scenarios = sys.argv[1], sys.argv[2:]
def last(f):
    try:
        lines = [l for l in open(f, errors="replace").read().splitlines() if l.strip()]
        return lines[-1] if lines else ""
    except OSError:
        return None
def tail(f, n):
    try: return open(f, errors="replace").read()[-n:]
    except OSError: return None
def rc(f):
    try: return int(open(f).read())
    except Exception: return None
def rep(f):
    try:
        r = json.load(open(f))
    except Exception as e:
        return {"error": f"no report: {e}"}
    faults = [e["details"] for e in r.get("errors", []) if e.get("kind") == "kernel_fault"]
    return {"kinds": sorted(r["summary"]["by_kind"]), "total": r["summary"]["total"],
            "faults": [{"error": d.get("error"), "api": d.get("api"),
                        "kernels": [(k.get("kernel"), k.get("grid"), k.get("block"), bool(k.get("launch_stack")))
                                    for k in d.get("kernels", [])],
                        "call_stack_has_main": any(fr.get("function") == "main" for fr in d.get("call_stack") or [])}
                       for d in faults]}
native_want = {"sync": (1, "cudaErrorLaunchFailure"), "abort": (134, "cudaErrorLaunchFailure"),
               "illegal": (1, "cudaErrorIllegalAddress"), "misaligned": (1, "cudaErrorMisalignedAddress"),
               "assert": (1, "cudaErrorAssert"), "query": (3, "cudaErrorLaunchFailure"),
               "event_query": (3, "cudaErrorLaunchFailure"), "unchecked": (0, "never asked")}
native, api, check, failures = {}, {}, {}, []
for s in scenarios:
    native[s] = {"rc": rc(f"native-{s}.rc"), "last": last(f"native-{s}.out")}
    for mode, into in (("api", api), ("check", check)):
        into[s] = {"rc": rc(f"{mode}-{s}.rc"), "last": last(f"{mode}-{s}.out"), **rep(f"{mode}-{s}.json"),
                   "stderr_tail": tail(f"{mode}-{s}.err", 300) if mode == "api" else ""}
    n, a, c = native[s], api[s], check[s]
    want_rc, want_err = native_want[s]
    if n["rc"] != want_rc or want_err not in (n["last"] or ""):
        failures.append(f"{s}: native gave rc {n['rc']} / {n['last']!r}, expected {want_rc} / {want_err}")
    # api mode: nothing instrumented; the fault is the finding; the program saw what it sees natively.
    if a.get("kinds") != ["kernel_fault"] or len(a.get("faults", [])) != 1:
        failures.append(f"{s}: api mode kinds {a.get('kinds')} faults {len(a.get('faults', []))}")
    elif not a["faults"][0]["kernels"]:
        failures.append(f"{s}: api mode: no kernel named")
    if a.get("last") != n["last"]:
        failures.append(f"{s}: api mode: the program saw {a.get('last')!r}, natively {n['last']!r}")
    if a.get("rc") != 99:
        failures.append(f"{s}: api mode: exit {a.get('rc')}, --error-exitcode 99 expected")
    if s in ("query", "event_query") and a.get("faults") and "Query" not in (a["faults"][0]["api"] or ""):
        failures.append(f"{s}: learnt from {a['faults'][0]['api']}, expected the query")
    if s == "unchecked" and a.get("faults") and "at exit" not in (a["faults"][0]["api"] or ""):
        failures.append(f"{s}: found by {a['faults'][0]['api']}, expected gpusan's query at exit")
    # check mode: every scenario reported; the checked write before the trap too.
    if not c.get("total") or c.get("rc") != 99:
        failures.append(f"{s}: check mode: total {c.get('total')} exit {c.get('rc')}")
    if s == "abort" and not {"kernel_fault", "out_of_bounds_write"} <= set(c.get("kinds") or []):
        failures.append(f"abort: check mode kinds {c.get('kinds')}: the write and the fault expected")
ok = not failures
json.dump({"case": "gpu_faults", "ok": ok,
           "expected": "every fault a kernel_fault in api mode (kernels named, program's error unchanged, exit 99); "
                       "polled and never-learnt faults found; in check mode the write before a trap reported though the program aborts",
           "native": native, "gpusan": {"api": api, "check": check},
           "notes": "; ".join(failures)}, open(path, "w"), indent=1)
PY
