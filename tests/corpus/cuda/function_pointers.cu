// PTX features: indirect calls through function pointers: `call (retval0), %rd, (param0),
// prototype_N;` with a `prototype_N : .callprototype (.param .b32 _) _ (.param .b32 _);`
// declaration; __device__ tables of function pointers initialised with .func symbols
// (.global .align 8 .u64 unary_table[4] = {_Z8f_squaref, ...}); virtual dispatch on
// device-constructed objects (vtables as .global arrays, calls through loaded pointers).
typedef float (*unary_fn)(float);
typedef int (*binop_fn)(int, int);

__device__ float f_square(float x) { return x * x; }
__device__ float f_negate(float x) { return -x; }
__device__ float f_half(float x) { return 0.5f * x; }
__device__ float f_sqrt(float x) { return sqrtf(fabsf(x)); }
__device__ int op_add(int a, int b) { return a + b; }
__device__ int op_mul(int a, int b) { return a * b; }

__device__ unary_fn unary_table[4] = {f_square, f_negate, f_half, f_sqrt};
__device__ binop_fn binop_table[2] = {op_add, op_mul};

extern "C" __global__ void apply_table(const float* in, const int* sel, float* out, int* iout, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unary_fn f = unary_table[sel[i] & 3];
  binop_fn g = binop_table[sel[i] >> 2 & 1];
  out[i] = f(in[i]);
  iout[i] = g(sel[i], i);
}

struct Shape {
  __device__ virtual float area() const = 0;
  __device__ virtual int sides() const { return 0; }
  __device__ virtual ~Shape() {}
};
struct Square : Shape {
  float s;
  __device__ explicit Square(float s_) : s(s_) {}
  __device__ float area() const override { return s * s; }
  __device__ int sides() const override { return 4; }
};
struct Circle : Shape {
  float r;
  __device__ explicit Circle(float r_) : r(r_) {}
  __device__ float area() const override { return 3.14159265f * r * r; }
};

extern "C" __global__ void virtual_dispatch(const float* sizes, float* areas, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Square sq(sizes[i]);
  Circle ci(sizes[i]);
  Shape* volatile pick = (i & 1) ? static_cast<Shape*>(&sq) : static_cast<Shape*>(&ci);
  Shape* s = pick;
  areas[i] = s->area() + (float)s->sides();
}
