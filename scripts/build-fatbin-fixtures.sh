#!/usr/bin/env bash
# Rebuilds the committed test fixtures of crates/fatbin (crates/fatbin/tests/fixtures/) from the
# CUDA sources in crates/fatbin/tests/fixtures/src/ with the pinned toolchain. The tests read
# the committed files and compare them with what the pinned cuobjdump says about them, so
# rerun this only when the sources or the toolchain change, and commit the result.
#
#   exe_sm90      nvcc -arch=sm_90: sm_90 SASS + compute_90 PTX (zstd, nvcc's default)
#   exe_multi     sm_80 SASS, sm_90 SASS, compute_90 PTX
#   exe_zstd      every image compressed (-Xfatbin=-compress-all), --compress-mode=size (zstd)
#   lib.so        a shared library (templates, extern "C", a struct parameter)
#   rdc.o         -rdc=true -c: device code in __nv_relfatbin, relocated wrapper
#   sm90.fatbin   nvcc -fatbin, as exe_sm90
#   multi.fatbin  nvcc -fatbin, as exe_multi
#   lz4.fatbin    every image compressed with --compress-mode=speed (LZ4)
#   plain.fatbin  --no-compress: nothing compressed, PTX stored as text
#   vars.cubin    nvcc -cubin of vars.cu: __device__/__constant__ variables (module variables)
#   vars-rdc.cubin  the same with -rdc=true (variables with global binding)
#   ident.fatbin  made by `fatbinary` with --ident, --cmdline and -g: identifier, ptxas
#                 options and the debug flag in the entry headers
#
# Executables link cudart dynamically (the wheel ships only libcudart.so.13, so a link named
# libcudart.so is made in a scratch folder) and are stripped: a few tens of KB each instead of
# the ~1 MB a static cudart adds. Nothing here runs on a GPU.
#
# Deterministic: fixed -frandom-seed, relative paths, a fixed scratch folder; rdc.o loses its
# local symbols (objcopy --strip-unneeded), which otherwise name nvcc's temporary file after
# its process id. Needs g++, strip and objcopy on PATH.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source <("$root/scripts/setup-toolchain.sh" --env)
out="$root/crates/fatbin/tests/fixtures"
src="$out/src"
# A fixed folder: nvcc hashes the source's full path into module ids and symbol names.
scratch=/tmp/gpusan-fatbin-fixtures
rm -rf "$scratch"
mkdir -p "$scratch"
trap 'rm -rf "$scratch"' EXIT

ln -s "$GPUSAN_CUDA/lib/libcudart.so.13" "$scratch/libcudart.so"
cp "$src"/*.cu "$scratch/"
cd "$scratch"

nvcc_() { nvcc -frandom-seed=gpusan "$@"; }
link=(-cudart=shared -L"$scratch" -L"$GPUSAN_CUDA/lib")
multi=(-gencode arch=compute_80,code=sm_80 -gencode 'arch=compute_90,code=[sm_90,compute_90]')

nvcc_ -arch=sm_90 "${link[@]}" -o exe_sm90 kernels.cu
nvcc_ "${multi[@]}" "${link[@]}" -o exe_multi kernels.cu
nvcc_ -arch=sm_90 --compress-mode=size -Xfatbin=-compress-all "${link[@]}" -o exe_zstd kernels.cu
nvcc_ -arch=sm_90 -shared -Xcompiler -fPIC "${link[@]}" -o lib.so lib.cu
strip exe_sm90 exe_multi exe_zstd lib.so

nvcc_ -arch=sm_90 -rdc=true -c -o rdc.o rdc.cu
objcopy --strip-unneeded rdc.o

nvcc_ -arch=sm_90 -fatbin -o sm90.fatbin kernels.cu
nvcc_ "${multi[@]}" -fatbin -o multi.fatbin kernels.cu
nvcc_ -arch=sm_90 --compress-mode=speed -Xfatbin=-compress-all -fatbin -o lz4.fatbin kernels.cu
nvcc_ -arch=sm_90 --no-compress -fatbin -o plain.fatbin kernels.cu

nvcc_ -arch=sm_90 -ptx -o kernels.ptx kernels.cu
ptxas -arch=sm_90 -o kernels.cubin kernels.ptx
fatbinary --64 -g --create=ident.fatbin --ident=kernels.cu --cmdline="-O3 -v" \
  --image3=kind=ptx,sm=90,file=kernels.ptx --image3=kind=elf,sm=90,file=kernels.cubin

nvcc_ -arch=sm_90 -cubin -o vars.cubin vars.cu
nvcc_ -arch=sm_90 -rdc=true -cubin -o vars-rdc.cubin vars.cu

fixtures=(exe_sm90 exe_multi exe_zstd lib.so rdc.o sm90.fatbin multi.fatbin lz4.fatbin plain.fatbin ident.fatbin vars.cubin
  vars-rdc.cubin)
cp "${fixtures[@]}" "$out/"
cd "$out"
ls -l "${fixtures[@]}"
du -ch "${fixtures[@]}" | tail -1
