#!/usr/bin/env bash
# What gpusan's launch path costs a PyTorch training step whose kernels it does not
# instrument (issue 13: every launch now counts its coverage and records a fault-ring entry):
# bench/binary/torch_steps.py (MLP and 4-layer Transformer, CUDA-event medians per step)
# natively, under `gpusan run --mode api` and under `gpusan run --mode check --route ptx`
# (PyTorch's machine code left unchecked: the launch path alone), alternating, ROUNDS rounds
# (default 3).
#
#   bench/launch-path.sh DIR [OUT.json]    DIR: the gpusan binary and libgpusan_inject.so;
#                                          OUT.json defaults to $OUT/launch-path.json
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=$(cd "${1:?usage: bench/launch-path.sh DIR [OUT.json]}" && pwd) || exit 2
out=${2:-${OUT:-/tmp}/launch-path.json}
cd "$repo" || exit 2
python3 - "$dir/gpusan" "$out" "${ROUNDS:-3}" "${STEPS:-30}" <<'PY'
import json, statistics, subprocess, sys, time
gpusan, out, rounds, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
tools = {"native": [], "api": [gpusan, "run", "--mode", "api", "--"],
         "check_ptx": [gpusan, "run", "--mode", "check", "--route", "ptx", "--"]}
runs = []
for r in range(1, rounds + 1):
    for model in ("mlp", "transformer"):
        for tool, prefix in tools.items():
            cmd = prefix + ["python3", "bench/binary/torch_steps.py", model, "--steps", steps]
            t = time.monotonic()
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            last = [l for l in p.stdout.splitlines() if l.startswith("{")]
            doc = json.loads(last[-1]) if last else {}
            ms = (doc.get("metrics") or {}).get(f"{model}.ms_per_step")
            runs.append({"round": r, "model": model, "tool": tool, "rc": p.returncode, "ms_per_step": ms,
                         "digest": doc.get("digest"), "wall_s": round(time.monotonic() - t, 2),
                         **({"tail": (p.stdout + p.stderr)[-600:]} if p.returncode or ms is None else {})})
            print(f"[launch-path] round {r} {model:11s} {tool:9s} rc={p.returncode} ms/step={ms}", flush=True)
            # What is done so far, should the call be cut short (it was, twice).
            json.dump({"command": "bench/launch-path.sh DIR", "partial": True, "runs": runs}, open(out, "w"), indent=1)
summary = {}
for model in ("mlp", "transformer"):
    med = {t: statistics.median([x["ms_per_step"] for x in runs if x["model"] == model and x["tool"] == t
                                 and x["ms_per_step"] is not None] or [float("nan")]) for t in tools}
    digests = {t: {x["digest"] for x in runs if x["model"] == model and x["tool"] == t} for t in tools}
    summary[model] = {"ms_per_step": med, "ratio": {t: round(med[t] / med["native"], 3) for t in tools if t != "native"},
                      "bit_identical": all(d == digests["native"] and len(d) == 1 for d in digests.values())}
doc = {"what": "ms per training step (CUDA events, median over steps, then over rounds): native, gpusan api, "
               "gpusan check with PTX route only (PyTorch's machine code unchecked: the launch path alone)",
       "command": "bench/launch-path.sh DIR", "rounds": rounds, "steps": int(steps), "summary": summary, "runs": runs}
json.dump(doc, open(out, "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
