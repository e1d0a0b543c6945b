#!/usr/bin/env bash
# Seeds the fuzz corpora ($FUZZ_CORPUS/<target>, default fuzz/corpus/<target>) from what
# the repository holds; needs python3 only (no Rust), so bench/fuzz-long.sh runs it on a
# machine with the fuzz binaries and no toolchain.
#
# - parse, lex, count: the PTX of tests/corpus/ptx and tests/corpus/triton (if
#   tests/corpus/ptx has none, tests/corpus/cuda/*.cu compiled with the pinned nvcc into
#   $FUZZ_CORPUS/_nvcc/), each file whole (if at most MAX_SEED bytes) and split into small
#   seeds, one per module item (header + one function or variable); the PTX fixtures of
#   crates/ptx and crates/passes; and long-line seeds: lines past column 65,535, one with a
#   parse error out there (such an error once panicked), which is why parse and lex run
#   with -max_len=262144 (fuzz/targets.sh).
# - check: the same PTX behind a first byte that picks the pass's configuration (bit 0
#   the reaction, bit 1 counting): the check fixtures with each of the four, the rest with
#   one picked by content.
# - rewrite: the same PTX behind a first byte that picks canary_heap (0) or fence (1), both.
# - meta: metadata texts in the cache's format (crates/passes/src/meta.rs) and the PTX
#   seeds with `.loc` lines (the reader of PTX gpusan did not instrument).
# - report: fuzz/seeds/report/ (documents and events files as `gpusan run` merges them).
# - records: error buffers as kernels write them (crates/abi/src/record.rs), with the
#   allocations they are judged against.
# - trace: the trace format's fixtures (crates/trace/tests/fixtures).
# - every target: the inputs that once broke it, saved in
#   crates/*/tests/fixtures/fuzz-regressions/<target>/ (and crates/ptx's, for parse and lex).
# - fatbin: crates/fatbin/tests/fixtures (executables, libraries, objects, compressed and
#   plain fatbins, cubins).
# Idempotent: seeds are named by content hash, re-running adds nothing new.
#
# Usage: fuzz/seed-corpus.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
corpus=${FUZZ_CORPUS:-$root/fuzz/corpus}
mkdir -p "$corpus"

shopt -s nullglob
ptx=("$root"/tests/corpus/ptx/*.ptx)
if [ ${#ptx[@]} -eq 0 ]; then
  cus=("$root"/tests/corpus/cuda/*.cu)
  if [ ${#cus[@]} -gt 0 ]; then
    echo "fuzz: tests/corpus/ptx is empty; compiling ${#cus[@]} CUDA files with the pinned nvcc" >&2
    # shellcheck disable=SC1090
    source <("$root/scripts/setup-toolchain.sh" --env)
    mkdir -p "$corpus/_nvcc"
    for cu in "${cus[@]}"; do
      out="$corpus/_nvcc/$(basename "${cu%.cu}").ptx"
      [ -s "$out" ] && continue
      # Some corpus files need sm_90a (wgmma) or -rdc (calls across files); try in turn.
      nvcc -arch=sm_90 -ptx -O3 -lineinfo "$cu" -o "$out" 2>/dev/null ||
        nvcc -arch=sm_90a -ptx -O3 -lineinfo "$cu" -o "$out" 2>/dev/null ||
        nvcc -arch=sm_90a -rdc=true -ptx -O3 "$cu" -o "$out" 2>/dev/null ||
        { rm -f "$out"; echo "fuzz: nvcc could not compile $cu; skipped" >&2; }
    done
    ptx=("$corpus"/_nvcc/*.ptx)
  fi
fi
ptx+=("$root"/tests/corpus/triton/*.ptx)

python3 - "$root" "$corpus" "${ptx[@]}" <<'EOF'
import hashlib, pathlib, re, struct, sys

MAX_SEED = 32 * 1024
root, corpus = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
item = re.compile(r"^(?:\.(?:visible|weak|extern|common)\s+)*\.(?:entry|func|global|const|shared|tex)\b", re.M)
added = {}

def add(targets, data):
    if isinstance(data, str):
        data = data.encode()
    name = hashlib.sha1(data).hexdigest()
    for target in targets:
        d = corpus / target
        d.mkdir(parents=True, exist_ok=True)
        p = d / name
        if not p.exists():
            p.write_bytes(data)
            added[target] = added.get(target, 0) + 1

def add_ptx(text, configs=None):
    add(("parse", "lex", "count"), text)
    if ".loc" in text:
        add(("meta",), text)
    # The check pass's configuration: the given ones, else one picked by content.
    for c in configs if configs is not None else [hashlib.sha1(text.encode()).digest()[0] & 3]:
        add(("check",), bytes([c]) + text.encode())
    # The smaller passes: canary_heap (0) and fence (1), each on every seed.
    for which in (0, 1):
        add(("rewrite",), bytes([which]) + text.encode())

# Real modules, whole and one item at a time.
for path in sys.argv[3:]:
    text = pathlib.Path(path).read_text(errors="replace")
    if len(text) <= MAX_SEED:
        add_ptx(text)
    starts = [m.start() for m in item.finditer(text)]
    header = text[: starts[0]] if starts else ""
    for a, b in zip(starts, starts[1:] + [len(text)]):
        piece = header + text[a:b]
        if len(piece) <= MAX_SEED:
            add_ptx(piece)

# Hand-written modules of the tests: every construct the passes single out. A pass
# fixture is its input, then `// ---- expected` and the instrumented output: two seeds.
for d in ("crates/ptx/tests/fixtures", "crates/passes/tests/fixtures"):
    for p in sorted((root / d).rglob("*.ptx")):
        text = p.read_text(errors="replace")
        for part in text.split("// ---- expected\n"):
            add_ptx(part, configs=range(4) if "/check/" in str(p) else None)

# Lines past column 65,535: a kernel whose access sits after 70,000 blanks, an
# initializer of 34,000 elements on one line, and the same with an error at its end.
head = ".version 9.0\n.target sm_90\n.address_size 64\n\n"
kernel = (head + ".visible .entry k(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
          + " " * 70000 + "st.global.u32 [%rd1], 0;\n\tret;\n}\n")
init = head + ".visible .global .align 1 .b8 data[34000] = {" + "0, " * 33999 + "0};\n"
add_ptx(kernel, configs=range(4))
add_ptx(init, configs=[0])
add_ptx(init.replace("0};", "0} @;"), configs=[0])

# Metadata as the cache stores it beside an instrumented module.
for meta in (
    "gpusan-meta 1\nend\n",
    "gpusan-meta 1\nfunction _Z6vecAddPfS_S_i\nfunction k\nfile 1 /src/vec.cu\nfile 2 C:\\\\a\\nb\\r\n"
    "line 12 1 3\nline 12 2 9\nline 40 1 4\nend\n",
    "gpusan-meta 1\nfunction k\nline 1 0 0\nline 4294967295 4294967295 4294967295\nend\n",
):
    add(("meta",), meta)

for p in sorted((root / "fuzz/seeds/report").glob("*")):
    add(("report",), p.read_bytes())
for p in sorted((root / "crates/fatbin/tests/fixtures").glob("*")):
    if p.is_file():
        add(("fatbin",), p.read_bytes())

# Error buffers (fuzz::records in crates/runtime/src/fuzz.rs): counts drained and stored,
# allocations (base, size, freed), then 64-byte records (crates/abi/src/record.rs).
def record(address, allocation, kernel, code, size, ptx_line, space, access):
    return struct.pack("<QQIIII3I3III", address, allocation, kernel, code, size, ptx_line, 1, 0, 0, 32, 0, 0, space, access)
A, B = 0x7F0000000000, 0x7F0000100000
allocs = struct.pack("<B", 2) + struct.pack("<QIB", A, 1023, 0) + struct.pack("<QIB", B, 255, 1)
recs = [
    record(A + 1028, 1, (1 << 16) | 0, 1, 4, 12, 0, 1),   # out of bounds write, past the end
    record(B + 8, 2, (1 << 16) | 1, 2, 8, 25, 3, 0),      # use after free, generic read
    record(A - 4, 0, 0, 1, 4, 0, 0, 2),                   # before an allocation, atomic
    record(0x700000100040, (1 << 63) | 0x700000100000, 2, 1, 4, 31, 0, 1),  # device-heap block
    record(0x700000100000, (1 << 63) | 0x700000100000, 2, 7, 0, 0, 0, 0),   # double free in a kernel
    record(0x10, 0, 3, 3, 4, 0, 2, 0),                    # use after scope
    record(0x20, 0, 3, 4, 4, 0, 1, 1),                    # shared out of bounds
    record(0x30, 0, 3, 6, 8, 0, 0, 0),                    # misaligned
    record(A + 2000, 9, 3, 99, 4, 0, 0, 0),               # an unknown code, an unknown allocation
]
add(("records",), struct.pack("<II", 0, len(recs)) + allocs + b"".join(recs))
add(("records",), struct.pack("<II", 2, 5) + allocs + b"".join(recs))
add(("records",), struct.pack("<II", 4090, 4100) + struct.pack("<B", 0) + b"".join(recs))

# Traces (docs/trace-format.md): the format's fixtures.
for p in sorted((root / "crates/trace/tests/fixtures").glob("*.gstrace")):
    add(("trace",), p.read_bytes())

# Inputs that once broke a target, saved beside the test that replays them.
for d in sorted(root.glob("crates/*/tests/fixtures/fuzz-regressions/*")):
    if d.is_dir():
        for p in sorted(d.iterdir()):
            add((d.name,), p.read_bytes())

print("fuzz: new seeds: " + (", ".join(f"{t} {n}" for t, n in sorted(added.items())) or "none"), file=sys.stderr)
EOF
