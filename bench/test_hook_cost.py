#!/usr/bin/env python3
"""Tests of bench/hook_cost.py (issue 15's hook cost) without a GPU: a whole run over a fake
torch_steps.py and a fake gpusan (which runs the program after `--`, 3% slower), a run cut
by its deadline, and a dry run.

    python3 bench/test_hook_cost.py
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import hook_cost  # noqa: E402

FAKE_STEPS = textwrap.dedent("""\
    import json, os, random, sys, time
    steps = int(sys.argv[sys.argv.index("--steps") + 1])
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
    base = 15.0 * float(os.environ.get("FAKE_SLOWER", "1"))
    times = sorted(random.gauss(base, 0.2) for _ in range(steps))
    print(json.dumps({"ok": True, "metrics": {"transformer.ms_per_step": times[len(times) // 2]},
                      "times": times, "digest": "same"}))
""")
FAKE_GPUSAN = textwrap.dedent("""\
    #!/bin/sh
    while [ "$1" != "--" ]; do shift; done; shift
    FAKE_SLOWER=1.03 exec "$@"
""")


class HookCost(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = Path(self.dir.name)
        (d / "steps.py").write_text(FAKE_STEPS)
        (d / "gpusan").write_text(FAKE_GPUSAN)
        os.chmod(d / "gpusan", 0o755)
        self.old = hook_cost.STEPS_PY
        hook_cost.STEPS_PY = str(d / "steps.py")

    def tearDown(self):
        hook_cost.STEPS_PY = self.old
        self.dir.cleanup()

    def run_main(self, *extra):
        out = Path(self.dir.name) / "out.json"
        argv = ["hook_cost.py", "--gpusan", str(Path(self.dir.name) / "gpusan"), "--out", str(out), *extra]
        old_argv, sys.argv = sys.argv, argv
        try:
            with open(os.devnull, "w") as null:
                old_stdout, sys.stdout = sys.stdout, null
                try:
                    hook_cost.main()
                finally:
                    sys.stdout = old_stdout
        finally:
            sys.argv = old_argv
        return json.loads(out.read_text())

    def test_paired_ratios_and_the_target_are_computed(self):
        doc = self.run_main("--rounds", "5")
        self.assertEqual(doc["target"]["rounds"], 5)
        api = doc["ratios"]["api/native"]
        self.assertEqual(len(api["per_round"]), 5)
        self.assertAlmostEqual(api["median"], 1.03, delta=0.02)
        low, high = api["bootstrap95"]
        self.assertTrue(api["min"] <= low <= api["median"] <= high <= api["max"], api)
        self.assertTrue(doc["target"]["met"])
        self.assertEqual(len(doc["per_config"]["native"]["round_medians_ms"]), 5)
        self.assertEqual(doc["per_config"]["native"]["pooled_steps"], 5 * 60)
        self.assertTrue(doc["same_results"])
        self.assertEqual(doc["failures"], [])
        # Each configuration leads one round in three.
        self.assertEqual([r["order"][0] for r in doc["rounds"][:3]], ["native", "api", "hooks_off"])

    def test_a_cost_past_the_target_is_said(self):
        Path(self.dir.name, "gpusan").write_text(FAKE_GPUSAN.replace("1.03", "1.20"))
        doc = self.run_main("--rounds", "3")
        self.assertFalse(doc["target"]["met"])
        self.assertAlmostEqual(doc["target"]["cost_percent"], 20, delta=3)
        # The fake slows api mode with and without the hooks alike: the hooks cost nothing.
        self.assertAlmostEqual(doc["hooks_target"]["median_ratio"], 1.0, delta=0.03)
        self.assertTrue(doc["hooks_target"]["met"])
        self.assertEqual(len(doc["ratios"]["api/hooks_off"]["per_round"]), 3)

    def test_the_deadline_stops_rounds(self):
        os.environ["FAKE_SLEEP"] = "0.4"
        try:
            doc = self.run_main("--rounds", "8", "--deadline-s", "4")
        finally:
            del os.environ["FAKE_SLEEP"]
        self.assertLess(doc["target"]["rounds"], 8)
        self.assertIn("deadline", doc["stopped"])

    def test_fewer_than_50_steps_are_refused_and_a_dry_run_runs_nothing(self):
        r = subprocess.run([sys.executable, str(HERE / "hook_cost.py"), "--gpusan", "x", "--steps", "10"],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        doc = self.run_main("--dry")
        self.assertIn("skipped", doc)
        self.assertIn("--python-hooks", doc["commands"]["hooks_off"])


if __name__ == "__main__":
    unittest.main()
