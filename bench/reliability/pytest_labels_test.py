"""The tests `bench/reliability/pytest_labels.sh` runs with `pytest --gpusan`: CuPy arrays
on the stream-ordered allocator (each array an allocation gpusan sees) and a RawKernel
(NVRTC) that writes `n + extra` ints into an array of `n`. `test_overflow` writes 120 past
the end (past CuPy's rounding of the array to 512 bytes, which the async pool allocates) and never synchronizes: its finding must still be named after it (the plugin's mark
of the next test reads what kernels recorded first). The others are clean."""
import cupy as cp

SRC = r"""
extern "C" __global__ void fill(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = i;
}
"""

cp.cuda.set_allocator(cp.cuda.MemoryAsyncPool().malloc)
fill = cp.RawKernel(SRC, "fill")


def launch(n, extra):
    a = cp.zeros(n, dtype=cp.int32)  # ALLOC
    fill(((n + extra + 255) // 256,), (256,), (a, cp.int32(n + extra)))  # a thread per element
    return a


def test_clean_before():
    a = launch(1024, 0)
    assert int(a[1023]) == 1023


def test_overflow():
    launch(1000, 120)  # no synchronization here


def test_clean_after():
    a = launch(1024, 0)
    cp.cuda.Device().synchronize()
    assert int(a.sum()) == 1023 * 1024 // 2
