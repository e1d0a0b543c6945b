#!/usr/bin/env python3
"""One row of bench/coverage.sh: the coverage a gpusan report states for a program, against a
count made without gpusan's help. Standard library only; every input read defensively (a
missing or broken one is recorded, never fatal).

    compare.py --name NAME --report REPORT.json [--native-out F] [--program-out F]
               [--xla-dump DIR] [--log GPUSAN_STDERR] [--rc N] [--native-rc N]

Independent counts, each a JSON line starting with `{` in a program's stdout:
  - `profiled_launches`, `profiled_kernels`, `by_name` (torch.profiler, CUPTI, in a native run
    of the same program): every kernel launched, by name;
  - `program_launches`, `by_name` (the program counts the launches it makes itself);
  - `--xla-dump DIR`: the kernels XLA wrote there (XLA_FLAGS=--xla_dump_to) in the gpusan run:
    `.entry` names of PTX, kernel thunks of thunk sequences; the report must list those launched.
A non-zero `profiled_*` count printed by the gpusan run itself is preferred to the native run's
(the same process); on the H100, CUPTI recorded nothing under gpusan (the Compute Sanitizer
API is on), so bench/coverage.sh profiles the native run only, and makes the runs launch alike.
Kernel names are compared by their base (the qualified name before template arguments and
parameters): CUPTI's and gpusan's demanglers spell template arguments differently.
"""
import argparse
import json
import os
import re
import sys


def json_lines(path):
    """The JSON objects a program printed, one a line, merged (later keys win)."""
    out = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        d = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(d, dict):
                        out.update(d)
    except OSError:
        pass
    return out


def base(name):
    n = str(name).strip()
    if n.startswith("void "):
        n = n[5:]
    n = re.split(r"[<(]", n, maxsplit=1)[0].strip()
    return n


def by_base(counts):
    out = {}
    for name, n in counts.items():
        if isinstance(n, int):
            out[base(name)] = out.get(base(name), 0) + n
    return out


def report_coverage(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return None, f"no report: {e}"
    cov = doc.get("coverage") if isinstance(doc, dict) else None
    if not isinstance(cov, dict):
        return {"doc": doc, "kernels": [], "totals": None}, "report has no coverage section"
    kernels = [k for k in cov.get("kernels") or [] if isinstance(k, dict)]
    return {"doc": doc, "kernels": kernels, "totals": cov.get("totals") if isinstance(cov.get("totals"), dict) else None}, None


# A kernel thunk in XLA's thunk-sequence dumps: `001: kCustomKernel [...] NAME grid: [...]`.
THUNK = re.compile(r"^\s*\d+:\s+k(?:Custom)?Kernel\b[^\]]*\]\s+(\S+)\s+grid:", re.M)


def xla_entries(folder):
    """The kernels XLA made: `.entry` names of dumped PTX, and the kernel thunks of its
    thunk sequences (XLA 0.7+ dumps no PTX; its thunks name every kernel it launches)."""
    names = set()
    if not folder or not os.path.isdir(folder):
        return None
    for root, _, files in os.walk(folder):
        for fn in files:
            if "thunk_sequence" in fn and fn.endswith(".txt"):
                try:
                    names.update(THUNK.findall(open(os.path.join(root, fn), encoding="utf-8", errors="replace").read()))
                except OSError:
                    continue
            if fn.endswith(".ptx"):
                try:
                    text = open(os.path.join(root, fn), encoding="utf-8", errors="replace").read()
                except OSError:
                    continue
                names.update(re.findall(r"^\s*\.(?:visible\s+)?\.?entry\s+([\w$.]+)", text, re.M))
    return sorted(names)


def compare(args):
    row = {"program": args.name, "gpusan_rc": args.rc, "native_rc": args.native_rc}
    rep, problem = report_coverage(args.report)
    if problem:
        row["report_problem"] = problem
    kernels = rep["kernels"] if rep else []
    totals = (rep or {}).get("totals") or {}
    launches = sum(k.get("launches", 0) for k in kernels if isinstance(k.get("launches"), int))
    row["report"] = {
        "totals": totals or None,
        "kernels": len(kernels),
        "launches": launches,
        "checked_kernels": sum(1 for k in kernels if k.get("checked_by") and not k.get("unchecked")),
        "unchecked_by_reason": (totals.get("unchecked") if isinstance(totals.get("unchecked"), dict) else None),
        "errors_by_kind": ((rep or {}).get("doc") or {}).get("summary", {}).get("by_kind") if rep else None,
        "top_kernels": sorted(({"name": str(k.get("name", ""))[:120], "launches": k.get("launches"),
                                "checked_by": k.get("checked_by"), "unchecked": k.get("unchecked")}
                               for k in kernels), key=lambda k: -(k["launches"] or 0))[:12],
    }
    if rep and totals and isinstance(totals.get("launches"), int):
        row["report"]["totals_consistent"] = totals.get("launches") == launches and totals.get("kernels") == len(kernels)
    if args.log:
        try:
            row["summary_line"] = [l.strip() for l in open(args.log, errors="replace") if "COVERAGE:" in l][-1:]
        except OSError:
            row["summary_line"] = []
    # Several kernels may share a base name: summed.
    reported = {}
    for k in kernels:
        if isinstance(k.get("launches"), int):
            b = base(k.get("name", ""))
            reported[b] = reported.get(b, 0) + k["launches"]
    independent = {}
    for label, path in (("native", args.native_out), ("program", args.program_out)):
        if path:
            independent.update({f"{label}:{k}": v for k, v in json_lines(path).items()})
    counts = None
    if independent.get("program:profiled_launches"):
        # The same process as the report: launches that vary from run to run (Inductor's
        # autotuning benchmarks each candidate for a time, not a count) are counted alike.
        counts = {"source": "torch.profiler (CUPTI) in the gpusan run itself",
                  "launches": independent["program:profiled_launches"],
                  "kernels": independent.get("program:profiled_kernels"),
                  "by_name": independent.get("program:by_name") or {}}
        if "native:profiled_launches" in independent:
            row["native_profile"] = {"launches": independent["native:profiled_launches"],
                                     "kernels": independent.get("native:profiled_kernels")}
    elif "native:profiled_launches" in independent:
        counts = {"source": "torch.profiler (CUPTI) in a native run", "launches": independent["native:profiled_launches"],
                  "kernels": independent.get("native:profiled_kernels"), "by_name": independent.get("native:by_name") or {}}
    elif "program:program_launches" in independent:
        counts = {"source": "the program's own count, in the gpusan run", "launches": independent["program:program_launches"],
                  "kernels": independent.get("program:program_kernels"), "by_name": independent.get("program:by_name") or {}}
    if counts:
        theirs = by_base(counts["by_name"]) if isinstance(counts["by_name"], dict) else {}
        row["independent"] = {k: v for k, v in counts.items() if k != "by_name"}
        row["launches_match"] = counts["launches"] == launches
        if theirs:
            diff = []
            for name in sorted(set(theirs) | set(reported)):
                a, b = theirs.get(name, 0), reported.get(name, 0)
                if a != b:
                    diff.append({"kernel": name[:120], "independent": a, "report": b})
            row["names_compared"] = len(set(theirs) | set(reported))
            row["name_mismatches"] = diff[:20]
            row["name_mismatch_count"] = len(diff)
            row["kernels_match"] = not diff
    entries = xla_entries(args.xla_dump)
    if entries is not None:
        mangled = {str(k.get("mangled") or k.get("name")) for k in kernels}
        listed = [e for e in entries if e in mangled]
        row["independent"] = {"source": "the kernels XLA dumped (--xla_dump_to: PTX .entry names, kernel thunks) in the gpusan run",
                              "xla_kernels": len(entries)}
        row["xla_kernels_in_report"] = len(listed)
        # XLA compiles kernels it may not launch (autotuning candidates): the check is that
        # every kernel the report lists from XLA's modules is one XLA made, and how many of
        # XLA's are listed.
        row["xla_kernels_not_in_report"] = [e for e in entries if e not in mangled][:20]
    if "independent" not in row:
        row["independent"] = None
        row["note"] = "no independent count for this program"
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--native-out", default="")
    ap.add_argument("--program-out", default="")
    ap.add_argument("--xla-dump", default="")
    ap.add_argument("--log", default="")
    ap.add_argument("--rc", type=int, default=None)
    ap.add_argument("--native-rc", type=int, default=None)
    args = ap.parse_args(argv)
    try:
        row = compare(args)
    except Exception as e:  # noqa: BLE001 (a row that says why, never nothing)
        row = {"program": args.name, "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
