#!/usr/bin/env bash
# The simulator's speed and determinism (issue 19: ≥ 10 M trace events a second per core,
# bounded memory, results independent of threads), on a synthetic trace (gpusan sim synth):
# one configuration on one thread; the default sweep (3 tables × 8 buffer sizes) on 1 and
# on all threads, whose results must be identical. Resident memory by /usr/bin/time.
#
#   bench/sim-speed.sh [GPUSAN] [OUT.json]    GPUSAN: default target/release/gpusan
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
gpusan=${1:-$repo/target/release/gpusan}
out=${2:-${OUT:-/tmp}/sim-speed.json}
work=$(mktemp -d /tmp/gpusan-sim-speed.XXXXXX)
trap 'rm -rf "$work"' EXIT
threads=$(nproc)
"$gpusan" sim synth "$work/t.gstrace" --kernels 200 --warps 8192 --accesses 16 > "$work/synth.txt"
timed() { /usr/bin/time -f "%e %M" -o "$work/time.txt" "$@" > "$work/stdout.txt"; cat "$work/time.txt"; }
one=$(timed "$gpusan" sim mlb "$work/t.gstrace" --entries 8 --orgs bst --threads 1 --json "$work/one.json")
s1=$(timed "$gpusan" sim mlb "$work/t.gstrace" --threads 1 --json "$work/s1.json")
sn=$(timed "$gpusan" sim mlb "$work/t.gstrace" --threads "$threads" --json "$work/sn.json" --svg "$work/sweep.svg")
python3 - "$work" "$out" "$one" "$s1" "$sn" "$threads" "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)" "$(stat -c %s "$work/t.gstrace")" <<'PY'
import json, sys
work, out, one, s1, sn, threads, commit, size = sys.argv[1:9]
load = lambda n: json.load(open(f"{work}/{n}.json"))
o, a, b = load("one"), load("s1"), load("sn")
t = lambda s: (float(s.split()[0]), int(s.split()[1]))
events = o["events"]
same = [r["stats"] for r in a["results"]] == [r["stats"] for r in b["results"]]
doc = {
    "what": "gpusan sim's speed on a synthetic trace (gpusan sim synth --kernels 200 --warps 8192 --accesses 16): "
            "wall seconds and peak resident KB of the whole command (reading, decoding, simulating)",
    "commit": commit, "events": events, "trace_bytes": int(size), "cores": int(threads),
    "one_config_1_thread": {"seconds": t(one)[0], "max_rss_kb": t(one)[1], "M_events_per_s": round(events / t(one)[0] / 1e6, 1)},
    "sweep_24_configs_1_thread": {"seconds": t(s1)[0], "max_rss_kb": t(s1)[1],
                                  "M_config_events_per_s": round(events * 24 / t(s1)[0] / 1e6, 1)},
    f"sweep_24_configs_{threads}_threads": {"seconds": t(sn)[0], "max_rss_kb": t(sn)[1]},
    "sweep_results_identical_across_threads": same,
    "sweep": [{"org": r["config"]["org"], "entries": r["config"]["mlb"]["entries"], "hit_rate": round(r["stats"]["hit_rate"], 4),
               "metadata_loads": r["stats"]["metadata_loads"], "est_slowdown": r["stats"]["est_slowdown"]} for r in a["results"]],
}
json.dump(doc, open(out, "w"), indent=1)
print(json.dumps({k: v for k, v in doc.items() if k != "sweep"}, indent=1))
if not same:
    sys.exit("results differ between 1 and several threads")
PY
cp "$work/sweep.svg" "$(dirname "$out")/sim-speed-sweep.svg"
