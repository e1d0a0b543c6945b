#!/usr/bin/env bash
# Fuzzes the PTX front-end with cargo-fuzz/libFuzzer on the stable Rust toolchain.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  time per target (default 60)
#   TARGET   parse, lex, fatbin (default: all, one after the other)
# Environment:
#   FUZZ_SANITIZER=none|address  (default none). `none` needs nothing beyond stable Rust:
#       cargo-fuzz then passes only stable -C flags (sancov instrumentation, the
#       `fuzzing` cfg, debug assertions, overflow checks). `address` adds
#       -Zsanitizer=address, which stable rustc accepts only with RUSTC_BOOTSTRAP=1 (set
#       here); the ASan runtime ships with the stable toolchain. The code under test is
#       safe Rust, so `none` finds the same panics about twice as fast.
#   FUZZ_MAX_LEN  largest input libFuzzer builds (default 32768)
#   FUZZ_RECORD   also write the run's summary (JSON) to this file, e.g.
#                 bench/results/fuzz.json
#   FUZZ_FORK     when set to N, run libFuzzer with -fork=N: a crash is recorded and the
#                 campaign goes on (-ignore_crashes=1) instead of stopping at the first.
#
# Installs cargo-fuzz if it is missing and seeds fuzz/corpus/<target> from real nvcc PTX
# (fuzz/seed-corpus.sh); both steps are idempotent. Crashes land in
# fuzz/artifacts/<target>/, logs in fuzz/artifacts/logs/. Reproduce one with
#   cargo fuzz run --sanitizer none parse fuzz/artifacts/parse/crash-…
# and minimize it with
#   cargo fuzz tmin --sanitizer none parse fuzz/artifacts/parse/crash-…
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(parse lex fatbin)
sanitizer=${FUZZ_SANITIZER:-none}
max_len=${FUZZ_MAX_LEN:-32768}

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz" >&2
  cargo install --locked cargo-fuzz
fi
if [ "$sanitizer" != none ]; then
  export RUSTC_BOOTSTRAP=1
fi

fuzz/seed-corpus.sh

mkdir -p fuzz/artifacts/logs
summaries=()
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  cargo fuzz build --sanitizer "$sanitizer" "$t"
  log="fuzz/artifacts/logs/$t.log"
  extra=()
  if [ -n "${FUZZ_FORK:-}" ]; then
    extra=(-fork="$FUZZ_FORK" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  fi
  # The PTX dictionary helps the text targets only.
  case $t in parse|lex) extra+=(-dict=fuzz/ptx.dict) ;; esac
  cmd=(cargo fuzz run --sanitizer "$sanitizer" "$t" "fuzz/corpus/$t" --
    -max_total_time="$secs" -max_len="$max_len" -timeout=10
    -rss_limit_mb=4096 -print_final_stats=1 "${extra[@]}")
  echo "fuzz: ${cmd[*]}" >&2
  start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  touch "$log.start"   # artifacts newer than this are this run's
  set +e
  "${cmd[@]}" 2>&1 | tee "$log" | grep -E --line-buffered 'DONE|NEW_FUNC|pulse|INFO: seed|ERROR|panicked|SUMMARY|stat::|crash-|#[0-9]+: cov' >&2
  rc=${PIPESTATUS[0]}
  set -e
  crashes=$(find "fuzz/artifacts/$t" -maxdepth 1 -type f -newer "$log.start" \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
  # Fork mode does not log the children's panic messages: replay each artifact once.
  bin="fuzz/target/$(rustc -vV | sed -n 's/^host: //p')/release/$t"
  for c in $crashes; do
    echo "fuzz: replaying $c" >>"$log"
    "$bin" "$c" 2>&1 | grep -A1 'panicked at' >>"$log" || true
  done
  summaries+=("$(python3 - "$t" "$log" "$rc" "$start" "${cmd[*]}" "$crashes" <<'EOF'
import json, re, sys
target, log, rc, start, cmd, crashes = sys.argv[1:7]
text = open(log, errors="replace").read()
stats = dict(re.findall(r"^stat::(\w+):\s*(\S+)", text, re.M))
# Last status line: "#123 DONE cov: 1 ft: 2 corp: 3/4b ..." (or pulse/NEW), or in fork
# mode "#123: cov: 1 ft: 2 corp: 3 exec/s: 4 oom/timeout/crash: 0/0/5 time: 6s ...".
lines = re.findall(r"^#(\d+)(?:\s+\w+\s+|:\s+)cov: (\d+) ft: (\d+) corp: (\d+)(?:/(\S+))?", text, re.M)
last = (lines[-1][0], None, lines[-1][1], lines[-1][2], lines[-1][3], lines[-1][4] or None) if lines else None
fork = re.findall(r"oom/timeout/crash: (\d+)/(\d+)/(\d+) time: (\d+)s", text)
out = {
    "target": target,
    "started": start,
    "exit_code": int(rc),
    "command": cmd,
    "executions": int(stats.get("number_of_executed_units", last[0] if last else 0)),
    "exec_per_s": int(stats.get("average_exec_per_sec", 0)) or (int(last[0]) // max(1, int(fork[-1][3])) if fork and last else 0),
    "coverage_edges": int(last[2]) if last else None,
    "features": int(last[3]) if last else None,
    "corpus_units": int(last[4]) if last else None,
    "corpus_size": last[5] if last else None,
    "new_units_added": int(stats.get("new_units_added", 0)),
    "peak_rss_mb": int(stats.get("peak_rss_mb", 0)),
    "crashes": [c for c in crashes.split("\n") if c],
    "crash_count": int(fork[-1][2]) if fork else len([c for c in crashes.split("\n") if c]),
    "panics": sorted(set(a + " " + b for a, b in re.findall(r"panicked at ([^\n]+)\n([^\n]*)", text))),
}
print(json.dumps(out))
EOF
)")
  echo "fuzz: $t exited $rc; summary: ${summaries[-1]}" >&2
done

if [ -n "${FUZZ_RECORD:-}" ]; then
  # "targets": the latest run of each target; "history": every recorded run.
  python3 - "$FUZZ_RECORD" "$secs" "$sanitizer" "${FUZZ_FORK:-}" "${summaries[@]}" <<'EOF'
import datetime, json, os, platform, subprocess, sys
path, secs, sanitizer, fork, *runs = sys.argv[1:]
def sh(*a):
    try:
        return subprocess.run(a, capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return None
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), None)
try:
    rec = json.load(open(path))
except (OSError, ValueError):
    rec = {}
rec.setdefault("targets", {})
rec["about"] = "cargo-fuzz/libFuzzer runs of fuzz/fuzz_targets/*, written by scripts/fuzz.sh (FUZZ_RECORD)"
rec["machine"] = {"nproc": os.cpu_count(), "cpu": cpu, "os": platform.platform()}
rec["rustc"] = sh("rustc", "--version")
rec["cargo_fuzz"] = sh("cargo", "fuzz", "--version")
env = " ".join(x for x in [f"FUZZ_FORK={fork}" if fork else "", f"FUZZ_SANITIZER={sanitizer}" if sanitizer != "none" else ""] if x)
for r in map(json.loads, runs):
    r = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "script": (env + " " if env else "") + f"scripts/fuzz.sh {secs} {r['target']}",
        "seconds": int(secs),
        "sanitizer": sanitizer,
        "git_commit": sh("git", "rev-parse", "HEAD"),
        "git_dirty": bool(sh("git", "status", "--porcelain", "--untracked-files=no")),
        **r,
    }
    rec["targets"][r["target"]] = r
    rec.setdefault("history", []).append(r)
os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
with open(path, "w") as f:
    json.dump(rec, f, indent=2)
    f.write("\n")
print(f"fuzz: wrote {path}", file=sys.stderr)
EOF
fi
