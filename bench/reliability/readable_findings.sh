#!/usr/bin/env bash
# Readable findings (issue 16): a C++ program built with `nvcc -g -lineinfo`
# (readable_findings.cu) with an out-of-bounds write in a template kernel and a host copy
# past its allocation, run under `gpusan run --mode check`. The text report must show the
# device source line of the write, the host file:line of the allocation, the launch and
# the copy (host frames symbolized from the program's debug information), no mangled name,
# no COUNTER line and no instrumented-PTX location; `--verbose` adds those two back; each
# frame's module and offset give `addr2line` the line the report names.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$WORK"
src="$here/readable_findings.cu"
"$NVCC" -arch=sm_90 -g -lineinfo -o prog "$src" >build.log 2>&1 || {
  python3 -c 'import json,sys; json.dump({"case": "readable_findings", "ok": False, "notes": "nvcc failed: " + open("build.log").read()[-400:]}, open(sys.argv[1], "w"))' "$RESULT"
  exit 0
}
timeout 20 ./prog >native.out 2>native.err; echo $? >native.rc
timeout 40 "$GPUSAN" run --mode check --report-json plain.json -- ./prog >plain.out 2>plain.err; echo $? >plain.rc
timeout 40 "$GPUSAN" run --mode check --verbose --report-json verbose.json -- ./prog >verbose.out 2>verbose.err
echo $? >verbose.rc
python3 - "$RESULT" "$src" <<'PY'
import json, re, subprocess, sys
path, src = sys.argv[1], sys.argv[2]
lines = {m.group(1): i for i, l in enumerate(open(src), 1) for m in [re.search(r"// LINE:(\w+)", l)] if m}
def read(f):
    try: return open(f, errors="replace").read()
    except OSError: return ""
def rc(f):
    try: return int(open(f).read())
    except Exception: return None
def report(f):
    try: return json.load(open(f))
    except Exception as e: return {"error": str(e)}
plain, verbose = read("plain.err"), read("verbose.err")
doc = report("plain.json")
kinds = sorted((doc.get("summary") or {}).get("by_kind") or {})
at = lambda key: f"readable_findings.cu:{lines[key]}"
facts = {
    "kinds": kinds,
    "device_source_line": re.search(r"at scale<float>\(float\*, int\) in \S*" + re.escape(at("oob")) + r"\n", plain) is not None,
    "host_alloc_line": at("alloc") in plain,
    "host_launch_line": at("launch") in plain,
    "host_copy_line": at("copy") in plain,
    "mangled_names": sorted(set(re.findall(r"\b_Z[A-Za-z0-9_]+", plain)))[:10],
    "counter_lines": sum(1 for l in plain.splitlines() if " COUNTER " in l),
    "ptx_location": "(PTX " in plain,
    "folded_runtime_lines": sum(1 for l in plain.splitlines() if "in the CUDA runtime)" in l),
    "verbose_ptx_location": "(PTX " in verbose,
    "verbose_counters": any(" COUNTER " in l for l in verbose.splitlines()),
    "rc": rc("plain.rc"),
}
# addr2line on the module and offset of the copy's `main` frame names the report's line.
copies = [e for e in doc.get("errors", []) if e.get("kind") == "memcpy_out_of_bounds"]
mains = [f for e in copies for f in e["details"].get("call_stack", []) if f.get("function") == "main"]
if mains and mains[0].get("module") and mains[0].get("offset"):
    try:
        out = subprocess.run(["addr2line", "-e", mains[0]["module"], mains[0]["offset"]],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        facts["addr2line"] = out
        facts["addr2line_agrees"] = out.endswith(f":{mains[0].get('line')}") or out.split(" ")[0].endswith(f":{mains[0].get('line')}")
    except Exception as e:
        facts["addr2line"] = f"not run: {e}"
failures = []
for want in ("out_of_bounds_write", "memcpy_out_of_bounds"):
    if want not in kinds:
        failures.append(f"no {want}")
for key in ("device_source_line", "host_alloc_line", "host_launch_line", "host_copy_line", "verbose_ptx_location", "verbose_counters"):
    if not facts[key]:
        failures.append(f"{key} missing")
if facts["mangled_names"]:
    failures.append(f"mangled names in the text: {facts['mangled_names']}")
if facts["counter_lines"] or facts["ptx_location"]:
    failures.append("COUNTER lines or a PTX location without --verbose")
if facts.get("addr2line_agrees") is False:
    failures.append(f"addr2line names {facts['addr2line']}, the report line {mains[0].get('line')}")
json.dump({
    "case": "readable_findings",
    "ok": not failures,
    "expected": "device source line, host file:line of allocation, launch and copy; no mangled names, COUNTER lines or PTX location unless --verbose",
    "native": {"rc": rc("native.rc"), "out": read("native.out")[-200:]},
    "gpusan": {**facts, "text": plain[-4000:]},
    "notes": "; ".join(failures) or "all facts hold",
}, open(path, "w"), indent=1)
PY
