// PTX features: long branchy control flow: nested loops with early exits, while with
// break/continue, goto into a cleanup label, do/while, a loop with a data-dependent
// trip count (bra.uni back-edges, @%p bra), divergent if/else ladders, ternaries that
// become selp, and a "state machine" loop.
extern "C" __global__ void nested_search(const int* grid, int w, int h, int target, int* found) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int rows = h / (gridDim.x * blockDim.x) + 1;
  for (int r = t * rows; r < (t + 1) * rows && r < h; ++r) {
    for (int c = 0; c < w; ++c) {
      int v = grid[r * w + c];
      if (v < 0) continue;
      if (v == target) { found[0] = r; found[1] = c; goto done; }
      for (int k = 0; k < (v & 3); ++k) {
        if (grid[(r * w + c + k) % (w * h)] == -target) goto done;
      }
    }
  }
  return;
done:
  atomicAdd(&found[2], 1);
}

extern "C" __global__ void collatz_steps(const unsigned* seeds, unsigned* steps, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned long long x = seeds[i];
  unsigned s = 0;
  while (true) {
    if (x == 1) break;
    x = (x & 1) ? 3 * x + 1 : x >> 1;
    if (++s > 10000) { s = 0xffffffffu; break; }
  }
  steps[i] = s;
}

extern "C" __global__ void state_machine(const char* text, int len, int* counts) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int start = t * 64, end = min(start + 64, len);
  int state = 0, words = 0, digits = 0, other = 0;
  int p = start;
  do {
    if (p >= end) break;
    char c = text[p];
    switch (state) {
      case 0:
        if (c >= 'a' && c <= 'z') { state = 1; ++words; }
        else if (c >= '0' && c <= '9') { state = 2; ++digits; }
        else ++other;
        break;
      case 1:
        if (!(c >= 'a' && c <= 'z')) state = 0;
        break;
      default:
        if (!(c >= '0' && c <= '9')) state = c == '.' ? 2 : 0;
        break;
    }
    ++p;
  } while (true);
  atomicAdd(&counts[0], words);
  atomicAdd(&counts[1], digits);
  atomicAdd(&counts[2], other);
}
