#!/usr/bin/env bash
# Which of the binary route's options a failing program needs (issue 14's diagnosis, on the GPU
# machine): the program runs natively, then under `gpusan run --mode check --route binary`
# with each option set in turn; prints one line per variant (exit code, errors, the first
# GPU fault or CUDA error line) and writes $OUT/variants-NAME.json.
#
#   bench/binary/variants.sh DIR NAME -- PROGRAM ARGS...
#
# Variants: default, --binary-kinds none, each kind alone, --redzone 0 with kinds none.
# VARIANTS overrides the list ('|'-separated option strings).
set -uo pipefail
dir=$(cd "$1" && pwd); name=$2; shift 3
out=${OUT:-/tmp}
work=$(mktemp -d /tmp/gpusan-variants.XXXXXX)
IFS='|' read -r -a variants <<<"${VARIANTS:-default|--binary-kinds none|--binary-kinds shared|--binary-kinds async|--binary-kinds bulk|--binary-kinds heap|--binary-kinds none --redzone 0}"
timeout 120 "$@" >"$work/native.out" 2>"$work/native.err"; echo "native rc=$?"
rows=()
i=0
for v in "${variants[@]}"; do
  opts=(); [ "$v" = default ] || read -r -a opts <<<"$v"
  timeout 150 "$dir/gpusan" run --mode check --route binary "${opts[@]}" --report-json "$work/$i.json" -- "$@" \
    >"$work/$i.out" 2>"$work/$i.err"
  rc=$?
  first=$(grep -m1 -E "GPU fault|CUDA error|INTERNAL_ERROR|ERROR SUMMARY" "$work/$i.err" | tr -d '"\\' | cut -c1-200)
  errs=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['summary']['total'])" "$work/$i.json" 2>/dev/null || echo none)
  echo "variant [$v]: rc=$rc errors=$errs $first"
  rows+=("{\"variant\": \"$v\", \"rc\": $rc, \"errors\": \"$errs\", \"first\": \"$first\"}")
  i=$((i + 1))
done
(IFS=,; echo "{\"program\": \"$name\", \"variants\": [${rows[*]}]}") >"$out/variants-$name.json"
