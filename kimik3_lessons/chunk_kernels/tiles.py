"""The kernels' tile sizes and how they are launched: `SLICE`, the columns of K or V (or rows of a chunk) a
kernel takes at a time; `block_sizes`, the state's tiles in the scan and output kernels; `LAUNCH`, each
step's warps, stages and registers. The rules they keep are written where `chunk_kernels` begins."""

import triton

# Tiles, and how the kernels are launched. A product whose tiles are 64 x 64 x 64 in plain float32 (no
# tensor cores: a T4, or "ieee" anywhere) already needs most of a thread's 255 registers, so the kernels
# multiply thin slices: 16 columns of K or V inside a chunk, 16 rows of a chunk at a time in the walk.
# maxnreg lets a thread use all the 255 registers it can have: left to itself, ptxas sometimes
# caps a large kernel at 128 and spills the rest. Every kernel runs 8 warps: with 4 the output kernel's
# threads held 254 of their 255 registers. The kernels leave headroom under the cap (at most
# `gpu_targets.MAX_REGISTERS`, checked by tests/test_gpu_targets.py), so that a compiler release needing a
# few more registers does not spill.
SLICE = 16
LAUNCH = {"intra": dict(num_warps=8, num_stages=1, maxnreg=255),
          "scan": dict(num_warps=8, num_stages=1, maxnreg=255),
          "output": dict(num_warps=8, num_stages=1, maxnreg=255)}


def block_sizes(K, V):
    """Tile sizes for head dims K, V: the state's key rows in blocks of BK <= 64 (two blocks, SPLIT_K,
    when 64 < K <= 128), its value columns split over programs in blocks of BV = 16, the chunk's rows
    walked BR = 16 at a time."""
    if K > 128:
        raise ValueError(f"the Triton kernels hold at most 128 key channels (two blocks of 64), got K = {K}")
    BK = min(64, max(16, triton.next_power_of_2(K)))
    return dict(BK=BK, BV=SLICE, BR=SLICE, SPLIT_K=K > BK)
