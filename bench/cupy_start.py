"""A CuPy program with 50 distinct kernels, each made ready and launched once: what a door
adds to a program's start (bench/cupy-start.sh times it).

    python3 bench/cupy_start.py              50 RawKernels: NVRTC to a cubin (or CuPy's cache)
    python3 bench/cupy_start.py --ptx DIR    50 RawModules loaded from DIR/k<i>.ptx (nvcc -ptx):
                                             the PTX-at-load route, for comparison
    python3 bench/cupy_start.py --source I   prints kernel I's source (for nvcc)
"""
import sys

N = 50


def source(i):
    return (r'extern "C" __global__ void k%d(float* a, int n) { int j = blockIdx.x * blockDim.x + threadIdx.x; '
            r'if (j < n) a[j] += %d.0f * a[(j + %d) %% n]; }' % (i, i, i))


if len(sys.argv) == 3 and sys.argv[1] == "--source":
    print(source(int(sys.argv[2])))
    sys.exit(0)

import cupy as cp  # noqa: E402

cp.cuda.set_allocator(None)
a = cp.zeros(4096, dtype=cp.float32)
ptx_dir = sys.argv[2] if len(sys.argv) == 3 and sys.argv[1] == "--ptx" else None
for i in range(N):
    if ptx_dir:
        k = cp.RawModule(path=f"{ptx_dir}/k{i}.ptx").get_function(f"k{i}")
    else:
        k = cp.RawKernel(source(i), f"k{i}")
    k((16,), (256,), (a, cp.int32(4096)))
cp.cuda.runtime.deviceSynchronize()
print("cupy-start done", float(a.sum()))
