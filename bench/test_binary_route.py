#!/usr/bin/env python3
"""Tests of the binary route's measurement scripts (issue 14) without a GPU:

- tests/cases/suite.py: the `binary:` header (every case parses; missed-by-design needs a why,
  a bug), judging under `--route binary` (missed by design apart from failures), and
  bench/gpu-suite.sh GPUSAN_SUITE_SASS_ONLY=1 end to end with a fake nvcc, gpusan and
  compute-sanitizer (machine-code-only flags, `--route binary`, runtime-cases-sass.json);
- bench/binary_overhead.py: the machine-code-only build command, the plan, the summary, a
  dry run and a whole run over fake workloads and tools;
- bench/reliability/tensormap_bounds_judge.py on fake run outputs.

    python3 bench/test_binary_route.py
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests/cases"))
sys.path.insert(0, str(HERE / "reliability"))
import binary_overhead as bo  # noqa: E402
import suite  # noqa: E402
import tensormap_bounds_judge as tmj  # noqa: E402


def script(path, text):
    path.write_text(textwrap.dedent(text).lstrip())
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# A gpusan that runs the program after `--` and writes a report with the kinds in
# $FAKE_KINDS (JSON) and full coverage.
FAKE_GPUSAN = """
    #!/usr/bin/env python3
    import json, os, subprocess, sys
    a = sys.argv
    rep = a[a.index("--report-json") + 1]
    prog = a[a.index("--") + 1:]
    r = subprocess.run(prog)
    kinds = json.loads(os.environ.get("FAKE_KINDS", "{}"))
    open(os.environ.get("FAKE_ARGS_LOG", os.devnull), "a").write(" ".join(a[1:]) + "\\n")
    json.dump({"tool": "gpusan", "version": "x", "mode": "check", "leaks": [],
               "errors": [{"kind": k, "message": k, "details": {}} for k in kinds],
               "summary": {"total": sum(kinds.values()), "unique": len(kinds), "not_stored": 0, "leaked_bytes": 0,
                           "by_kind": kinds},
               "coverage": {"kernels": [{"name": "k", "mangled": "k", "launches": 3, "checked_by": "binary"}],
                            "totals": {"kernels": 1, "launches": 3, "checked_kernels": 1, "checked_launches": 3}}},
              open(rep, "w"))
    sys.exit(r.returncode)
"""
# compute-sanitizer: runs the program (after its options), says it found nothing.
FAKE_CS = """
    #!/usr/bin/env python3
    import subprocess, sys
    args = sys.argv[1:]
    if args[:1] == ["--version"]:
        print("fake compute-sanitizer"); sys.exit(0)
    while args and args[0].startswith("--"):
        args = args[2:] if args[0] in ("--tool", "--leak-check", "--print-limit", "--report-api-errors") else args[1:]
    r = subprocess.run(args)
    print("========= ERROR SUMMARY: 0 errors")
    sys.exit(r.returncode)
"""

BUG = {"case": "check_x", "file": "x.cu", "case_mode": "check", "expect": ["local_out_of_bounds"],
       "expect_leak": False, "accept": [], "known_gap": None, "cs_believed": False, "native_may_fail": False,
       "also_shared": False, "what": "", "binary": "missed-by-design", "binary_why": "inside the frame"}
NATIVE = {"rc": 0, "wall_s": 0.1, "timed_out": False, "cmd": "x", "stdout": "done (x)\n", "stderr": ""}


class SuiteHeaders(unittest.TestCase):
    def test_every_case_parses_and_those_machine_code_cannot_show_say_why(self):
        cases, errors = suite.load_cases(str(REPO / "tests/cases"))
        self.assertEqual(errors, [])
        by_design = {c["case"]: c["binary_why"] for c in cases if c["binary"] == "missed-by-design"}
        # Arrays inside a frame or the shared window: at least these (new cases of the kind
        # join them, each with its own reason).
        for name in ("check_bug_local_use_after_scope", "check_local_oob", "check_shared_between_arrays",
                     "check_shared_static_oob"):
            self.assertIn(name, by_design)
        for name, why in by_design.items():
            self.assertGreater(len(why), 40, name)
            self.assertNotIn("missed-by-design", why, name)

    def header(self, lines):
        with tempfile.NamedTemporaryFile("w", suffix=".cu", delete=False) as f:
            f.write("\n".join(lines) + "\nint main() {}\n")
        self.addCleanup(os.unlink, f.name)
        return suite.parse_header(f.name)

    def test_missed_by_design_needs_a_why_and_a_bug(self):
        base = ["// gpusan-case: check", "// expect: local_out_of_bounds", "// compute-sanitizer: no"]
        c = self.header(base + ["// binary: missed-by-design the frame", "//   has no bounds", "// what: w"])
        self.assertEqual((c["binary"], c["binary_why"]), ("missed-by-design", "the frame has no bounds"))
        self.assertEqual(self.header(base + ["// what: w"])["binary"], "found")
        with self.assertRaises(ValueError):
            self.header(base + ["// binary: missed-by-design"])
        with self.assertRaises(ValueError):
            self.header(base + ["// binary: maybe"])
        clean = ["// gpusan-case: check", "// expect: clean", "// compute-sanitizer: no"]
        with self.assertRaises(ValueError):
            self.header(clean + ["// binary: missed-by-design why"])


class SuiteJudging(unittest.TestCase):
    def judge(self, kinds, route, case=BUG):
        with tempfile.TemporaryDirectory() as d:
            rep = os.path.join(d, "r.json")
            Path(rep).write_text(json.dumps({
                "tool": "gpusan", "version": "x", "mode": "check", "errors": [], "leaks": [],
                "summary": {"total": 0, "unique": 0, "not_stored": 0, "leaked_bytes": 0, "by_kind": kinds}}))
            return suite.judge_gpusan(case, "check", NATIVE, rep, NATIVE, route=route)

    def test_a_miss_the_header_explains_is_apart_only_on_the_binary_route(self):
        r = self.judge({}, "binary")
        self.assertEqual((r["verdict"], r["pass"], r["why"]), ("missed_by_design", None, "inside the frame"))
        self.assertEqual(self.judge({}, "")["verdict"], "missed")
        self.assertEqual(self.judge({}, "binary", dict(BUG, binary="found"))["verdict"], "missed")
        found = self.judge({"local_out_of_bounds": 1}, "binary")
        self.assertEqual((found["verdict"], found["pass"]), ("detected", True))
        self.assertTrue(found["found_though_missed_by_design"])
        fp = self.judge({"out_of_bounds_read": 1}, "binary")
        self.assertEqual((fp["verdict"], fp["pass"]), ("false_positive", False))

    def test_totals_and_table_list_misses_by_design_with_their_why_not_as_failures(self):
        rows = [dict(BUG, name="check_x", cudart="static", build={"ok": True}, native={"ok": True, "rc": 0},
                     gpusan={"check": self.judge({}, "binary")})]
        t = suite.totals(rows, ["check"])["gpusan"]["check"]
        self.assertEqual((t["passed"], t["failed"], t["missed"]), (0, 0, []))
        self.assertEqual(t["missed_by_design"], {"check_x": "inside the frame"})
        doc = {"modes": ["check"], "cases": rows, "totals": suite.totals(rows, ["check"]), "programs": [],
               "interface": [], "compute_sanitizer": {}}
        table = suite.format_table(doc)
        self.assertIn("DSGN", table)
        self.assertIn("missed by design (machine code cannot show it): check_x: inside the frame", table)

    def test_the_gpusan_command_names_the_route(self):
        self.assertEqual(suite.gpusan_cmd("g", "check", "r.json", ["b"], route="binary"),
                         ["g", "run", "--mode", "check", "--route", "binary", "--leak-check", "full",
                          "--report-json", "r.json", "--", "b"])
        self.assertNotIn("--route", suite.gpusan_cmd("g", "check", "r.json", ["b"]))


class SuiteDefaultMode(unittest.TestCase):
    """`--modes default` (issue 16): `gpusan run` with no `--mode`, judged as check."""

    def judge(self, report_mode, kinds):
        with tempfile.TemporaryDirectory() as d:
            rep = os.path.join(d, "r.json")
            Path(rep).write_text(json.dumps({
                "tool": "gpusan", "version": "x", "mode": report_mode, "errors": [], "leaks": [],
                "summary": {"total": 0, "unique": 0, "not_stored": 0, "leaked_bytes": 0, "by_kind": kinds}}))
            return suite.judge_gpusan(dict(BUG, binary="found"), "default", NATIVE, rep, NATIVE)

    def test_the_command_has_no_mode_flag(self):
        self.assertEqual(suite.gpusan_cmd("g", "default", "r.json", ["b"]),
                         ["g", "run", "--leak-check", "full", "--report-json", "r.json", "--", "b"])

    def test_cases_are_judged_as_check_and_fail_when_the_default_is_not_check(self):
        found = self.judge("check", {"local_out_of_bounds": 1})
        self.assertEqual((found["verdict"], found["pass"]), ("detected", True))
        self.assertEqual(self.judge("check", {})["verdict"], "missed")
        wrong = self.judge("api", {"local_out_of_bounds": 1})
        self.assertEqual((wrong["verdict"], wrong["pass"]), ("wrong_default_mode", False))


class GpuSuiteSassOnly(unittest.TestCase):
    def test_cases_are_built_machine_code_only_and_run_under_the_binary_route(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            nvcc_log = d / "nvcc.log"
            script(d / "nvcc", f"""
                #!/usr/bin/env bash
                echo "$*" >> {nvcc_log}
                out=""; src=""
                while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift;; *.cu) src=$1;; esac; shift; done
                if [[ "$src" == *clean* ]]; then line="OK (cudaSuccess)"; else line="done (bug)"; fi
                printf '#!/bin/sh\\necho "%s"\\n' "$line" > "$out"; chmod +x "$out"
            """)
            tools = d / "tools"
            tools.mkdir()
            script(tools / "gpusan", FAKE_GPUSAN)
            script(tools / "libgpusan_inject.so", "")
            script(d / "cs", FAKE_CS)
            env = dict(os.environ, NVCC=str(d / "nvcc"), COMPUTE_SANITIZER=str(d / "cs"), OUT=str(d / "out"),
                       GPUSAN_SUITE_SASS_ONLY="1", GPUSAN_SUITE_ONLY="check_local_oob|check_global_oob_adjacent|"
                       "check_clean_loop_ranges", GPUSAN_SUITE_BUDGET_S="200", FAKE_ARGS_LOG=str(d / "gpusan.log"))
            before = set(Path("/tmp").glob("gpusan-suite.*"))
            r = subprocess.run(["bash", str(HERE / "gpu-suite.sh"), str(tools)], env=env, capture_output=True,
                               text=True, timeout=300)
            for left in set(Path("/tmp").glob("gpusan-suite.*")) - before:  # the suite's scratch folder
                subprocess.run(["rm", "-rf", str(left)])
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-2000:])
            builds = [b for b in nvcc_log.read_text().splitlines() if b != "--version"]
            self.assertTrue(builds and all("-gencode arch=compute_90,code=sm_90" in b for b in builds), builds[:3])
            self.assertFalse(any("-arch=sm_90" in b for b in builds))
            self.assertFalse(any("bench/runtime" in b for b in builds), "no benchmarks in the machine-code-only run")
            doc = json.load(open(d / "out/runtime-cases-sass.json"))
            self.assertFalse((d / "out/runtime-cases.json").exists())
            self.assertEqual((doc["route"], doc["modes"]), ("binary", ["check"]))
            self.assertEqual(doc["interface"], [])
            self.assertEqual(doc["environment"]["sass_only"]["executables_with_ptx"], [])
            verdicts = {c["case"]: c["gpusan"]["check"]["verdict"] for c in doc["cases"]}
            self.assertEqual(verdicts, {"check_local_oob": "missed_by_design", "check_global_oob_adjacent": "missed",
                                        "check_clean_loop_ranges": "clean"})
            runs = (d / "gpusan.log").read_text().splitlines()
            self.assertTrue(runs and all(l.startswith("run --mode check --route binary ") for l in runs), runs)


def fake_workloads(d):
    """Two fake workloads printing a metric line (the time from $FAKE_MS_<TOOL>), one torch
    step with a digest ($FAKE_DIGEST), and the fake tools."""
    prog = script(d / "prog", """
        #!/usr/bin/env python3
        import json, os, sys
        name = sys.argv[1]
        tool = os.environ.get("FAKE_TOOL", "native")
        line = {"bench": name, "ok": True, "params": {}, "metrics": {f"{name}.ms": float(sys.argv[2]), f"{name}.ms_min": 0.1}}
        if name.startswith("torch"):
            line["digest"] = os.environ.get("FAKE_DIGEST", "abc")
        print(json.dumps(line))
    """)
    wl = [{"name": "saxpy", "kind": "cuda", "sass_cmd": [str(prog), "saxpy", "1.0"], "ptx_cmd": [str(prog), "saxpy", "1.0"]},
          {"name": "gather", "kind": "cuda", "sass_cmd": [str(prog), "gather", "2.0"], "ptx_cmd": [str(prog), "gather", "2.0"]},
          {"name": "torch_mlp", "kind": "torch", "sass_cmd": [str(prog), "torch_mlp", "4.0"]}]
    (d / "wl.json").write_text(json.dumps(wl))
    script(d / "gpusan", FAKE_GPUSAN)
    script(d / "cs", FAKE_CS)
    return d / "wl.json"


class BinaryOverhead(unittest.TestCase):
    def test_the_machine_code_only_build_replaces_the_arch_and_the_output(self):
        build = ["nvcc", "-O3", "-arch=sm_90", "-lineinfo", "-o", "/w/ptx/bin/saxpy", "saxpy.cu"]
        self.assertEqual(bo.sass_build(build, "/w/ptx/bin/saxpy", "/w/sass/bin/saxpy"),
                         ["nvcc", "-O3", "-gencode", "arch=compute_90,code=sm_90", "-lineinfo", "-o",
                          "/w/sass/bin/saxpy", "saxpy.cu"])

    def test_plan_interleaves_tools_with_compute_sanitizer_in_its_rounds_only(self):
        with tempfile.TemporaryDirectory() as d:
            args = bo.parse_args(["--gpusan", "g", "--out", "o", "--rounds", "2", "--cs-rounds", "1",
                                  "--workloads-json", str(fake_workloads(Path(d))), "--work", d])
            steps = [(r, w["name"], t) for r, w, t in bo.plan(args, bo.workload_list(args))]
            self.assertEqual(steps[:4], [(0, "saxpy", "native"), (0, "saxpy", "binary"), (0, "saxpy", "ptx"),
                                         (0, "saxpy", "cs")])
            self.assertIn((0, "torch_mlp", "cs"), steps)
            self.assertNotIn((0, "torch_mlp", "ptx"), steps)
            self.assertFalse([s for s in steps if s[0] == 1 and s[2] == "cs"])
            w = bo.workload_list(args)[2]
            self.assertIn("--report-api-errors", bo.command(args, w, "cs", "r"))
            self.assertEqual(bo.command(args, w, "binary", "r")[:6], ["g", "run", "--mode", "check", "--route", "binary"])

    def test_a_dry_run_plans_every_workload_with_both_builds(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "plan.json")
            bo.main(["--gpusan", "g", "--out", out, "--dry-run", "--work", d, "--only", "saxpy|torch_mlp"])
            doc = json.load(open(out))
            self.assertEqual(sorted(doc["builds"]), ["saxpy"])
            self.assertIn("-gencode arch=compute_90,code=sm_90", doc["builds"]["saxpy"]["sass"])
            self.assertIn("-arch=sm_90", doc["builds"]["saxpy"]["ptx"])
            self.assertEqual({r["workload"] for r in doc["runs"]}, {"saxpy", "torch_mlp"})
            self.assertTrue(any("torch_steps.py mlp --steps 10" in r["cmd"] for r in doc["runs"]))

    def test_a_whole_run_over_fake_tools_gives_ratios_coverage_and_the_bit_identical_check(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            wl = fake_workloads(d)
            out = d / "o.json"
            argv = ["--gpusan", str(d / "gpusan"), "--compute-sanitizer", str(d / "cs"), "--out", str(out),
                    "--workloads-json", str(wl), "--work", str(d / "w"), "--skip-build", "--rounds", "2"]
            bo.main(argv)
            doc = json.load(open(out))
            s = doc["summary"]
            # The fake tools take no extra time: every ratio is 1.
            self.assertEqual((s["geomean_binary_over_native"], s["geomean_ptx_over_native"]), (1.0, 1.0))
            self.assertEqual(s["torch_binary_over_native"], {"torch_mlp": 1.0})
            self.assertTrue(doc["workloads"]["torch_mlp"]["bit_identical"])
            self.assertEqual(doc["workloads"]["saxpy"]["binary_coverage"]["checked_launches"], 3)
            self.assertEqual(s["pass"]["workloads_speedup_over_cs"], False)
            self.assertTrue(s["pass"]["no_false_positives"] and s["pass"]["all_launches_checked"])
            self.assertTrue(doc["finished"])
            # A finding in a clean workload is a false positive; a digest that differs is not identical.
            os.environ["FAKE_KINDS"] = '{"out_of_bounds_read": 2}'
            try:
                bo.main(argv + ["--only", "saxpy", "--rounds", "1"])
            finally:
                del os.environ["FAKE_KINDS"]
            self.assertEqual(json.load(open(out))["summary"]["binary_false_positives"], {"saxpy": 2})
            e = {"kind": "torch", "runs": [
                {"tool": "native", "round": 0, "rc": 0, "ok": True, "metrics": {"m.ms": 1.0}, "digest": "a"},
                {"tool": "binary", "round": 0, "rc": 0, "ok": True, "metrics": {"m.ms": 2.0}, "digest": "b"}]}
            bo.summarize_workload(e)
            self.assertFalse(e["bit_identical"])
            self.assertEqual(e["metrics"]["m.ms"]["ratio_binary"], 2.0)


class TensormapJudge(unittest.TestCase):
    def write_runs(self, d, over_kinds):
        os.chdir(d)
        runs = {
            "native_clean": ({"scenario": "clean", "sum": 256.0}, None),
            "api_clean": ({"scenario": "clean", "sum": 256.0}, {}),
            "check_clean": ({"scenario": "clean", "sum": 256.0}, {}),
            "native_over": ({"scenario": "over", "sum": 352.0, "adjacent": True}, None),
            "api_over": ({"scenario": "over", "sum": 352.0}, over_kinds),
            "native_triton_clean": ({"scenario": "clean", "skip": "no triton"}, None),
        }
        for label, (prog, kinds) in runs.items():
            Path(f"{label}.out").write_text(json.dumps(prog) + "\n")
            Path(f"{label}.err").write_text("")
            Path(f"{label}.rc").write_text("77 1.0" if "skip" in prog else "0 1.0")
            if kinds is not None:
                errors = [{"kind": k, "message": k, "details": {
                    "size": 1088, "nearest": {"position": {"relation": "inside", "offset": 0}}}} for k in kinds]
                Path(f"{label}.json").write_text(json.dumps({
                    "summary": {"by_kind": kinds}, "errors": errors, "counters": {"tensor_maps_judged": 1}}))
        return list(runs)

    def test_the_over_reaching_map_must_be_reported_and_the_exact_one_silent(self):
        cwd = os.getcwd()
        try:
            with tempfile.TemporaryDirectory() as d:
                labels = self.write_runs(d, {"tensor_map_out_of_bounds": 1})
                res = {label: tmj.load(label) for label in labels}
                checks, notes = tmj.judge(res)
                self.assertTrue(checks and all(checks.values()), checks)
                self.assertTrue(any("triton_clean: skipped" in n for n in notes), notes)
                labels = self.write_runs(d, {})
                checks, _ = tmj.judge({label: tmj.load(label) for label in labels})
                self.assertEqual([k for k, v in checks.items() if not v], ["api_over_verdict"])
        finally:
            os.chdir(cwd)


if __name__ == "__main__":
    unittest.main()
