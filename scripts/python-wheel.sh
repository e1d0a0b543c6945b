#!/usr/bin/env bash
# gpusan for Python users, without a GPU (scripts/test.sh runs it): the wheel is built from
# the cargo binaries (python/gpusan_build.py, directly and as pip's PEP 517 backend),
# installed with pip from local files only (--no-index) into a fresh virtual environment,
# and there `gpusan --version`, `python -m gpusan --version`, `python -m gpusan run SCRIPT`
# over the fake CUDA driver (a finding naming the script's line), the package's unittest
# suite and, when pytest is installed, `pytest --gpusan` (each finding named by its test)
# are run. Nothing is fetched: where pytest is missing that part says so and is skipped,
# the plugin's logic still tested by the unittest suite.
#
# usage: scripts/python-wheel.sh [BIN_DIR]   (default target/debug, built if needed)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
bin_dir=$(realpath "${1:-target/debug}")
if [ -z "${1:-}" ]; then
    cargo build --locked -q -p gpusan-cli -p gpusan-inject
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/gpusan-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "python-wheel: FAILED: $*" >&2; exit 1; }

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)

# pytest comes from the system's Python when it has one (nothing is downloaded).
venv_flags=()
if python3 -c 'import pytest' 2>/dev/null; then
    venv_flags=(--system-site-packages)
fi
python3 -m venv "${venv_flags[@]}" "$work/venv" || fail "python3 -m venv does not work here"
py=$work/venv/bin/python

echo "python-wheel: building the wheel from $bin_dir"
wheel=$(python3 python/gpusan_build.py "$work/dist" "$bin_dir")
"$py" -m pip install --no-index --no-cache-dir --quiet "$wheel" || fail "pip install --no-index $wheel"
# The same through pip's PEP 517 route (the in-tree backend; no build requirements).
"$py" -m pip wheel --no-index --no-cache-dir --quiet --no-deps -w "$work/pep517" \
    --config-settings "bin-dir=$bin_dir" ./python || fail "pip wheel ./python"
ls "$work"/pep517/gpusan-"$version"-py3-none-linux_*.whl >/dev/null || fail "pip wheel made no gpusan wheel"

cd "$work"
# From the installed wheel only: the checkout's binaries and package are not visible.
export -n GPUSAN_BIN GPUSAN_INJECT_LIB 2>/dev/null || true
[ "$("$work/venv/bin/gpusan" --version)" = "gpusan $version" ] || fail "gpusan --version"
[ "$("$py" -m gpusan --version)" = "gpusan $version" ] || fail "python -m gpusan --version"
"$py" -c 'import gpusan, os, sys; sys.exit(not gpusan.__file__.startswith(sys.prefix))' || fail "gpusan imported from outside the venv"

echo "python-wheel: the package's unittest suite"
"$py" -m unittest discover -s "$root/python/tests" || fail "unittest"

# The fake CUDA driver of the command's tests, and an extension using it.
fake=$root/crates/cli/tests/fake_cuda
mkdir -p "$work/fake"
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$work/fake/libcuda.so.1" "$fake/libcuda.c"
ln -s libcuda.so.1 "$work/fake/libcuda.so"
cc -shared -fPIC -o "$work/fake/libpyext.so" "$fake/pyext.c" -L"$work/fake" -lcuda -Wl,-rpath,"$work/fake"
export LD_LIBRARY_PATH=$work/fake PYEXT=$work/fake/libpyext.so GPUSAN_CACHE_DIR=$work/cache
mkdir -p tests
cat > tests/test_fake.py <<'PY'
import ctypes, os
from ctypes import c_uint64
ext = ctypes.PyDLL(os.environ["PYEXT"])  # the GIL held during calls, as extensions do
ext.ext_alloc.restype = c_uint64
ext.ext_alloc.argtypes = [c_uint64]
ext.ext_free.argtypes = [c_uint64]
ext.ext_copy.argtypes = [c_uint64, c_uint64]
ext.ext_launch_store.argtypes = [c_uint64]

def test_clean():
    a = ext.ext_alloc(1024)
    assert ext.ext_copy(a, 1024) == 0
    ext.ext_free(a)

def test_kernel_overflow():
    a = ext.ext_alloc(1024)
    assert ext.ext_launch_store(a + 1028) == 0  # recorded, never synchronized by the test

def test_copy_overflow():
    a = ext.ext_alloc(1024)
    ext.ext_copy(a, 1028)
    ext.ext_free(a)

if __name__ == "__main__":
    test_copy_overflow()
PY

echo "python-wheel: python -m gpusan run SCRIPT"
set +e
"$py" -m gpusan run --mode check --error-exitcode 3 --report-json run.json tests/test_fake.py 2>run.txt
code=$?
set -e
[ "$code" = 3 ] || { cat run.txt; fail "python -m gpusan run exited $code, not 3"; }
grep -q "Python Frame: test_copy_overflow at .*tests/test_fake.py:21$" run.txt || { cat run.txt; fail "no Python frame"; }

if "$py" -c 'import pytest' 2>/dev/null; then
    echo "python-wheel: pytest --gpusan"
    set +e
    "$py" -m pytest --gpusan -q -p no:cacheprovider tests >pytest.txt 2>&1
    code=$?
    set -e
    [ "$code" = 1 ] || { cat pytest.txt; fail "pytest --gpusan exited $code, not 1"; }
    summary=$(sed -n '/^gpusan: .* error(s)/,$p' pytest.txt)
    for want in "in 2 test(s)" "tests/test_fake.py::test_kernel_overflow" \
        "out_of_bounds_write: Out-of-bounds __global__ write" "tests/test_fake.py::test_copy_overflow" \
        "memcpy_out_of_bounds: "; do
        grep -qF -- "$want" <<<"$summary" || { cat pytest.txt; fail "pytest --gpusan's summary lacks '$want'"; }
    done
    grep -q "during: tests/test_fake.py::test_kernel_overflow" pytest.txt || { cat pytest.txt; fail "no label"; }
    grep -q "3 passed" pytest.txt || { cat pytest.txt; fail "the tests did not run under gpusan"; }
else
    echo "python-wheel: SKIPPED pytest --gpusan: pytest is not installed (nothing is downloaded here);" \
        "the plugin's logic was tested by the unittest suite above"
fi
echo "python-wheel: ok"
