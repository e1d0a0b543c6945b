// PTX features: reads of special registers: %tid/%ntid/%ctaid/%nctaid (.x/.y/.z),
// %laneid, %warpid, %nwarpid, %smid, %nsmid, %gridid (64-bit), %lanemask_eq/lt/le/gt/ge,
// %total_smem_size; 3-D thread/block indexing arithmetic.
extern "C" __global__ void read_sregs(unsigned* out) {
  unsigned lane, warp, nwarp, sm, nsm, lt, le, gt, ge, eq, tsm;
  unsigned long long grid;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  asm volatile("mov.u32 %0, %%warpid;" : "=r"(warp));
  asm volatile("mov.u32 %0, %%nwarpid;" : "=r"(nwarp));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  asm volatile("mov.u32 %0, %%nsmid;" : "=r"(nsm));
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
  asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
  asm volatile("mov.u32 %0, %%lanemask_le;" : "=r"(le));
  asm volatile("mov.u32 %0, %%lanemask_gt;" : "=r"(gt));
  asm volatile("mov.u32 %0, %%lanemask_ge;" : "=r"(ge));
  asm volatile("mov.u32 %0, %%lanemask_eq;" : "=r"(eq));
  asm volatile("mov.u32 %0, %%total_smem_size;" : "=r"(tsm));
  unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned g = bid * blockDim.x * blockDim.y * blockDim.z + tid;
  out[g * 4 + 0] = lane | (warp << 5) | (nwarp << 16);
  out[g * 4 + 1] = sm | (nsm << 16);
  out[g * 4 + 2] = (lt ^ le ^ gt ^ ge ^ eq) + (unsigned)grid;
  out[g * 4 + 3] = tsm;
}
