#!/usr/bin/env python3
"""Tests of the canary-mode GPU cases and benchmark (issue 17) without a GPU, over fake
tools: a fake nvcc whose "binaries" are Python scripts acting out each program's output
(gmod_table3, programs, the tests/cases clean cases, the overhead workloads), a fake
cuobjdump that lists PTX only for builds asked for it, a fake python for the PyTorch
programs, and a fake gpusan that runs the program and writes a report in the shape of
canary17's (kind `canary_overwrite`, CanaryDetails) for the runs whose arguments say they
overflow. Each case script runs whole (bench/reliability/canary_*.sh) with
CANARY_ASSUME_GPU=1, and its result is checked: bugs found, clean twins judged, the
judging failing where the fake gpusan misbehaves (a false positive, a missed bug).

    python3 bench/canary/test_canary.py
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
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
import common as C  # noqa: E402


def script(path, text):
    path.write_text(textwrap.dedent(text).lstrip())
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# The programs, acted out. argv[0]'s build marker file says which source it was built from.
FAKE_PROGRAM = r'''
import json, os, sys, time
src, has_ptx = open(sys.argv[0] + ".src").read().split()
base = os.path.basename(src)
args = sys.argv[1:]
now = lambda: time.time() * 1e6
if base == "gmod_table3.cu":
    t_main = now()
    sc = args[0]
    print("info: gap=4096 adjacent=1 lower_tail_bytes=256 globaltimer_step_ns=32")
    print(f"scenario={sc}")
    print("result=1234")
    t = now()
    print(f"time: t_main_us={t_main:.1f} t_overflow_done_us={t:.1f} t_last_kernel_us={t:.1f} t_exit_us={t + 40000:.1f}")
    print("time: kernel_ms=1.0000 write_to_kernel_end_ms=0.9000 hold_ms=40")
    # A %globaltimer of 19 digits: a float would round it.
    print(f"time: bad_store_gpu_ns={0 if sc.endswith('_clean') else 1700000000123456789}")
    print("done")
elif base == "programs.cu":
    print(f"{args[0]}: sum=42 bad=0")
    print("OK")
elif base.endswith(".cu") and "clean" in base:
    print("OK (cudaSuccess)")
else:  # an overhead workload
    name = base[:-3]
    metrics = {f"{name}.ms": 1.0, f"{name}.ms_min": 0.9}
    if name == "many_allocs":
        metrics["many_allocs.mem_delta_mib"] = 320.0 + (0.5 if os.environ.get("UNDER_FAKE_GPUSAN") else 0)
    print(json.dumps({"bench": name, "ok": True, "params": {}, "metrics": metrics}))
'''

FAKE_NVCC = r'''
#!/usr/bin/env python3
import os, sys
a = sys.argv[1:]
out = a[a.index("-o") + 1]
src = [x for x in a if x.endswith(".cu")][-1]
if os.environ.get("FAKE_NVCC_FAIL") and os.environ["FAKE_NVCC_FAIL"] in src:
    print("error: fake build failure", file=sys.stderr); sys.exit(1)
has_ptx = "sm_90" in " ".join(a) and "code=sm_90" not in " ".join(a)
open(out, "w").write("#!" + sys.executable + "\nexec(open(" + repr(os.environ["FAKE_PROGRAM"]) + ").read())\n")
os.chmod(out, 0o755)
open(out + ".src", "w").write(f"{src} {int(has_ptx)}")
'''

FAKE_CUOBJDUMP = r'''
#!/usr/bin/env python3
import sys
path = sys.argv[-1]
try:
    src, has_ptx = open(path + ".src").read().split()
except OSError:
    sys.exit(0)
if has_ptx == "1":
    print("PTX file    1: x.sm_90.ptx")
'''

# A python for the PyTorch programs: acts out torch_canary.py and torch_steps.py.
FAKE_PYTHON = r'''
#!/usr/bin/env python3
import json, os, sys
prog = os.path.basename(sys.argv[1]); args = sys.argv[2:]
if prog == "torch_canary.py":
    print("info: ptx_entries=0")
    if args[0] != "build":
        print("info: tensor=0x7f0000000000 block_bytes=4096 tensor_bytes=4000")
        print("result=1000" if args[0].startswith("bug") else "result=2000")
    print("done")
elif prog == "torch_steps.py":
    print(json.dumps({"bench": "torch_" + args[0], "ok": True, "params": {},
                      "metrics": {args[0] + ".ms_per_step": 2.0}, "digest": os.environ.get("FAKE_DIGEST", "d1")}))
elif prog == "torch_compile.py":
    print(json.dumps({"bench": "torch_compile", "ok": True, "params": {},
                      "metrics": {"torch_compile.ms": 3.0, "torch_compile.triton_only.ms": 1.0}}))
else:
    os.execv(sys.executable, [sys.executable] + sys.argv[1:])
'''

# gpusan: runs the program after `--`; reports canary_overwrite when its arguments say it
# overflows (FAKE_BUG regex), everything else silent; FAKE_EXTRA_KIND adds a false positive.
FAKE_GPUSAN = r'''
#!/usr/bin/env python3
import json, os, re, subprocess, sys, time
a = sys.argv
if "--canary-interval-ms" in a:
    v = a[a.index("--canary-interval-ms") + 1]
    # As gpusan's: decimal milliseconds from 0.05 (whole ones only under FAKE_INTEGER_INTERVALS).
    ok = re.fullmatch(r"\d+", v) if os.environ.get("FAKE_INTEGER_INTERVALS") else \
        re.fullmatch(r"\d*\.?\d+", v) and float(v) >= 0.05
    if not ok:
        print(f"error: invalid value '{v}' for '--canary-interval-ms <MS>'", file=sys.stderr); sys.exit(2)
rep = a[a.index("--report-json") + 1]
prog = a[a.index("--") + 1:]
env = dict(os.environ, UNDER_FAKE_GPUSAN="1")
if os.environ.get("FAKE_GPUSAN_DIGEST"):
    env["FAKE_DIGEST"] = os.environ["FAKE_GPUSAN_DIGEST"]
r = subprocess.run(prog, env=env, capture_output=True, text=True)
sys.stdout.write(r.stdout); sys.stderr.write(r.stderr)
# The scan kernel saw the bad bytes 12 µs after the program's store (its %globaltimer); the
# host read the records 300 µs after launching that scan.
m = re.search(r"bad_store_gpu_ns=(\d+)", r.stdout)
now_us = int(time.time() * 1e6)
when = {"detected_unix_us": now_us, "scan_launched_unix_us": now_us - 300,
        **({"scan_gpu_ns": int(m.group(1)) + 12000} if m and int(m.group(1)) else {})}
line = " ".join(prog)
errors = []
if re.search(os.environ.get("FAKE_BUG", r"coarse_\w+_(over|under)|torch_canary.py bug\b(?!_)"), line):
    under = "_under" in line
    size = 4064 if under else 4000
    errors.append({"kind": "canary_overwrite", "count": 1, "message": "Canary overwritten",
                   "details": {"origin": "canary", "allocation": {"size": size, "kind": "device"},
                               **({"next": {"size": 4064}} if under else {}),
                               "address": "0x10", "offset_past_end": 29 if under else 1, "bad_bytes": 4,
                               "canary_bytes": 32, "expected": 1, "found": 2, "scan": "periodic",
                               "detected_ms": 150, "since_clean_scan_ms": 1,
                               **({} if os.environ.get("FAKE_NO_ABSOLUTE_TIMES") else when),
                               "kernels": [{"kernel": "attacker"}]}})
extra = os.environ.get("FAKE_EXTRA_KIND")
if extra and re.search(os.environ.get("FAKE_EXTRA_WHERE", "."), line):
    errors.append({"kind": extra, "count": 1, "message": extra, "details": {}})
by = {}
for e in errors:
    by[e["kind"]] = by.get(e["kind"], 0) + 1
json.dump({"tool": "gpusan", "mode": "canary", "errors": errors,
           "summary": {"total": len(errors), "unique": len(errors), "not_stored": 0, "leaked_bytes": 0, "by_kind": by},
           "counters": {"canary_scans": 120, "canary_live": 20000, "canary_array_bytes": 1 << 19,
                        "canary_host_bytes": 320000}, "canary": {"guarded": {"device": 3, "pool block": 2}, "unguarded": {}, "scans": 120}},
          open(rep, "w"))
sys.exit(r.returncode)
'''


class Fakes:
    def __init__(self, root):
        self.root = Path(root)
        self.bin = self.root / "bin"
        self.bin.mkdir()
        prog = self.root / "program.py"
        prog.write_text(FAKE_PROGRAM)
        self.nvcc = script(self.bin / "nvcc", FAKE_NVCC)
        script(self.bin / "cuobjdump", FAKE_CUOBJDUMP)
        self.gpusan = script(self.bin / "gpusan", FAKE_GPUSAN)
        self.python = script(self.bin / "fakepython", FAKE_PYTHON)
        self.env = dict(os.environ, FAKE_PROGRAM=str(prog), CANARY_ASSUME_GPU="1",
                        PATH=f"{self.bin}{os.pathsep}{os.environ['PATH']}")

    def case(self, name, **env):
        work = self.root / f"work-{name}"
        work.mkdir(exist_ok=True)
        result = work / "result.json"
        e = dict(self.env, GPUSAN=str(self.gpusan), WORK=str(work), RESULT=str(result), NVCC=str(self.nvcc), **env)
        r = subprocess.run(["bash", str(REPO / "bench/reliability" / f"{name}.sh")], env=e, capture_output=True,
                           text=True, timeout=300)
        self.last = r
        return json.loads(result.read_text())


class CommonTest(unittest.TestCase):
    def test_latency_from_relative_and_absolute_fields(self):
        f = {"kind": C.KIND, "details": {"detected_ms": 150, "since_clean_scan_ms": 2, "scan": "periodic"}}
        lat = C.latency(f, t_overflow_us=1_000_100_000.0, t_main_us=1_000_000_000.0)
        self.assertNotIn("latency_ms", lat)  # a relative field's zero is gpusan's: an estimate only
        self.assertEqual(lat["latency_estimate_ms"], 50.0)  # 150 ms after its zero, overflow 100 ms after main
        self.assertEqual(lat["since_last_clean_scan_ms"], 2.0)
        self.assertEqual(lat["scan"], "periodic")
        f = {"details": {"detected_unix_us": 1_000_100_250}}
        self.assertEqual(C.latency(f, 1_000_100_000.0)["latency_ms"], 0.25)
        # GPU clock to GPU clock when both sides have it: exact to the nanosecond.
        f = {"details": {"detected_unix_us": 1_000_100_250, "scan_launched_unix_us": 1_000_100_050,
                         "scan_gpu_ns": 1_700_000_000_123_468_789}}
        lat = C.latency(f, 1_000_100_000.0, bad_store_gpu_ns=1_700_000_000_123_456_789)
        self.assertEqual(lat["latency_ms"], 0.012)
        self.assertIn("globaltimer", lat["basis"])
        self.assertEqual(lat["host_latency_ms"], 0.25)
        self.assertEqual(lat["scan_read_after_launch_ms"], 0.2)
        self.assertEqual(C.fields("time: g=1700000000123456789 k=1.5")["g"], 1_700_000_000_123_456_789)
        self.assertEqual(C.latency({"details": {"size": 4}}, 1.0, 0.5), {})

    def test_deterministic_drops_time_and_info(self):
        self.assertEqual(C.deterministic("info: a=1\nresult=3\ntime: t=4\ndone\n"), ["result=3", "done"])


class CasesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.f = Fakes(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_gmod_passes_when_bugs_found_and_clean_silent(self):
        r = self.f.case("canary_gmod")
        self.assertTrue(r["ok"], (r.get("notes"), self.f.last.stderr[-2000:]))
        self.assertTrue(r["checks"]["sass_build_has_no_ptx"])
        self.assertTrue(r["checks"]["ptx_build_has_ptx"])
        self.assertTrue(r["checks"]["sass:coarse_conc_under:names_both"])
        self.assertEqual(r["intervals"]["sass"], ["1", "0.1", "0.05"])
        self.assertTrue(r["intervals"]["fractions_accepted"])
        for iv in ("1", "0.1", "0.05"):
            rows = [x for x in r["latency"] if x["interval_ms"] == iv and x["build"] == "sass"]
            self.assertEqual(len(rows), 6, iv)
            # The fake's scan saw the store 12 µs after it, on the GPU's clock.
            self.assertEqual({x["latency_ms"] for x in rows}, {0.012}, rows)
            self.assertTrue(all("globaltimer" in x["basis"] for x in rows), rows)
            self.assertTrue(all(x["host_latency_ms"] is not None for x in rows), rows)
            self.assertEqual({x["globaltimer_step_ns"] for x in rows}, {32})
        self.assertEqual(r["table3"]["coarse_conc"]["gpusan_latency_ms"], {"1": 0.012, "0.1": 0.012, "0.05": 0.012})
        self.assertIn("latency ms at interval 0.1", r["notes"])
        self.assertEqual(r["known_gaps"]["sass-fine_single_over"]["found"], False)
        self.assertEqual(r["table3"]["coarse_single"]["detected"], True)
        self.assertEqual(set(r["known_window_overflow_at_once"]), {"sass-coarse_single_over", "sass-coarse_seq_over"})

    def test_gmod_records_what_an_older_gpusan_gives(self):
        """Whole-ms intervals only and findings without absolute times: still judged, the
        latency left unmeasured and said so."""
        r = self.f.case("canary_gmod", FAKE_INTEGER_INTERVALS="1", FAKE_NO_ABSOLUTE_TIMES="1")
        self.assertTrue(r["ok"], (r.get("notes"), self.f.last.stderr[-2000:]))
        self.assertEqual(r["intervals"]["sass"], ["1", "5"])
        self.assertFalse(r["intervals"]["fractions_accepted"])
        rows = [x for x in r["latency"] if x["interval_ms"] == "5"]
        self.assertEqual(len(rows), 6)
        self.assertIsNone(rows[0]["latency_ms"])
        self.assertIsNotNone(rows[0]["latency_estimate_ms"])
        self.assertEqual(rows[0]["since_last_clean_scan_ms"], 1.0)
        self.assertIn("no absolute detection time", r["notes"])

    def test_gmod_fails_on_a_missed_bug_and_a_false_positive(self):
        r = self.f.case("canary_gmod", FAKE_BUG=r"coarse_single_over")
        self.assertFalse(r["ok"])
        self.assertFalse(r["checks"]["ptx:coarse_seq_over:found"])
        self.assertTrue(r["checks"]["ptx:coarse_single_over:found"])
        r = self.f.case("canary_gmod", FAKE_EXTRA_KIND="out_of_bounds_write", FAKE_EXTRA_WHERE="coarse_seq_clean")
        self.assertFalse(r["ok"])
        self.assertFalse(r["checks"]["sass:coarse_seq_clean:silent_as_native"])
        self.assertTrue(r["checks"]["sass:coarse_single_clean:silent_as_native"])

    def test_gmod_dry_without_gpu(self):
        r = self.f.case("canary_gmod", CANARY_ASSUME_GPU="0", CANARY_DRY="1")
        self.assertFalse(r["ok"])
        self.assertIn("no GPU", r["skipped"])
        self.assertEqual(r["builds"]["sass"]["ptx_entries"], 0)

    def test_torch(self):
        r = self.f.case("canary_torch", CANARY_PYTHON=str(self.f.python))
        self.assertTrue(r["ok"], (r.get("notes"), self.f.last.stderr[-2000:]))
        r = self.f.case("canary_torch", CANARY_PYTHON=str(self.f.python), FAKE_GPUSAN_DIGEST="other")
        self.assertFalse(r["ok"])
        self.assertFalse(r["checks"]["mlp_bit_identical"])
        self.assertTrue(r["checks"]["bug_found"])
        self.assertFalse(r["known_window_overflow_at_once"]["found"])  # the fake misses it, not judged

    def test_programs(self):
        r = self.f.case("canary_programs", GPUSAN_PY_WHEELS="/nonexistent")
        self.assertTrue(r["ok"], (r.get("notes"), self.f.last.stderr[-2000:]))
        self.assertIn("programs_threads", r["programs"])
        self.assertIn("api_clean_graph", r["programs"])
        # No cupy/numba/jax here: listed as not run, not failed.
        for py in ("cupy", "numba", "jax"):
            if py in r["not_run"]:
                self.assertTrue(r["programs"][py]["not_run"])
        r = self.f.case("canary_programs", GPUSAN_PY_WHEELS="/nonexistent", FAKE_EXTRA_KIND=C.KIND,
                        FAKE_EXTRA_WHERE="programs graph")
        self.assertFalse(r["ok"])
        self.assertFalse(r["programs"]["programs_graph"]["pass"])
        self.assertTrue(r["programs"]["programs_fork"]["pass"])

    def test_overhead(self):
        out = Path(self.tmp.name) / "ov"
        d = Path(self.tmp.name) / "gpusan-dir"
        d.mkdir()
        os.symlink(self.f.gpusan, d / "gpusan")
        env = dict(self.f.env, OUT=str(out), NVCC=str(self.f.nvcc), GPUSAN_CANARY_ROUNDS="2",
                   GPUSAN_CANARY_PYTHON=str(self.f.python), GPUSAN_CANARY_BUDGET_S="200")
        r = subprocess.run(["bash", str(REPO / "bench/canary-overhead.sh"), str(d)], env=env, capture_output=True,
                           text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        doc = json.loads((out / "canary-overhead.json").read_text())
        s = doc["summary"]
        self.assertEqual(s["geomean_ratio"], 1.0, s)
        self.assertTrue(s["pass"]["geomean_ratio"])
        self.assertTrue(s["pass"]["no_false_positives"])
        self.assertTrue(s["pass"]["bit_identical"])
        self.assertTrue(s["pass"]["guard_scanned"])
        self.assertEqual(set(s["ratios"]), {"saxpy", "stencil2d", "sgemm", "reduction", "histogram", "gather",
                                            "tiny_launches", "many_allocs", "torch_compile", "torch_mlp",
                                            "torch_transformer"})
        row = doc["workloads"]["saxpy"]["metrics"][doc["workloads"]["saxpy"]["headline"]]
        self.assertEqual(row["paired_canary"], [1.0] * len(row["native_rounds"]), row)
        self.assertIn("canary/native by round 1.000-1.000", (out / "canary-overhead-table.txt").read_text())
        self.assertEqual(doc["memory"]["extra_bytes"], 1 << 19)
        self.assertTrue(s["pass"]["memory"])
        self.assertEqual(doc["memory"]["reported"]["bytes_per_live_allocation"], 42.21)
        self.assertFalse(s["pass"]["memory_reported_per_allocation"])
        self.assertTrue(doc["finished"])

    def test_overhead_variants(self):
        out = Path(self.tmp.name) / "ov-variants"
        d = Path(self.tmp.name) / "gpusan-dir-v"
        d.mkdir()
        os.symlink(self.f.gpusan, d / "gpusan")
        env = dict(self.f.env, OUT=str(out), NVCC=str(self.f.nvcc), GPUSAN_CANARY_ROUNDS="1",
                   GPUSAN_CANARY_CUDA_ROUNDS="2", GPUSAN_CANARY_ONLY="^saxpy$", GPUSAN_CANARY_BUDGET_S="100",
                   GPUSAN_CANARY_VARIANTS="slow=--canary-interval-ms 10;diag=GPUSAN_CANARY_DIAG=no_kernels")
        r = subprocess.run(["bash", str(REPO / "bench/canary-overhead.sh"), str(d)], env=env, capture_output=True,
                           text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        doc = json.loads((out / "canary-overhead.json").read_text())
        self.assertIn("--canary-interval-ms 10", doc["commands"]["slow"])
        self.assertTrue(doc["commands"]["diag"].startswith("GPUSAN_CANARY_DIAG=no_kernels "), doc["commands"])
        self.assertNotIn("GPUSAN_CANARY_DIAG", doc["commands"]["canary"])
        e = doc["workloads"]["saxpy"]
        self.assertEqual(sorted({x["tool"] for x in e["runs"]}), ["canary", "diag", "native", "slow"])
        row = e["metrics"][e["headline"]]
        self.assertEqual((row["ratio_slow"], row["ratio_diag"]), (1.0, 1.0), row)
        self.assertEqual((row["paired_slow"], row["paired_diag"]), ([1.0, 1.0], [1.0, 1.0]), row)
        self.assertIn("slow=", (out / "canary-overhead-table.txt").read_text())


class PairedTest(unittest.TestCase):
    def test_each_round_is_compared_with_natives_run_of_the_same_round(self):
        sys.path.insert(0, str(REPO / "bench"))
        import canary_overhead as co
        runs = [{"tool": t, "round": r, "ok": True, "wall_s": 1.0, "metrics": {"ms": v}}
                for t, r, v in [("native", 0, 10.0), ("canary", 0, 12.0), ("native", 1, 20.0), ("canary", 1, 21.0)]]
        entry = {"runs": runs}
        co.summarize(entry)
        row = entry["metrics"]["ms"]
        self.assertEqual(row["ratio"], 1.1, row)  # 16.5 / 15: the medians hide the spread
        self.assertEqual(row["paired_canary"], [1.2, 1.05], row)



class PinTest(unittest.TestCase):
    """Every run of the overhead suite goes to the same CPUs near the GPU."""

    TOPO = ("\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \tSYS\t16-31,48-63\t1\t\tN/A\n"
            "NIC0\tSYS\t X \t\t\t\t\n")

    def test_gpu0s_affinity_is_read_from_nvidia_smis_table(self):
        sys.path.insert(0, str(REPO / "bench"))
        import canary_overhead as co
        self.assertEqual(co.gpu_affinity(self.TOPO)[:3], [16, 17, 18])
        self.assertEqual(len(co.gpu_affinity(self.TOPO)), 32)
        self.assertEqual(co.gpu_affinity("no table here"), [])
        self.assertEqual(co.gpu_affinity("GPU0  X  CPU Affinity 0-3\nGPU0  X  0-3\n"), [], "spaces, not tabs")
        self.assertEqual(co.cpu_list("0-2,5"), [0, 1, 2, 5])

    def test_a_given_list_is_used_as_it_is(self):
        sys.path.insert(0, str(REPO / "bench"))
        import canary_overhead as co
        self.assertEqual(co.pinned_cpus("2-5"), "2-5")


if __name__ == "__main__":
    unittest.main()
