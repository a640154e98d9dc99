"""The device functions every kernel of the course calls (a `@triton.jit` function called from a kernel is
compiled into it): a tile of rows read (`load_rows`) and written (`store_rows`) with the masks that keep it
inside its tensor, the one product of two tiles (`mma`), a chunk's scores summed over slices of the key
dimension (`dot_rows`) and rows times the state (`times_state`). Other modules call them as
`chunk_kernels.load_rows(...)`. The rules they keep ("names", "arguments", "loops") are written where
`chunk_kernels` begins."""

import triton
import triton.language as tl


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
