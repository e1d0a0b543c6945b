// PTX features: 128-bit atomics on sm_90 (atom.cas.b128 / atom.exch.b128 with
// .b128 register operands built via mov.b128 {lo,hi}), with default, block and
// system scope; a 16-byte aligned struct passed through generic pointers.
struct __align__(16) Slot { unsigned long long tag; unsigned long long value; };

extern "C" __global__ void atomics_128(Slot* slots, Slot* out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  Slot expected = {0ull, 0ull};
  Slot desired = {(unsigned long long)t, (unsigned long long)t * 7};
  Slot old = atomicCAS(&slots[t % 4], expected, desired);
  Slot prev = atomicExch(&slots[4], desired);
  Slot blk = atomicCAS_block(&slots[5], old, prev);
  Slot sys = atomicExch_system(&slots[6], blk);
  out[t] = sys;
}
