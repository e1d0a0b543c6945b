"""A clean CuPy program for bench/reliability/canary_programs.sh (issue 17): arrays of odd
sizes through CuPy's memory pool (freed and handed out again), a RawKernel writing every
element to the last, cuBLAS, sort, FFT, reductions. Prints integer results and OK."""
import cupy as cp

total = 0
for n in (1, 3, 17, 1000, 1001, 4099, 65537):
    a = cp.arange(n, dtype=cp.int64)
    b = a * 2 + 1
    total += int(b.sum().get())
    del a, b
k = cp.RawKernel(r'''
extern "C" __global__ void fill(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = i % 11;
}''', "fill")
for n in (1000, 1024, 4097):
    x = cp.empty(n, cp.int32)
    k(((n + 255) // 256,), (256,), (x, cp.int32(n)))
    total += int(x.sum().get())
m = cp.ones((257, 129), cp.float32) @ cp.ones((129, 63), cp.float32)
total += int(m.sum().get())
s = cp.sort(cp.arange(10001)[::-1])
total += int(s[-1].get()) + int(s[0].get())
f = cp.fft.fft(cp.ones(1024, cp.complex64))
total += int(round(float(f.real[0].get())))
for i in range(300):
    t = cp.zeros(97 * i + 1, cp.uint8)
    t += 1
    total += int(t.sum().get())
cp.cuda.Device().synchronize()
print(f"total={total}")
print("OK")
