"""The device functions of the backward's kernels (a `@triton.jit` function called from a kernel is compiled
into it): a tile read transposed (`load_transposed`), rows of a chunk's [C, C] matrix times rows of a
tensor, the matrix read back one [BR, BR] block at a time (`chunk_product_rows`), and the same product
with KDA's decay per channel (`decayed_product_rows`). Other modules of the package import them from here.
The rules they keep are written where `chunk_kernels` begins, why the products are thin where
`backward.kernels` begins."""

import triton
import triton.language as tl

from kimik3_lessons import chunk_kernels


@triton.jit
def load_transposed(
    # pointers
    x,          # [T, width], row-major
    # indices
    t,          # [R]  the rows to read
    cols,       # [S]  the columns to read
    # sizes
    T,
    width,
):
    """The tile X[t, cols]^T, [S, R], of row-major [T, width] matrix x, read transposed (0 outside): a
    transposed operand of `tl.dot` loaded as it is used, not loaded and then transposed on chip."""
    return tl.load(x + t[None, :] * width + cols[:, None], mask=(t[None, :] < T) & (cols[:, None] < width),
                   other=0.0)


@triton.jit
def chunk_product_rows(
    # pointers
    p,          # [T, C]      P, lower triangular: one [C, C] matrix per chunk
    x,          # [T, width]
    scale,      # [T]         a factor per row of x (read under SCALE)
    # indices
    n,          # the chunk
    i0,         # the block's first row inside the chunk
    cols,       # [BR]        the columns of x
    # sizes
    T,
    width,
    C: tl.constexpr,
    BR: tl.constexpr,
    # switches
    TRANSPOSE: tl.constexpr,
    SCALE: tl.constexpr,
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """Rows b = i0 ... i0 + BR - 1 of P X[:, cols] for chunk n (TRANSPOSE: of P^T X[:, cols]), [BR, BR];
    under SCALE the rows of X are multiplied by `scale` first (diag(scale) X, e.g. k_beta = diag(beta) K).

    P is read back from memory one [BR, BR] block at a time, each with the BR rows of X it multiplies.
    P is lower triangular, so row block b needs the blocks j <= b (TRANSPOSE: P^T's row block b is P's
    column block b, which needs the rows a >= b): half of them."""
    b = n * C + i0 + tl.arange(0, BR)
    OUT = tl.zeros([BR, BR], dtype=ACC)
    j0 = i0 if TRANSPOSE else 0
    while j0 < (C if TRANSPOSE else i0 + BR):      # a runtime bound (i0 is): a while loop
        j = n * C + j0 + tl.arange(0, BR)
        X_j = chunk_kernels.load_rows(x=x, t=j, cols=cols, T=T, width=width)
        if SCALE:
            X_j *= tl.load(scale + j, mask=j < T, other=0.0)[:, None]
        if TRANSPOSE:
            P_bj = load_transposed(x=p, t=j, cols=i0 + tl.arange(0, BR), T=T, width=C)     # P[j, b]^T
        else:
            P_bj = chunk_kernels.load_rows(x=p, t=b, cols=j0 + tl.arange(0, BR), T=T, width=C)  # P[b, j]
        OUT = chunk_kernels.mma(X=P_bj, Y=X_j, Acc=OUT, PRECISION=PRECISION)
        j0 += BR
    return OUT


@triton.jit
def decayed_product_rows(
    # pointers
    p,          # [T, C]        P, lower triangular: one [C, C] matrix per chunk
    y,          # [T, K]
    scale,      # [T]           a factor per row of y (read under SCALE)
    g_cum,      # [N*C, K]      G = cumsum(g) inside each chunk, per channel
    # indices
    n,          # the chunk
    i0,         # the block's first row inside the chunk
    cols,       # [BR]          the channels
    # sizes
    T,
    K,
    C: tl.constexpr,
    BR: tl.constexpr,
    # switches
    TRANSPOSE: tl.constexpr,
    SCALE: tl.constexpr,
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """Rows b = i0 ... i0 + BR - 1 of Z for chunk n and channels cols, [BR, BR] (`chunked.decayed_product`
    on a tile):  Z_i = sum_{j <= i} P_ij exp(G_i - G_j) * Y_j;
    TRANSPOSE:   Z_j = sum_{i >= j} P_ij exp(G_i - G_j) * Y_i.
    Under SCALE the rows of Y are multiplied by `scale` first.

    The chunk is cut into blocks of BR rows. Every earlier block (TRANSPOSE: every later one) meets this
    block through one reference row r between them, the row just before the block (TRANSPOSE: its last
    row): exp(G_i - G_j) = exp(G_i - G_r) exp(G_r - G_j), both <= 1, so each such block is one product of
    P's [BR, BR] block with the scaled rows of Y. Inside the block the factors are exact, one row of Y at
    a time (exp of a masked difference, never positive). `kda.decayed_scores_tile` takes its pairs the
    same way, through reference rows, at log2(C) levels instead of one level of blocks."""
    b = n * C + i0 + tl.arange(0, BR)                                  # this block's rows
    jj = tl.arange(0, BR)
    G_b = chunk_kernels.load_rows(x=g_cum, t=b, cols=cols, T=n * C + C, width=K)
    Z = tl.zeros([BR, BR], dtype=ACC)
    if TRANSPOSE:           # the later blocks a, through r = this block's last row
        G_r = tl.load(g_cum + (n * C + i0 + BR - 1) * K + cols, mask=cols < K, other=0.0)
        a0 = i0 + BR
        while a0 < C:       # a runtime bound (i0 is): a while loop
            a = n * C + a0 + jj
            Y_a = chunk_kernels.load_rows(x=y, t=a, cols=cols, T=T, width=K)
            if SCALE:
                Y_a *= tl.load(scale + a, mask=a < T, other=0.0)[:, None]
            G_a = chunk_kernels.load_rows(x=g_cum, t=a, cols=cols, T=n * C + C, width=K)
            Y_a *= tl.exp(G_a - G_r[None, :])
            P_ab = chunk_kernels.load_rows(x=p, t=a, cols=i0 + jj, T=T, width=C)           # P[a, b]
            Z = chunk_kernels.mma(X=tl.trans(P_ab), Y=Y_a, Acc=Z, PRECISION=PRECISION)
            a0 += BR
        Z *= tl.exp(G_r[None, :] - G_b)
    else:                   # the earlier blocks j, through r = the row before this block
        # i0 = 0: no block
        G_r = tl.load(g_cum + (n * C + tl.maximum(i0 - 1, 0)) * K + cols, mask=cols < K, other=0.0)
        j0 = 0
        while j0 < i0:
            j = n * C + j0 + jj
            Y_j = chunk_kernels.load_rows(x=y, t=j, cols=cols, T=T, width=K)
            if SCALE:
                Y_j *= tl.load(scale + j, mask=j < T, other=0.0)[:, None]
            G_j = chunk_kernels.load_rows(x=g_cum, t=j, cols=cols, T=n * C + C, width=K)
            Y_j *= tl.exp(G_r[None, :] - G_j)
            P_bj = chunk_kernels.load_rows(x=p, t=b, cols=j0 + jj, T=T, width=C)           # P[b, j]
            Z = chunk_kernels.mma(X=P_bj, Y=Y_j, Acc=Z, PRECISION=PRECISION)
            j0 += BR
        Z *= tl.exp(G_b - G_r[None, :])
    for m in range(BR):     # inside the block: row m of Y, with its exact factors
        row_m = n * C + i0 + m + tl.arange(0, 1)                        # row m, a [1] index
        Y_m = chunk_kernels.load_rows(x=y, t=row_m, cols=cols, T=T, width=K)                # [1, BR]
        if SCALE:
            Y_m *= tl.load(scale + row_m, mask=row_m < T, other=0.0)[:, None]
        G_m = chunk_kernels.load_rows(x=g_cum, t=row_m, cols=cols, T=n * C + C, width=K)
        if TRANSPOSE:       # Z_j += P_mj exp(G_m - G_j) Y_m for j <= m
            keep = (jj <= m)[:, None]
            P_m = load_transposed(x=p, t=row_m, cols=i0 + jj, T=T, width=C)   # P[m, b]: [BR, 1]
            Z += tl.where(keep, P_m * tl.exp(tl.where(keep, G_m - G_b, 0.0)), 0.0) * Y_m
        else:               # Z_i += P_im exp(G_i - G_m) Y_m for i >= m
            keep = (jj >= m)[:, None]
            P_m = chunk_kernels.load_rows(x=p, t=b, cols=i0 + m + tl.arange(0, 1), T=T, width=C)   # P[b, m]
            Z += tl.where(keep, P_m * tl.exp(tl.where(keep, G_b - G_m, 0.0)), 0.0) * Y_m
    return Z
