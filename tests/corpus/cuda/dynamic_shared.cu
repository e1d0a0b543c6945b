// PTX features: dynamic shared memory (extern __shared__ -> .extern .shared .align 16
// .b8 name[]), carving several typed views out of it, mov.u32 of a shared symbol
// address, ld.shared.v4 / st.shared.v4 (float4, double2), %dynamic_smem_size via asm.
extern __shared__ __align__(16) unsigned char dyn_smem[];

extern "C" __global__ void dyn_shared_views(const float4* in, float4* out, int n, int nfloat) {
  float4* f4 = reinterpret_cast<float4*>(dyn_smem);
  int* ints = reinterpret_cast<int*>(dyn_smem + nfloat * sizeof(float));
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  f4[t] = i < n ? in[i] : make_float4(0, 0, 0, 0);
  ints[t] = t * 3;
  __syncthreads();
  float4 a = f4[(t + 1) % blockDim.x];
  unsigned dsz;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dsz));
  a.w += (float)ints[blockDim.x - 1 - t] + (float)dsz;
  if (i < n) out[i] = a;
}

template <typename T>
__global__ void dyn_shared_reverse(T* data, int n) {
  extern __shared__ __align__(16) unsigned char raw[];
  T* s = reinterpret_cast<T*>(raw);
  int t = threadIdx.x;
  if (t < n) s[t] = data[t];
  __syncthreads();
  if (t < n) data[t] = s[n - 1 - t];
}
template __global__ void dyn_shared_reverse<int>(int*, int);
template __global__ void dyn_shared_reverse<double2>(double2*, int);
