#!/usr/bin/env python3
"""Writes the benchmark's CUDA source: big.cu.in with explicit template instantiations.

Usage: gen_big.py OUT.cu [--limit N]

The instantiation list is deterministic (same file every run). --limit keeps only the
first N instantiations, for quick trials.
"""
import argparse
import itertools
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
TYPES = ["float", "double", "int", "unsigned", "long long"]
# atomicAdd has no signed 64-bit overload.
RED_TYPES = ["float", "double", "int", "unsigned", "unsigned long long"]


def instantiations():
    out = []
    # Tiled GEMM: (BM, BN, BK, TM, TN); threads = (BM/TM)*(BN/TN) must be 32..1024.
    shapes = []
    for bm, bn in [(32, 32), (64, 32), (32, 64), (64, 64), (128, 64), (64, 128), (128, 128)]:
        for bk in (4, 8, 16, 32):
            for tm, tn in [(2, 2), (4, 2), (2, 4), (4, 4), (8, 4), (4, 8), (8, 8)]:
                threads = (bm // tm) * (bn // tn)
                if 32 <= threads <= 1024 and bm % tm == 0 and bn % tn == 0:
                    shapes.append((bm, bn, bk, tm, tn))
    for t, (bm, bn, bk, tm, tn), bt in itertools.product(TYPES, shapes, ("false", "true")):
        out.append(
            f"template __global__ void gemm_tiled<{t}, {bm}, {bn}, {bk}, {tm}, {tn}, {bt}>"
            f"(int, int, int, {t}, const {t}*, const {t}*, {t}, {t}*);"
        )
    # Stencils: radius 1..6 over three block shapes.
    for t, r, (bx, by) in itertools.product(TYPES, range(1, 9), [(32, 8), (16, 16), (32, 4)]):
        out.append(
            f"template __global__ void stencil2d<{t}, {r}, {bx}, {by}>"
            f"(int, int, const {t}*, {t}*, const {t}*);"
        )
    # Reductions.
    for t, block, items in itertools.product(RED_TYPES, (64, 128, 256, 512, 1024), (1, 2, 4, 8, 16)):
        out.append(f"template __global__ void reduce_sum<{t}, {block}, {items}>(const {t}*, {t}*, int64_t);")
    # Transposes.
    for t, (tile, rows) in itertools.product(TYPES, [(16, 4), (16, 8), (32, 4), (32, 8), (32, 16), (64, 8)]):
        out.append(f"template __global__ void transpose<{t}, {tile}, {rows}>(int, int, const {t}*, {t}*);")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    inst = instantiations()
    if args.limit is not None:
        inst = inst[: args.limit]
    text = (HERE / "big.cu.in").read_text()
    body = "namespace bench {\n" + "\n".join(inst) + "\n}  // namespace bench\n"
    text = text.replace("// @INSTANTIATIONS@\n", body)
    pathlib.Path(args.out).write_text(text)
    print(f"{len(inst)} instantiations -> {args.out}")


if __name__ == "__main__":
    main()
