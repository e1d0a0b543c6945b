// PTX features: cooperative groups lowering: thread_block sync (barrier.sync),
// tiled_partition<32>/<16>/<4> shuffles (shfl.sync.* with computed masks), cg::reduce
// (redux.sync.add/max.s32 for int, shuffles for float), coalesced_threads() (activemask,
// popc, brev/bfind), labeled_partition (match.any.sync), bar.warp.sync, thread_rank math.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

extern "C" __global__ void cg_tiles(const int* in, int* out, float* fout) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  cg::thread_block_tile<16> half = cg::tiled_partition<16>(warp);
  cg::thread_block_tile<4> quad = cg::tiled_partition<4>(block);
  int idx = blockIdx.x * block.size() + block.thread_rank();
  int v = in[idx];
  int wsum = cg::reduce(warp, v, cg::plus<int>());
  int hmax = cg::reduce(half, v, cg::greater<int>());
  float qsum = cg::reduce(quad, (float)v, cg::plus<float>());
  int neighbor = quad.shfl_down(v, 1);
  int any = warp.any(v > 10);
  unsigned bal = warp.ballot(v & 1);
  block.sync();
  out[idx] = wsum + hmax + neighbor + any + (int)bal + (int)quad.meta_group_rank();
  fout[idx] = qsum;
}

extern "C" __global__ void cg_coalesced(const int* in, int* out) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[idx];
  if (v & 1) {
    cg::coalesced_group active = cg::coalesced_threads();
    int rank = active.thread_rank();
    int leader_val = active.shfl(v, 0);
    int cnt = active.size();
    cg::coalesced_group same = cg::labeled_partition(active, v & 6);
    out[idx] = rank * 1000 + leader_val + cnt + (int)same.size();
    active.sync();
  } else {
    out[idx] = -1;
  }
}
