"""The mixing-op contract (DESIGN.md), written once for the four recurrent mixers of lessons 02-07.

Every mixer — linear attention, DeltaNet, gated DeltaNet, KDA — computes o_t = q_t S_t from a state S that
its writes update, with the same tensors in the same layout:

    q, k  [B, H, T, K]      v  [B, H, T, V]      state S  [B, H, K, V]
    g     [B, H, T] (one log decay per head) or [B, H, T, K] (one per key channel), g <= 0
    beta  [B, H, T]         the delta rule's write strength

and three forms with one signature, each returning (o [B, H, T, V] in v's dtype, final state):

    recurrent(q, k, v, [g,] [beta,] initial_state=None)
    chunked(q, k, v, [g,] [beta,] chunk_size=64, initial_state=None)
    triton_chunked(q, k, v, [g,] [beta,] chunk_size=64, initial_state=None, input_precision="ieee")

This module holds what the forms share, so that a lesson module shows only its own mechanism:
- `prepare`: check every argument's shape, dtype and device (a ValueError that names the argument and the
  shape it expected) and cast to the compute dtype;
- `compute_dtype`: float64 stays float64 (exact checks), everything else computes in float32;
- `split_chunks` / `merge_chunks`: [B, H, T, ...] <-> [B, H, N, C, ...], zero-padding T;
- the Triton side: `check_triton_options`, `check_triton_inputs`, and (in `kernels`) the state walk that
  all four kernels share and the one launcher.
"""

import os

import torch

# ---------------------------------------------------------------------------------------------------
# Checking the inputs


def shape_str(x):
    """'[2, 4, 100, 16]' for a tensor, the type name for anything else (for error messages)."""
    if isinstance(x, torch.Tensor):
        return "[" + ", ".join(str(n) for n in x.shape) + "]"
    return type(x).__name__


def _check_tensor(name, x, shape, device, what):
    """x must be a floating-point tensor of `shape` on `device`; `what` names the dims for the message."""
    expected = "[" + ", ".join(map(str, shape)) + "]"
    if not isinstance(x, torch.Tensor) or tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} must be {what} = {expected}, got {shape_str(x)}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if x.device != device:
        raise ValueError(f"{name} must be on {device} like q, got {x.device}")


def check_inputs(q, k, v, g=None, beta=None, initial_state=None, *, gate=None, delta=False):
    """Validate the inputs of a mixing op; return (B, H, T, K, V).

    gate: None (no decay: g must be None), "scalar" (g [B, H, T]) or "channel" (g [B, H, T, K]).
    delta: True for the delta rule (beta [B, H, T] required), False for linear attention (beta must be None).
    Raises ValueError naming the argument and the shape it expected.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            raise ValueError(f"{name} must be a 4-dimensional tensor [B, H, T, D], got {shape_str(x)}")
        if not x.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {x.dtype}")
    B, H, T, K = q.shape
    V = v.shape[-1]
    if k.shape != q.shape:
        raise ValueError(f"k must have the shape of q [B, H, T, K] = {shape_str(q)}, got {shape_str(k)}")
    if v.shape[:3] != q.shape[:3]:
        raise ValueError(f"v must be [B, H, T, V] = [{B}, {H}, {T}, V] like q, got {shape_str(v)}")
    for name, x in (("k", k), ("v", v)):
        if x.device != q.device:
            raise ValueError(f"{name} must be on {q.device} like q, got {x.device}")
    if gate is None and g is not None:
        raise ValueError(f"g must be None: this mixer has no decay, got {shape_str(g)}")
    if gate is not None:
        if gate not in ("scalar", "channel"):
            raise ValueError(f"gate must be None, 'scalar' or 'channel', got {gate!r}")
        shape = (B, H, T) if gate == "scalar" else (B, H, T, K)
        what = "[B, H, T] (log decay, one per head)" if gate == "scalar" else \
            "[B, H, T, K] (log decay, one per key channel)"
        _check_tensor("g", g, shape, q.device, what)
        if (g > 0).any():
            raise ValueError(f"g is a log decay and must be <= 0, got a maximum of {g.max().item():.3g}")
    if delta:
        _check_tensor("beta", beta, (B, H, T), q.device, "[B, H, T]")
    elif beta is not None:
        raise ValueError(f"beta must be None: linear attention has no write strength, got {shape_str(beta)}")
    if initial_state is not None:
        _check_tensor("initial_state", initial_state, (B, H, K, V), q.device, "[B, H, K, V]")
    return B, H, T, K, V


def compute_dtype(x):
    """Accumulate in float64 for float64 inputs (exact checks), float32 for everything else
    (half-precision inputs are computed with float32 accumulators and returned in their dtype)."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def prepare(q, k, v, g=None, beta=None, initial_state=None, *, gate=None, delta=False):
    """`check_inputs`, then cast to the compute dtype and start the state.

    Returns (q, k, v, g, beta, S0): every tensor in the compute dtype of q (g and beta stay None when not
    given) and S0 [B, H, K, V], the initial state or zeros.
    """
    B, H, T, K, V = check_inputs(q, k, v, g, beta, initial_state, gate=gate, delta=delta)
    dtype = compute_dtype(q)
    q, k, v, g, beta = (None if x is None else x.to(dtype) for x in (q, k, v, g, beta))
    S0 = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(dtype)
    return q, k, v, g, beta, S0


# ---------------------------------------------------------------------------------------------------
# Chunks


def check_chunk_size(chunk_size, power_of_two=False):
    """A chunk size is a positive integer (a power of two where a Triton kernel tiles by it)."""
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        got = shape_str(chunk_size) if isinstance(chunk_size, torch.Tensor) else repr(chunk_size)
        raise ValueError(f"chunk_size must be a positive integer, got {got}")
    if power_of_two and chunk_size & (chunk_size - 1):
        raise ValueError(f"chunk_size must be a power of two for the Triton kernel, got {chunk_size}")


def split_chunks(x, chunk_size):
    """[B, H, T, ...] -> [B, H, N, C, ...], zero-padding T up to N*C.

    Zero padding is neutral for every op here: a zero key writes nothing, beta = 0 writes nothing,
    g = 0 decays nothing, and the padded outputs are cut off by `merge_chunks`.
    """
    T = x.shape[2]
    n = -(-T // chunk_size)
    pad = n * chunk_size - T
    if pad:
        x = torch.cat([x, x.new_zeros(*x.shape[:2], pad, *x.shape[3:])], dim=2)
    return x.reshape(*x.shape[:2], n, chunk_size, *x.shape[3:])


def merge_chunks(x, T):
    """[B, H, N, C, ...] -> [B, H, T, ...]: undo `split_chunks` and drop the padding."""
    return x.reshape(*x.shape[:2], -1, *x.shape[4:])[:, :, :T]


# ---------------------------------------------------------------------------------------------------
# The Triton side


def interpreted():
    """True when Triton runs kernels in its interpreter (no GPU: numpy on the CPU)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def check_triton_options(chunk_size, input_precision="ieee"):
    """The kernels tile by the chunk: a power of two >= 16 (the smallest `tl.dot` tile). Products run in
    full float32 ("ieee") or, on a GPU with TF32 tensor cores (sm_80 and newer), in TF32 ("tf32": inputs
    rounded to a 10-bit mantissa, relative errors near 1e-3, several times faster)."""
    check_chunk_size(chunk_size, power_of_two=True)
    if chunk_size < 16:
        raise ValueError(f"chunk_size must be >= 16 for the Triton kernel (tl.dot tiles), got {chunk_size}")
    if input_precision not in ("ieee", "tf32"):
        raise ValueError(f"input_precision must be 'ieee' (exact float32) or 'tf32' (tensor cores), "
                         f"got {input_precision!r}")


def check_triton_inputs(**tensors):
    """The Triton path computes where Triton runs: CUDA tensors when compiled, CPU tensors in the
    interpreter. Anything else is a ValueError naming the argument, never a silent copy."""
    for name, x in tensors.items():
        if x is None:
            continue
        if interpreted() and x.is_cuda:
            raise ValueError(f"{name} is a CUDA tensor, but Triton runs in interpreter mode here "
                             f"(TRITON_INTERPRET=1): pass CPU tensors")
        if not interpreted() and not x.is_cuda:
            raise ValueError(f"{name} is on {x.device}, but the compiled Triton kernel needs CUDA tensors")


def fast_input_precision():
    """The fastest exact-enough choice on this machine: "tf32" on GPUs with TF32 tensor cores (Ampere,
    sm_80, and newer), "ieee" on a T4 (sm_75, no TF32) and in the interpreter (numpy float32 either way)."""
    if interpreted() or not torch.cuda.is_available():
        return "ieee"
    return "tf32" if torch.cuda.get_device_capability()[0] >= 8 else "ieee"


# ---------------------------------------------------------------------------------------------------
# The Triton kernels: the chunked form's three steps, as kernels
#
# For chunk n (C rows), with S_n the state before it, every mixer of the course computes
#
#     U'_n    = U_n - W_n S_n                 the delta rule's correction (linear attention: U'_n = V_n)
#     S_{n+1} = d_n * S_n + Kd_n^T U'_n        d_n [K]: what each key row of the state keeps across the chunk
#     O_n     = Qd_n S_n + A_n U'_n            earlier chunks through the state, this chunk directly
#
# and everything there but S_n comes from chunk n alone: A_n = the intra-chunk scores tril(Q K^T) (with the
# decay, for gated mixers), W_n and U_n the WY form of the delta rule (lesson 05), Qd_n, Kd_n the queries and
# keys decayed to the chunk's start and end, d_n = exp(G_C). So each mixer runs three kernels, like the
# three steps of its PyTorch `chunked`:
#   1. the lesson's *intra-chunk kernel*, one program per (chunk, head), every chunk in parallel, writes
#      A_n [C, C] (and W_n, U_n, Qd_n, Kd_n, d_n where the mixer has them);
#   2. `chunk_scan_kernel`, shared by the four, one program per (block of BV value columns, head), walks the
#      chunks in order with its [K, BV] slice of S on chip, and writes S_n and U'_n for every chunk;
#   3. `chunk_output_kernel`, shared, one program per (value block, chunk, head), computes O_n.
# Every tile is small: the state at head size 128 is two [64, 16] tiles per program, the walk and the
# output take the chunk 16 rows at a time, the intra-chunk kernels read K and V in slices of 16 columns.
# So nothing spills out of registers on a T4, an A100 or an H100, even when the products run in plain
# float32 (benchmarks/compile_kernels.py compiles every kernel for them and checks).
#
# Every kernel names its arguments from one vocabulary, in this order, and `launch_chunked` passes each
# kernel the ones it names:
#   inputs        q, k [B*H, T, K]; v [B*H, T, V]; beta [B*H, T]; g_cum [B*H, N*C] or [B*H, N*C, K]: the log
#                 decay summed inside each chunk, G = cumsum(g), computed by the launcher (one PyTorch line)
#   intra-chunk   a_qk [B*H, T, C]; w, qd, kd [B*H, T, K]; u [B*H, T, V]; decay [B*H, N, K]
#   the walk      s0, s_out [B*H, K, V]; h [B*H, N, K, V] (S_n); u_new [B*H, T, V] (U'_n); o [B*H, T, V]
#   sizes         T, K, V (runtime); C, LOG_C, BK, BV, BR (compile-time block sizes)
#   switches      SPLIT_K, DELTA, DECAY, HAS_S0, PRECISION (compile-time)
# All tensors are contiguous float32; every product accumulates in float32 (the compute dtype of every
# kernel). PRECISION is how `tl.dot` multiplies: "ieee" full float32, "tf32" tensor cores (sm_80+).

import triton  # noqa: E402 (the PyTorch half of the contract above needs no Triton)
import triton.language as tl  # noqa: E402

# Tiles, and how the kernels are launched. A product whose tiles are 64 x 64 x 64 in plain float32 (no
# tensor cores: a T4, or "ieee" anywhere) already needs most of a thread's 255 registers, so the kernels
# multiply thin slices: 16 columns of K or V inside a chunk, 16 rows of a chunk at a time in the walk.
# On a GPU every kernel may use all 255 registers a thread can have (maxnreg): left to itself, ptxas
# sometimes caps a large kernel at 128 and spills the rest to memory.
SLICE = 16
LAUNCH = {"intra": dict(num_warps=8, num_stages=1, maxnreg=255),
          "scan": dict(num_warps=8, num_stages=1, maxnreg=255),
          "output": dict(num_warps=4, num_stages=1, maxnreg=255)}


def block_sizes(K, V):
    """Tile sizes for head dims K, V: the state's key rows in blocks of BK <= 64 (two blocks, SPLIT_K,
    when 64 < K <= 128), its value columns split over programs in blocks of BV = 16, the chunk's rows
    walked BR = 16 at a time."""
    if K > 128:
        raise ValueError(f"the Triton kernels hold at most 128 key channels (two blocks of 64), got K = {K}")
    BK = min(64, max(16, triton.next_power_of_2(K)))
    return dict(BK=BK, BV=SLICE, BR=SLICE, SPLIT_K=K > BK)


@triton.jit
def load_rows(ptr, t, cols, T, width):
    """The tile [len(t), len(cols)] of a row-major [T, width] matrix at rows t, columns cols; 0 outside."""
    return tl.load(ptr + t[:, None] * width + cols[None, :], mask=(t[:, None] < T) & (cols[None, :] < width),
                   other=0.0)


@triton.jit
def store_rows(ptr, t, cols, T, width, x):
    """Write the tile x at rows t, columns cols of a row-major [T, width] matrix, skipping what is outside."""
    tl.store(ptr + t[:, None] * width + cols[None, :], x, mask=(t[:, None] < T) & (cols[None, :] < width))


@triton.jit
def dot_rows(x, y, t, T, K, C: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr):
    """X Y^T [C, C] for the rows t of x, y [T, K] (a chunk's scores, e.g. Q K^T), summed over K in slices
    of BK columns so that no tile is wider than BK."""
    XY = tl.zeros([C, C], dtype=tl.float32)
    for k0 in range(0, K, BK):
        cols = k0 + tl.arange(0, BK)
        X, Y = load_rows(x, t, cols, T, K), load_rows(y, t, cols, T, K)
        XY += tl.dot(X, tl.trans(Y), input_precision=PRECISION)
    return XY


@triton.jit
def times_state(x, t, T, K, S_top, S_bottom, BK: tl.constexpr, SPLIT_K: tl.constexpr,
                PRECISION: tl.constexpr):
    """X S for the rows t of x [T, K] and the state S = [S_top; S_bottom] (key rows 0..BK-1, BK..2BK-1):
    a product over K in blocks of BK. Without SPLIT_K the state is S_top alone."""
    cols = tl.arange(0, BK)
    XS = tl.dot(load_rows(x, t, cols, T, K), S_top, input_precision=PRECISION)
    if SPLIT_K:
        XS += tl.dot(load_rows(x, t, BK + cols, T, K), S_bottom, input_precision=PRECISION)
    return XS


@triton.jit
def chunk_scan_kernel(w, u, kd, decay, s0, h, u_new, s_out, T, K, V,
                      C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, BR: tl.constexpr,
                      SPLIT_K: tl.constexpr, DELTA: tl.constexpr, DECAY: tl.constexpr, HAS_S0: tl.constexpr,
                      PRECISION: tl.constexpr):
    """The walk over chunks n = 0, 1, ... of one head, for value columns i_v*BV ... i_v*BV + BV - 1:

        h_n  = S                      the state chunk n starts from, written for the output kernel
        U'_n = U_n - W_n S            (DELTA, written to u_new; else U'_n = U_n, which is V_n)
        S   <- d_n * S + Kd_n^T U'_n  (DECAY multiplies key row r of S by d_n[r]; else d_n = 1)

    S stays on chip from s0 (or zeros) to s_out, as one [BK, BV] tile or, when K > BK (SPLIT_K), as two:
    the key rows 0..BK-1 (S_top) and BK..K-1 (S_bottom). The chunk's rows are taken BR at a time (each
    row of U' needs only its own row of W; the update sums over rows). Rows past T read as zeros.
    """
    i_v, bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    cols_k, cols_v = tl.arange(0, BK), i_v * BV + tl.arange(0, BV)
    N = tl.cdiv(T, C)
    w, kd, u, u_new = w + bh * T * K, kd + bh * T * K, u + bh * T * V, u_new + bh * T * V
    decay, h, s0, s_out = decay + bh * N * K, h + bh * N * K * V, s0 + bh * K * V, s_out + bh * K * V
    S_top = tl.zeros([BK, BV], dtype=tl.float32)
    S_bottom = tl.zeros([BK, BV], dtype=tl.float32)
    if HAS_S0:
        S_top += load_rows(s0, cols_k, cols_v, K, V)
        if SPLIT_K:
            S_bottom += load_rows(s0, BK + cols_k, cols_v, K, V)
    for n in range(N):
        store_rows(h + n * K * V, cols_k, cols_v, K, V, S_top)
        if SPLIT_K:
            store_rows(h + n * K * V, BK + cols_k, cols_v, K, V, S_bottom)
        dS_top = tl.zeros([BK, BV], dtype=tl.float32)
        dS_bottom = tl.zeros([BK, BV], dtype=tl.float32)
        for r0 in range(0, C, BR):
            t = n * C + r0 + tl.arange(0, BR)
            U_t = load_rows(u, t, cols_v, T, V)
            if DELTA:
                U_t -= times_state(w, t, T, K, S_top, S_bottom, BK, SPLIT_K, PRECISION)
                store_rows(u_new, t, cols_v, T, V, U_t)
            dS_top += tl.dot(tl.trans(load_rows(kd, t, cols_k, T, K)), U_t, input_precision=PRECISION)
            if SPLIT_K:
                dS_bottom += tl.dot(tl.trans(load_rows(kd, t, BK + cols_k, T, K)), U_t,
                                    input_precision=PRECISION)
        if DECAY:
            S_top *= tl.load(decay + n * K + cols_k, mask=cols_k < K, other=1.0)[:, None]
            if SPLIT_K:
                S_bottom *= tl.load(decay + n * K + BK + cols_k, mask=BK + cols_k < K, other=1.0)[:, None]
        S_top += dS_top
        S_bottom += dS_bottom
    store_rows(s_out, cols_k, cols_v, K, V, S_top)
    if SPLIT_K:
        store_rows(s_out, BK + cols_k, cols_v, K, V, S_bottom)


@triton.jit
def chunk_output_kernel(a_qk, qd, h, u_new, o, T, K, V,
                        C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, BR: tl.constexpr,
                        SPLIT_K: tl.constexpr, PRECISION: tl.constexpr):
    """O_n = Qd_n S_n + A_n U'_n for rows r0 ... r0 + BR - 1 of chunk n, value columns of block i_v:
    the earlier chunks through the state the chunk started from (h_n), this chunk through its scores.
    One program per (value block, block of BR rows, head): every chunk at once."""
    i_v, i_r, bh = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    cols_k, cols_v = tl.arange(0, BK), i_v * BV + tl.arange(0, BV)
    n, N = i_r * BR // C, tl.cdiv(T, C)
    t = i_r * BR + tl.arange(0, BR)
    a_qk, qd, u_new, o = a_qk + bh * T * C, qd + bh * T * K, u_new + bh * T * V, o + bh * T * V
    h = h + (bh * N + n) * K * V
    S_top = load_rows(h, cols_k, cols_v, K, V)
    S_bottom = load_rows(h, BK + cols_k, cols_v, K, V)
    O_t = times_state(qd, t, T, K, S_top, S_bottom, BK, SPLIT_K, PRECISION)
    chunk = n * C + tl.arange(0, C)
    O_t += tl.dot(load_rows(a_qk, t, tl.arange(0, C), T, C), load_rows(u_new, chunk, cols_v, T, V),
                  input_precision=PRECISION)
    store_rows(o, t, cols_v, T, V, O_t)


def launch_chunked(intra_kernel, q, k, v, g=None, beta=None, *, gate=None, delta=False, chunk_size=64,
                   initial_state=None, input_precision="ieee"):
    """Run a mixer's chunked form as Triton kernels: its `intra_kernel` over all (chunk, head) pairs, the
    shared `chunk_scan_kernel` over (value block, head), then `chunk_output_kernel` over (value block,
    block of rows, head). The one launcher of the four mixers.

    Checks the inputs (`check_inputs`, `check_triton_options`, `check_triton_inputs`), computes in float32
    whatever the input dtype, returns (o [B, H, T, V] in v's dtype, S_T [B, H, K, V] float32).
    """
    B, H, T, K, V = check_inputs(q, k, v, g, beta, initial_state, gate=gate, delta=delta)
    check_triton_options(chunk_size, input_precision)
    check_triton_inputs(q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state)
    sizes = block_sizes(K, V)
    out_dtype, C, N = v.dtype, chunk_size, -(-T // chunk_size)
    q, k, v, g, beta, s0 = (None if x is None else x.to(torch.float32).contiguous()
                            for x in (q, k, v, g, beta, initial_state))
    # G = cumsum(g) inside each chunk, padded with g = 0 to whole chunks: [B, H, N*C] or [B, H, N*C, K]
    g_cum = None if g is None else split_chunks(g, C).cumsum(3).flatten(2, 3).contiguous()
    new = q.new_empty
    u = new(B, H, T, V) if delta else v
    tensors = dict(q=q, k=k, v=v, g_cum=g_cum, beta=beta, a_qk=new(B, H, T, C),
                   w=new(B, H, T, K) if delta else None, u=u,
                   qd=new(B, H, T, K) if gate else q, kd=new(B, H, T, K) if gate else k,
                   decay=new(B, H, N, K) if gate else None, s0=s0, h=new(B, H, N, K, V),
                   u_new=new(B, H, T, V) if delta else u, s_out=new(B, H, K, V), o=new(B, H, T, V))
    switches = dict(DELTA=delta, DECAY=gate is not None, HAS_S0=s0 is not None, PRECISION=input_precision)
    launch(intra_kernel, (N, B * H), tensors, LAUNCH["intra"], T=T, K=K, V=V, C=C, LOG_C=C.bit_length() - 1,
           BK=SLICE, BV=SLICE, **switches)
    value_blocks = triton.cdiv(V, sizes["BV"])
    launch(chunk_scan_kernel, (value_blocks, B * H), tensors, LAUNCH["scan"], T=T, K=K, V=V, C=C, **sizes,
           **switches)
    launch(chunk_output_kernel, (value_blocks, N * C // SLICE, B * H), tensors, LAUNCH["output"], T=T, K=K,
           V=V, C=C, **sizes, **switches)
    return tensors["o"].to(out_dtype), tensors["s_out"]


def launch(kernel, grid, tensors, options, **scalars):
    """kernel[grid](...) with each argument taken by name: from `scalars` (sizes and switches) or `tensors`.
    A tensor a kernel names but the mixer does not have (None) is replaced by any other tensor: the kernel's
    switches make sure it is never read. `options`: num_warps, num_stages, maxnreg (`LAUNCH`)."""
    placeholder = tensors["q"]
    args = {name: scalars[name] if name in scalars else tensors[name] for name in kernel.arg_names}
    kernel[grid](**{name: placeholder if value is None else value for name, value in args.items()}, **options)
