// The kernel fatbin_load.cpp loads from a fatbin file (`nvcc -fatbin`), as a driver-API
// program ships its device code: c[i] = a[i] + b[i] for i < n.
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
