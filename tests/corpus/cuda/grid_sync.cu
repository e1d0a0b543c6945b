// PTX features: grid-wide synchronization via cg::this_grid().sync(): the grid
// workspace pointer read from %envreg1/%envreg2, an atom.add.release.gpu arrive plus an
// ld.acquire.gpu spin loop (header inline asm), bar.sync around it;
// grid.thread_rank()/size() 64-bit arithmetic, two-phase reduction in one kernel.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void grid_two_phase(const float* in, float* partial, float* result, int n) {
  cg::grid_group grid = cg::this_grid();
  cg::thread_block block = cg::this_thread_block();
  __shared__ float s[256];
  float acc = 0.f;
  for (unsigned long long i = grid.thread_rank(); i < (unsigned long long)n; i += grid.size())
    acc += in[i];
  s[block.thread_rank()] = acc;
  block.sync();
  for (int st = 128; st > 0; st >>= 1) {
    if (block.thread_rank() < st) s[block.thread_rank()] += s[block.thread_rank() + st];
    block.sync();
  }
  if (block.thread_rank() == 0) partial[blockIdx.x] = s[0];
  grid.sync();
  if (grid.thread_rank() == 0) {
    float tot = 0.f;
    for (unsigned b = 0; b < gridDim.x; ++b) tot += partial[b];
    *result = tot;
  }
  grid.sync();
  if (grid.thread_rank() < (unsigned long long)n) partial[0] = *result;
}
