#!/usr/bin/env bash
# Regenerates the PTX fixtures in tests/corpus/ptx/ from the CUDA sources in
# tests/corpus/cuda/, then checks that every generated file assembles with ptxas.
#
# For each tests/corpus/cuda/NAME.cu three variants are written:
#   NAME.O3.ptx        nvcc -O3 -arch=sm_90 -ptx
#   NAME.lineinfo.ptx  nvcc -O3 -lineinfo -arch=sm_90 -ptx
#   NAME.G.ptx         nvcc -G -arch=sm_90 -ptx
# Files whose name contains "sm90a" are built with -arch=sm_90a (and checked with
# ptxas -arch=sm_90a). A source may add flags for all three variants with a line
#   // corpus-nvcc-flags: <flags>
# (switch_brx.cu uses it to let NVVM emit brx.idx jump tables).
#
# The ptxas check uses the flags nvcc itself hands ptxas for each variant (see
# `nvcc -dryrun`): nothing for O3, --generate-line-info for lineinfo, and
# `-g --dont-merge-basicblocks --return-at-end` for -G. ptxas also accepts the -G
# PTX (with its .section .debug_* blocks) without -g; -g just keeps the debug info.
#
# Determinism: nvcc writes absolute paths into the PTX (.file directives, the
# DW_AT_comp_dir string inside .section .debug_info, `_INTERNAL_<hash>` names of
# internal-linkage functions, whose hash is taken from the source's absolute path).
# So sources are compiled from a fixed staging folder, /tmp/gpusan-corpus/src, with
# the toolkit and the CCCL headers reached through symlinks in that folder: the
# output is then the same wherever the repository is checked out. Two runs at once
# are serialised with flock. One thing stays host-specific: -G output names the host
# C++ library headers (e.g. /usr/include/c++/12/...), so byte-identical -G files
# need the same host g++ (Debian 12: g++ 12).
#
# CCCL: cuda_fp16.h, cooperative_groups.h and libcu++ need the CCCL headers, which
# scripts/setup-toolchain.sh installs (nvidia-cuda-cccl); they are reached through the
# staging folder like the toolkit.
#
# Idempotent: outputs are replaced only when their content changes, and PTX files
# of sources that no longer exist are removed.
#
# Usage: scripts/build-corpus.sh            (prints a one-line summary)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source <("$root/scripts/setup-toolchain.sh" --env)

src_dir="$root/tests/corpus/cuda"
out_dir="$root/tests/corpus/ptx"

# --- CCCL headers (installed with the toolchain) -----------------------------------
cccl_inc="$GPUSAN_CUDA/include/cccl"
[ -f "$cccl_inc/nv/target" ] || { echo "build-corpus: $cccl_inc/nv/target missing" >&2; exit 1; }

# --- fixed staging folder ----------------------------------------------------------
stage=/tmp/gpusan-corpus
exec 9>"$stage.lock"
flock 9
rm -rf "$stage"
mkdir -p "$stage/src" "$stage/out"
ln -s "$GPUSAN_CUDA" "$stage/cuda"
ln -s "$cccl_inc" "$stage/cccl"
nvcc="$stage/cuda/bin/nvcc"
ptxas="$stage/cuda/bin/ptxas"

shopt -s nullglob
sources=("$src_dir"/*.cu)
[ ${#sources[@]} -gt 0 ] || { echo "build-corpus: no sources in $src_dir" >&2; exit 1; }
cp "${sources[@]}" "$stage/src/"
cd "$stage/src"

mkdir -p "$out_dir"
built=0 changed=0 failed=0
declare -A keep=()

for path in "${sources[@]}"; do
  file=$(basename "$path")
  name=${file%.cu}
  arch=sm_90
  [[ $name == *sm90a* ]] && arch=sm_90a
  extra=()
  flags_line=$(sed -n 's|^// corpus-nvcc-flags:[[:space:]]*||p' "$file" | head -n 1)
  [ -n "$flags_line" ] && read -r -a extra <<< "$flags_line"

  for variant in O3 lineinfo G; do
    case $variant in
      O3)       nv=(-O3);           px=() ;;
      lineinfo) nv=(-O3 -lineinfo); px=(--generate-line-info) ;;
      G)        nv=(-G);            px=(-g --dont-merge-basicblocks --return-at-end) ;;
    esac
    out="$name.$variant.ptx"
    keep[$out]=1
    # Tool output (e.g. ptxas's stack-size warning for recursion) is shown only on failure.
    if ! "$nvcc" "${nv[@]}" -arch="$arch" -ptx -isystem "$stage/cccl" ${extra[@]+"${extra[@]}"} \
         "$file" -o "$stage/out/$out" > "$stage/log" 2>&1; then
      echo "build-corpus: nvcc failed: $file ($variant)" >&2; cat "$stage/log" >&2
      failed=$((failed + 1)); continue
    fi
    if ! "$ptxas" -arch="$arch" ${px[@]+"${px[@]}"} "$stage/out/$out" -o /dev/null > "$stage/log" 2>&1; then
      echo "build-corpus: ptxas rejected $out" >&2; cat "$stage/log" >&2
      failed=$((failed + 1)); continue
    fi
    built=$((built + 1))
    if ! cmp -s "$stage/out/$out" "$out_dir/$out"; then
      cp "$stage/out/$out" "$out_dir/$out"
      changed=$((changed + 1))
    fi
  done
done

removed=0
for old in "$out_dir"/*.ptx; do
  b=$(basename "$old")
  if [ -z "${keep[$b]+x}" ]; then rm -f "$old"; removed=$((removed + 1)); fi
done

cd "$root"
rm -rf "$stage"
size=$(du -sh "$out_dir" | cut -f1)
echo "build-corpus: ${#sources[@]} sources, $built PTX files assembled, $changed changed, $removed removed, $failed failed; tests/corpus/ptx is $size"
[ "$failed" -eq 0 ]
