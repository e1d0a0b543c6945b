"""Triton's host-side tensor descriptors (TMA on Hopper), for bench/reliability/tensormap_bounds.sh.
Triton's launcher makes each descriptor with cuTensorMapEncodeTiled, got through
dlopen("libcuda.so.1") + dlsym, at every launch. x is 64 × 16 float32 of its own cudaMalloc
(run with PYTORCH_NO_CUDA_MEMORY_CACHING=1: under the caching allocator x would be a piece
of a 2 MiB segment, and only the segment's bounds are known).

  tensormap_bounds_triton.py clean   the descriptor of x as it is (TensorDescriptor.from_tensor),
                                     4 boxes of 16 rows copied out: sum 1024; then a bf16
                                     matmul (cuBLAS may make tensor maps of its own)
  tensormap_bounds_triton.py over    a descriptor declaring 65 rows on x's 64; 5 boxes: the
                                     fifth reads row 64, 64 bytes past x (TMA clips rows 65+)

Prints one JSON line: {"scenario", "sum", "rows"} or {"skip": reason} (exit 77)."""
import json
import sys

scenario = sys.argv[1] if len(sys.argv) > 1 else "clean"


def skip(why):
    print(json.dumps({"scenario": scenario, "skip": why}), flush=True)
    sys.exit(77)


try:
    import torch
    import triton
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor
except Exception as e:  # noqa: BLE001 (any import failure is a skip with its reason)
    skip(f"{type(e).__name__}: {e}")
if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
    skip("no sm_90 GPU")


@triton.jit
def copy_boxes(desc, out, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    tile = desc.load([pid * BLOCK_M, 0])
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    tl.store(out + rows[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :], tile)


x = torch.ones(64, 16, device="cuda")
rows = 65 if scenario == "over" else 64
if scenario == "over":
    desc = TensorDescriptor(x, shape=[rows, 16], strides=[16, 1], block_shape=[16, 16])
else:
    desc = TensorDescriptor.from_tensor(x, [16, 16])
boxes = (rows + 15) // 16
out = torch.zeros(boxes * 16, 16, device="cuda")
copy_boxes[(boxes,)](desc, out, BLOCK_M=16, BLOCK_N=16)
torch.cuda.synchronize()
result = {"scenario": scenario, "rows": rows, "sum": float(out.sum().item())}
if scenario == "clean":
    torch.manual_seed(0)
    a = torch.randn(512, 512, device="cuda", dtype=torch.bfloat16)
    result["matmul_sum"] = float((a @ a).float().sum().item())
print(json.dumps(result), flush=True)
