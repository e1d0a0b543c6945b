# cases: oob uaf clean
# expect-oob: out_of_bounds_write
# expect-uaf: use_after_free
# what: cuda-python's cuda.core: a Program (NVRTC, compiled to a cubin for this GPU) and its
#   kernel launched with cuda.core's launch; memory from CuPy with its pool off. oob: one float
#   past a 1000-float array; uaf: through the pointer of a freed array after an array of the
#   same size was allocated; clean: in bounds.
import sys

import cupy as cp

try:
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
except ImportError:
    from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch

cp.cuda.set_allocator(None)
scenario = sys.argv[1]
n = 1000
dev = Device()
dev.set_current()
s = dev.create_stream()
code = r'''
extern "C" __global__ void fill(float* a, int last) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= last) a[i] = 3.0f;
}'''
arch = "".join(str(x) for x in dev.compute_capability)
k = Program(code, code_type="c++", options=ProgramOptions(arch=f"sm_{arch}")).compile("cubin").get_kernel("fill")
a = cp.zeros(n, dtype=cp.float32)
cfg = LaunchConfig(grid=4, block=256)
target, last = a.data.ptr, n - 1
if scenario == "oob":
    last = n
elif scenario == "uaf":
    b = cp.zeros(n, dtype=cp.float32)
    target = b.data.ptr
    del b
    c = cp.zeros(n, dtype=cp.float32)
launch(s, cfg, k, target, cp.int32(last))
s.sync()
print(f"cuda.core {scenario} done {float(a.sum()):.0f}")
