#!/usr/bin/env bash
# Installs the pinned CUDA toolchain (nvcc, ptxas, cuobjdump, nvdisasm, CCCL and Sanitizer
# API headers) from PyPI wheels into .toolchain/, for machines without a GPU.
#
# The versions match the GPU machine (CUDA 13.0, driver 580): its JIT accepts PTX ISA 9.0
# at most, so everything we emit is assembled by the same ptxas in our tests.
# Idempotent: a stamp file records what is installed; a second run does nothing.
#
# Usage: scripts/setup-toolchain.sh            (prints the toolchain's bin folder)
#        source <(scripts/setup-toolchain.sh --env)   (exports PATH and GPUSAN_CUDA)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest="${GPUSAN_TOOLCHAIN_DIR:-$root/.toolchain}"
pins=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-cuda-crt==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-runtime==13.0.88
  nvidia-cuda-sanitizer-api==13.0.85
  # CCCL headers (<nv/target>, libcu++): cuda_fp16.h and cooperative_groups.h need them.
  nvidia-cuda-cccl==13.0.85
  # NVTX v3 headers as CUDA 13.0 ships them (the fake-driver tests of the NVTX memory door).
  nvidia-nvtx==13.0.85
  # The first published disassemblers; they read sm_90 code from the 13.0 ptxas.
  nvidia-cuda-cuobjdump==13.2.51
  nvidia-cuda-nvdisasm==13.2.51
)
stamp="$dest/.installed"
want=$(printf '%s\n' "${pins[@]}")
cuda="$dest/nvidia/cu13"

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "gpusan: installing the pinned CUDA toolchain into $dest" >&2
  rm -rf "$dest.tmp"
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --target "$dest.tmp" "${pins[@]}" >&2
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
  # pip --target keeps the wheels' layout; fix modes lost by some pip versions.
  chmod +x "$dest/nvidia/cu13/bin/"* "$dest/nvidia/cu13/nvvm/bin/"* 2>/dev/null || true
  printf '%s\n' "$want" > "$stamp"
fi

for tool in nvcc ptxas cuobjdump nvdisasm; do
  [ -x "$cuda/bin/$tool" ] || { echo "gpusan: $tool missing from $cuda/bin" >&2; exit 1; }
done

if [ "${1:-}" = "--env" ]; then
  echo "export GPUSAN_CUDA='$cuda'"
  echo "export PATH='$cuda/bin':\"\$PATH\""
else
  echo "$cuda/bin"
fi
