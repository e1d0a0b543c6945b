#!/usr/bin/env bash
# Seeds the fuzz corpora (fuzz/corpus/parse, fuzz/corpus/lex) from real nvcc PTX.
#
# Sources, in order: tests/corpus/ptx/*.ptx; if that folder has none, the CUDA files in
# tests/corpus/cuda/*.cu compiled with the pinned nvcc (scripts/setup-toolchain.sh) into
# fuzz/corpus/_nvcc/. Every PTX file is added whole (if at most MAX_SEED bytes) and also
# split into small seeds, one per module item (header + one function or variable), so
# the fuzzer starts from many short, valid inputs that cover every construct nvcc
# writes. Idempotent: seeds are named by content hash, re-running adds nothing new.
#
# Usage: fuzz/seed-corpus.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
corpus="$root/fuzz/corpus"
mkdir -p "$corpus/parse" "$corpus/lex" "$corpus/fatbin"
# The fatbin target starts from the fatbin crate's fixtures (executables, libraries,
# objects, compressed and plain fatbins).
for f in "$root"/crates/fatbin/tests/fixtures/*; do
  [ -f "$f" ] && cp -n "$f" "$corpus/fatbin/$(basename "$f")"
done

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
if [ ${#ptx[@]} -eq 0 ]; then
  echo "fuzz: no PTX to seed from; the fuzzer starts from the dictionary alone" >&2
  exit 0
fi

python3 - "$corpus" "${ptx[@]}" <<'EOF'
import hashlib, pathlib, re, sys

MAX_SEED = 32 * 1024
MAX_PIECE = 32 * 1024
corpus = pathlib.Path(sys.argv[1])
item = re.compile(r"^(?:\.(?:visible|weak|extern|common)\s+)*\.(?:entry|func|global|const|shared|tex)\b", re.M)
added = 0

def add(text):
    global added
    data = text.encode()
    name = hashlib.sha1(data).hexdigest()
    for target in ("parse", "lex"):
        p = corpus / target / name
        if not p.exists():
            p.write_bytes(data)
            added += 1

for path in sys.argv[2:]:
    text = pathlib.Path(path).read_text(errors="replace")
    if len(text) <= MAX_SEED:
        add(text)
    starts = [m.start() for m in item.finditer(text)]
    if not starts:
        continue
    header = text[: starts[0]]
    for a, b in zip(starts, starts[1:] + [len(text)]):
        piece = header + text[a:b]
        if len(piece) <= MAX_PIECE:
            add(piece)
print(f"fuzz: {added} new seed files from {len(sys.argv) - 2} PTX files", file=sys.stderr)
EOF
