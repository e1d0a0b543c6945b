"""The build backend of gpusan's wheel (PEP 517, in-tree: `pyproject.toml` beside it names
it), made of the standard library only, so `pip wheel ./python` and `pip install ./python`
work offline with nothing to fetch.

The wheel holds the `gpusan` package (python/gpusan/, every file) and, in `gpusan/_bin/`,
the Rust `gpusan` binary with `libgpusan_inject.so` beside it, where the binary looks for
it. Its `gpusan` command is `gpusan.__main__:main`, which hands over to that binary; the
pytest plugin is registered through the `pytest11` entry point.

The binaries come from cargo: `cargo build --release -p gpusan-cli -p gpusan-inject` run
here, unless a folder holding both is named (`--config-settings bin-dir=DIR` or
`$GPUSAN_WHEEL_BIN_DIR`: CI reuses its debug build). Debug information is stripped from
the copies when `strip` is found (symbol tables stay; `$GPUSAN_WHEEL_STRIP=0` keeps all).
The wheel is tagged for this machine (`py3-none-linux_<arch>`): it holds native code built
against this system's C library.

Also a command: `python3 gpusan_build.py OUT_DIR [BIN_DIR]` writes the wheel, prints its path.
"""

import base64
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NAME = "gpusan"
BINARIES = ("gpusan", "libgpusan_inject.so")

SUMMARY = "Memory safety for CUDA programs on real NVIDIA GPUs"


def version():
    """The crates' version (the workspace's), which the package must carry too."""
    with open(os.path.join(ROOT, "Cargo.toml")) as f:
        cargo = f.read()
    section = cargo.split("[workspace.package]", 1)[1]
    found = re.search(r'^version\s*=\s*"([^"]+)"', section, re.M)
    if not found:
        raise RuntimeError("no version in [workspace.package] of Cargo.toml")
    with open(os.path.join(HERE, NAME, "__init__.py")) as f:
        package = re.search(r'^__version__\s*=\s*"([^"]+)"', f.read(), re.M)
    if not package or package.group(1) != found.group(1):
        raise RuntimeError(
            "python/gpusan/__init__.py's __version__ (%s) is not the crates' (%s)"
            % (package and package.group(1), found.group(1))
        )
    return found.group(1)


def platform_tag():
    return "linux_" + platform.machine().replace("-", "_").replace(".", "_").lower()


def cargo_build():
    """Builds the release binaries; returns their folder."""
    subprocess.check_call(
        ["cargo", "build", "--release", "--locked", "-p", "gpusan-cli", "-p", "gpusan-inject"], cwd=ROOT
    )
    return os.path.join(ROOT, "target", "release")


def package_files():
    """(path in the wheel, path here) of the Python package, sorted."""
    out = []
    pkg = os.path.join(HERE, NAME)
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and d != "_bin")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(dirpath, name)
            out.append((os.path.relpath(full, HERE).replace(os.sep, "/"), full))
    return out


def stripped(path, scratch):
    """`path`, or a copy of it without debug information."""
    strip = shutil.which("strip")
    if not strip or os.environ.get("GPUSAN_WHEEL_STRIP") == "0":
        return path
    copy = os.path.join(scratch, os.path.basename(path))
    shutil.copy2(path, copy)
    subprocess.check_call([strip, "--strip-debug", copy])
    return copy


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def metadata(ver):
    return (
        "Metadata-Version: 2.1\n"
        "Name: %s\n"
        "Version: %s\n"
        "Summary: %s\n"
        "Requires-Python: >=3.8\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Classifier: Environment :: GPU :: NVIDIA CUDA\n" % (NAME, ver, SUMMARY)
    )


ENTRY_POINTS = "[console_scripts]\ngpusan = gpusan.__main__:main\n\n[pytest11]\ngpusan = gpusan.pytest_plugin\n"


def build(out_dir, bin_dir):
    """Writes the wheel into `out_dir` from the binaries in `bin_dir`; returns its path."""
    ver = version()
    for b in BINARIES:
        if not os.path.isfile(os.path.join(bin_dir, b)):
            raise RuntimeError("%s not found in %s (cargo build -p gpusan-cli -p gpusan-inject)" % (b, bin_dir))
    tag = "py3-none-" + platform_tag()
    dist_info = "%s-%s.dist-info" % (NAME, ver)
    wheel_path = os.path.join(out_dir, "%s-%s-%s.whl" % (NAME, ver, tag))
    os.makedirs(out_dir, exist_ok=True)
    records = []
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(wheel_path, "w", zipfile.ZIP_DEFLATED) as z:

        def add(arcname, data, mode=0o644):
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data, compresslevel=6)
            records.append(_record_line(arcname, data))

        for arcname, path in package_files():
            with open(path, "rb") as f:
                add(arcname, f.read())
        for b in BINARIES:
            with open(stripped(os.path.join(bin_dir, b), scratch), "rb") as f:
                add("%s/_bin/%s" % (NAME, b), f.read(), 0o755)
        add(dist_info + "/METADATA", metadata(ver).encode())
        wheel = "Wheel-Version: 1.0\nGenerator: gpusan_build\nRoot-Is-Purelib: false\nTag: %s\n" % tag
        add(dist_info + "/WHEEL", wheel.encode())
        add(dist_info + "/entry_points.txt", ENTRY_POINTS.encode())
        add(dist_info + "/top_level.txt", (NAME + "\n").encode())
        record = "\n".join(records + [dist_info + "/RECORD,,"]) + "\n"
        info = zipfile.ZipInfo(dist_info + "/RECORD", date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o100644) << 16
        z.writestr(info, record, compress_type=zipfile.ZIP_DEFLATED)
    return wheel_path


def _bin_dir(config_settings):
    named = (config_settings or {}).get("bin-dir") or os.environ.get("GPUSAN_WHEEL_BIN_DIR")
    return os.path.abspath(named) if named else cargo_build()


# PEP 517 hooks.


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return os.path.basename(build(wheel_directory, _bin_dir(config_settings)))


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: gpusan_build.py OUT_DIR [BIN_DIR]")
    print(build(sys.argv[1], os.path.abspath(sys.argv[2]) if len(sys.argv) == 3 else cargo_build()))
