"""What the cuda.core cases share (not a case): cuda.core's names (a package that moved them
out of `experimental`, or one that has them there), a device made current, and two ways to a
kernel: NVRTC straight to a cubin (`Program.compile("cubin")`), or NVRTC to PTX linked into a
cubin by cuda.core's `Linker` (nvJitLink, or the driver's cuLink* where nvJitLink does not
match the driver). Memory comes from CuPy with its pool off: plain cudaMalloc."""
from _case import need, note, skip

need("cuda.core")
try:
    from cuda.core import Device, LaunchConfig, Linker, LinkerOptions, Program, ProgramOptions, launch
except ImportError:
    try:
        from cuda.core.experimental import Device, LaunchConfig, Linker, LinkerOptions, Program, ProgramOptions, launch
    except ImportError as e:
        skip(f"cuda.core lacks what the case uses: {e}")

cp = need("cupy")
cp.cuda.set_allocator(None)

dev = Device()
dev.set_current()
stream = dev.create_stream()
cc = "".join(str(x) for x in dev.compute_capability)

SOURCE = r'''
extern "C" __global__ void fill(float* a, int last) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= last) a[i] = 3.0f;
}
extern "C" __global__ void take_next(const float* a, float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i + 1];
}'''


def cubin_kernel(name):
    """NVRTC to a cubin for this GPU."""
    prog = Program(SOURCE, code_type="c++", options=ProgramOptions(arch=f"sm_{cc}"))
    return prog.compile("cubin").get_kernel(name)


def linked_kernel(name):
    """NVRTC to PTX, then cuda.core's Linker to a cubin."""
    ptx = Program(SOURCE, code_type="c++", options=ProgramOptions(arch=f"compute_{cc}")).compile("ptx")
    options = LinkerOptions(arch=f"sm_{cc}")
    try:
        linker = Linker(ptx, options=options)
    except TypeError:  # an older signature: options first
        linker = Linker(options, ptx)
    note("linker_backend", getattr(linker, "backend", "?"))
    return linker.link("cubin").get_kernel(name)


def run(kernel, *args):
    launch(stream, LaunchConfig(grid=4, block=256), kernel, *args)
    stream.sync()
