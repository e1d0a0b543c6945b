#!/usr/bin/env bash
# CI's fuzzing (.ci/run, after scripts/test.sh): every fuzz target of fuzz/targets.sh, time
# boxed, from the seed corpus. Fails on the first crash (a panic, a failed assertion), hang
# (an input running past 10 s) or out-of-memory (past 2 GiB) of any target, naming the
# input that did it and the command that replays it.
#
# Usage: scripts/fuzz-ci.sh [SECONDS]
#   SECONDS  per target (default 30, or $FUZZ_CI_SECONDS)
# Environment:
#   FUZZ_JOBS     targets run at once (default `nproc`, at most the target count)
#   FUZZ_TARGETS  default: every target of fuzz/targets.sh
#
# Builds the binaries with scripts/fuzz-build.sh (plain cargo, stable Rust; about a minute
# from clean on 2 cores) and seeds fuzz/corpus/ with fuzz/seed-corpus.sh. Each target
# reads the seeds and writes what it finds to a scratch corpus (removed): every run starts
# from the same seeds. Inputs that failed are kept in fuzz/artifacts/<target>/, logs in
# fuzz/artifacts/logs/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
secs=${1:-${FUZZ_CI_SECONDS:-30}}
# shellcheck source=../fuzz/targets.sh
source fuzz/targets.sh
read -r -a targets <<<"${FUZZ_TARGETS:-${FUZZ_ALL_TARGETS[*]}}"
jobs=${FUZZ_JOBS:-$(nproc)}
((jobs > ${#targets[@]})) && jobs=${#targets[@]}

t0=$(date +%s)
fuzz/seed-corpus.sh
bin=$(scripts/fuzz-build.sh)
t1=$(date +%s)
echo "fuzz-ci: built ${#targets[@]} targets in $((t1 - t0)) s; running each for $secs s, $jobs at a time" >&2

scratch=$(mktemp -d "${TMPDIR:-/tmp}/gpusan-fuzz-ci.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p fuzz/artifacts/logs

run() {
  local t=$1 rc=0 opts
  read -r -a opts <<<"$(fuzz_options "$t" fuzz)"
  mkdir -p "$scratch/$t" "fuzz/artifacts/$t" "fuzz/corpus/$t"
  "$bin/$t" "$scratch/$t" "fuzz/corpus/$t" -max_total_time="$secs" "${FUZZ_COMMON_OPTIONS[@]}" "${opts[@]}" \
    -artifact_prefix="fuzz/artifacts/$t/" >"fuzz/artifacts/logs/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$scratch/$t.rc"
}

running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  run "$t" &
  running=$((running + 1))
done
wait
t2=$(date +%s)

failed=0
for t in "${targets[@]}"; do
  log="fuzz/artifacts/logs/$t.log"
  rc=$(cat "$scratch/$t.rc" 2>/dev/null || echo "no exit status")
  # "#258596<TAB>DONE   cov: 3233 ft: 12945 corp: 1884/13014Kb lim: 102109 exec/s: 8341 rss: 60Mb"
  stats=$(sed -n -E 's/^#([0-9]+)[[:space:]]+DONE[[:space:]]+cov: ([0-9]+) ft: [0-9]+ corp: ([0-9]+).* exec\/s: ([0-9]+).*/\1 runs, \4\/s, coverage \2, corpus \3/p' "$log" | tail -1)
  if [ "$rc" = 0 ]; then
    echo "fuzz-ci: $t: ok (${stats:-no statistics})" >&2
    continue
  fi
  failed=1
  echo "fuzz-ci: $t FAILED (exit $rc); from its log ($log):" >&2
  # The panic (a crash), then libFuzzer's verdict (crash, timeout, out-of-memory) and input.
  grep -A2 'panicked at' "$log" | head -12 >&2 || true
  if grep -q 'ERROR: libFuzzer' "$log"; then
    sed -n '/ERROR: libFuzzer/,$p' "$log" | grep -v -E '^(stat::|MS:|0x)' >&2 || true
  else
    tail -20 "$log" >&2
  fi
  for f in $(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log"); do
    echo "fuzz-ci: $t: the input is $f; replay it with: $bin/$t $f" >&2
  done
done
echo "fuzz-ci: $((t2 - t1)) s of fuzzing after $((t1 - t0)) s of build and seeds" >&2
exit "$failed"
