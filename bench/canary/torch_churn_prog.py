"""A clean PyTorch program for bench/reliability/canary_programs.sh (issue 17): the caching
allocator's blocks handed out again and again while the guard scans them, the worst case
for canary mode's reuse rule (a scan that read a block's entry before the block was freed
and handed out again sees the new tensor's bytes in the old canary; the finding must be
dropped). Tensors of odd sizes made on two streams, each written to its last element, read
on the other stream (after `wait_stream`) and freed while that read may still be queued
(`record_stream`), 3000 rounds. Prints an integer checksum and OK."""
import torch

s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
keep, sums = [], []
for i in range(3000):
    n = 1 + (i * 7919) % 5000
    st = s1 if i % 2 else s2
    with torch.cuda.stream(st):
        t = torch.full((n,), float(i % 5), device="cuda")
        u = t * 2 + 1
        del t  # its block may be handed out again at once, on this stream
    keep.append((u, st))
    if len(keep) > 8:
        old, ost = keep.pop(0)
        other = s2 if ost is s1 else s1
        other.wait_stream(ost)
        with torch.cuda.stream(other):
            sums.append(old.sum())
        old.record_stream(other)
        del old
torch.cuda.synchronize()
total = sum(int(x.item()) for x in sums) + sum(int(u.sum().item()) for u, _ in keep)
print(f"total={total}")
print("OK")
