// PTX features: recursive .func calls (call.uni to itself: fib, quicksort, tree walk),
// mutual recursion (NVVM may turn it into a loop), mul.hi-based division by 2, and in
// the -G variant a __local_depot frame with %SP/%SPL per call.
__device__ __noinline__ unsigned long long fib(int n) {
  return n < 2 ? (unsigned long long)n : fib(n - 1) + fib(n - 2);
}

__device__ bool is_odd(int n);
__device__ __noinline__ bool is_even(int n) { return n == 0 ? true : is_odd(n - 1); }
__device__ __noinline__ bool is_odd(int n) { return n == 0 ? false : is_even(n - 1); }

__device__ __noinline__ int tree_sum(const int* nodes, int idx, int n, int depth) {
  int path[4];  // local array whose address escapes keeps a frame per call
  if (idx >= n) return 0;
  path[depth & 3] = nodes[idx];
  return path[depth & 3] + tree_sum(nodes, 2 * idx + 1, n, depth + 1) +
         tree_sum(nodes, 2 * idx + 2, n, depth + 1);
}

__device__ __noinline__ void quicksort(int* a, int lo, int hi) {
  if (lo >= hi) return;
  int p = a[(lo + hi) / 2], i = lo, j = hi;
  while (i <= j) {
    while (a[i] < p) ++i;
    while (a[j] > p) --j;
    if (i <= j) { int tmp = a[i]; a[i] = a[j]; a[j] = tmp; ++i; --j; }
  }
  quicksort(a, lo, j);
  quicksort(a, i, hi);
}

extern "C" __global__ void recursive_kernels(const int* nodes, int n, int* data, int len,
                                             unsigned long long* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t * 3] = fib(t % 20);
  out[t * 3 + 1] = is_even(t % 50);
  out[t * 3 + 2] = tree_sum(nodes, 0, n, 0);
  if (t == 0) quicksort(data, 0, len - 1);
}
