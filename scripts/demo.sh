#!/usr/bin/env bash
# gpusan's main job on a built-in example: examples/planted/overflow.cu, a small CUDA program
# with one planted bug (its kernel writes one float past a buffer into the live buffer next
# to it, which compute-sanitizer does not report).
#
# With a GPU (nvidia-smi lists one, or libcuda initializes): builds the example with nvcc
# (-g -lineinfo), builds gpusan (release), runs the example natively and then under
# `gpusan run`, which reports the write: kernel, thread, address, allocation, source line.
#
# Without a GPU (CI, laptops): builds the example with the pinned nvcc of .toolchain/,
# instruments its PTX with gpusan's check pass (and assembles the result with ptxas), then
# shows the finding of a RECORDED run of the same example on a GPU machine, rendered by
# `gpusan report show` from examples/planted/recorded-h100.report.json, and says so. That
# file is the report bench/reliability/demo_example.sh writes on the H100; where it is
# missing the demo says so and shows nothing made up.
#
# Usage: scripts/demo.sh
# Environment: GPUSAN (a gpusan binary to use instead of building one; its folder must hold
# libgpusan_inject.so for the GPU run), NVCC, GPUSAN_DEMO_GPU=1|0 (force either path),
# GPUSAN_DEMO_ARCH (nvcc -arch on the GPU path, default native), GPUSAN_DEMO_WORK (scratch
# folder, default target/demo), GPUSAN_DEMO_REPORT_JSON (where the GPU run's JSON report
# goes), GPUSAN_DEMO_RECORDED (the recorded report to show without a GPU).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
example_dir="$root/examples/planted"
recorded=${GPUSAN_DEMO_RECORDED:-$example_dir/recorded-h100.report.json}
work=${GPUSAN_DEMO_WORK:-$root/target/demo}
mkdir -p "$work"
work=$(cd "$work" && pwd)

if [ -t 1 ]; then
  step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  step() { printf '\n== %s\n' "$*"; }
fi

has_gpu() {
  case "${GPUSAN_DEMO_GPU:-}" in
    1) return 0 ;;
    0) return 1 ;;
  esac
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -q '^GPU '
    return
  fi
  python3 -c 'import ctypes, sys; sys.exit(ctypes.CDLL("libcuda.so.1").cuInit(0))' >/dev/null 2>&1
}

# gpusan: the one given, or a release build of this checkout (with the injected library
# when the program is to run under it).
gpusan_binary() {
  if [ -n "${GPUSAN:-}" ]; then
    echo "using $GPUSAN" >&2
    echo "$GPUSAN"
    return
  fi
  local packages=(-p gpusan-cli)
  [ "$1" = run ] && packages+=(-p gpusan-inject)
  echo "cargo build --release ${packages[*]}" >&2
  (cd "$root" && cargo build --release -q "${packages[@]}") >&2
  echo "$root/target/release/gpusan"
}

if has_gpu; then
  nvcc=${NVCC:-$(command -v nvcc || true)}
  link=()
  if [ -z "$nvcc" ]; then
    # No CUDA toolkit installed: the pinned one, whose static runtime is in its lib/.
    source <("$root/scripts/setup-toolchain.sh" --env)
    nvcc=$GPUSAN_CUDA/bin/nvcc
    link=(-L"$GPUSAN_CUDA/lib")
  fi
  arch=${GPUSAN_DEMO_ARCH:-native}
  report_json=${GPUSAN_DEMO_REPORT_JSON:-$work/overflow.report.json}
  step "Building the example: nvcc -g -lineinfo -arch=$arch overflow.cu (in examples/planted)"
  (cd "$example_dir" && "$nvcc" -g -lineinfo -arch="$arch" "${link[@]}" -o "$work/overflow" overflow.cu)
  step "Building gpusan"
  gpusan=$(gpusan_binary run)
  step "The example natively: the stray write goes unnoticed"
  "$work/overflow" || true
  # --error-exitcode tells a finding from none; the JSON report is what demo_example.sh records.
  step "The example under gpusan: gpusan run --error-exitcode 99 --report-json $(basename "$report_json") -- ./overflow"
  rc=0
  (cd "$work" && "$gpusan" run --error-exitcode 99 --report-json "$report_json" -- ./overflow) || rc=$?
  case $rc in
    99) step "gpusan found the planted bug (report above; JSON: $report_json)" ;;
    0) echo "gpusan: the planted bug was not found: this is a bug in gpusan, please report it" >&2; exit 1 ;;
    *) echo "gpusan run exited $rc" >&2; exit "$rc" ;;
  esac
  exit 0
fi

# No GPU here: build, instrument, then the recorded run.
source <("$root/scripts/setup-toolchain.sh" --env)
nvcc=${NVCC:-$GPUSAN_CUDA/bin/nvcc}
step "No GPU on this machine: building the example with the pinned nvcc of .toolchain/ ($("$nvcc" --version | grep -o 'release [0-9.]*'))"
(cd "$example_dir" && "$nvcc" -g -lineinfo -arch=sm_90 -L"$GPUSAN_CUDA/lib" -o "$work/overflow" overflow.cu)
(cd "$example_dir" && "$nvcc" -lineinfo -arch=sm_90 -ptx -o "$work/overflow.ptx" overflow.cu)
echo "built $work/overflow and its PTX, $work/overflow.ptx"
step "Building gpusan"
gpusan=$(gpusan_binary instrument)
step "What the kernel accesses: gpusan ptx stats overflow.ptx"
"$gpusan" ptx stats "$work/overflow.ptx"
step "Instrumenting it: gpusan instrument overflow.ptx (the check pass gpusan run applies to every kernel)"
"$gpusan" instrument "$work/overflow.ptx" -o "$work/overflow.checked.ptx" 2>&1
echo "(a site is a global load or store of the kernel: each is checked when it runs against the"
echo " bounds and lifetime of the allocation its pointer came from)"
"$GPUSAN_CUDA/bin/ptxas" -arch=sm_90 -o "$work/overflow.checked.cubin" "$work/overflow.checked.ptx"
echo "the instrumented PTX ($work/overflow.checked.ptx) assembles with ptxas for sm_90"

step "The finding, from a RECORDED run"
if [ ! -f "$recorded" ]; then
  cat <<EOF
This machine has no GPU, so the example cannot run here, and no recorded run is present:
${recorded#"$root"/} is written from the report of bench/reliability/demo_example.sh
on a GPU machine. On a machine with a GPU, scripts/demo.sh runs the example under gpusan.
EOF
  exit 0
fi
about="${recorded%.report.json}.about"
where="on a GPU machine"
[ -f "$about" ] && where=$(cat "$about")
cat <<EOF
This machine has no GPU, so what follows is NOT from this machine: it is the report of
\`gpusan run -- ./overflow\` (as this script runs it on a GPU, the same example built the same
way), recorded $where.
gpusan renders it from ${recorded#"$root"/} with \`gpusan report show\`:

EOF
"$gpusan" report show "$recorded"
