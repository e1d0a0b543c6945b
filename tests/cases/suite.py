#!/usr/bin/env python3
"""Runs the memory-safety cases of tests/cases/ natively, under `gpusan run` and under
compute-sanitizer memcheck, judges each against its header, and writes one JSON document.

Called by bench/gpu-suite.sh on the GPU machine (the cases are built there first); runnable
alone with fake tools for testing (see tests/cases/README.md). Standard library only.

  suite.py --cases tests/cases --bin BUILD_DIR --gpusan DIR/gpusan --out runtime-cases.json \
           [--modes api] [--compute-sanitizer PATH|none] [--deadline EPOCH] [--logs DIR]
           [--programs NAME=CMD ...] [--env-json FILE] [--interface-bin EXIT3_BIN]
           [--route binary] [--no-interface]

BUILD_DIR holds one executable per case, named like the .cu without extension, and
NAME.shared for the `-cudart shared` builds; BUILD_DIR/NAME.build-error holds the compiler's
output of a case that did not build.
"""

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

MODE_LEVEL = {"api": 0, "count": 1, "check": 2}
# `default`: `gpusan run` with no `--mode` (issue 16: check is the default), judged as check.
RUN_DEFAULT, DEFAULT_IS = "default", "check"


def mode_args(mode):
    """The `--mode` flag for a run mode; none for `default`, to test what users get."""
    return [] if mode == RUN_DEFAULT else ["--mode", mode]


def judged_as(mode):
    return DEFAULT_IS if mode == RUN_DEFAULT else mode
KNOWN_KINDS = {
    "memcpy_out_of_bounds", "memset_out_of_bounds", "use_after_free_host", "unknown_device_address",
    "invalid_pitch", "device_mismatch", "double_free", "invalid_free", "mismatched_free",
    "unknown_free", "leak", "tensor_map_out_of_bounds", "tensor_map_use_after_free",
    "out_of_bounds_read", "out_of_bounds_write", "out_of_bounds_atomic",
    "use_after_free", "use_after_scope", "shared_out_of_bounds", "local_out_of_bounds",
    "misaligned_access", "kernel_fault", "unchecked_launch",
}
HEADER_KEYS = {"gpusan-case", "expect", "expect-leak", "accept", "known-gap", "compute-sanitizer",
               "native", "what", "also-cudart-shared", "binary"}
# Header values that are free text, continued on indented lines.
TEXT_KEYS = ("what", "known-gap", "binary")
# `binary:` (the binary route, machine code only): `found` (the default), or
# `missed-by-design WHY`: what machine code cannot show, and why.
BINARY_MISSED = "missed-by-design"


# ----------------------------------------------------------------------------- case headers

def parse_header(path):
    """The `// key: value` lines at the top of a case; indented `//   more` lines continue the
    previous value. Raises ValueError on a malformed header."""
    fields, last = {}, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.startswith("//"):
                break
            body = line[2:].rstrip("\n")
            m = re.match(r"^ ([a-z-]+):\s*(.*?)\s*(\(.*)?$", body)
            if m and m.group(1) in HEADER_KEYS:
                last = m.group(1)
                value = m.group(2) if last not in TEXT_KEYS else body.split(":", 1)[1].strip()
                fields[last] = value
            elif last in TEXT_KEYS and body.startswith("   "):
                fields[last] += " " + body.strip()
            else:
                last = None
    return normalize_case(os.path.basename(path)[:-3], path, fields)


def normalize_case(name, path, h):
    mode = h.get("gpusan-case", "")
    if mode not in MODE_LEVEL:
        raise ValueError(f"{path}: `gpusan-case:` must be one of {sorted(MODE_LEVEL)}, got {mode!r}")
    expect_raw = h.get("expect", "")
    if not expect_raw:
        raise ValueError(f"{path}: missing `expect:`")
    expect = [] if expect_raw == "clean" else expect_raw.replace(",", " ").split()
    accept = h.get("accept", "").replace(",", " ").split()
    for k in expect + accept:
        if k not in KNOWN_KINDS or k == "leak":
            raise ValueError(f"{path}: unknown kind {k!r} (leaks go in `expect-leak:`)")
    leak = h.get("expect-leak", "none")
    if leak not in ("none", "leak"):
        raise ValueError(f"{path}: `expect-leak:` must be none or leak, got {leak!r}")
    cs = h.get("compute-sanitizer", "")
    if cs not in ("yes", "no"):
        raise ValueError(f"{path}: `compute-sanitizer:` must be yes or no, got {cs!r}")
    native = h.get("native", "ok")
    if native not in ("ok", "may-fail"):
        raise ValueError(f"{path}: `native:` must be ok or may-fail, got {native!r}")
    binary = h.get("binary", "found")
    binary_why = None
    if binary.startswith(BINARY_MISSED):
        binary_why = binary[len(BINARY_MISSED):].strip()
        binary = BINARY_MISSED
        if not binary_why:
            raise ValueError(f"{path}: `binary: {BINARY_MISSED}` must say why")
        if not expect_raw or expect_raw == "clean":
            raise ValueError(f"{path}: `binary: {BINARY_MISSED}` on a clean case")
    elif binary != "found":
        raise ValueError(f"{path}: `binary:` must be found or {BINARY_MISSED} WHY, got {binary!r}")
    return {
        "case": name,
        "file": path,
        "case_mode": mode,
        "expect": expect,
        "expect_leak": leak == "leak",
        "accept": accept,
        "known_gap": h.get("known-gap") or None,
        "cs_believed": cs == "yes",
        "native_may_fail": native == "may-fail",
        "also_shared": h.get("also-cudart-shared", "no") == "yes",
        "what": h.get("what", ""),
        "binary": binary,
        "binary_why": binary_why,
    }


def load_cases(cases_dir):
    cases, errors = [], []
    for fn in sorted(os.listdir(cases_dir)):
        if fn.endswith(".cu"):
            try:
                cases.append(parse_header(os.path.join(cases_dir, fn)))
            except ValueError as e:
                errors.append(str(e))
    return cases, errors


# ----------------------------------------------------------------------------- running

class Clock:
    def __init__(self, deadline):
        self.deadline = deadline

    def left(self):
        return self.deadline - time.time() if self.deadline else 1e9


def run(cmd, timeout, clock=None, env=None, cwd=None):
    """Runs `cmd` (a list) with a wall-clock limit, in its own process group (killed whole
    on timeout). Returns rc (128+N for signal N, 124 on timeout), wall time and output."""
    if clock is not None:
        timeout = min(timeout, clock.left())
    if timeout < 3:
        return {"skipped": "suite time budget spent", "cmd": shlex.join(cmd)}
    full_env = dict(os.environ)
    full_env.update(env or {})
    start = time.monotonic()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, cwd=cwd,
                             start_new_session=True)
    except OSError as e:
        return {"rc": 127, "wall_s": 0.0, "stdout": "", "stderr": f"cannot start: {e}", "timed_out": False,
                "cmd": shlex.join(cmd)}
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = p.communicate()
    wall = time.monotonic() - start
    rc = p.returncode
    if timed_out:
        rc = 124
    elif rc < 0:
        rc = 128 - rc
    return {"rc": rc, "wall_s": round(wall, 4), "timed_out": timed_out, "cmd": shlex.join(cmd),
            "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace")}


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


def slim(r, keep=1500):
    """A run result for the JSON: output tails only."""
    if "skipped" in r:
        return dict(r)
    out = {k: r[k] for k in ("rc", "wall_s", "timed_out", "cmd")}
    out["stdout_tail"] = r["stdout"][-keep:]
    out["stderr_tail"] = r["stderr"][-keep:]
    out["last_line"] = last_line(r["stdout"])
    return out


def save_log(logs, name, r):
    if not logs or "skipped" in r:
        return
    with open(os.path.join(logs, name + ".log"), "w", encoding="utf-8") as f:
        f.write(f"$ {r['cmd']}\nrc={r['rc']} wall_s={r['wall_s']} timed_out={r['timed_out']}\n")
        f.write("----- stdout\n" + r["stdout"] + "\n----- stderr\n" + r["stderr"] + "\n")


# ----------------------------------------------------------------------------- gpusan reports

def schema_problems(doc):
    """What in a --report-json document differs from the documented interface."""
    p = []
    if not isinstance(doc, dict):
        return ["not a JSON object"]
    for k, t in (("tool", str), ("version", str), ("mode", str), ("errors", list), ("summary", dict),
                 ("leaks", list)):
        if not isinstance(doc.get(k), t):
            p.append(f"`{k}` missing or not {t.__name__}")
    if doc.get("tool") not in (None, "gpusan") and isinstance(doc.get("tool"), str):
        p.append(f"tool is {doc.get('tool')!r}")
    s = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}
    for k in ("total", "unique", "not_stored", "leaked_bytes"):
        if not isinstance(s.get(k), int):
            p.append(f"summary.{k} missing or not an integer")
    if not isinstance(s.get("by_kind"), dict):
        p.append("summary.by_kind missing")
    else:
        for k in s["by_kind"]:
            if k not in KNOWN_KINDS:
                p.append(f"unknown kind {k!r} in summary.by_kind")
    for i, e in enumerate(doc.get("errors") or []):
        if not isinstance(e, dict) or not all(k in e for k in ("kind", "message", "details")):
            p.append(f"errors[{i}] lacks kind/message/details")
        elif e["kind"] not in KNOWN_KINDS:
            p.append(f"errors[{i}] has unknown kind {e['kind']!r}")
    return p


def read_report(path):
    if not os.path.exists(path):
        return None, "no --report-json file written"
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f), None
    except (OSError, ValueError) as e:
        return None, f"unreadable report: {e}"


def found_kinds(doc):
    s = doc.get("summary") if isinstance(doc, dict) else None
    kinds = {}
    if isinstance(s, dict) and isinstance(s.get("by_kind"), dict):
        kinds = {k: v for k, v in s["by_kind"].items() if isinstance(v, int) and v > 0}
    if not kinds and isinstance(doc, dict):  # fall back to the error list
        for e in doc.get("errors") or []:
            if isinstance(e, dict) and "kind" in e:
                kinds[e["kind"]] = kinds.get(e["kind"], 0) + int(e.get("count", 1) or 1)
    return kinds


def expected_for(case, mode):
    """Kinds gpusan must report for `case` in `mode`: a case's kinds count from its own mode up."""
    if MODE_LEVEL[case["case_mode"]] <= MODE_LEVEL[judged_as(mode)]:
        return list(case["expect"])
    return []


def judge_gpusan(case, mode, run_result, report_path, native, route=""):
    """The verdict of one gpusan run. Under `route == "binary"` (machine-code-only builds) a
    bug case whose header says `binary: missed-by-design WHY`, missed with nothing extra, is
    `missed_by_design` (pass None: neither a pass nor a failure, counted apart with its why)."""
    res = slim(run_result)
    res["mode"] = mode
    if route:
        res["route"] = route
    if "skipped" in run_result:
        res["verdict"] = "skipped"
        res["pass"] = None
        return res
    expected = expected_for(case, mode)
    expect_leak = case["expect_leak"]
    res["expected"] = expected + (["leak"] if expect_leak else [])
    doc, problem = read_report(report_path)
    if doc is None:
        res.update(report=False, report_problem=problem, kinds={}, missing=res["expected"], extra=[],
                   verdict="no_report")
        res["pass"] = False
        return res
    kinds = found_kinds(doc)
    res["report"] = True
    res["schema_problems"] = schema_problems(doc)
    res["kinds"] = kinds
    s = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}
    res["total"] = s.get("total")
    res["leaked_bytes"] = s.get("leaked_bytes")
    res["report_mode"] = doc.get("mode")
    res["messages"] = [str(e.get("message", ""))[:200] for e in (doc.get("errors") or [])[:8] if isinstance(e, dict)]
    missing = [k for k in expected if k not in kinds]
    if expect_leak and "leak" not in kinds:
        missing.append("leak")
    allowed = set(expected) | set(case["accept"]) | ({"leak"} if expect_leak else set())
    extra = sorted(k for k in kinds if k not in allowed)
    res["missing"], res["extra"] = missing, extra
    res["pass"] = not missing and not extra
    is_bug = bool(expected) or expect_leak
    if extra:
        res["verdict"] = "false_positive"
    elif is_bug and missing and route == "binary" and case.get("binary") == BINARY_MISSED:
        res["verdict"] = "missed_by_design"
        res["pass"] = None
        res["why"] = case.get("binary_why")
    elif is_bug:
        res["verdict"] = "detected" if not missing else ("missed_known_gap" if case["known_gap"] else "missed")
        if not missing and route == "binary" and case.get("binary") == BINARY_MISSED:
            res["found_though_missed_by_design"] = True
    else:
        res["verdict"] = "clean"
    if mode == RUN_DEFAULT and doc.get("mode") != DEFAULT_IS:
        # What users get without `--mode` must be the checker, or every verdict above is moot.
        res["verdict"], res["pass"] = "wrong_default_mode", False
    # The program must behave as it does natively: same exit code (no --error-exitcode
    # given) and, for clean cases, the same verdict line.
    if native and "skipped" not in native:
        res["rc_passthrough"] = run_result["rc"] == native["rc"]
        if not is_bug:
            res["behaviour_preserved"] = (run_result["rc"] == native["rc"]
                                          and last_line(run_result["stdout"]) == last_line(native["stdout"]))
    return res


# ----------------------------------------------------------------------------- compute-sanitizer

CS_SKIP = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "LEAK SUMMARY", "Target application returned",
           "Error: process didn't terminate", "Saved host backtrace")


def cs_classify(headline):
    m = re.match(r"Invalid (__\w+__|generic) (read|write|atomic)", headline)
    if m:
        return f"invalid {m.group(1)} {m.group(2)}"
    m = re.match(r"Program hit (\w+).*?on CUDA API call to (\w+)", headline)
    if m:
        return f"api_error {m.group(1)} in {m.group(2)}"
    if headline.startswith("Leaked"):
        return "leak"
    if headline.startswith("Host API memory access error"):
        return "host_api_memory_access"
    if headline.startswith("Malloc/Free error"):
        return "device_heap: " + headline.split(":", 1)[-1].strip()
    if "isaligned" in headline:
        return "misaligned"
    if headline.startswith("Out-of-range"):
        return "out_of_range_shared_or_local"
    return " ".join(headline.split()[:6]).lower()


def parse_cs(text):
    """compute-sanitizer's output → error count, headline kinds, leaked bytes."""
    lines = text.splitlines()
    summary = None
    heads = []
    leaked = 0
    for i, line in enumerate(lines):
        m = re.match(r"^========= ERROR SUMMARY: (\d+) error", line)
        if m:
            summary = int(m.group(1))
            continue
        m = re.match(r"^========= (\S.*)$", line)
        if not m:
            continue
        h = m.group(1).strip()
        if any(h.startswith(s) for s in CS_SKIP):
            continue
        detail = ""
        if i + 1 < len(lines) and lines[i + 1].startswith("=========     "):
            detail = lines[i + 1][14:].strip()
        lm = re.match(r"Leaked (\d+) bytes", h)
        if lm:
            leaked += int(lm.group(1))
        heads.append({"kind": cs_classify(h), "headline": h[:200], "detail": detail[:200]})
    kinds = {}
    for h in heads:
        kinds[h["kind"]] = kinds.get(h["kind"], 0) + 1
    return {"errors": summary, "kinds": kinds, "headlines": heads[:20], "leaked_bytes": leaked}


def cs_unavailable(r):
    if "skipped" in r:
        return r["skipped"]
    text = r["stdout"] + r["stderr"]
    for s in ("Device not supported", "Error: Target application terminated before first instrumented API",
              "Unable to find injection library", "error 999"):
        if s in text:
            return s
    if r.get("rc") == 127:
        return "compute-sanitizer not found"
    if "ERROR SUMMARY" not in text:
        return "no ERROR SUMMARY in its output (rc %s)" % r.get("rc")
    return None


def judge_cs(case, r):
    res = slim(r, keep=800)
    if "skipped" in r:
        res["verdict"] = "skipped"
        return res
    parsed = parse_cs(r["stdout"] + "\n" + r["stderr"])
    res.update(parsed)
    non_leak = sum(v for k, v in parsed["kinds"].items() if k != "leak")
    leak = parsed["kinds"].get("leak", 0)
    is_bug = bool(case["expect"]) or case["expect_leak"]
    if parsed["errors"] is None:
        res["verdict"] = "no_summary"
        res["detected"] = None
        return res
    if is_bug:
        found = (non_leak > 0 if case["expect"] else False) or (leak > 0 if case["expect_leak"] else False)
        res["detected"] = found
        res["verdict"] = "detected" if found else "missed"
        # Leaks it reports in a bug case follow from the bug (a faulting kernel stops the
        # program before its frees): recorded, not counted as false positives.
        res["false_positive"] = False
        res["leaks_after_error"] = leak > 0 and not case["expect_leak"]
    else:
        res["detected"] = None
        res["false_positive"] = parsed["errors"] > 0
        res["verdict"] = "false_positive" if res["false_positive"] else "clean"
    res["matches_belief"] = (res["verdict"] == "detected") == case["cs_believed"] if is_bug else (
        not res["false_positive"])
    return res


# ----------------------------------------------------------------------------- main

def gpusan_cmd(gpusan, mode, report, prog, extra=(), route=""):
    route_args = ["--route", route] if route else []
    return [gpusan, "run", *mode_args(mode), *route_args, "--leak-check", "full", "--report-json", report, *extra, "--",
            *prog]


def run_cases(args, cases, clock):
    rows = []
    variants = []
    for c in cases:
        variants.append((c, "static", c["case"]))
        if c["also_shared"]:
            variants.append((c, "shared", c["case"] + ".shared"))
    reports = os.path.join(args.logs or "/tmp", "reports")
    os.makedirs(reports, exist_ok=True)
    for c, cudart, binname in variants:
        row = {k: c[k] for k in ("case", "file", "case_mode", "expect", "expect_leak", "accept", "known_gap",
                                 "cs_believed", "native_may_fail", "what", "binary", "binary_why")}
        row["cudart"] = cudart
        row["name"] = binname
        exe = os.path.join(args.bin, binname)
        if not os.access(exe, os.X_OK):
            err = ""
            ep = exe + ".build-error"
            if os.path.exists(ep):
                err = open(ep, encoding="utf-8", errors="replace").read()[-1500:]
            row["build"] = {"ok": False, "error": err or "no executable"}
            rows.append(row)
            print(f"{binname:40s} BUILD FAILED", flush=True)
            continue
        row["build"] = {"ok": True}
        native = run([exe], args.timeout, clock)
        save_log(args.logs, binname + ".native", native)
        row["native"] = slim(native)
        if "skipped" not in native:
            # Clean cases must print OK and exit 0; bug cases must survive their bug (exit 0)
            # unless their header says the bug may crash them natively.
            is_bug = bool(c["expect"]) or c["expect_leak"]
            ok = native["rc"] == 0 and (is_bug or last_line(native["stdout"]).startswith("OK"))
            row["native"]["ok"] = ok or (is_bug and c["native_may_fail"] and native["rc"] != 124)
        row["gpusan"] = {}
        for mode in args.modes:
            if not args.gpusan_ok:
                row["gpusan"][mode] = {"verdict": "skipped", "pass": None, "skipped": "no gpusan binary"}
                continue
            report = os.path.join(reports, f"{binname}.{mode}.json")
            if os.path.exists(report):
                os.unlink(report)
            g = run(gpusan_cmd(args.gpusan, mode, report, [exe], route=args.route), args.timeout, clock)
            save_log(args.logs, f"{binname}.gpusan-{mode}", g)
            row["gpusan"][mode] = judge_gpusan(c, mode, g, report, native, route=args.route)
        rows.append(row)
        g = row["gpusan"].get(args.modes[0], {})
        print(f"{binname:40s} native rc={row['native'].get('rc')} gpusan[{args.modes[0]}]={g.get('verdict')} "
              f"kinds={','.join(sorted(g.get('kinds', {}))) or '-'}", flush=True)
    return rows


def run_cs(args, cases, rows, clock):
    """compute-sanitizer over every built case; run last: slowest, and cut first when time runs
    short (a case it had no time for says so)."""
    cs_state = {"available": False, "reason": "not run"}
    probe_run = (None, None)
    if args.compute_sanitizer != "none":
        probe = next((r for r in rows if r["build"]["ok"] and r["case"] == "api_clean_exact_copies"),
                     next((r for r in rows if r["build"]["ok"]), None))
        if probe is not None:
            pr = run([args.compute_sanitizer, "--version"], 30, clock)
            cs_state["version"] = last_line(pr.get("stdout", "")) if "skipped" not in pr else None
            first = run(cs_cmd(args, os.path.join(args.bin, probe["name"])), args.cs_timeout, clock)
            reason = cs_unavailable(first)
            cs_state = {"available": reason is None, "reason": reason, "version": cs_state.get("version"),
                        "probe_case": probe["name"]}
            save_log(args.logs, probe["name"] + ".cs-probe", first)
            probe_run = (probe["name"], first)
    def order(row):  # bug cases first, the long stress cases last
        is_bug = bool(row["expect"]) or row["expect_leak"]
        return (not is_bug, any(w in row["case"] for w in ("threads", "many_allocations")))

    for row in sorted(rows, key=order):
        if not row["build"]["ok"]:
            continue
        case = next(c for c in cases if c["case"] == row["case"])
        if not cs_state["available"]:
            row["compute_sanitizer"] = {"verdict": "skipped", "skipped": f"compute-sanitizer unavailable: {cs_state['reason']}"}
            continue
        if row["name"] == probe_run[0]:
            r = probe_run[1]
        else:
            r = run(cs_cmd(args, os.path.join(args.bin, row["name"])), args.cs_timeout, clock)
            save_log(args.logs, row["name"] + ".cs", r)
        row["compute_sanitizer"] = judge_cs(case, r)
        print(f"{row['name']:40s} compute-sanitizer={row['compute_sanitizer'].get('verdict')} "
              f"errors={row['compute_sanitizer'].get('errors')} wall={row['compute_sanitizer'].get('wall_s')}",
              flush=True)
    return cs_state


def cs_cmd(args, exe):
    return [args.compute_sanitizer, "--tool", "memcheck", "--leak-check", "full", "--print-limit", "100", exe]


def totals(rows, modes):
    t = {"cases": len({r["case"] for r in rows}), "runs": len(rows),
         "build_failed": [r["name"] for r in rows if not r["build"]["ok"]],
         "native_broken": [r["name"] for r in rows if r.get("native", {}).get("ok") is False],
         "gpusan": {}, "compute_sanitizer": {}}
    built = [r for r in rows if r["build"]["ok"]]
    for mode in modes:
        g = {"mode": mode, "bug_cases_expected": 0, "bug_cases_found": 0, "missed": [], "missed_known_gap": [],
             "false_positive_cases": [], "clean_cases": 0, "clean_silent": 0, "no_report": [], "skipped": [],
             "passed": 0, "failed": 0, "behaviour_changed": [], "rc_not_passed_through": [],
             "schema_problems": {}, "all_bug_cases": 0, "all_bug_cases_found": 0, "missed_by_design": {}}
        for r in rows:
            res = r.get("gpusan", {}).get(mode)
            if not r["build"]["ok"]:
                g["failed"] += 1
                continue
            if res is None or res.get("verdict") == "skipped":
                g["skipped"].append(r["name"])
                continue
            v = res["verdict"]
            is_bug = bool(res.get("expected"))
            if v == "missed_by_design":
                # Neither passed nor failed: what machine code cannot show, with the header's why.
                g["missed_by_design"][r["name"]] = res.get("why")
                g["bug_cases_expected"] += 1
                g["all_bug_cases"] += 1
                continue
            g["passed" if res.get("pass") else "failed"] += 1
            if is_bug:
                g["bug_cases_expected"] += 1
                g["bug_cases_found"] += not res.get("missing")
            else:
                g["clean_cases"] += 1
                g["clean_silent"] += v == "clean"
            if r["expect"] or r["expect_leak"]:
                g["all_bug_cases"] += 1
                g["all_bug_cases_found"] += is_bug and not res.get("missing")
            if v == "missed":
                g["missed"].append(r["name"])
            elif v == "missed_known_gap":
                g["missed_known_gap"].append(r["name"])
            elif v == "no_report":
                g["no_report"].append(r["name"])
            if res.get("extra"):
                g["false_positive_cases"].append(r["name"])
            if res.get("behaviour_preserved") is False:
                g["behaviour_changed"].append(r["name"])
            if res.get("rc_passthrough") is False:
                g["rc_not_passed_through"].append(r["name"])
            if res.get("schema_problems"):
                g["schema_problems"][r["name"]] = res["schema_problems"]
        t["gpusan"][mode] = g
    cs = {"bug_cases": 0, "found": 0, "missed": [], "false_positive_cases": [], "clean_cases": 0, "clean_silent": 0,
          "skipped": 0, "belief_wrong": [], "wall_s_total": 0.0}
    for r in built:
        res = r.get("compute_sanitizer")
        if not res or res.get("verdict") in ("skipped", None):
            cs["skipped"] += 1
            continue
        cs["wall_s_total"] += res.get("wall_s") or 0
        if r["expect"] or r["expect_leak"]:
            cs["bug_cases"] += 1
            cs["found"] += bool(res.get("detected"))
            if not res.get("detected"):
                cs["missed"].append(r["name"])
        else:
            cs["clean_cases"] += 1
            cs["clean_silent"] += res.get("verdict") == "clean"
        if res.get("false_positive"):
            cs["false_positive_cases"].append(r["name"])
        if res.get("matches_belief") is False:
            cs["belief_wrong"].append(r["name"])
    cs["wall_s_total"] = round(cs["wall_s_total"], 2)
    t["compute_sanitizer"] = cs
    t["native_wall_s_total"] = round(sum(r.get("native", {}).get("wall_s") or 0 for r in built), 2)
    for mode in modes:
        t["gpusan"][mode]["wall_s_total"] = round(
            sum((r.get("gpusan", {}).get(mode) or {}).get("wall_s") or 0 for r in built), 2)
    return t


def run_programs(args, clock):
    """Real programs (PyTorch, Triton) under gpusan: they must finish with the same answer and
    no reports. Leaks are judged with --leak-check none: framework caches outlive the process
    by design. A second run with --leak-check full records what a full leak check says."""
    out = []
    reports = os.path.join(args.logs or "/tmp", "reports")
    os.makedirs(reports, exist_ok=True)
    for spec in args.programs:
        name, cmd = spec.split("=", 1)
        prog = shlex.split(cmd)
        entry = {"program": name, "command": cmd}
        env = {"PYTHONUNBUFFERED": "1"}
        native = run(prog, args.program_timeout, clock, env=env)
        save_log(args.logs, f"program-{name}.native", native)
        entry["native"] = slim(native)
        entry["native"]["ok"] = "skipped" not in native and native["rc"] == 0 and last_line(native["stdout"]).startswith("OK")
        entry["gpusan"] = {}
        for mode in args.modes:
            if not args.gpusan_ok:
                entry["gpusan"][mode] = {"skipped": "no gpusan binary", "pass": None}
                continue
            rep = os.path.join(reports, f"program-{name}.{mode}.json")
            if os.path.exists(rep):
                os.unlink(rep)
            g = run([args.gpusan, "run", *mode_args(mode), "--leak-check", "none", "--report-json", rep, "--", *prog],
                    args.program_timeout, clock, env=env)
            save_log(args.logs, f"program-{name}.gpusan-{mode}", g)
            res = slim(g)
            if "skipped" not in g:
                doc, problem = read_report(rep)
                kinds = found_kinds(doc) if doc else {}
                res.update(report=doc is not None, report_problem=problem, kinds=kinds,
                           messages=[str(e.get("message", ""))[:200] for e in ((doc or {}).get("errors") or [])[:8]
                                     if isinstance(e, dict)],
                           schema_problems=schema_problems(doc) if doc else [])
                res["output_ok"] = g["rc"] == 0 and last_line(g["stdout"]).startswith("OK")
                res["false_positives"] = sum(kinds.values())
                res["pass"] = res["output_ok"] and doc is not None and not kinds
                if native.get("wall_s"):
                    res["wall_ratio"] = round(g["wall_s"] / native["wall_s"], 3)
            else:
                res["pass"] = None
            entry["gpusan"][mode] = res
            print(f"program {name:10s} native={entry['native'].get('last_line', '')[:30]!r} "
                  f"gpusan[{mode}] pass={res.get('pass')} kinds={res.get('kinds')}", flush=True)
        if args.gpusan_ok and args.modes and clock.left() > 2 * 60:
            rep = os.path.join(reports, f"program-{name}.leakfull.json")
            g = run([args.gpusan, "run", *mode_args(args.modes[0]), "--leak-check", "full", "--report-json", rep, "--", *prog],
                    args.program_timeout, clock, env=env)
            doc, problem = read_report(rep) if "skipped" not in g else (None, "skipped")
            s = (doc or {}).get("summary") or {}
            entry["leak_check_full_info"] = {"rc": g.get("rc"), "wall_s": g.get("wall_s"), "report_problem": problem,
                                             "by_kind": s.get("by_kind"), "leaked_bytes": s.get("leaked_bytes")}
        out.append(entry)
    return out


def interface_checks(args, clock):
    """The command-line contract of `gpusan run`, on a few cases."""
    checks = []
    if not args.gpusan_ok:
        return [{"check": "all", "skipped": "no gpusan binary"}]
    tmp = os.path.join(args.logs or "/tmp", "iface")
    os.makedirs(tmp, exist_ok=True)
    mode = args.modes[0]

    def exe(name):
        p = os.path.join(args.bin, name)
        return p if os.access(p, os.X_OK) else None

    def add(name, ok, r, **more):
        d = {"check": name, "pass": ok, "rc": r.get("rc"), "wall_s": r.get("wall_s"), "cmd": r.get("cmd")}
        if "skipped" in r:
            d = {"check": name, "pass": None, "skipped": r["skipped"]}
        d.update(more)
        checks.append(d)
        save_log(args.logs, "iface-" + name, r)
        print(f"interface {name:34s} pass={d['pass']}", flush=True)

    bug, clean, leak = exe("api_double_free"), exe("api_clean_exact_copies"), exe("api_leak_at_exit")
    if bug:
        r = run([args.gpusan, "run", *mode_args(mode), "--error-exitcode", "42", "--", bug], args.timeout, clock)
        add("error_exitcode_on_error", r.get("rc") == 42, r, expected_rc=42)
    if clean:
        r = run([args.gpusan, "run", *mode_args(mode), "--error-exitcode", "42", "--", clean], args.timeout, clock)
        add("error_exitcode_clean", r.get("rc") == 0, r, expected_rc=0)
        r = run([args.gpusan, "run", "--", clean], args.timeout, clock)
        add("default_options", r.get("rc") == 0 and last_line(r.get("stdout", "")).startswith("OK"), r)
    if bug:
        log = os.path.join(tmp, "log.txt")
        if os.path.exists(log):
            os.unlink(log)
        r = run([args.gpusan, "run", *mode_args(mode), "--log-file", log, "--", bug], args.timeout, clock)
        text = open(log, encoding="utf-8", errors="replace").read() if os.path.exists(log) else ""
        ok = "ERROR SUMMARY" in text and "ERROR SUMMARY" not in r.get("stderr", "")
        add("log_file", ok, r, log_tail=text[-800:])
        r = run([args.gpusan, "run", *mode_args(mode), "--", bug], args.timeout, clock)
        add("text_report_on_stderr", "ERROR SUMMARY" in r.get("stderr", "") and "ouble free" in r.get("stderr", ""),
            r, stderr_tail=r.get("stderr", "")[-800:])
    if leak:
        rep = os.path.join(tmp, "leak-none.json")
        r = run([args.gpusan, "run", *mode_args(mode), "--leak-check", "none", "--report-json", rep, "--", leak],
                args.timeout, clock)
        doc, problem = read_report(rep)
        add("leak_check_none", doc is not None and "leak" not in found_kinds(doc), r, report_problem=problem)
    if args.interface_bin and os.access(args.interface_bin, os.X_OK):
        r = run([args.gpusan, "run", *mode_args(mode), "--", args.interface_bin], args.timeout, clock)
        add("exit_code_passthrough", r.get("rc") == 3, r, expected_rc=3)
        r = run([args.gpusan, "run", *mode_args(mode), "--", args.interface_bin, "--abort"], args.timeout, clock)
        add("signal_death_passthrough", r.get("rc") == 134, r, expected_rc=134,
            note="native: SIGABRT, shell status 134")
        r = run([args.gpusan, "run", *mode_args(mode), "--", args.interface_bin, "--args", "a b", "c"], args.timeout, clock)
        add("argument_passthrough", "argv=[a b][c]" in r.get("stdout", ""), r)
    return checks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--gpusan", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--modes", default=os.environ.get("GPUSAN_SUITE_MODES", "api"))
    ap.add_argument("--compute-sanitizer", default="compute-sanitizer")
    ap.add_argument("--deadline", type=float, default=0)
    ap.add_argument("--logs", default="")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--cs-timeout", type=float, default=90)
    ap.add_argument("--program-timeout", type=float, default=180)
    ap.add_argument("--programs", nargs="*", default=[])
    ap.add_argument("--env-json", default="")
    ap.add_argument("--interface-bin", default="")
    ap.add_argument("--only", default="", help="regex: run only the cases whose name matches")
    ap.add_argument("--table-out", default="", help="also write the final table to this file")
    ap.add_argument("--route", default="", help="gpusan run --route ROUTE (binary: machine-code-only builds; "
                                                "`binary: missed-by-design` headers apply)")
    ap.add_argument("--no-interface", action="store_true", help="skip the command-line contract checks")
    args = ap.parse_args()
    args.modes = [m for m in args.modes.replace(",", " ").split() if m]
    for m in args.modes:
        if m not in MODE_LEVEL and m != RUN_DEFAULT:
            ap.error(f"unknown mode {m}")
    args.gpusan_ok = os.access(args.gpusan, os.X_OK)
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)
    clock = Clock(args.deadline)
    started = time.time()

    cases, header_errors = load_cases(args.cases)
    if args.only:
        cases = [c for c in cases if re.search(args.only, c["case"])]
    for e in header_errors:
        print("HEADER ERROR:", e, flush=True)
    env = {}
    if args.env_json and os.path.exists(args.env_json):
        with open(args.env_json, encoding="utf-8") as f:
            env = json.load(f)
    state = {"rows": [], "programs": [], "interface": [], "cs": {"available": False, "reason": "not run yet"},
             "phase": "cases"}

    def write():
        doc = make_doc(args, env, header_errors, state, time.time() - started)
        tmp = args.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, args.out)
        return doc

    # Phases in order of importance, the document rewritten after each: a run cut short by the
    # outer time limit still leaves what it had.
    state["rows"] = run_cases(args, cases, clock)
    write()
    state["phase"] = "interface"
    state["interface"] = [] if args.no_interface else interface_checks(args, clock)
    state["phase"] = "programs"
    state["programs"] = run_programs(args, clock) if args.programs else []
    write()
    state["phase"] = "compute-sanitizer"
    state["cs"] = run_cs(args, cases, state["rows"], clock)
    state["phase"] = "done"
    doc = write()
    table = format_table(doc)
    if not args.table_out:
        print(table)
    else:
        with open(args.table_out, "w", encoding="utf-8") as f:
            f.write(table + "\n")
    return 0


def make_doc(args, env, header_errors, state, wall):
    rows = state["rows"]
    return {
        "what": "gpusan memory-safety case suite (tests/cases) on a GPU: each case natively, under "
                "`gpusan run` and under compute-sanitizer memcheck",
        "environment": env,
        "commands": {
            "native": "BIN",
            "gpusan": shlex.join(gpusan_cmd(args.gpusan, "MODE", "REPORT.json", ["BIN"], route=args.route)),
            "compute_sanitizer": shlex.join(cs_cmd(args, "BIN")),
            "programs_gpusan": f"{args.gpusan} run --mode MODE --leak-check none --report-json REPORT.json -- CMD",
        },
        "modes": args.modes,
        "route": args.route or None,
        "phase_reached": state["phase"],
        "judging": {
            "gpusan_pass": "every expected kind (and `leak` for expect-leak: leak) in summary.by_kind, and no kind "
                           "outside expect + accept; check-mode cases expect nothing in lower modes",
            "compute_sanitizer_detected": "bug case: a non-leak error for expect kinds, a `Leaked` line for "
                                          "expect-leak; clean case: ERROR SUMMARY 0",
            "program_pass": "exit 0, last line starts with OK, report written with no errors",
        },
        "header_errors": header_errors,
        "compute_sanitizer": state["cs"],
        "cases": rows,
        "totals": totals(rows, args.modes),
        "programs": state["programs"],
        "interface": state["interface"],
        "suite_wall_s": round(wall, 1),
    }


def format_table(doc):
    lines = []
    out = lines.append
    mode = (doc.get("modes") or ["api"])[0]
    out("")
    out(f"(expect: what gpusan[{mode}] must report; cases of a later mode expect nothing in this one)")
    out(f"{'case':36s} {'mode':5s} {'expect':22s} {'gpusan[' + mode + ']':22s} {'ok':4s} {'c-s':7s} "
          f"{'rc n/g/cs':10s} {'wall n/g/cs s'}")
    for r in doc["cases"]:
        g = r.get("gpusan", {}).get(mode, {})
        exp = ",".join(expected_for(r, mode) + (["leak"] if r["expect_leak"] else [])) or "clean"
        if not r["build"]["ok"]:
            out(f"{r['name'][:36]:36s} {r['case_mode']:5s} {exp[:22]:22s} BUILD FAILED")
            continue
        found = ",".join(sorted(g.get("kinds", {}))) or ("-" if g.get("report") else g.get("verdict", "?"))
        ok = {True: "PASS", False: "FAIL", None: "-"}[g.get("pass")]
        if g.get("verdict") == "missed_by_design":
            ok = "DSGN"
        cs = r.get("compute_sanitizer", {})
        csv = {"detected": "found", "missed": "missed", "clean": "silent", "false_positive": "FP",
               "skipped": "skipped"}.get(cs.get("verdict"), str(cs.get("verdict")))
        rcs = "/".join(str(x.get("rc", "-")) for x in (r.get("native", {}), g, cs))
        walls = "/".join(f"{x['wall_s']:.1f}" if isinstance(x.get("wall_s"), (int, float)) else "-"
                         for x in (r.get("native", {}), g, cs))
        out(f"{r['name'][:36]:36s} {r['case_mode']:5s} {exp[:22]:22s} {found[:22]:22s} {ok:4s} {csv:7s} {rcs:10s} {walls}")
    for p in doc.get("programs", []):
        g = p["gpusan"].get(mode, {})
        out(f"program {p['program']:32s} native_ok={p['native'].get('ok')} gpusan pass={g.get('pass')} "
              f"kinds={g.get('kinds')} wall ratio={g.get('wall_ratio')}")
    for c in doc.get("interface", []):
        out(f"interface {c['check']:30s} pass={c.get('pass')}")
    t = doc["totals"]
    for m, g in t["gpusan"].items():
        out(f"gpusan[{m}]: bugs found {g['bug_cases_found']}/{g['bug_cases_expected']} "
              f"(all bug cases incl. other modes: {g['all_bug_cases_found']}/{g['all_bug_cases']}), "
              f"false-positive cases {len(g['false_positive_cases'])}, clean silent {g['clean_silent']}/{g['clean_cases']}, "
              f"pass {g['passed']} fail {g['failed']}, no report {len(g['no_report'])}, "
              f"known-gap misses {len(g['missed_known_gap'])}, behaviour changed {len(g['behaviour_changed'])}")
        for name, why in g.get("missed_by_design", {}).items():
            out(f"  missed by design (machine code cannot show it): {name}: {why}")
    cs = t["compute_sanitizer"]
    out(f"compute-sanitizer: bugs found {cs['found']}/{cs['bug_cases']}, false-positive cases "
          f"{len(cs['false_positive_cases'])}, clean silent {cs['clean_silent']}/{cs['clean_cases']}, skipped {cs['skipped']} "
          f"({doc['compute_sanitizer'].get('reason') or 'available'})")
    if t["build_failed"] or t["native_broken"]:
        out(f"build failed: {t['build_failed']}  native broken: {t['native_broken']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
