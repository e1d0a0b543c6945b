#!/usr/bin/env bash
# SIGTERM sent to `gpusan run` mid-run (issue 12): the program is signalled and waited for,
# the report keeps what happened before the signal (an off-by-one kernel write in check
# mode, a double free), gpusan exits 128+15, nothing of the program is left running and
# gpusan's scratch folder is gone. Also `--timeout` the same way (exit 124).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
"$NVCC" -arch=sm_90 -lineinfo -o prog "$here/sigterm_mid_run.cu" || { echo '{"ok": false, "notes": "nvcc failed"}' >"$RESULT"; exit 0; }

one() {  # $1: label; $2: how it is cut (signal|timeout)
  local label=$1 how=$2 tmp="$WORK/tmp-$1" ready="$WORK/ready-$1"
  mkdir -p "$tmp"; rm -f "$ready"
  local opts=(--mode check --report-json "$WORK/$label.json")
  [ "$how" = timeout ] && opts+=(--timeout 20)
  TMPDIR="$tmp" "$GPUSAN" run "${opts[@]}" -- ./prog "$ready" >"$WORK/$label.out" 2>"$WORK/$label.err" &
  local gp=$! start; start=$(date +%s.%N)
  for _ in $(seq 600); do [ -s "$ready" ] && break; sleep 0.1; done
  local prog_pid; prog_pid=$(cat "$ready" 2>/dev/null || echo 0)
  [ "$how" = signal ] && { sleep 2; kill -TERM "$gp"; }
  wait "$gp"; local rc=$?
  local secs; secs=$(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" "$start")
  sleep 0.5
  local alive=false
  [ "$prog_pid" != 0 ] && [ -d "/proc/$prog_pid" ] && ! grep -q ') Z ' "/proc/$prog_pid/stat" 2>/dev/null && alive=true
  local left; left=$(ls -A "$tmp" | wc -l)
  python3 - "$label" "$rc" "$secs" "$alive" "$left" "$WORK/$label.json" "$WORK/$label.err" "$prog_pid" <<'PY'
import json, sys
label, rc, secs, alive, left, rep, err, pid = sys.argv[1:]
try:
    r = json.load(open(rep)); kinds = sorted(r["summary"]["by_kind"]); total = r["summary"]["total"]; notes = r.get("notes", [])
except Exception as e:
    kinds, total, notes = None, None, [f"no report: {e}"]
print(json.dumps({"label": label, "rc": int(rc), "seconds": float(secs), "program_pid": int(pid),
                  "program_left_running": alive == "true", "scratch_entries_left": int(left),
                  "kinds": kinds, "total": total, "notes": notes,
                  "stderr_tail": open(err, errors="replace").read()[-600:]}))
PY
}
native_rc=$(timeout 5 ./prog >/dev/null 2>&1; echo $?)  # 124: natively it runs past 5 s, as it must
sig=$(one sigterm signal)
tmo=$(one timeout timeout)
python3 - "$RESULT" "$native_rc" "$sig" "$tmo" <<'PY'
import json, sys
path, native_rc, sig, tmo = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
want = ["double_free", "out_of_bounds"]
def good(x, rc):
    return (x["rc"] == rc and not x["program_left_running"] and x["scratch_entries_left"] == 0
            and x["kinds"] is not None and all(any(w in k for k in x["kinds"]) for w in want))
ok = good(sig, 143) and good(tmo, 124) and native_rc == 124
json.dump({"case": "sigterm_mid_run", "ok": ok,
           "expected": "SIGTERM → exit 143, --timeout → exit 124; both: report has the double free and the kernel overflow found before, program gone, scratch removed",
           "native": {"rc_after_5s_timeout": native_rc, "still_running_at_5s": native_rc == 124}, "gpusan": {"sigterm": sig, "timeout": tmo},
           "notes": "" if ok else "see gpusan.sigterm / gpusan.timeout"}, open(path, "w"), indent=1)
PY
