#!/usr/bin/env bash
# A long fuzzing campaign with PREBUILT fuzz binaries, every core busy: runs on a machine
# with no Rust (bash, python3 and the repository's tracked files are enough).
#
# Usage: bench/fuzz-long.sh BINDIR [SECONDS] [TARGET...]
#   BINDIR   the binaries of scripts/fuzz-build.sh BINDIR (or fuzz/target/<host>/release)
#   SECONDS  wall time of the campaign (default 480); every target runs that long
#   TARGET   default: every target of fuzz/targets.sh that BINDIR holds
# Environment:
#   OUT        where the summary (fuzz-long.json), the logs and every crash, timeout and
#              out-of-memory input go (default bench/work/fuzz-long)
#   FUZZ_JOBS  cores to use (default: all, `nproc`)
#   FUZZ_WORK  scratch folder for the corpora (default: a fresh temporary folder, removed)
#
# The cores are shared out among the targets (the parsers that run inside the user's
# process first get what does not divide evenly: check, parse, fatbin, count, ...); each
# target runs in libFuzzer's fork mode with that many workers over one corpus, seeded by
# fuzz/seed-corpus.sh, and goes on past a crash, a hang (-timeout) or an out-of-memory
# (-rss_limit_mb), counting each and keeping its input, so one run says how many there are.
# With fewer cores than targets, targets take turns, one core each, SECONDS each.
#
# The summary: per target the wall and CPU seconds, executions, coverage, corpus size,
# crashes, timeouts, out-of-memory and the files of each; totals; the machine. Exit status
# 1 when anything crashed, hung or ran out of memory.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -ge 1 ] || { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
bindir=$(cd "$1" && pwd)
secs=${2:-480}
shift $(($# >= 2 ? 2 : 1))
# shellcheck source=../fuzz/targets.sh
source "$root/fuzz/targets.sh"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for t in check parse fatbin count lex meta report "${FUZZ_ALL_TARGETS[@]}"; do
    [ -x "$bindir/$t" ] && [[ " ${targets[*]} " != *" $t "* ]] && targets+=("$t")
  done
fi
[ ${#targets[@]} -gt 0 ] || { echo "fuzz-long: no fuzz binaries in $bindir" >&2; exit 2; }
out=${OUT:-$root/bench/work/fuzz-long}
mkdir -p "$out/logs" "$out/artifacts"
out=$(cd "$out" && pwd)
cores=${FUZZ_JOBS:-$(nproc)}
if [ -n "${FUZZ_WORK:-}" ]; then
  work=$FUZZ_WORK
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/gpusan-fuzz-long.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi

FUZZ_CORPUS="$work/seeds" "$root/fuzz/seed-corpus.sh"

# Workers per target: an even share, the remainder to the first targets; at least one.
declare -A workers
n=${#targets[@]}
for i in "${!targets[@]}"; do
  w=$((cores / n + (i < cores % n ? 1 : 0)))
  workers[${targets[$i]}]=$((w > 0 ? w : 1))
done

run_target() {
  local t=$1 w=$2 log="$out/logs/$1.log" rc=0
  mkdir -p "$work/corpus/$t" "$out/artifacts/$t" "$work/seeds/$t"
  local opts
  read -r -a opts <<<"$(fuzz_options "$t" "$root/fuzz")"
  # Fork mode keeps its workers' temporary files under TMPDIR.
  TMPDIR="$work" "$bindir/$t" "$work/corpus/$t" "$work/seeds/$t" \
    -fork="$w" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$secs" "${FUZZ_COMMON_OPTIONS[@]}" "${opts[@]}" \
    -artifact_prefix="$out/artifacts/$t/" >"$log" 2>&1 || rc=$?
  echo "$rc" >"$out/logs/$t.rc"
}

echo "fuzz-long: ${#targets[@]} targets on $cores cores for $secs s: $(for t in "${targets[@]}"; do printf '%s×%s ' "$t" "${workers[$t]}"; done)" >&2
start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
busy=0
for t in "${targets[@]}"; do
  # Targets take turns when the cores run out.
  while [ $((busy + workers[$t])) -gt "$cores" ] && [ "$busy" -gt 0 ]; do
    wait -n || true
    busy=0
    for p in $(jobs -pr); do busy=$((busy + 1)); done
  done
  run_target "$t" "${workers[$t]}" &
  busy=$((busy + workers[$t]))
done
wait

# Fork mode does not log its workers' panic messages: replay each crash once for them.
for t in "${targets[@]}"; do
  for f in "$out/artifacts/$t"/crash-*; do
    [ -f "$f" ] || continue
    timeout 60 "$bindir/$t" "$f" 2>&1 | grep -A1 'panicked at' >>"$out/logs/$t.replay" || true
  done
done

python3 - "$out" "$work/corpus" "$secs" "$start" "$bindir" "$(for t in "${targets[@]}"; do printf '%s=%s ' "$t" "${workers[$t]}"; done)" <<'EOF'
import json, os, platform, re, sys
out, corpora, secs, start, bindir, spec = sys.argv[1:7]
secs = int(secs)
workers = dict(x.split("=") for x in spec.split())
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), None)
summary = {
    "about": "bench/fuzz-long.sh: libFuzzer fork mode, every target for the same wall time, the cores shared out",
    "started": start,
    "machine": {"nproc": os.cpu_count(), "cpu": cpu, "os": platform.platform()},
    "binaries": bindir,
    "targets": {},
}
for t, w in workers.items():
    w = int(w)
    log = open(f"{out}/logs/{t}.log", errors="replace").read()
    replay = f"{out}/logs/{t}.replay"
    replayed = open(replay, errors="replace").read() if os.path.exists(replay) else ""
    rc = int(open(f"{out}/logs/{t}.rc").read().strip() or 1) if os.path.exists(f"{out}/logs/{t}.rc") else None
    # Fork mode: "#123: cov: 1 ft: 2 corp: 3 exec/s: 4 oom/timeout/crash: 0/0/5 time: 6s job: 7 dft_time: 0"
    status = re.findall(r"^#(\d+): cov: (\d+) ft: (\d+) corp: (\d+) exec/s: (\d+) oom/timeout/crash: (\d+)/(\d+)/(\d+) time: (\d+)s", log, re.M)
    last = [int(x) for x in status[-1]] if status else [0] * 9
    arts = sorted(os.listdir(f"{out}/artifacts/{t}"))
    files = lambda kind: [f"artifacts/{t}/{a}" for a in arts if a.startswith(kind + "-")]
    corpus = f"{corpora}/{t}"
    units = [os.path.join(corpus, f) for f in os.listdir(corpus)] if os.path.isdir(corpus) else []
    summary["targets"][t] = {
        "workers": w,
        "seconds": last[8],
        "cpu_seconds": last[8] * w,
        "execs": last[0],
        "exec_per_s": last[4],
        "coverage_edges": last[1],
        "features": last[2],
        "corpus_units": last[3],
        "corpus_files": len(units),
        "corpus_bytes": sum(os.path.getsize(u) for u in units),
        "crashes": max(last[7], len(files("crash"))),
        "timeouts": max(last[6], len(files("timeout"))),
        "ooms": max(last[5], len(files("oom"))),
        "crash_files": files("crash") + files("leak"),
        "timeout_files": files("timeout"),
        "oom_files": files("oom"),
        "exit_code": rc,
        "panics": sorted(set(a + " " + b for a, b in re.findall(r"panicked at ([^\n]+)\n([^\n]*)", log + replayed)))[:20],
    }
ts = summary["targets"].values()
summary["total"] = {k: sum(x[k] for x in ts) for k in ("cpu_seconds", "execs", "crashes", "timeouts", "ooms")}
summary["total"]["failed_runs"] = sum(1 for x in ts if x["exit_code"] != 0)
json.dump(summary, open(f"{out}/fuzz-long.json", "w"), indent=2)
open(f"{out}/fuzz-long.json", "a").write("\n")
tot = summary["total"]
print(f"fuzz-long: {tot['cpu_seconds']} CPU-seconds, {tot['execs']} executions; "
      f"{tot['crashes']} crashes, {tot['timeouts']} timeouts, {tot['ooms']} out-of-memory; {out}/fuzz-long.json", file=sys.stderr)
for t, x in summary["targets"].items():
    print(f"fuzz-long:   {t}: {x['workers']}×{x['seconds']} s, {x['execs']} execs, cov {x['coverage_edges']}, corpus {x['corpus_units']}, "
          f"crash/timeout/oom {x['crashes']}/{x['timeouts']}/{x['ooms']}" + (f" (exit {x['exit_code']})" if x["exit_code"] else ""), file=sys.stderr)
sys.exit(1 if tot["crashes"] or tot["timeouts"] or tot["ooms"] or tot["failed_runs"] else 0)
EOF
