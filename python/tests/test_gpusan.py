"""The logic of `python -m gpusan` and of the pytest plugin, tested with the standard
library's unittest (pytest may not be installed where this runs: scripts/python-wheel.sh
runs the plugin inside pytest when it is). Run against the installed package:

    python -m unittest discover -s python/tests
"""

import re
import subprocess
import sys
import unittest

from gpusan import __main__ as cli
from gpusan import pytest_plugin as plugin

PY = "/usr/bin/python3"


class RunCommand(unittest.TestCase):
    def test_a_script_runs_under_this_interpreter_after_gpusans_options(self):
        self.assertEqual(
            cli.run_command(["--mode", "check", "--count-checks", "train.py", "--lr", "3"], PY),
            ["run", "--mode", "check", "--count-checks", "--", PY, "train.py", "--lr", "3"],
        )

    def test_options_with_an_equals_sign_and_python_options(self):
        self.assertEqual(
            cli.run_command(["--mode=check", "-m", "pytest", "-x"], PY),
            ["run", "--mode=check", "--", PY, "-m", "pytest", "-x"],
        )
        self.assertEqual(cli.run_command(["-c", "print(1)"], PY), ["run", "--", PY, "-c", "print(1)"])

    def test_a_command_line_with_its_own_separator_is_left_alone(self):
        self.assertEqual(
            cli.run_command(["--mode", "api", "--", "./prog", "x"], PY), ["run", "--mode", "api", "--", "./prog", "x"]
        )

    def test_other_commands_and_help_pass_through(self):
        self.assertEqual(cli.command(["--version"]), ["--version"])
        self.assertEqual(cli.command(["ptx", "fmt", "a.ptx"]), ["ptx", "fmt", "a.ptx"])
        self.assertEqual(cli.command(["run", "--help"]), ["run", "--help"])
        self.assertEqual(cli.command(["run"]), ["run"])

    def test_the_flags_are_those_of_gpusan_run(self):
        exe = cli.find()
        self.assertIsNotNone(exe, "no gpusan executable: %s" % cli.candidates())
        help_text = subprocess.run([exe, "run", "--help"], capture_output=True, text=True, check=True).stdout
        flags = set()
        for line in help_text.splitlines():
            m = re.match(r"^\s+(?:(-\w), )?(--[\w-]+)(\s+<[^>]+>)?\s*$", line)
            if m and not m.group(3):
                flags.update(f for f in (m.group(1), m.group(2)) if f)
        self.assertEqual(flags, set(cli.FLAGS), help_text)


class Plugin(unittest.TestCase):
    def test_its_own_options_are_taken_out_of_the_inner_run(self):
        args = ["-x", "--gpusan", "--gpusan-mode", "api", "--gpusan-args=--leak-check full", "tests", "-k", "a"]
        self.assertEqual(plugin.strip_own_options(args), ["-x", "tests", "-k", "a"])
        self.assertEqual(plugin.strip_own_options(["--gpusan-mode=check", "--", "--gpusan"]), ["--", "--gpusan"])

    def test_the_inner_command(self):
        cmd = plugin.gpusan_command("/g", "check", ["--leak-check", "full"], "/r.json", ["-x", "t"], PY)
        self.assertEqual(
            cmd,
            ["/g", "run", "--mode", "check", "--error-exitcode", "1", "--report-json", "/r.json"]
            + ["--leak-check", "full", "--", PY, "-m", "pytest", "-x", "t"],
        )
        mine = ["--report-json=/mine.json", "--error-exitcode", "7"]
        cmd = plugin.gpusan_command("/g", "api", mine, "/r.json", [], PY)
        self.assertEqual(cmd, ["/g", "run", "--mode", "api"] + mine + ["--", PY, "-m", "pytest"])
        self.assertEqual(plugin.report_path(mine, "/r.json"), "/mine.json")
        self.assertEqual(plugin.report_path(["--report-json", "/x"], "/r.json"), "/x")
        self.assertEqual(plugin.report_path([], "/r.json"), "/r.json")

    def test_findings_are_summarized_test_by_test_those_outside_tests_last(self):
        def err(label, kind, count=1):
            e = {"kind": kind, "count": count, "message": "m " + kind, "details": {"kernel": "k"}}
            if label:
                e["label"] = label
            return e

        doc = {
            "errors": [err(None, "leak"), err("t.py::b", "oob", 3), err("t.py::a", "uaf"), err("t.py::b", "uaf")],
            "summary": {"total": 6},
        }
        groups = plugin.by_test(doc)
        self.assertEqual([t for t, _ in groups], ["t.py::b", "t.py::a", plugin.NO_TEST])
        lines = plugin.summary_lines(doc)
        self.assertEqual(lines[0], "gpusan: 6 error(s), 4 distinct, in 2 test(s):")
        self.assertIn("    oob (3 times): m oob in k", lines)
        clean = {"errors": [], "summary": {"total": 0}, "cuda_processes": 1}
        self.assertEqual(plugin.summary_lines(clean), ["gpusan: no errors found"])
        blind = dict(clean, cuda_processes=0)
        self.assertEqual(plugin.summary_lines(blind), ["gpusan: no CUDA activity seen: nothing was checked"])

    def test_tests_are_marked_only_under_gpusan_and_when_asked(self):
        under = {"GPUSAN_REPORT_DIR": "/tmp/x"}
        self.assertTrue(plugin.marks_tests(True, under))
        self.assertFalse(plugin.marks_tests(False, under))
        self.assertTrue(plugin.marks_tests(False, dict(under, GPUSAN_PYTEST_LABELS="1")))
        self.assertFalse(plugin.marks_tests(True, {}))

    def test_each_test_is_marked_from_its_setup_to_the_end_of_its_teardown(self):
        seen = []
        labels = plugin.Labels(seen.append)

        class Item:
            nodeid = "t.py::test_é"

        self.assertIsNone(labels.pytest_runtest_protocol(Item(), None))
        labels.pytest_runtest_logfinish(Item.nodeid, None)
        self.assertEqual(seen, ["t.py::test_é".encode(), None])

    def test_without_gpusan_the_label_function_is_absent(self):
        self.assertIsNone(plugin._set_label_function())


class TorchPadding(unittest.TestCase):
    """Canary mode asks PyTorch's caching allocator for padding after every tensor whose size
    leaves no slack (the shim's gpusan_torch_shim_pad), after the trace tracker is attached, in
    canary mode only."""

    def setUp(self):
        import os
        self.saved = {k: os.environ.get(k) for k in ("GPUSAN_MODE", "GPUSAN_REDZONE")}

    def tearDown(self):
        import os
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def test_the_padding_is_the_runs_redzone_in_canary_mode_only(self):
        import os
        from gpusan import torch_hook
        os.environ["GPUSAN_MODE"] = "check"
        os.environ["GPUSAN_REDZONE"] = "32"
        self.assertEqual(torch_hook.canary_padding(), 0)
        os.environ["GPUSAN_MODE"] = "canary"
        self.assertEqual(torch_hook.canary_padding(), 32)
        os.environ["GPUSAN_REDZONE"] = "100000"
        self.assertEqual(torch_hook.canary_padding(), 65535, "the pool interface's field")
        os.environ["GPUSAN_REDZONE"] = "junk"
        self.assertEqual(torch_hook.canary_padding(), 0)

    def test_the_padding_allocator_is_installed_after_the_tracker(self):
        import os
        import types
        from gpusan import torch_hook
        calls = []
        torch = types.SimpleNamespace(cuda=types.SimpleNamespace(get_allocator_backend=lambda: "native"))
        shim = object.__new__(torch_hook._Shim)
        shim.torch, shim.started, shim.error = torch, True, None
        shim.thread = types.SimpleNamespace(join=lambda: None)
        shim.attach = lambda why, n: calls.append("attach") or 0
        shim.pad = lambda pad, why, n: calls.append(("pad", pad)) or 0
        os.environ["GPUSAN_MODE"] = "canary"
        os.environ["GPUSAN_REDZONE"] = "32"
        shim.attach_now()
        self.assertEqual(calls, ["attach", ("pad", 32)])
        calls.clear()
        os.environ["GPUSAN_MODE"] = "check"
        shim.attach_now()
        self.assertEqual(calls, ["attach"], "no padding outside canary mode")


if __name__ == "__main__":
    sys.exit(unittest.main())
