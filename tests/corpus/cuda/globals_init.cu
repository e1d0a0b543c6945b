// PTX features: module-scope variables with initializers: .global .b8 arrays with
// byte-list initializers, .global .u64 pointers initialised with generic(sym)+offset and
// {generic(a), generic(a)+8} lists, a .global pointer to a string constant ($str), a
// static (internal) .global, __managed__ variables (.global .attribute(.managed)), a
// struct initialiser emitted as a .u64 list mixing integers and generic($str$1), and a
// .const (__constant__) table whose address is stored in a global.
struct Config { int width; int height; float scale; const char* name; };

__device__ int lookup[8] = {1, 1, 2, 3, 5, 8, 13, 21};
__device__ float weights[4] = {0.1f, 0.2f, 0.3f, 0.4f};
__device__ int* lookup_mid = &lookup[4];
__device__ float* weight_ptrs[2] = {&weights[0], &weights[2]};
__device__ const char* greeting = "hello, corpus";
__device__ Config config = {640, 480, 1.5f, "default"};
static __device__ unsigned long long internal_counter = 0xdeadbeefcafef00dull;
__device__ double dtable[3] = {1.0, -2.5, 3.141592653589793};
__device__ short packed[5] = {-1, 2, -3, 4, -5};
__managed__ int managed_total = 7;
__managed__ float managed_vec[16];
__constant__ int const_table[4] = {10, 20, 30, 40};
__device__ const int* const_ptr = const_table;

extern "C" __global__ void read_globals(int* out, float* fout) {
  int t = threadIdx.x;
  out[t] = lookup[t & 7] + lookup_mid[t & 3] + config.width * (t & 1) + const_ptr[t & 3] + packed[t % 5];
  fout[t] = *weight_ptrs[t & 1] * config.scale + (float)dtable[t % 3] + managed_vec[t & 15];
  if (t == 0) {
    atomicAdd(&managed_total, 1);
    internal_counter += greeting[0] + config.name[0];
    out[64] = (int)internal_counter;
  }
}
