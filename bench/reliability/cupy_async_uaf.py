"""CuPy on the stream-ordered allocator (cupy.cuda.MemoryAsyncPool: cudaMallocAsync and
cudaFreeAsync) with a RawKernel (NVRTC): an array is freed, one of the same size allocated
(natively the pool hands the same block out again), and the kernel reads through the freed
array's pointer (`bug`) or the new array's (`clean`). Prints one JSON line last: whether the
address was reused and what the kernel read."""
import json
import sys

import cupy as cp

SRC = r"""
extern "C" __global__ void peek(const int* p, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = p[i];
}
"""


def main():
    which = sys.argv[1]
    cp.cuda.set_allocator(cp.cuda.MemoryAsyncPool().malloc)
    peek = cp.RawKernel(SRC, "peek")
    n = 1024
    a = cp.arange(n, dtype=cp.int32)
    stale = a.data.ptr
    del a  # cudaFreeAsync on the current stream
    b = cp.full(n, 7, dtype=cp.int32)
    out = cp.zeros(n, dtype=cp.int32)
    src = stale if which == "bug" else b.data.ptr
    peek((n // 256,), (256,), (cp.uint64(src), out, cp.int32(n)))
    cp.cuda.get_current_stream().synchronize()
    got = out[:4].get().tolist()
    print(json.dumps({"scenario": which, "reused": b.data.ptr == stale, "read": got}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
