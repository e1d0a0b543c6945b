#!/usr/bin/env python3
"""Tests of bench/python_suite.py without a GPU: every header of tests/cases/python parses,
the judging on fake reports and fake compute-sanitizer output, and a whole run of the suite
over fake cases with a fake `gpusan` and a fake `compute-sanitizer` (pass, miss, false
positive, changed output, no report, skip, a hang past the timeout, a prepare step). Also
bench/coverage/compare.py (bench/coverage.sh's rows) on fake reports and counts.

    python3 bench/test_python_suite.py
"""
import json
import os
import stat
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "coverage"))
import compare  # noqa: E402
import python_suite as ps  # noqa: E402

CASE = {"case": "c", "framework": "c", "expect": ["out_of_bounds_write"], "accept": [], "known_gap": None,
        "cs_believed": True, "kernels": ["fill"]}
CLEAN = dict(CASE, expect=[], cs_believed=False)


def doc(kinds, coverage=None):
    d = {"tool": "gpusan", "version": "x", "mode": "check", "errors": [{"kind": k, "message": k} for k in kinds],
         "summary": {"total": sum(kinds.values()), "unique": len(kinds), "not_stored": 0, "leaked_bytes": 0,
                     "by_kind": kinds}, "leaks": []}
    if coverage is not None:
        d["coverage"] = coverage
    return d


def ran(rc=0, out="c done 1\n", err=""):
    return {"rc": rc, "wall_s": 0.1, "timed_out": rc == 124, "cmd": "x", "stdout": out, "stderr": err}


class Headers(unittest.TestCase):
    def test_every_case_header_parses(self):
        cases, errors = ps.load_cases(HERE.parent / "tests" / "cases" / "python")
        self.assertEqual(errors, [])
        names = {c["case"] for c in cases}
        self.assertGreaterEqual(len(cases), 18)
        for fw in ("cupy", "numba", "cuda", "torch", "triton"):
            self.assertTrue(any(n.startswith(fw) for n in names), fw)
        # Every framework has a bug with its clean twin; every case names its planted kernel.
        for c in cases:
            self.assertTrue(c["kernels"], c["case"])
            self.assertTrue(c["what"], c["case"])
        for prefix in ("cupy", "numba", "cuda_core", "torch_inline", "torch_jiterator", "triton"):
            group = [c for c in cases if c["case"].startswith(prefix)]
            self.assertTrue(any(not c["expect"] for c in group), prefix)
            self.assertTrue(any("use_after_free" in c["expect"] for c in group), prefix)
            self.assertTrue(any(k.startswith("out_of_bounds") for c in group for k in c["expect"]), prefix)

    def test_malformed_headers_are_refused(self):
        with tempfile.TemporaryDirectory() as t:
            for name, head in (("a", "# gpusan-case: check\n# expect: out_of_bound\n# compute-sanitizer: yes\n"),
                               ("b", "# gpusan-case: check\n# compute-sanitizer: yes\n"),
                               ("c", "# gpusan-case: check\n# expect: clean\n# compute-sanitizer: maybe\n"),
                               ("d", "# gpusan-case: check\n# expect: clean\n# compute-sanitizer: no\n# prepare: _x.py\n"),
                               ("e", "# gpusan-case: check\n# expect: clean\n# compute-sanitizer: no\n# env: NOEQUALS\n")):
                Path(t, name + ".py").write_text(head + "print(1)\n")
            cases, errors = ps.load_cases(t)
            self.assertEqual(cases, [])
            self.assertEqual(len(errors), 5, errors)

    def test_continuation_lines(self):
        with tempfile.TemporaryDirectory() as t:
            Path(t, "_p.py").write_text("")
            Path(t, "x.py").write_text("# gpusan-case: check\n# expect: use_after_free\n# compute-sanitizer: no\n"
                                       "# env: A=1 B=x=y\n# prepare: _p.py\n# what: one\n#   two\nimport os\n")
            (c,), errors = ps.load_cases(t)
            self.assertEqual(errors, [])
            self.assertEqual(c["what"], "one two")
            self.assertEqual(c["env"], {"A": "1", "B": "x=y"})
            self.assertEqual(c["prepare"], "_p.py")


class JudgeGpusan(unittest.TestCase):
    def test_bug_found(self):
        r = ps.judge_gpusan(CASE, ran(), doc({"out_of_bounds_write": 1}), None, ran())
        self.assertEqual((r["verdict"], r["pass"]), ("detected", True))

    def test_bug_missed(self):
        r = ps.judge_gpusan(CASE, ran(), doc({}), None, ran())
        self.assertEqual((r["verdict"], r["pass"], r["missing"]), ("missed", False, ["out_of_bounds_write"]))

    def test_extra_kind_is_a_false_positive_in_a_bug_case(self):
        r = ps.judge_gpusan(CASE, ran(), doc({"out_of_bounds_write": 1, "kernel_fault": 1}), None, ran())
        self.assertEqual((r["verdict"], r["pass"], r["extra"]), ("false_positive", False, ["kernel_fault"]))
        accepting = dict(CASE, accept=["kernel_fault"])
        r = ps.judge_gpusan(accepting, ran(), doc({"out_of_bounds_write": 1, "kernel_fault": 1}), None, ran())
        self.assertTrue(r["pass"])

    def test_clean_silent_and_same_output(self):
        r = ps.judge_gpusan(CLEAN, ran(), doc({}), None, ran())
        self.assertEqual((r["verdict"], r["pass"], r["behaviour_preserved"]), ("clean", True, True))

    def test_clean_with_other_output_fails(self):
        r = ps.judge_gpusan(CLEAN, ran(out="c done 2\n"), doc({}), None, ran())
        self.assertEqual((r["verdict"], r["pass"]), ("behaviour_changed", False))
        r = ps.judge_gpusan(CLEAN, ran(rc=1), doc({}), None, ran())
        self.assertEqual((r["verdict"], r["pass"]), ("behaviour_changed", False))

    def test_clean_with_a_finding_is_a_false_positive(self):
        r = ps.judge_gpusan(CLEAN, ran(), doc({"use_after_free": 3}), None, ran())
        self.assertEqual((r["verdict"], r["pass"]), ("false_positive", False))

    def test_no_report(self):
        r = ps.judge_gpusan(CLEAN, ran(), None, "no --report-json file written", ran())
        self.assertEqual((r["verdict"], r["pass"]), ("no_report", False))

    def test_kinds_from_errors_when_summary_lacks_them(self):
        d = doc({})
        d["errors"] = [{"kind": "use_after_free", "count": 4}, {"kind": "use_after_free"}]
        self.assertEqual(ps.found_kinds(d), {"use_after_free": 5})

    def test_coverage_read_defensively(self):
        self.assertEqual(ps.coverage_of({}), {"present": False})
        self.assertEqual(ps.coverage_of({"coverage": "odd"}), {"present": False})
        cov = {"kernels": [{"name": "fill", "mangled": "fill", "launches": 2, "checked_by": "nvrtc"},
                           {"name": "cub::Reduce<float>", "launches": 1, "unchecked": "machine code only"}, "junk"],
               "totals": {"kernels": 2}}
        c = ps.coverage_of({"coverage": cov}, ["fill"])
        self.assertTrue(c["planted_checked"])
        self.assertEqual(c["planted"]["fill"][0]["checked_by"], "nvrtc")
        self.assertEqual([u["name"] for u in c["unchecked"]], ["cub::Reduce<float>"])
        c = ps.coverage_of({"coverage": cov}, ["missing_kernel"])
        self.assertFalse(c["planted_checked"])

    def test_skipped_run(self):
        r = ps.judge_gpusan(CASE, {"skipped": "suite time budget spent", "cmd": "x"}, None, "skipped", ran())
        self.assertEqual((r["verdict"], r["pass"]), ("skipped", None))


CS_BUG = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at fill+0x80
=========     by thread (232,0,0) in block (3,0,0)
=========     Address 0x7f0000000fa0 is out of bounds
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: cuLaunchKernel in libcuda.so
c done 1
========= ERROR SUMMARY: 1 error
"""


class JudgeCs(unittest.TestCase):
    def test_parse(self):
        p = ps.parse_cs(CS_BUG)
        self.assertEqual((p["errors"], p["memory_errors"], p["api_errors"]), (1, 1, 0))

    def test_summary_after_the_programs_stderr(self):
        # The summary is on stdout, the program's traceback on stderr: both read whole.
        r = ps.judge_cs(CASE, ran(out=CS_BUG, err="Traceback ...\n" * 500))
        self.assertEqual(r["verdict"], "detected")
        self.assertTrue(r["matches_belief"])

    def test_missed_and_clean(self):
        silent = "========= COMPUTE-SANITIZER\nc done 1\n========= ERROR SUMMARY: 0 errors\n"
        self.assertEqual(ps.judge_cs(CASE, ran(out=silent))["verdict"], "missed")
        self.assertEqual(ps.judge_cs(CLEAN, ran(out=silent))["verdict"], "clean")
        self.assertEqual(ps.judge_cs(CLEAN, ran(out=CS_BUG))["verdict"], "false_positive")

    def test_no_summary(self):
        self.assertEqual(ps.judge_cs(CLEAN, ran(rc=124, out="========= COMPUTE-SANITIZER\n"))["verdict"], "timeout")
        self.assertEqual(ps.judge_cs(CLEAN, ran(rc=1, out="", err="cannot start"))["verdict"], "no_summary")


FAKE_GPUSAN = """#!/usr/bin/env python3
# A stand-in for `gpusan run --mode check [--timeout N] --report-json R -- PROG...`: runs PROG
# with FAKE_REPORT=R (the fake case writes its own report) and passes its exit code on.
import os, subprocess, sys
a = sys.argv[1:]
if a == ["--version"]:
    print("gpusan fake"); sys.exit(0)
assert a[:3] == ["run", "--mode", "check"], a
rep = a[a.index("--report-json") + 1]
prog = a[a.index("--") + 1:]
sys.exit(subprocess.call(prog, env=dict(os.environ, FAKE_REPORT=rep, FAKE_RUN=str(os.path.exists(rep + ".seen")))))
"""

FAKE_CS = """#!/usr/bin/env python3
import os, subprocess, sys
a = sys.argv[1:]
if a == ["--version"]:
    print("compute-sanitizer fake"); sys.exit(0)
assert a[:4] == ["--tool", "memcheck", "--report-api-errors", "no"], a
prog = a[a.index("--print-limit") + 2:]
print("========= COMPUTE-SANITIZER", flush=True)
rc = subprocess.call(prog, env=dict(os.environ, FAKE_CS="1"))
print("========= ERROR SUMMARY: %d errors" % (1 if os.environ.get("CS_ERRORS_FILE") and os.path.exists(os.environ["CS_ERRORS_FILE"]) else 0), flush=True)
sys.exit(rc)
"""

FAKE_CASE = """# gpusan-case: check
# expect: {expect}
# compute-sanitizer: {cs}
# kernel: fill
{extra}# what: fake
import json, os, sys, time
kinds = {kinds}
if os.environ.get("FAKE_CS") and kinds:
    print("========= Invalid __global__ write of size 4 bytes", flush=True)
{body}
rep = os.environ.get("FAKE_REPORT")
if rep:
    json.dump({{"tool": "gpusan", "version": "x", "mode": "check", "errors": [],
               "summary": {{"total": 0, "unique": 0, "not_stored": 0, "leaked_bytes": 0, "by_kind": kinds}},
               "leaks": [], "coverage": {{"kernels": [{{"name": "fill", "mangled": "fill", "launches": 1,
               "checked_by": "nvrtc"}}]}}}}, open(rep, "w"))
print(os.path.basename(sys.argv[0])[:-3] + " done " + ("2" if rep and {changed} else "1"))
"""


def fake_case(d, name, expect="clean", kinds="{}", cs="no", body="", extra="", changed=False):
    Path(d, name + ".py").write_text(FAKE_CASE.format(expect=expect, kinds=kinds, cs=cs, body=body, extra=extra,
                                                      changed=changed))


def executable(path, text):
    Path(path).write_text(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


class WholeRun(unittest.TestCase):
    def test_fake_suite(self):
        with tempfile.TemporaryDirectory() as t:
            cases = Path(t, "cases")
            cases.mkdir()
            fake_case(cases, "a_found", "out_of_bounds_write", '{"out_of_bounds_write": 1}', cs="yes")
            fake_case(cases, "b_missed", "use_after_free")
            fake_case(cases, "c_clean", "clean")
            fake_case(cases, "d_false_positive", "clean", '{"use_after_free": 2} if os.environ.get("FAKE_REPORT") else {}')
            fake_case(cases, "e_changed", "clean", changed=True)
            fake_case(cases, "f_skip", body='print("SKIP: no such framework"); sys.exit(77)')
            fake_case(cases, "g_hang", body="time.sleep(60)")
            fake_case(cases, "h_crash", "out_of_bounds_write", body='if os.environ.get("FAKE_REPORT"): sys.exit(3)')
            fake_case(cases, "i_prepared", extra="# prepare: _prep.py\n# env: MARK=1\n",
                      body='assert os.environ["MARK"] == "1"\n'
                           'assert open(os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "built")).read() == "ok"')
            fake_case(cases, "j_cached", "clean",
                      body='c = os.path.join(os.environ["CUPY_CACHE_DIR"], "k")\n'
                           'seen = os.path.exists(c)\nopen(c, "w").close()\n'
                           'sys.stderr.write("note: cache_hit=%s\\n" % seen)')
            Path(cases, "_prep.py").write_text(
                "import os\nd = os.environ['TORCH_EXTENSIONS_DIR']\nos.makedirs(d, exist_ok=True)\n"
                "assert not os.path.exists(os.path.join(d, 'built')), 'prepared twice'\n"
                "open(os.path.join(d, 'built'), 'w').write('ok')\n")
            Path(cases, "z_bad.py").write_text("# gpusan-case: check\n# expect: nonsense\n")
            executable(Path(t, "gpusan"), FAKE_GPUSAN)
            executable(Path(t, "cs"), FAKE_CS)
            out = Path(t, "out.json")
            rc = ps.main(["--gpusan", str(Path(t, "gpusan")), "--out", str(out), "--cases", str(cases),
                          "--work", str(Path(t, "work")), "--compute-sanitizer", str(Path(t, "cs")), "--timeout", "6",
                          "--cs-timeout", "6", "--jobs", "6", "--budget", "120"])
            self.assertEqual(rc, 0)
            d = json.loads(out.read_text())
            self.assertEqual(d["phase"], "done")
            self.assertEqual(len(d["header_errors"]), 1)
            rows = {r["case"]: r for r in d["cases"]}
            self.assertEqual(len(rows), 10)
            v = {n: (r.get("gpusan_first") or {}).get("verdict") for n, r in rows.items()}
            self.assertEqual(v["a_found"], "detected")
            self.assertEqual(v["b_missed"], "missed")
            self.assertEqual(v["c_clean"], "clean")
            self.assertEqual(v["d_false_positive"], "false_positive")
            self.assertEqual(v["e_changed"], "behaviour_changed")
            self.assertEqual(v["h_crash"], "no_report")
            self.assertEqual(v["i_prepared"], "clean", rows["i_prepared"])
            self.assertEqual(rows["f_skip"]["skipped"], "SKIP: no such framework")
            hang = rows["g_hang"]
            self.assertEqual(hang["native"]["rc"], 124)
            self.assertTrue(hang["native"]["timed_out"])
            self.assertEqual(hang["compute_sanitizer"]["verdict"], "timeout")
            self.assertEqual(rows["a_found"]["compute_sanitizer"]["verdict"], "detected")
            self.assertEqual(rows["b_missed"]["compute_sanitizer"]["verdict"], "missed")
            self.assertEqual(rows["c_clean"]["compute_sanitizer"]["verdict"], "clean")
            self.assertTrue(rows["a_found"]["gpusan_first"]["coverage"]["planted_checked"])
            # The cached run finds what the first left; native and the first run start empty.
            self.assertEqual(rows["j_cached"]["native"]["notes"], {"cache_hit": "False"})
            self.assertEqual(rows["j_cached"]["gpusan_first"]["notes"], {"cache_hit": "False"})
            self.assertEqual(rows["j_cached"]["gpusan_cached"]["notes"], {"cache_hit": "True"})
            s = d["summary"]
            self.assertEqual((s["gpusan_first"]["found"], s["gpusan_first"]["bug_cases"]), (1, 3))
            self.assertEqual(sorted(s["gpusan_first"]["false_positive_cases"]), ["d_false_positive"])
            self.assertEqual((s["gpusan_first"]["clean_silent"], s["gpusan_first"]["clean_cases"]), (3, 6))
            self.assertEqual(s["skipped"], {"f_skip": "SKIP: no such framework"})
            self.assertEqual(s["gpusan_cached"]["found"], 1)
            self.assertEqual(s["compute_sanitizer"]["found"], 1)
            self.assertEqual(d["prepare"]["_prep.py"]["rc"], 0)
            self.assertTrue(any(p.name == "a_found.gpusan_first.log" for p in Path(t, "work", "logs").iterdir()))

    def test_budget_spent_skips_runs_but_writes_the_document(self):
        with tempfile.TemporaryDirectory() as t:
            cases = Path(t, "cases")
            cases.mkdir()
            fake_case(cases, "a", body="time.sleep(30)")
            out = Path(t, "out.json")
            ps.main(["--gpusan", "/nonexistent/gpusan", "--out", str(out), "--cases", str(cases), "--work",
                     str(Path(t, "work")), "--compute-sanitizer", "none", "--budget", "5"])
            d = json.loads(out.read_text())
            (row,) = d["cases"]
            self.assertTrue(row["native"]["timed_out"])
            self.assertEqual(row["gpusan_first"]["verdict"], "skipped")
            self.assertEqual(row["compute_sanitizer"]["verdict"], "skipped")

    def test_missing_gpusan_is_no_report(self):
        with tempfile.TemporaryDirectory() as t:
            cases = Path(t, "cases")
            cases.mkdir()
            fake_case(cases, "a")
            out = Path(t, "out.json")
            ps.main(["--gpusan", "/nonexistent/gpusan", "--out", str(out), "--cases", str(cases), "--work",
                     str(Path(t, "work")), "--compute-sanitizer", "none"])
            (row,) = json.loads(out.read_text())["cases"]
            self.assertEqual(row["gpusan_first"]["rc"], 127)
            self.assertEqual(row["gpusan_first"]["verdict"], "no_report")


class CoverageCompare(unittest.TestCase):
    def row(self, report, native=None, program=None, xla=None):
        with tempfile.TemporaryDirectory() as t:
            rep = Path(t, "r.json")
            if report is not None:
                rep.write_text(json.dumps(report))
            args = ["--name", "p", "--report", str(rep), "--rc", "0"]
            for flag, text in (("--native-out", native), ("--program-out", program)):
                if text is not None:
                    Path(t, flag).write_text(text)
                    args += [flag, str(Path(t, flag))]
            if xla is not None:
                Path(t, "dump").mkdir()
                Path(t, "dump", "m.ptx").write_text(xla)
                args += ["--xla-dump", str(Path(t, "dump"))]
            return compare.compare(compare.argparse.Namespace(**{
                "name": "p", "report": str(rep), "native_out": "", "program_out": "", "xla_dump": "", "log": "",
                "rc": 0, "native_rc": None, **{a[2:].replace("-", "_"): v for a, v in zip(args[::2], args[1::2])
                                               if a not in ("--name", "--report", "--rc")}}))

    KERNELS = [{"name": "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "mangled": "_Z1a",
                "launches": 3, "unchecked": "machine code only"},
               {"name": "at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>", "mangled": "_Z1b",
                "launches": 2, "unchecked": "machine code only"},
               {"name": "k0", "mangled": "k0", "launches": 25, "checked_by": "nvrtc"}]

    def test_profiler_count_matches_by_base_name(self):
        prof = {"profiled_launches": 30, "profiled_kernels": 3, "by_name": {
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int)": 3,
            "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >(int)": 2, "k0": 25}}
        r = self.row({"coverage": {"kernels": self.KERNELS, "totals": {"kernels": 3, "launches": 30}}},
                     native="noise\n" + json.dumps(prof) + "\nloss 1.0\n")
        self.assertTrue(r["launches_match"])
        self.assertTrue(r["kernels_match"], r)
        self.assertTrue(r["report"]["totals_consistent"])
        self.assertEqual(r["report"]["checked_kernels"], 1)

    def test_mismatch_named(self):
        own = {"program_launches": 26, "by_name": {"k0": 25, "twice": 1}}
        r = self.row({"coverage": {"kernels": self.KERNELS[2:]}}, program=json.dumps(own) + "\n")
        self.assertFalse(r["launches_match"])
        self.assertEqual(r["name_mismatches"], [{"kernel": "twice", "independent": 1, "report": 0}])

    def test_no_report_and_no_coverage(self):
        r = self.row(None)
        self.assertIn("no report", r["report_problem"])
        self.assertIsNone(r["independent"])
        r = self.row({"summary": {"by_kind": {}}})
        self.assertEqual(r["report_problem"], "report has no coverage section")

    def test_xla_entries(self):
        ptx = ".version 8.0\n.visible .entry fusion_1(\n.param .u64 a)\n{\n}\n.visible .entry loop_add_2(\n"
        r = self.row({"coverage": {"kernels": [{"name": "fusion_1", "mangled": "fusion_1", "launches": 20}]}}, xla=ptx)
        self.assertEqual(r["independent"]["xla_kernels"], 2)
        self.assertEqual(r["xla_kernels_in_report"], 1)
        self.assertEqual(r["xla_kernels_not_in_report"], ["loop_add_2"])

    def test_xla_kernel_thunks(self):
        # XLA 0.7+ dumps no PTX: its thunk sequences name the kernels.
        thunks = ("000: kCommandBuffer [source | sink] \n"
                  "    001: kCustomKernel [source       | next=002 (1)] gemm_fusion_dot_2 grid: [128, 1, 1] threads: [1]\n"
                  "    002: kKernel [prev=001 (1) | sink] loop_reduce_fusion grid: [256, 1, 1] threads: [64, 1, 1]\n")
        with tempfile.TemporaryDirectory() as t:
            Path(t, "module_1.jit_step.thunk_sequence.txt").write_text(thunks)
            self.assertEqual(compare.xla_entries(t), ["gemm_fusion_dot_2", "loop_reduce_fusion"])

    def test_the_gpusan_runs_own_profile_is_the_count(self):
        # Autotuning makes two runs launch differently: the same process's count is used.
        mine = {"profiled_launches": 30, "profiled_kernels": 3, "by_name": {"k0": 25, "a": 5}}
        native = {"profiled_launches": 28, "profiled_kernels": 2, "by_name": {"k0": 23, "a": 5}}
        kernels = [{"name": "k0", "launches": 25, "checked_by": "nvrtc"}, {"name": "a", "launches": 5}]
        r = self.row({"coverage": {"kernels": kernels}}, native=json.dumps(native) + "\n",
                     program=json.dumps(mine) + "\n")
        self.assertEqual(r["independent"]["source"], "torch.profiler (CUPTI) in the gpusan run itself")
        self.assertTrue(r["launches_match"] and r["kernels_match"], r)
        self.assertEqual(r["native_profile"], {"launches": 28, "kernels": 2})


if __name__ == "__main__":
    unittest.main(verbosity=1)
