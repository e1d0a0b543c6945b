// PTX features: thread block clusters (sm_90): .explicitcluster and .reqnctapercluster
// X, Y, Z directives (__cluster_dims__), distributed shared memory through
// cg::this_cluster(): mapa.u64 (generic address of a peer CTA's shared variable), generic
// ld/atom through the mapped address, barrier.cluster.arrive(.relaxed)(.aligned) /
// barrier.cluster.wait(.aligned), %cluster_ctarank / %cluster_nctarank / %clusterid.x.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster_neighbor_sum(const int* in, int* out) {
  __shared__ int smem[128];
  cg::cluster_group cluster = cg::this_cluster();
  unsigned rank = cluster.block_rank();
  int t = threadIdx.x;
  smem[t] = in[blockIdx.x * 128 + t];
  cluster.sync();
  int* peer = cluster.map_shared_rank(smem, (rank + 1) % cluster.num_blocks());
  int v = smem[t] + peer[127 - t];
  cluster.sync();
  out[blockIdx.x * 128 + t] = v + (int)cluster.dim_blocks().x;
}

extern "C" __global__ void __cluster_dims__(2, 2, 1) cluster_histogram(const int* keys, int n, int* out) {
  __shared__ int bins[64];
  cg::cluster_group cluster = cg::this_cluster();
  unsigned rank = cluster.block_rank(), nblk = cluster.num_blocks();
  for (int b = threadIdx.x; b < 64; b += blockDim.x) bins[b] = 0;
  cluster.sync();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    int k = keys[i] & 255;
    int* dst = cluster.map_shared_rank(bins, (unsigned)(k / 64) % nblk);
    atomicAdd(dst + (k % 64), 1);
  }
  cluster.sync();
  unsigned flag = __isClusterShared(bins);
  for (int b = threadIdx.x; b < 64; b += blockDim.x)
    atomicAdd(&out[rank * 64 + b], bins[b] + (int)flag);
}

extern "C" __global__ void cluster_runtime_dims(unsigned* out) {
  unsigned r, nr, cx;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(nr));
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(cx));
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
  out[blockIdx.x] = r + nr * 100 + cx * 10000 + __clusterDimIsSpecified();
}
