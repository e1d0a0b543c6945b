// PTX features: matrix transpose through a padded shared tile (TILE x TILE+1 to avoid
// bank conflicts), 2-D blocks with a loop over BLOCK_ROWS, coalesced reads/writes,
// a naive variant, an in-place-square variant with a diagonal-block special case, and
// a generic element type template (double / char) with mangled names.
#define TILE 32
#define BLOCK_ROWS 8

extern "C" __global__ void transpose_padded(const float* __restrict__ in, float* __restrict__ out, int w, int h) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += BLOCK_ROWS)
    if (x < w && y + j < h) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += BLOCK_ROWS)
    if (x < h && y + j < w) out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}

extern "C" __global__ void transpose_naive(const float* in, float* out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

template <typename T>
__global__ void transpose_inplace_square(T* m, int n) {
  __shared__ T a[TILE][TILE + 1], b[TILE][TILE + 1];
  int bx = blockIdx.x, by = blockIdx.y;
  if (bx > by) return;  // each pair handled once
  int tx = threadIdx.x;
  for (int ty = threadIdx.y; ty < TILE; ty += BLOCK_ROWS) {
    int r1 = by * TILE + ty, c1 = bx * TILE + tx, r2 = bx * TILE + ty, c2 = by * TILE + tx;
    if (r1 < n && c1 < n) a[ty][tx] = m[(size_t)r1 * n + c1];
    if (bx != by && r2 < n && c2 < n) b[ty][tx] = m[(size_t)r2 * n + c2];
  }
  __syncthreads();
  for (int ty = threadIdx.y; ty < TILE; ty += BLOCK_ROWS) {
    int r1 = by * TILE + ty, c1 = bx * TILE + tx, r2 = bx * TILE + ty, c2 = by * TILE + tx;
    if (bx == by) {
      if (r1 < n && c1 < n) m[(size_t)r1 * n + c1] = a[tx][ty];
    } else {
      if (r2 < n && c2 < n) m[(size_t)r2 * n + c2] = a[tx][ty];
      if (r1 < n && c1 < n) m[(size_t)r1 * n + c1] = b[tx][ty];
    }
  }
}
template __global__ void transpose_inplace_square<double>(double*, int);
template __global__ void transpose_inplace_square<signed char>(signed char*, int);
