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
"""

import torch
import triton
import triton.language as tl

from kimik3_lessons import contract, rehearsal

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
# A tensor a kernel may be given in place of one the mixer does not have, and the switch that, off, keeps
# the kernel from reading it (see `launch`).
READ_ONLY_UNDER = {"w": "DELTA", "decay": "DECAY", "s0": "HAS_S0"}


def block_sizes(K, V):
    """Tile sizes for head dims K, V: the state's key rows in blocks of BK <= 64 (two blocks, SPLIT_K,
    when 64 < K <= 128), its value columns split over programs in blocks of BV = 16, the chunk's rows
    walked BR = 16 at a time."""
    if K > 128:
        raise ValueError(f"the Triton kernels hold at most 128 key channels (two blocks of 64), got K = {K}")
    BK = min(64, max(16, triton.next_power_of_2(K)))
    return dict(BK=BK, BV=SLICE, BR=SLICE, SPLIT_K=K > BK)




def multiply_bf16_in_the_interpreter():
    """Make Triton's interpreter multiply bfloat16 tiles as a tensor core does. numpy has no bfloat16, so
    the interpreter keeps a bfloat16 tile as its bits (uint16); its casts read them right, but its
    `tl.dot` (triton 3.4 to 3.9) multiplies the bits as integers. Here it turns bfloat16 operands into
    float32 first: exact, since a product of two bfloat16 numbers fits in float32, and summed in the
    accumulator's float32 as on the GPU (up to the order of the sum). No-op when compiling for a GPU."""
    from triton.runtime import interpreter
    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_dot, "multiplies_bf16", False):
        return
    create_dot = builder.create_dot

    def create_dot_bf16(self, a, b, *args, **kwargs):
        a, b = (self.cast_impl(x, tl.float32) if x.dtype.scalar == tl.bfloat16 else x for x in (a, b))
        return create_dot(self, a, b, *args, **kwargs)

    create_dot_bf16.multiplies_bf16 = True
    builder.create_dot = create_dot_bf16


def patch_language_once_per_launch():
    """Make Triton's interpreter patch `triton.language` once per kernel launch, not once per call of a
    device function. Each launch patches the language (its builtins made to compute in numpy) and undoes
    it at the end; triton 3.4 to 3.9 patch it again on every call of a @triton.jit helper inside the
    launch, which finds nothing left to patch but walks every member of the language first: a third of the
    interpreter's time in these kernels, which call small helpers (`load_rows`, `mma`) thousands of times.
    A call that finds the language modules it would patch already patched (their `load` no longer a
    builtin) now skips the walk."""
    from triton.runtime import interpreter
    patch = getattr(interpreter, "_patch_lang", None)
    if patch is None or not hasattr(interpreter, "_LangPatchScope") or hasattr(patch, "once_per_launch"):
        return

    def patch_lang(fn):
        langs = [m for m in fn.__globals__.values() if m is tl or m is tl.core]     # what it would patch
        if langs and not any(tl.core.is_builtin(lang.load) for lang in langs):
            return interpreter._LangPatchScope()      # patched by the launch: nothing to do, nothing to undo
        return patch(fn)

    patch_lang.once_per_launch = True
    interpreter._patch_lang = patch_lang


if contract.interpreted():
    multiply_bf16_in_the_interpreter()
    patch_language_once_per_launch()


# ---------------------------------------------------------------------------------------------------
# Device functions every kernel uses


@triton.jit
def load_rows(
    # pointers
    x,          # [T, width], row-major
    # indices
    t,          # [R]  the rows to read
    cols,       # [S]  the columns to read
    # sizes
    T,
    width,
):
    """The tile X [R, S] of row-major [T, width] matrix x at rows t, columns cols; 0 outside. A bfloat16
    or float16 tile comes out in float32 (decided when the kernel compiles): tiles on chip are never half."""
    X = tl.load(x + t[:, None] * width + cols[None, :], mask=(t[:, None] < T) & (cols[None, :] < width),
                other=0.0)
    if X.dtype.is_bf16() or X.dtype.is_fp16():
        X = X.to(tl.float32)
    return X


@triton.jit
def store_rows(
    # pointers
    x,          # [T, width], row-major
    # indices
    t,          # [R]  the rows to write
    cols,       # [S]  the columns to write
    # tiles
    X,          # [R, S]
    # sizes
    T,
    width,
):
    """Write the tile X at rows t, columns cols of a row-major [T, width] matrix x (not what is outside)."""
    tl.store(x + t[:, None] * width + cols[None, :], X, mask=(t[:, None] < T) & (cols[None, :] < width))


@triton.jit
def mma(
    # tiles
    X,          # [M, L]
    Y,          # [L, N]
    Acc,        # [M, N]  ACC
    # switches
    PRECISION: tl.constexpr,
):
    """Acc + X Y, multiplied as PRECISION says: "ieee" in full float32 (float64 for a float64 Acc), "tf32"
    with the inputs rounded to TF32 on tensor cores (sm_80 and newer), "bf16" or "fp16" with the inputs
    rounded to that half precision, as a training run's products are; every sum in Acc's dtype. The one
    place a kernel of the course multiplies two tiles (`tl.dot`).

    fp16 is multiplied as TF32: a float16 number is exactly a TF32 number (the same 10-bit mantissa, a wider
    exponent), so the products are those of float16 inputs, on the TF32 tensor cores from sm_80 on (at half
    their float16 rate, reported; a training run there uses bf16). On a T4 (sm_75) Triton uses no tensor
    cores for either, and the same code runs on the CUDA cores with 30 fewer registers than a float16
    `tl.dot` (KDA's intra-chunk kernel: 216 against 246, triton 3.9)."""
    if PRECISION == "bf16":
        return tl.dot(X.to(tl.bfloat16), Y.to(tl.bfloat16), acc=Acc)
    elif PRECISION == "fp16":
        return tl.dot(X.to(tl.float16).to(Acc.dtype), Y.to(tl.float16).to(Acc.dtype), acc=Acc,
                      input_precision="tf32", out_dtype=Acc.dtype)
    else:
        return tl.dot(X.to(Acc.dtype), Y.to(Acc.dtype), acc=Acc, input_precision=PRECISION,
                      out_dtype=Acc.dtype)


@triton.jit
def dot_rows(
    # pointers
    x,          # [T, K]
    y,          # [T, K]
    # indices
    t,          # [C]  the chunk's rows
    # sizes
    T,
    K,
    C: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """X Y^T [C, C] for the rows t of x, y [T, K] (a chunk's scores, e.g. Q K^T), summed over K in slices
    of SLICE columns so that no tile is wider than SLICE."""
    XY = tl.zeros([C, C], dtype=ACC)
    k0 = 0
    while k0 < K:               # a loop over a runtime size: see "loops" above
        cols = k0 + tl.arange(0, SLICE)
        X = load_rows(x=x, t=t, cols=cols, T=T, width=K)
        Y = load_rows(x=y, t=t, cols=cols, T=T, width=K)
        XY = mma(X=X, Y=tl.trans(Y), Acc=XY, PRECISION=PRECISION)
        k0 += SLICE
    return XY


@triton.jit
def times_state(
    # pointers
    x,          # [T, K]
    # indices
    t,          # [BR]  the rows of x
    # tiles
    Acc,        # [BR, BV]  what X S is added to
    S_top,      # [BK, BV]  the state's key rows 0 ... BK - 1
    S_bottom,   # [BK, BV]  its key rows BK ... 2 BK - 1 (read under SPLIT_K)
    # sizes
    T,
    K: tl.constexpr,
    BK: tl.constexpr,
    # switches
    SPLIT_K: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Acc + X S for the rows t of x [T, K] and the state S = [S_top; S_bottom]: a product over K in blocks
    of BK. Without SPLIT_K the state is S_top alone (S_bottom is not read)."""
    cols = tl.arange(0, BK)
    Acc = mma(X=load_rows(x=x, t=t, cols=cols, T=T, width=K), Y=S_top, Acc=Acc, PRECISION=PRECISION)
    if SPLIT_K:
        Acc = mma(X=load_rows(x=x, t=t, cols=BK + cols, T=T, width=K), Y=S_bottom, Acc=Acc,
                  PRECISION=PRECISION)
    return Acc


# ---------------------------------------------------------------------------------------------------
# The two kernels the four mixers share


@triton.jit
def chunk_scan_kernel(
    # pointers: inputs
    w,          # [B*H, T, K]     W_n (read under DELTA)
    u,          # [B*H, T, V]     U_n (V_n without the delta rule)
    kd,         # [B*H, T, K]     Kd_n, the keys decayed to their chunk's end (K_n without decay)
    decay,      # [B*H, N, K]     d_n, one factor per key row (read under DECAY)
    s0,         # [B*H, K, V]     the initial state (read under HAS_S0)
    # pointers: outputs
    h,          # [B*H, N, K, V]  S_n, the state chunk n starts from
    u_new,      # [B*H, T, V]     U'_n (written under DELTA)
    s_out,      # [B*H, K, V]     the final state
    # sizes
    T,
    K: tl.constexpr,
    V: tl.constexpr,
    C: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BR: tl.constexpr,
    # switches
    SPLIT_K: tl.constexpr,
    DELTA: tl.constexpr,
    DECAY: tl.constexpr,      # the mixer's decay: None, "head" or "channel" (`Mixer.decay`)
    HAS_S0: tl.constexpr,
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,        # the dtype of tiles, sums and states: tl.float32 (tl.float64 for exact checks)
):
    """The walk over chunks n = 0, 1, ... of one head, for value columns i_v*BV ... i_v*BV + BV - 1:

        h_n  = S                      the state chunk n starts from, written for the output kernel
        U'_n = U_n - W_n S            (DELTA, written to u_new; else U'_n = U_n, which is V_n)
        S   <- d_n * S + Kd_n^T U'_n  (DECAY multiplies key row r of S by d_n[r]; without it d_n = 1)

    S stays on chip from s0 (or zeros) to s_out, as one [BK, BV] tile or, when K > BK (SPLIT_K), as two:
    the key rows 0..BK-1 (S_top) and BK..K-1 (S_bottom). The chunk's rows are taken BR at a time (each
    row of U' needs only its own row of W; the update sums over rows). Rows past T read as zeros.
    """
    i_v = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    cols_k = tl.arange(0, BK)
    cols_v = i_v * BV + tl.arange(0, BV)
    N = tl.cdiv(T, C)
    w += bh * T * K
    u += bh * T * V
    kd += bh * T * K
    decay += bh * N * K
    s0 += bh * K * V
    h += bh * N * K * V
    u_new += bh * T * V
    s_out += bh * K * V
    S_top = tl.zeros([BK, BV], dtype=ACC)
    S_bottom = tl.zeros([BK, BV], dtype=ACC)
    if HAS_S0:
        S_top += load_rows(x=s0, t=cols_k, cols=cols_v, T=K, width=V)
        if SPLIT_K:
            S_bottom += load_rows(x=s0, t=BK + cols_k, cols=cols_v, T=K, width=V)
    n = 0
    while n < N:                # a loop over a runtime size: see "loops" above
        store_rows(x=h + n * K * V, t=cols_k, cols=cols_v, X=S_top, T=K, width=V)
        if SPLIT_K:
            store_rows(x=h + n * K * V, t=BK + cols_k, cols=cols_v, X=S_bottom, T=K, width=V)
        KdU_top = tl.zeros([BK, BV], dtype=ACC)          # Kd_n^T U'_n, key rows of S_top
        KdU_bottom = tl.zeros([BK, BV], dtype=ACC)       # and of S_bottom
        for r0 in range(0, C, BR):
            t = n * C + r0 + tl.arange(0, BR)
            U_t = load_rows(x=u, t=t, cols=cols_v, T=T, width=V)
            if DELTA:
                U_t -= times_state(x=w, t=t, Acc=tl.zeros([BR, BV], dtype=ACC), S_top=S_top,
                                   S_bottom=S_bottom, T=T, K=K, BK=BK, SPLIT_K=SPLIT_K, PRECISION=PRECISION)
                store_rows(x=u_new, t=t, cols=cols_v, X=U_t, T=T, width=V)
            KdU_top = mma(X=tl.trans(load_rows(x=kd, t=t, cols=cols_k, T=T, width=K)), Y=U_t, Acc=KdU_top,
                          PRECISION=PRECISION)
            if SPLIT_K:
                KdU_bottom = mma(X=tl.trans(load_rows(x=kd, t=t, cols=BK + cols_k, T=T, width=K)), Y=U_t,
                                 Acc=KdU_bottom, PRECISION=PRECISION)
        if DECAY is not None:   # "head" or "channel": either way d_n holds one factor per key row
            S_top *= tl.load(decay + n * K + cols_k, mask=cols_k < K, other=1.0)[:, None]
            if SPLIT_K:
                S_bottom *= tl.load(decay + n * K + BK + cols_k, mask=BK + cols_k < K, other=1.0)[:, None]
        S_top += KdU_top
        S_bottom += KdU_bottom
        n += 1
    store_rows(x=s_out, t=cols_k, cols=cols_v, X=S_top, T=K, width=V)
    if SPLIT_K:
        store_rows(x=s_out, t=BK + cols_k, cols=cols_v, X=S_bottom, T=K, width=V)


@triton.jit
def chunk_output_kernel(
    # pointers: inputs
    a_qk,       # [B*H, T, C]     A_n, the chunk's scores
    qd,         # [B*H, T, K]     Qd_n, the queries decayed to their chunk's start (Q_n without decay)
    h,          # [B*H, N, K, V]  S_n
    u_new,      # [B*H, T, V]     U'_n
    # pointers: outputs
    o,          # [B*H, T, V]
    # sizes
    T,
    K: tl.constexpr,
    V: tl.constexpr,
    C: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BR: tl.constexpr,
    # switches
    SPLIT_K: tl.constexpr,
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,        # the dtype of tiles, sums and states: tl.float32 (tl.float64 for exact checks)
):
    """O_n = Qd_n S_n + A_n U'_n for rows i_r*BR ... i_r*BR + BR - 1 (in chunk n), value columns of block i_v:
    the earlier chunks through the state the chunk started from (h_n), this chunk through its scores.
    One program per (block of BR rows, value block, head): every chunk at once. The row blocks are the
    grid's first axis, which holds 2^31 - 1 programs (the others hold 65,535): any length fits."""
    i_r = tl.program_id(0)
    i_v = tl.program_id(1)
    bh = tl.program_id(2).to(tl.int64)
    cols_k = tl.arange(0, BK)
    cols_v = i_v * BV + tl.arange(0, BV)
    N = tl.cdiv(T, C)
    n = i_r * BR // C
    t = i_r * BR + tl.arange(0, BR)
    chunk = n * C + tl.arange(0, C)
    a_qk += bh * T * C
    qd += bh * T * K
    h += (bh * N + n) * K * V
    u_new += bh * T * V
    o += bh * T * V
    S_top = load_rows(x=h, t=cols_k, cols=cols_v, T=K, width=V)
    S_bottom = tl.zeros([BK, BV], dtype=ACC)
    if SPLIT_K:
        S_bottom = load_rows(x=h, t=BK + cols_k, cols=cols_v, T=K, width=V)
    O_t = times_state(x=qd, t=t, Acc=tl.zeros([BR, BV], dtype=ACC), S_top=S_top, S_bottom=S_bottom, T=T, K=K,
                      BK=BK, SPLIT_K=SPLIT_K, PRECISION=PRECISION)
    O_t = mma(X=load_rows(x=a_qk, t=t, cols=tl.arange(0, C), T=T, width=C),
              Y=load_rows(x=u_new, t=chunk, cols=cols_v, T=T, width=V), Acc=O_t, PRECISION=PRECISION)
    store_rows(x=o, t=t, cols=cols_v, X=O_t, T=T, width=V)


# ---------------------------------------------------------------------------------------------------
# The launcher


def acc_dtype(tensors):
    """ACC, the dtype of every tile, sum and state of the kernels on `tensors` (`chunk_tensors`): the state's,
    float32, or float64 for float64 inputs (exact checks in the interpreter)."""
    return tl.float64 if tensors["s_out"].dtype == torch.float64 else tl.float32


def launches(intra_chunk_kernel, T, K, V, chunk_size, heads, *, delta, decay, has_s0, precision="ieee",
             acc=tl.float32):
    """The three launches of a mixer's chunked form: [(step, kernel, grid, constexprs, options)], the
    constexprs those the kernel takes. The launcher runs them; `gpu_targets` compiles the same ones.

    heads = B * H. The switches say which tensors there are: delta (W, U'), decay (the mixer's `decay`,
    None, "head" or "channel": G, Qd, Kd, d_n), has_s0 (an initial state); precision:
    how the products multiply (`contract.PRECISIONS`); acc: the dtype they sum into (`acc_dtype`)."""
    C = chunk_size
    N = triton.cdiv(T, C)
    sizes = block_sizes(K, V)
    intra = dict(C=C, LOG_C=C.bit_length() - 1, SLICE=SLICE, PRECISION=precision, ACC=acc)   # K, V: runtime
    shared = dict(K=K, V=V, C=C, **sizes, DELTA=delta, DECAY=decay, HAS_S0=has_s0, PRECISION=precision,
                  ACC=acc)
    value_blocks = triton.cdiv(V, sizes["BV"])
    steps = [("intra", intra_chunk_kernel, (N, heads), intra),
             ("scan", chunk_scan_kernel, (value_blocks, heads), shared),
             ("output", chunk_output_kernel, (N * C // sizes["BR"], value_blocks, heads), shared)]
    return [(step, kernel, grid, {n: value for n, value in constexprs.items() if n in kernel.arg_names},
             LAUNCH[step]) for step, kernel, grid, constexprs in steps]


def chunk_tensors(mixer, q, k, v, g=None, beta=None, *, chunk_size=64, initial_state=None,
                  input_precision="ieee"):
    """The tensors of `mixer`'s chunked form as its kernels name them (the table where this module begins):
    q, k, v contiguous, in their dtype when it is half (bfloat16, float16: read as such, computed in
    float32), else in the compute dtype; g's cumulative sum, beta and the initial state in the compute
    dtype (float32, float64 for float64 inputs: `contract.compute_dtype`); the intermediates and outputs
    allocated in it. None for a tensor the mixer does not have. Checks the inputs (`check_inputs`), the
    options (`check_triton_options`) and where the tensors are (`check_triton_inputs`) first."""
    B, H, T, K, V = contract.check_inputs(q, k, v, g, beta, initial_state, **mixer.switches)
    contract.check_triton_options(chunk_size, input_precision)
    contract.check_triton_inputs(q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state)
    C, N, dtype = chunk_size, triton.cdiv(T, chunk_size), contract.compute_dtype(q)
    q, k, v = (x.contiguous() if x.dtype in (torch.bfloat16, torch.float16) else x.to(dtype).contiguous()
               for x in (q, k, v))
    g, beta, s0 = (None if x is None else x.to(dtype).contiguous() for x in (g, beta, initial_state))
    delta, decay = beta is not None, mixer.decay
    # G = cumsum(g) inside each chunk, padded with g = 0 to whole chunks: [B, H, N*C] or [B, H, N*C, K]
    g_cum = contract.split_chunks(g, C).cumsum(3).flatten(2, 3).contiguous() if decay else None

    def new(*shape):
        return torch.empty(shape, dtype=dtype, device=q.device)

    u = new(B, H, T, V) if delta else v                  # without the delta rule U = V, and U' = U
    return dict(q=q, k=k, v=v, g_cum=g_cum, beta=beta, a_qk=new(B, H, T, C),
                l_inv=new(B, H, T, C) if delta else None,
                w=new(B, H, T, K) if delta else None, u=u,
                qd=new(B, H, T, K) if decay else q, kd=new(B, H, T, K) if decay else k,
                decay=new(B, H, N, K) if decay else None, s0=s0, h=new(B, H, N, K, V),
                u_new=new(B, H, T, V) if delta else u, s_out=new(B, H, K, V), o=new(B, H, T, V))


def half_inputs(mixer):
    """The tensors of `mixer`'s kernels that hold its inputs in their own dtype, half precision included
    (`chunk_tensors`): q, k, v; U and U' are V without the delta rule, Qd and Kd are Q and K without decay.
    A compile for bfloat16 or float16 inputs (`gpu_targets`) types these pointers so."""
    return {"q", "k", "v"} | ({"u", "u_new"} if not mixer.delta else set()) | \
        ({"qd", "kd"} if mixer.decay is None else set())


def run(mixer, tensors, chunk_size, input_precision="ieee", steps=("intra", "scan", "output")):
    """Launch `steps` of `mixer`'s chunked form (`launches`) on `tensors` (`chunk_tensors`), the products
    multiplied as `input_precision` says."""
    (B, H, T, K), V = tensors["q"].shape, tensors["v"].shape[-1]
    plan = launches(mixer.intra_chunk_kernel, T, K, V, chunk_size, B * H, delta=mixer.delta,
                    decay=mixer.decay, has_s0=tensors["s0"] is not None, precision=input_precision,
                    acc=acc_dtype(tensors))
    for step, kernel, grid, constexprs, options in plan:
        if step in steps:
            launch(kernel, grid, tensors, options, **{"T": T, "K": K, "V": V, **constexprs})


def launch_chunked(mixer, q, k, v, g=None, beta=None, *, chunk_size=64, initial_state=None,
                   input_precision="ieee"):
    """Run `mixer`'s chunked form as Triton kernels: its intra-chunk kernel over all (chunk, head) pairs,
    the shared `chunk_scan_kernel` over (value block, head), then `chunk_output_kernel` over (block of
    rows, value block, head). The one launcher of the four mixers.

    The tensors must be those the mixer's declaration (`contract.Mixer`) names (`check_inputs`); the
    kernels' switches come from the declaration and the initial state (HAS_S0). Products multiply as
    input_precision says (`contract.check_triton_options`), whatever the inputs' dtype; everything sums in
    float32 (float64 for float64 inputs); returns (o [B, H, T, V] in v's dtype, S_T [B, H, K, V] in
    float32, or float64).
    """
    tensors = chunk_tensors(mixer, q, k, v, g, beta, chunk_size=chunk_size, initial_state=initial_state,
                            input_precision=input_precision)
    run(mixer, tensors, chunk_size, input_precision)
    return tensors["o"].to(v.dtype), tensors["s_out"]


def launch(kernel, grid, tensors, options, read_only_under=READ_ONLY_UNDER, **scalars):
    """kernel[grid](...) with each argument taken by name: from `scalars` (sizes and switches) or `tensors`.

    A tensor the kernel names but the mixer does not have (None) is allowed only where a switch that is
    off keeps the kernel from reading it (`read_only_under`, {tensor: switch}); the kernel then gets q in
    its place (a pointer it never follows). Anything else is a ValueError. `options`: num_warps,
    num_stages, maxnreg."""
    args = {}
    for name in kernel.arg_names:
        value = scalars[name] if name in scalars else tensors[name]
        if value is None and name not in scalars:          # a switch may be None (DECAY), a tensor not
            switch = read_only_under.get(name)
            if switch is None or scalars.get(switch, True):
                raise ValueError(f"{kernel.fn.__name__} reads {name}, which was not given "
                                 f"(a kernel may skip a missing tensor only under a switch that is off)")
            value = tensors["q"]
        args[name] = value
    with rehearsal.paused():            # the interpreter's own copies are not the lesson's
        kernel[grid](**args, **options)
