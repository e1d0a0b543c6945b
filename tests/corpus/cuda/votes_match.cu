// PTX features: warp vote and match instructions: vote.sync.ballot.b32, vote.sync.any.pred,
// vote.sync.all.pred, vote.sync.uni via asm, activemask.b32, match.any.sync.b32/.b64,
// match.all.sync with predicate output, redux.sync.add/min/max/and/or/xor (sm_80+),
// popc/brev/bfind on ballot masks, __syncwarp with a partial mask (bar.warp.sync).
extern "C" __global__ void votes(const int* in, unsigned* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[t];
  unsigned ballot = __ballot_sync(0xffffffffu, v > 0);
  int any = __any_sync(0xffffffffu, v == 42);
  int all = __all_sync(0xffffffffu, v >= 0);
  unsigned act = __activemask();
  unsigned uni;
  asm volatile("{\n\t.reg .pred p, q;\n\tsetp.ne.s32 p, %1, 0;\n\t"
               "vote.sync.uni.pred q, p, 0xffffffff;\n\tselp.u32 %0, 1, 0, q;\n\t}"
               : "=r"(uni) : "r"(v));
  unsigned m_any = __match_any_sync(0xffffffffu, v & 7);
  unsigned long long key = (unsigned long long)v << 20;
  unsigned m_any64 = __match_any_sync(0xffffffffu, key);
  int pred;
  unsigned m_all = __match_all_sync(0xffffffffu, v >> 4, &pred);
  unsigned radd = __reduce_add_sync(0xffffffffu, (unsigned)v);
  int rmin = __reduce_min_sync(0xffffffffu, v);
  unsigned rmax = __reduce_max_sync(0xffffffffu, (unsigned)v);
  unsigned rand_ = __reduce_and_sync(0xffffffffu, (unsigned)v);
  unsigned ror = __reduce_or_sync(0xffffffffu, (unsigned)v);
  unsigned rxor = __reduce_xor_sync(0xffffffffu, (unsigned)v);
  out[t * 4 + 0] = ballot ^ act ^ m_any ^ m_any64 ^ m_all;
  out[t * 4 + 1] = __popc(ballot) + any + all + pred + uni;
  out[t * 4 + 2] = radd + rmin + rmax;
  out[t * 4 + 3] = rand_ | ror | rxor | (__brev(ballot) >> (__clz(ballot | 1)));
}

extern "C" __global__ void divergent_votes(const int* in, unsigned* out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  unsigned r = 0;
  if (lane < 16) {
    unsigned mask = __activemask();
    r = __ballot_sync(mask, in[t] & 1);
    __syncwarp(mask);
    r += __reduce_add_sync(0x0000ffffu, (unsigned)in[t]);
  } else {
    r = __match_any_sync(0xffff0000u, in[t]);
    __syncwarp(0xffff0000u);
  }
  __syncwarp();
  out[t] = r;
}
