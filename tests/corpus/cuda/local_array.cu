// PTX features: per-thread local arrays indexed dynamically, which forces a
// .local depot (__local_depot0, %SP/%SPL, cvta.local.u64, ld.local/st.local),
// plus a private struct array, and a small sorting network over local memory.
struct Item { int key; float val; };

extern "C" __global__ void local_dynamic_index(const int* idx, const float* in, float* out, int n) {
  float buf[64];
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid >= n) return;
  for (int k = 0; k < 64; ++k) buf[k] = in[(tid + k) % n];
  int j = idx[tid] & 63;
  buf[j] += 1.0f;
  float s = 0.f;
  for (int k = 0; k < 8; ++k) s += buf[(j + k * 7) & 63];
  out[tid] = s;
}

extern "C" __global__ void local_insertion_sort(const int* keys, float* out, int n) {
  Item items[16];
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid * 16 + 15 >= n) return;
  for (int k = 0; k < 16; ++k) { items[k].key = keys[tid * 16 + k]; items[k].val = (float)k; }
  for (int a = 1; a < 16; ++a) {
    Item x = items[a];
    int b = a - 1;
    while (b >= 0 && items[b].key > x.key) { items[b + 1] = items[b]; --b; }
    items[b + 1] = x;
  }
  for (int k = 0; k < 16; ++k) out[tid * 16 + k] = items[k].val;
}
