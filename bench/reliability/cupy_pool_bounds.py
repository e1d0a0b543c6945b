"""Per-array bounds inside CuPy's memory pool (issue 15). `python3 cupy_pool_bounds.py
bugs|clean`: every scenario of its kind in one process, one JSON line last. Each RawKernel
has a name of its own, so a report's findings say which scenario they came from.

- `gpusan_cupy_slack`: writes past a 1,000-float array into its block's rounding (4,000
  bytes asked, 4,096 handed out: inside the driver allocation the pool made);
- `gpusan_cupy_neighbour`: two 2,000-float arrays cut from one freed 1 MiB chunk (one driver
  allocation), 4,000 floats written from the first: into the second;
- `gpusan_cupy_thread`: the slack write on an array a thread started after CuPy's import
  allocated (CuPy's memory hooks are per thread).
clean: the same kernels within each array.
"""

import json
import sys
import threading

import cupy as cp

SRC = r"""
extern "C" __global__ void gpusan_cupy_slack(float* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = 1.0f;
}
extern "C" __global__ void gpusan_cupy_neighbour(float* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = 7.0f;
}
extern "C" __global__ void gpusan_cupy_thread(float* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = 3.0f;
}
"""


def launch(kernel, arr, n):
    kernel(((n + 255) // 256,), (256,), (arr, cp.int32(n)))


def main():
    bug = sys.argv[1] == "bugs"
    mod = cp.RawModule(code=SRC)
    slack, neighbour, thread_k = (mod.get_function(n) for n in
                                  ("gpusan_cupy_slack", "gpusan_cupy_neighbour", "gpusan_cupy_thread"))
    facts = {"kind": sys.argv[1], "cupy": cp.__version__}

    a = cp.zeros(1000, dtype=cp.float32)
    launch(slack, a, 1024 if bug else 1000)

    big = cp.zeros(1 << 18, dtype=cp.float32)  # 1 MiB, freed: the next two are cut from it
    del big
    x = cp.zeros(2000, dtype=cp.float32)
    y = cp.zeros(2000, dtype=cp.float32)
    facts["y_after_x_bytes"] = int(y.data.ptr - x.data.ptr)
    launch(neighbour, x, 4000 if bug else 2000)

    made = {}
    t = threading.Thread(target=lambda: made.setdefault("t", cp.zeros(1000, dtype=cp.float32)))
    t.start()
    t.join()
    launch(thread_k, made["t"], 1024 if bug else 1000)
    cp.cuda.runtime.deviceSynchronize()
    facts.update({"a_sum": float(a.sum()), "x_sum": float(x.sum()), "neighbour_sum": float(y.sum()),
                  "thread_sum": float(made["t"].sum())})
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
