"""The chunked form of every mixer as Triton kernels: the shared device functions, the scan and output
kernels the four mixers share, and the one launcher (`launch_chunked`). The PyTorch contract the kernels
keep (shapes, dtypes, chunks) is `contract`; each lesson module adds its own intra-chunk kernel.

For chunk n (C rows), with S_n the state before it, every mixer of the course computes

    U'_n    = U_n - W_n S_n                 the delta rule's correction (linear attention: U'_n = V_n)
    S_{n+1} = d_n * S_n + Kd_n^T U'_n        d_n [K]: what each key row of the state keeps across the chunk
    O_n     = Qd_n S_n + A_n U'_n            earlier chunks through the state, this chunk directly

and everything there but S_n comes from chunk n alone: A_n = the intra-chunk scores tril(Q K^T) (with the
decay, for gated mixers), W_n and U_n the WY form of the delta rule (lesson 05), Qd_n, Kd_n the queries and
keys decayed to the chunk's start and end, d_n = exp(G_C). So each mixer runs three kernels, like the
three steps of its PyTorch `chunked`:
  1. the lesson's *intra-chunk kernel* (`Mixer.intra_chunk_kernel`), one program per (chunk, head), every
     chunk in parallel, writes A_n [C, C] (and W_n, U_n, Qd_n, Kd_n, d_n where the mixer has them);
  2. `chunk_scan_kernel`, shared by the four, one program per (block of BV value columns, head), walks the
     chunks in order with its [K, BV] slice of S on chip, and writes S_n and U'_n for every chunk;
  3. `chunk_output_kernel`, shared, one program per (block of BR rows, value block, head), computes O_n.

How the kernels are written (every kernel of the course keeps these rules):
  - names: a lowercase name is a pointer (q, a_qk, u_new) or an index vector or mask (t, r, cols, lower);
    a Capitalized name is a tile of values on chip (Q_n, A, L_inv, G, Beta, S_top). Pointer names are the
    tensors' names below; a tile of a tensor x is X (the chunk's rows: X_n; rows t: X_t).
  - names never mix the two: no lowercase name holds a tile (a tile of updates to S is KdU_top, not dS_top:
    a d-prefix is left to the gradients of a backward pass).
  - arguments: one per line, in commented groups, in this order: pointers (inputs, then outputs), indices,
    tiles, sizes, scalars, switches. Kernels and the device functions they call (the helpers) alike, and
    a helper of more than one argument is called by keyword (`load_rows(x=k, t=t, cols=cols, T=T,
    width=K)`: compiler and interpreter take keywords, checked with triton 3.4 and 3.9). T is a runtime size
    everywhere (a new length does not recompile); K and V are compile-time in the scan and output
    kernels, whose tiles they size, and runtime in the intra-chunk kernels, which walk K and V in slices
    (there a compile-time K lets the compiler unroll the walk, and hold up to 2.6 times the registers).
    Block sizes and switches are compile-time and UPPER CASE; each switch that is off leaves a tensor
    unread. DECAY is the mixer's decay (`Mixer.decay`: None, "head" or "channel") in every kernel and
    helper. `tests/test_kernel_style.py` keeps these rules.
  - loops: a loop whose bound is a runtime size (N = cdiv(T, C) chunks, K / SLICE slices) is a `while`,
    not a `range`: the interpreters of triton <= 3.6 cannot take a runtime bound in range() with
    numpy >= 2.4 (they hold the size as a one-element array). Loops over compile-time sizes use range().
  - tensors: contiguous [B*H, ...]: head bh starts bh * (its row size) numbers in. q, k, v come in their
    own dtype; `load_rows` turns a half-precision tile into float32 as it loads it, so every tile on chip,
    every sum and every state is ACC, float32 (float64 for float64 inputs: exact checks in the
    interpreter). PRECISION is how a product multiplies (`mma`): "ieee" full float32, "tf32" float32 on
    tensor cores, "bf16" and "fp16" rounded to the inputs' half precision (on tensor cores where the GPU has
    them), summed in ACC.
  - block sizes: SLICE = 16 columns of K or V read at a time inside a chunk (the intra-chunk kernels); in the
    scan and output kernels BK key rows of the state per tile (at most 64: two tiles, S_top and S_bottom,
    when K = 128, the switch SPLIT_K), BV value columns per program and BR rows of a chunk at a time.

The tensors, by the names the kernels give them:
    inputs        q, k [B*H, T, K]; v [B*H, T, V]; beta [B*H, T]; g_cum [B*H, N*C] or [B*H, N*C, K]: the log
                  decay summed inside each chunk, G = cumsum(g), computed by the launcher (one PyTorch line)
    intra-chunk   a_qk [B*H, T, C]; l_inv [B*H, T, C] (L_inv = (I + A)^{-1}, stored by the delta rule's
                  kernels and read back in slices: `deltanet.wy_slices`); w, qd, kd [B*H, T, K];
                  u [B*H, T, V]; decay [B*H, N, K]
    the walk      s0, s_out [B*H, K, V]; h [B*H, N, K, V] (S_n); u_new [B*H, T, V] (U'_n); o [B*H, T, V]
Every tile is small, so nothing spills out of registers on a T4, an A100 or an H100, even when the products
run in plain float32 (`python -m kimik3_lessons compile-kernels` compiles every kernel for them and checks).

The package, by job; every name is read from it (`chunk_kernels.load_rows`, `chunk_kernels.launch`):
  - `chunk_kernels.tiles`: the tile sizes (`SLICE`, `block_sizes`) and the launch options (`LAUNCH`);
  - `chunk_kernels.interpreter`: two repairs of Triton's interpreter, made on import where it runs kernels;
  - `chunk_kernels.device`: the device functions every kernel calls (`load_rows`, `store_rows`, `mma`,
    `dot_rows`, `times_state`);
  - `chunk_kernels.shared`: the scan and output kernels the four mixers share;
  - `chunk_kernels.launcher`: the launcher (`launch_chunked`), its plan (`launches`), its tensors
    (`chunk_tensors`) and the call that launches one kernel (`launch`), made through the package: lesson 03
    patches `chunk_kernels.launch` to record the launches.
"""

from kimik3_lessons.chunk_kernels.device import dot_rows, load_rows, mma, store_rows, times_state
from kimik3_lessons.chunk_kernels.interpreter import (
    multiply_bf16_in_the_interpreter,
    patch_language_once_per_launch,
)
from kimik3_lessons.chunk_kernels.launcher import (
    READ_ONLY_UNDER,
    acc_dtype,
    chunk_tensors,
    half_inputs,
    launch,
    launch_chunked,
    launches,
    run,
)
from kimik3_lessons.chunk_kernels.shared import chunk_output_kernel, chunk_scan_kernel
from kimik3_lessons.chunk_kernels.tiles import LAUNCH, SLICE, block_sizes

__all__ = ["LAUNCH", "READ_ONLY_UNDER", "SLICE", "acc_dtype", "block_sizes", "chunk_output_kernel",
           "chunk_scan_kernel", "chunk_tensors", "dot_rows", "half_inputs", "launch", "launch_chunked",
           "launches", "load_rows", "mma", "multiply_bf16_in_the_interpreter",
           "patch_language_once_per_launch", "run", "store_rows", "times_state"]
