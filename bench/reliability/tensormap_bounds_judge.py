"""Judges the runs of bench/reliability/tensormap_bounds.sh (called there from its WORK folder)
and writes the case's one JSON object:

  tensormap_bounds_judge.py RESULT LABEL...

Each LABEL names LABEL.out (one JSON line from the program), LABEL.err, LABEL.rc ("rc
seconds") and, for gpusan's runs, LABEL.json (the report). Labels: native_S, api_S, check_S
for the .cu's scenarios S (clean, clip, over, freed, over_dlsym) and native_triton_S,
api_triton_S for the Triton script's (exit 77: a skip). Standard library only."""
import json
import os
import sys

# A's 16 rows of 16 floats; the over-reaching map declares 17.
ROW = 64
A_BYTES = 16 * ROW
OVER_EXTENT = 17 * ROW
# What each scenario's report must hold: kinds, and for a finding the extent and overrun.
EXPECT = {
    "clean": {},
    "clip": {},
    "over": {"tensor_map_out_of_bounds": 1},
    "over_dlsym": {"tensor_map_out_of_bounds": 1},
    "freed": {"tensor_map_use_after_free": 1},
    "triton_clean": {},
    "triton_over": {"tensor_map_out_of_bounds": 1},
}
NATIVE_SUM = {"clean": 256.0, "clip": 64.0, "triton_clean": 1024.0}


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def load(label):
    r = {}
    try:
        rc, secs = read(f"{label}.rc").split()
        r["rc"], r["seconds"] = int(rc), float(secs)
    except (OSError, ValueError):
        r["rc"] = None
    lines = [x for x in read(f"{label}.out").splitlines() if x.startswith("{")]
    try:
        r["program"] = json.loads(lines[-1])
    except (IndexError, ValueError):
        r["program"] = None
    if not label.startswith("native"):
        try:
            rep = json.loads(read(f"{label}.json"))
            r["kinds"] = rep["summary"]["by_kind"]
            r["counters"] = {k: v for k, v in rep.get("counters", {}).items() if k.startswith("tensor_maps")}
            r["errors"] = [{"kind": e["kind"], "message": e["message"],
                            "size": e["details"].get("size"), "position": (e["details"].get("nearest") or {}).get("position")}
                           for e in rep.get("errors", [])]
        except (OSError, ValueError, KeyError) as e:
            r["report_error"] = f"{type(e).__name__}: {e}"
    if r.get("rc") not in (0, 77):
        r["stderr_tail"] = read(f"{label}.err")[-600:]
    return r


def judge(res):
    """(checks, notes) for the loaded runs `res` (label -> load())."""
    checks, notes = {}, []
    scenarios = sorted({label.split("_", 1)[1] for label in res})
    for s in scenarios:
        native = res.get(f"native_{s}")
        if native is None:
            continue
        if (native.get("program") or {}).get("skip"):
            notes.append(f"{s}: skipped ({native['program']['skip']})")
            continue
        checks[f"native_{s}_ran"] = native.get("rc") == 0 and native.get("program") is not None
        if s in NATIVE_SUM:
            checks[f"native_{s}_sum"] = (native.get("program") or {}).get("sum") == NATIVE_SUM[s]
        for mode in ("api", "check"):
            g = res.get(f"{mode}_{s}")
            if g is None:
                continue
            key = f"{mode}_{s}"
            kinds = g.get("kinds")
            checks[f"{key}_verdict"] = kinds == EXPECT[s]
            checks[f"{key}_exit"] = g.get("rc") == 0
            prog, nprog = g.get("program") or {}, native.get("program") or {}
            if s in NATIVE_SUM:
                checks[f"{key}_same_output"] = prog.get("sum") == nprog.get("sum")
            if not EXPECT[s]:
                checks[f"{key}_maps_judged"] = (g.get("counters") or {}).get("tensor_maps_judged", 0) >= 1
            if s in ("over", "over_dlsym") and g.get("errors"):
                e = g["errors"][0]
                checks[f"{key}_extent"] = e["size"] == OVER_EXTENT and e["position"] == {"relation": "inside", "offset": 0}
            if kinds != EXPECT[s]:
                notes.append(f"{key}: kinds {kinds}, expected {EXPECT[s]} {g.get('report_error', '')}".strip())
    over = (res.get("native_over") or {}).get("program") or {}
    if over:
        notes.append(f"natively the over-reaching map read sum {over.get('sum')} (240 if the 64 bytes past A were "
                     f"zeros; B {'follows' if over.get('adjacent') else 'does not follow'} A)")
    return checks, notes


def main():
    path, labels = sys.argv[1], sys.argv[2:]
    res = {label: load(label) for label in labels}
    checks, notes = judge(res)
    doc = {"case": "tensormap_bounds", "ok": bool(checks) and all(checks.values()),
           "expected": "an over-reaching tensor map (one row past its 1024-byte allocation) is one "
                       "tensor_map_out_of_bounds at cuTensorMapEncodeTiled through cudaGetDriverEntryPoint, dlsym "
                       "and Triton's launcher; a map of freed memory tensor_map_use_after_free; exact and clipped "
                       "maps silent, outputs as native",
           "checks": checks, "failed": [k for k, v in checks.items() if not v],
           "native": {k: v for k, v in res.items() if k.startswith("native")},
           "gpusan": {k: v for k, v in res.items() if not k.startswith("native")},
           "notes": "; ".join(notes)}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
