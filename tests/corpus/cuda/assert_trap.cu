// PTX features: assert() -> call.uni to `.extern .func __assertfail` with string args
// (file, line, function name as .global .b8 arrays: $str, $str$1, __unnamed_1),
// __trap() -> trap;, __brkpt() -> brkpt;, __prof_trigger -> pmevent 3;.
#include <cassert>

extern "C" __global__ void checked_copy(const int* in, int* out, int n, int limit) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  assert(n <= limit);
  if (i >= n) return;
  int v = in[i];
  assert(v >= 0 && "negative input");
  if (v > 1000000) __trap();
  out[i] = v;
}

extern "C" __global__ void debug_hooks(int* flags) {
  int t = threadIdx.x;
  if (flags[t] == 0xbad) __brkpt();
  if (flags[t] == 0xdead) {
    __prof_trigger(3);
    __trap();
  }
  flags[t] += 1;
}
