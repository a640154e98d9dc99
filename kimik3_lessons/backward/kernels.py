"""The backward pass as Triton kernels: the steps of `chunked.chunked_backward`, kernel by kernel.

The launcher (`triton_chunked_backward`) first recomputes the forward's factors and states with the
forward's own kernels (the mixer's intra-chunk kernel and `chunk_kernels.chunk_scan_kernel`: a training
step keeps only the inputs), then runs the four launches of `backward_launches`:

  3'. `chunk_output_backward_kernel`, shared by the four mixers, one program per (block of BR rows, head):
      the backward of O_n = Qd_n S_n + A_qk,n U'_n,
          dA_qk = tril(dO U'^T),   dQd = dO S_n^T,   du_new = A_qk^T dO (the walk adds Kd_n dS);
  2'. `chunk_walk_backward_kernel`, shared, one program per (block of BV value columns, head): the
      forward's walk run backward, chunk N-1 first, with dS [K, BV] on chip,
          dh_n = dS,   dU'_n = A_qk,n^T dO_n + Kd_n dS,   dS <- d_n * dS + Qd_n^T dO_n - W_n^T dU'_n;
  2'. `chunk_state_grad_kernel`, shared, one program per (block of BR rows, head): what the states give
      each chunk,
          dW = -dU' S_n^T,   dKd = U' dh_n^T,   dd = rowsum(S_n * dh_n);
  1'. the mixer's *intra-chunk backward kernel* (`BACKWARD_KERNELS`), one program per (chunk, head): the
      gradients of the factors back into q, k, v, [g,] [beta], through the WY form and the decay.
Then the launcher turns dG into dg (a reverse cumulative sum inside each chunk, one PyTorch line, as the
forward's cumsum is).

The kernels keep the rules written where `chunk_kernels` begins (names, argument groups, loops), and:
  - every product over a chunk's rows is thin: a [C, C] matrix (L_inv, dA, dA_qk) multiplies a block of
    BR rows by reading the matrix back from memory one [BR, BR] block at a time (`chunk_product_rows`),
    so no thread holds a [C, C] tile;
  - the gradient through L_inv = (I + A)^{-1} needs no [C, C] x [C, C] product: dA = -(dk_beta W^T +
    dv_beta U^T) (`chunked.wy_backward`, and `wy_backward` here);
  - KDA's per-channel pairs are taken through one reference row per block of BR rows, the [BR, BR]
    diagonal blocks row by row, exactly (`decayed_product_rows`).

The tensors, by the names the kernels give them ([B*H, ...] per head, contiguous, float32):
    the forward's  a_qk, l_inv [T, C]; w, qd, kd [T, K]; u, u_new [T, V]; decay [N, K]; h [N, K, V]; g_cum
    given          do [T, V]; ds_t [K, V] (the gradient of the final state)
    the walk       dh [N, K, V] (the gradient of S_{n+1}); du_new [T, V]; ds0 [K, V]
    the states     dqd, dw, dkd [T, K]; da_qk [T, C]; ddecay [N, K]
    intra-chunk    da [T, C] (dA, strictly lower); dq, dk [T, K]; dv [T, V]; dbeta [T]; dg_cum [N*C] or
                   [N*C, K] (dG, before the reverse cumsum)
"""

import torch
import triton
import triton.language as tl

from kimik3_lessons import chunk_kernels, contract

SLICE = chunk_kernels.SLICE
LAUNCH = dict(num_warps=8, num_stages=1, maxnreg=255)


# ---------------------------------------------------------------------------------------------------
# Device functions


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


# ---------------------------------------------------------------------------------------------------
# The two kernels the four mixers share


@triton.jit
def chunk_walk_backward_kernel(
    # pointers: inputs
    qd,         # [B*H, T, K]     Qd_n
    kd,         # [B*H, T, K]     Kd_n
    w,          # [B*H, T, K]     W_n (read under DELTA)
    decay,      # [B*H, N, K]     d_n, one factor per key row (read under DECAY)
    do,         # [B*H, T, V]     dO
    ds_t,       # [B*H, K, V]     the gradient of the final state (read under HAS_DS_T)
    # pointers: inputs and outputs
    du_new,     # [B*H, T, V]     in: A_qk,n^T dO_n (`chunk_output_backward_kernel`); out: dU'_n
    # pointers: outputs
    dh,         # [B*H, N, K, V]  dS_{n+1}, the gradient of the state chunk n leaves
    ds0,        # [B*H, K, V]     the gradient of the initial state
    # sizes
    T,
    K: tl.constexpr,
    V: tl.constexpr,
    C: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BR: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    SPLIT_K: tl.constexpr,
    DELTA: tl.constexpr,
    DECAY: tl.constexpr,      # the mixer's decay: None, "head" or "channel" (`Mixer.decay`)
    HAS_DS_T: tl.constexpr,
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """`chunk_kernels.chunk_scan_kernel` run backward: chunks n = N-1, ..., 0 of one head, value columns
    i_v*BV ... i_v*BV + BV - 1, with dS on chip from ds_t (or zeros) to ds0:

        dh_n  = dS                                        the gradient of S_{n+1}, for the next kernel
        dU'_n = A_qk,n^T dO_n + Kd_n dS                  (A_qk^T dO read from du_new, dU' written there)
        dS   <- d_n * dS + Qd_n^T dO_n - W_n^T dU'_n     (W under DELTA; d_n under DECAY, else 1)

    Kd and W trade places with the forward: there Kd^T U' is written into S and W S read out of it. dS
    is one [BK, BV] tile or two (SPLIT_K: the key rows 0..BK-1, dS_top, and BK..K-1, dS_bottom); the
    chunk's rows are taken BR at a time, each row of dU' needing only its row of Kd.
    """
    i_v = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    cols_k = tl.arange(0, BK)
    cols_v = i_v * BV + tl.arange(0, BV)
    N = tl.cdiv(T, C)
    qd += bh * T * K
    kd += bh * T * K
    w += bh * T * K
    decay += bh * N * K
    do += bh * T * V
    ds_t += bh * K * V
    dh += bh * N * K * V
    du_new += bh * T * V
    ds0 += bh * K * V
    dS_top = tl.zeros([BK, BV], dtype=ACC)
    dS_bottom = tl.zeros([BK, BV], dtype=ACC)
    if HAS_DS_T:
        dS_top += chunk_kernels.load_rows(x=ds_t, t=cols_k, cols=cols_v, T=K, width=V)
        if SPLIT_K:
            dS_bottom += chunk_kernels.load_rows(x=ds_t, t=BK + cols_k, cols=cols_v, T=K, width=V)
    n = N - 1
    while n >= 0:               # a loop over a runtime size: see "loops" in `chunk_kernels`
        chunk_kernels.store_rows(x=dh + n * K * V, t=cols_k, cols=cols_v, X=dS_top, T=K, width=V)
        if SPLIT_K:
            chunk_kernels.store_rows(x=dh + n * K * V, t=BK + cols_k, cols=cols_v, X=dS_bottom, T=K, width=V)
        Write_top = tl.zeros([BK, BV], dtype=ACC)     # Qd^T dO - W^T dU', into dS
        Write_bottom = tl.zeros([BK, BV], dtype=ACC)
        for r0 in range(0, C, BR):
            t = n * C + r0 + tl.arange(0, BR)
            dU_t = chunk_kernels.load_rows(x=du_new, t=t, cols=cols_v, T=T, width=V)           # A_qk^T dO
            dU_t = chunk_kernels.times_state(x=kd, t=t, Acc=dU_t, S_top=dS_top, S_bottom=dS_bottom, T=T, K=K,
                                             BK=BK, SPLIT_K=SPLIT_K, PRECISION=PRECISION)        # + Kd_t dS
            chunk_kernels.store_rows(x=du_new, t=t, cols=cols_v, X=dU_t, T=T, width=V)
            dO_t = chunk_kernels.load_rows(x=do, t=t, cols=cols_v, T=T, width=V)
            Write_top = chunk_kernels.mma(X=load_transposed(x=qd, t=t, cols=cols_k, T=T, width=K), Y=dO_t,
                                          Acc=Write_top, PRECISION=PRECISION)
            if DELTA:
                Write_top = chunk_kernels.mma(X=-load_transposed(x=w, t=t, cols=cols_k, T=T, width=K), Y=dU_t,
                                              Acc=Write_top, PRECISION=PRECISION)
            if SPLIT_K:
                Qd_t = load_transposed(x=qd, t=t, cols=BK + cols_k, T=T, width=K)
                Write_bottom = chunk_kernels.mma(X=Qd_t, Y=dO_t, Acc=Write_bottom, PRECISION=PRECISION)
                if DELTA:
                    W_t = load_transposed(x=w, t=t, cols=BK + cols_k, T=T, width=K)
                    Write_bottom = chunk_kernels.mma(X=-W_t, Y=dU_t, Acc=Write_bottom, PRECISION=PRECISION)
        if DECAY is not None:
            dS_top *= tl.load(decay + n * K + cols_k, mask=cols_k < K, other=1.0)[:, None]
            if SPLIT_K:
                dS_bottom *= tl.load(decay + n * K + BK + cols_k, mask=BK + cols_k < K, other=1.0)[:, None]
        dS_top += Write_top
        dS_bottom += Write_bottom
        n -= 1
    chunk_kernels.store_rows(x=ds0, t=cols_k, cols=cols_v, X=dS_top, T=K, width=V)
    if SPLIT_K:
        chunk_kernels.store_rows(x=ds0, t=BK + cols_k, cols=cols_v, X=dS_bottom, T=K, width=V)


@triton.jit
def chunk_output_backward_kernel(
    # pointers: inputs
    a_qk,       # [B*H, T, C]     A_qk,n
    u_new,      # [B*H, T, V]     U'_n
    h,          # [B*H, N, K, V]  S_n
    do,         # [B*H, T, V]     dO
    # pointers: outputs
    da_qk,      # [B*H, T, C]     dA_qk
    dqd,        # [B*H, T, K]     dQd
    du_new,     # [B*H, T, V]     A_qk^T dO (the walk adds Kd dS)
    # sizes
    T,
    K,
    V,
    C: tl.constexpr,
    BK: tl.constexpr,
    BR: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """Step 3', the backward of O_n = Qd_n S_n + A_qk,n U'_n, for rows b = i_r*BR ... i_r*BR + BR - 1 (in
    chunk n), every chunk at once (one program per block of BR rows and head, as
    `chunk_kernels.chunk_output_kernel`):

        dA_qk = tril(dO U'^T)      dQd = dO S_n^T      A_qk^T dO (what the walk starts dU' from)

    V is summed BR columns at a time, K taken BK columns at a time; A_qk^T's rows b need A_qk's rows
    a >= b only (it is lower triangular)."""
    i_r = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    N = tl.cdiv(T, C)
    n = i_r * BR // C
    i0 = i_r * BR - n * C                       # the block's first row inside the chunk
    b = i_r * BR + tl.arange(0, BR)
    r = tl.arange(0, C)
    a_qk += bh * T * C
    u_new += bh * T * V
    h += (bh * N + n) * K * V
    do += bh * T * V
    da_qk += bh * T * C
    dqd += bh * T * K
    du_new += bh * T * V
    dA_qk = tl.zeros([BR, C], dtype=ACC)
    v0 = 0
    while v0 < V:               # a runtime bound: a while loop
        cols = v0 + tl.arange(0, BR)
        dO_b = chunk_kernels.load_rows(x=do, t=b, cols=cols, T=T, width=V)
        dA_qk = chunk_kernels.mma(X=dO_b, Y=load_transposed(x=u_new, t=n * C + r, cols=cols, T=T, width=V),
                                  Acc=dA_qk,
                                  PRECISION=PRECISION)
        A_dO = tl.zeros([BR, BR], dtype=ACC)
        a0 = i0
        while a0 < C:           # A_qk^T dO for rows b: A_qk's rows a >= b
            a = n * C + a0 + tl.arange(0, BR)
            A_dO = chunk_kernels.mma(X=load_transposed(x=a_qk, t=a, cols=i0 + tl.arange(0, BR), T=T, width=C),
                                     Y=chunk_kernels.load_rows(x=do, t=a, cols=cols, T=T, width=V), Acc=A_dO,
                                     PRECISION=PRECISION)
            a0 += BR
        chunk_kernels.store_rows(x=du_new, t=b, cols=cols, X=A_dO, T=T, width=V)
        v0 += BR
    causal = r[None, :] <= (i0 + tl.arange(0, BR))[:, None]      # A_qk's entries: j <= i inside the chunk
    chunk_kernels.store_rows(x=da_qk, t=b, cols=r, X=tl.where(causal, dA_qk, 0.0), T=T, width=C)
    k0 = 0
    while k0 < K:
        rows = k0 + tl.arange(0, BK)            # key rows of the state, key columns of dQd
        dQd = tl.zeros([BR, BK], dtype=ACC)
        v0 = 0
        while v0 < V:
            cols = v0 + tl.arange(0, BR)
            dQd = chunk_kernels.mma(X=chunk_kernels.load_rows(x=do, t=b, cols=cols, T=T, width=V),
                                    Y=load_transposed(x=h, t=rows, cols=cols, T=K, width=V), Acc=dQd,
                                    PRECISION=PRECISION)
            v0 += BR
        chunk_kernels.store_rows(x=dqd, t=b, cols=rows, X=dQd, T=T, width=K)
        k0 += BK


@triton.jit
def chunk_state_grad_kernel(
    # pointers: inputs
    u_new,      # [B*H, T, V]     U'_n
    du_new,     # [B*H, T, V]     dU'_n (read under DELTA)
    h,          # [B*H, N, K, V]  S_n
    dh,         # [B*H, N, K, V]  dS_{n+1}
    # pointers: outputs
    dw,         # [B*H, T, K]     dW (written under DELTA)
    dkd,        # [B*H, T, K]     dKd
    ddecay,     # [B*H, N, K]     dd (written under DECAY, by each chunk's first block of rows)
    # sizes
    T,
    K,
    V,
    C: tl.constexpr,
    BK: tl.constexpr,
    BR: tl.constexpr,
    # switches
    DELTA: tl.constexpr,
    DECAY: tl.constexpr,      # the mixer's decay: None, "head" or "channel" (`Mixer.decay`)
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """After the walk, what the states give rows b = i_r*BR ... i_r*BR + BR - 1 (in chunk n):

        dW = -dU' S_n^T      dKd = U' dh_n^T      dd = rowsum(S_n * dh_n)

    the gradients of U'_n = U_n - W_n S_n and S_{n+1} = d_n * S_n + Kd_n^T U'_n that need dS_{n+1} or dU'.
    K is taken BK columns at a time, V summed BR columns at a time."""
    i_r = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    N = tl.cdiv(T, C)
    n = i_r * BR // C
    b = i_r * BR + tl.arange(0, BR)
    u_new += bh * T * V
    du_new += bh * T * V
    h += (bh * N + n) * K * V
    dh += (bh * N + n) * K * V
    dw += bh * T * K
    dkd += bh * T * K
    ddecay += (bh * N + n) * K
    k0 = 0
    while k0 < K:               # a runtime bound: a while loop
        rows = k0 + tl.arange(0, BK)            # key rows of the state, key columns of dW, dKd
        dW = tl.zeros([BR, BK], dtype=ACC)
        dKd = tl.zeros([BR, BK], dtype=ACC)
        dDecay = tl.zeros([BK], dtype=ACC)
        v0 = 0
        while v0 < V:
            cols = v0 + tl.arange(0, BR)
            dKd = chunk_kernels.mma(X=chunk_kernels.load_rows(x=u_new, t=b, cols=cols, T=T, width=V),
                                    Y=load_transposed(x=dh, t=rows, cols=cols, T=K, width=V), Acc=dKd,
                                    PRECISION=PRECISION)
            if DELTA:
                dW = chunk_kernels.mma(X=chunk_kernels.load_rows(x=du_new, t=b, cols=cols, T=T, width=V),
                                       Y=load_transposed(x=h, t=rows, cols=cols, T=K, width=V), Acc=dW,
                                       PRECISION=PRECISION)
            if DECAY is not None:
                dDecay += tl.sum(chunk_kernels.load_rows(x=h, t=rows, cols=cols, T=K, width=V)
                                 * chunk_kernels.load_rows(x=dh, t=rows, cols=cols, T=K, width=V), axis=1)
            v0 += BR
        chunk_kernels.store_rows(x=dkd, t=b, cols=rows, X=dKd, T=T, width=K)
        if DELTA:
            chunk_kernels.store_rows(x=dw, t=b, cols=rows, X=-dW, T=T, width=K)
        if DECAY is not None:
            if i_r * BR % C == 0:           # the chunk's first block of rows writes dd
                tl.store(ddecay + rows, dDecay, mask=rows < K)
        k0 += BK


# ---------------------------------------------------------------------------------------------------
# Step 1', the intra-chunk backward: one kernel per mixer, each adding to the one before it


@triton.jit
def wy_backward(
    # pointers: inputs
    l_inv,      # [T, C]      L_inv = (I + A)^{-1}, as the forward's intra-chunk kernel stored it
    w,          # [T, K]      W
    u,          # [T, V]      U
    v,          # [T, V]
    beta,       # [T]
    g_cum,      # [N*C]       G = cumsum(g) inside each chunk (read under DECAY "head")
    dw,         # [T, K]      dW
    du,         # [T, V]      dU (= dU')
    # pointers: outputs
    dv,         # [T, V]      dv = diag(beta) dv_beta
    dk_beta,    # [T, K]      dk_beta = L_inv^T dW (the caller adds to it; its dk)
    da,         # [T, C]      dA (DECAY "head": dA * Gamma)
    # indices
    n,          # the chunk
    # sizes
    T,
    K,
    V,
    C: tl.constexpr,
    BR: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    DECAY: tl.constexpr,      # the mixer's decay: None, "head" or "channel" (`Mixer.decay`)
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """The backward of the WY form (`chunked.wy_backward`) for chunk n, in three passes over memory:

        dv_beta = L_inv^T dU,  dk_beta = L_inv^T dW                  in [BR, BR] blocks
        dA = -(dk_beta W^T + dv_beta U^T), strictly lower            BR rows at a time
        dv = diag(beta) dv_beta

    With a decay per head, dA * Gamma is written (Gamma_ij = exp(G_i - G_j)): what the caller multiplies
    by K. Returns rowsum(dv_beta * V) [C], beta's gradient through v_beta. No [C, C] tile is ever held:
    dv_beta and dk_beta go to memory (dv, dk_beta) and come back BR rows at a time."""
    r = tl.arange(0, C)
    t = n * C + r
    for i0 in range(0, C, BR):
        b = n * C + i0 + tl.arange(0, BR)
        c0 = 0
        while c0 < V:           # a runtime bound: a while loop
            cols = c0 + tl.arange(0, BR)
            dV_beta = chunk_product_rows(p=l_inv, x=du, scale=beta, n=n, i0=i0, cols=cols, T=T, width=V, C=C,
                                         BR=BR, TRANSPOSE=True, SCALE=False, PRECISION=PRECISION, ACC=ACC)
            chunk_kernels.store_rows(x=dv, t=b, cols=cols, X=dV_beta, T=T, width=V)
            c0 += BR
        c0 = 0
        while c0 < K:
            cols = c0 + tl.arange(0, BR)
            dK_beta = chunk_product_rows(p=l_inv, x=dw, scale=beta, n=n, i0=i0, cols=cols, T=T, width=K, C=C,
                                         BR=BR, TRANSPOSE=True, SCALE=False, PRECISION=PRECISION, ACC=ACC)
            chunk_kernels.store_rows(x=dk_beta, t=b, cols=cols, X=dK_beta, T=T, width=K)
            c0 += BR
    tl.debug_barrier()          # dv_beta and dk_beta are in memory before any thread reads them back
    for i0 in range(0, C, BR):
        i = i0 + tl.arange(0, BR)
        dA = tl.zeros([BR, C], dtype=ACC)
        c0 = 0
        while c0 < K:
            cols = c0 + tl.arange(0, SLICE)
            dA = chunk_kernels.mma(X=chunk_kernels.load_rows(x=dk_beta, t=n * C + i, cols=cols, T=T, width=K),
                                   Y=load_transposed(x=w, t=t, cols=cols, T=T, width=K), Acc=dA,
                                   PRECISION=PRECISION)
            c0 += SLICE
        c0 = 0
        while c0 < V:
            cols = c0 + tl.arange(0, SLICE)
            dA = chunk_kernels.mma(X=chunk_kernels.load_rows(x=dv, t=n * C + i, cols=cols, T=T, width=V),
                                   Y=load_transposed(x=u, t=t, cols=cols, T=T, width=V), Acc=dA,
                                   PRECISION=PRECISION)
            c0 += SLICE
        lower = i[:, None] > r[None, :]
        if DECAY == "head":     # dA * Gamma, Gamma_ij = exp(G_i - G_j)
            G_i = tl.load(g_cum + n * C + i)
            G = tl.load(g_cum + t)
            dA *= tl.exp(tl.where(lower, G_i[:, None] - G[None, :], 0.0))
        chunk_kernels.store_rows(x=da, t=n * C + i, cols=r, X=tl.where(lower, -dA, 0.0), T=T, width=C)
    tl.debug_barrier()          # every thread has read dv_beta before dv overwrites it
    Beta = tl.load(beta + t, mask=t < T, other=0.0)
    dBeta = tl.zeros([C], dtype=ACC)
    c0 = 0
    while c0 < V:
        cols = c0 + tl.arange(0, SLICE)
        dV_beta = chunk_kernels.load_rows(x=dv, t=t, cols=cols, T=T, width=V)
        dBeta += tl.sum(dV_beta * chunk_kernels.load_rows(x=v, t=t, cols=cols, T=T, width=V), axis=1)
        chunk_kernels.store_rows(x=dv, t=t, cols=cols, X=Beta[:, None] * dV_beta, T=T, width=V)
        c0 += SLICE
    return dBeta


@triton.jit
def linear_attention_intra_backward_kernel(
    # pointers: inputs
    q,          # [B*H, T, K]
    k,          # [B*H, T, K]
    da_qk,      # [B*H, T, C]   dA_qk
    dqd,        # [B*H, T, K]   dQd (dQ's part through the state)
    dkd,        # [B*H, T, K]   dKd
    # pointers: outputs
    dq,         # [B*H, T, K]
    dk,         # [B*H, T, K]
    # sizes
    T,
    K,
    C: tl.constexpr,
    BR: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """A_qk = tril(Q K^T) backward for chunk n of head bh (dv = dU' needs no kernel):

        dq = dA_qk K + dQd          dk = dA_qk^T Q + dKd"""
    n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    q += bh * T * K
    k += bh * T * K
    da_qk += bh * T * C
    dqd += bh * T * K
    dkd += bh * T * K
    dq += bh * T * K
    dk += bh * T * K
    for i0 in range(0, C, BR):
        b = n * C + i0 + tl.arange(0, BR)
        c0 = 0
        while c0 < K:           # a runtime bound: a while loop
            cols = c0 + tl.arange(0, BR)
            dQ = chunk_product_rows(p=da_qk, x=k, scale=k, n=n, i0=i0, cols=cols, T=T, width=K, C=C, BR=BR,
                                    TRANSPOSE=False, SCALE=False, PRECISION=PRECISION, ACC=ACC)
            dK = chunk_product_rows(p=da_qk, x=q, scale=q, n=n, i0=i0, cols=cols, T=T, width=K, C=C, BR=BR,
                                    TRANSPOSE=True, SCALE=False, PRECISION=PRECISION, ACC=ACC)
            dQ += chunk_kernels.load_rows(x=dqd, t=b, cols=cols, T=T, width=K)
            dK += chunk_kernels.load_rows(x=dkd, t=b, cols=cols, T=T, width=K)
            chunk_kernels.store_rows(x=dq, t=b, cols=cols, X=dQ, T=T, width=K)
            chunk_kernels.store_rows(x=dk, t=b, cols=cols, X=dK, T=T, width=K)
            c0 += BR


@triton.jit
def deltanet_intra_backward_kernel(
    # pointers: inputs
    q,          # [B*H, T, K]
    k,          # [B*H, T, K]
    v,          # [B*H, T, V]
    beta,       # [B*H, T]
    l_inv,      # [B*H, T, C]   L_inv, from the forward's intra-chunk kernel
    w,          # [B*H, T, K]   W
    u,          # [B*H, T, V]   U
    da_qk,      # [B*H, T, C]   dA_qk
    dw,         # [B*H, T, K]   dW
    du_new,     # [B*H, T, V]   dU = dU'
    dqd,        # [B*H, T, K]   dQd
    dkd,        # [B*H, T, K]   dKd
    # pointers: outputs
    da,         # [B*H, T, C]   dA (written, then read back in slices)
    dq,         # [B*H, T, K]
    dk,         # [B*H, T, K]
    dv,         # [B*H, T, V]
    dbeta,      # [B*H, T]
    # sizes
    T,
    K,
    V,
    C: tl.constexpr,
    BR: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """Lesson 03's backward plus the WY form's (`chunked.deltanet_factors_backward`), for chunk n:

        dv, dk_beta, dA       `wy_backward`
        dk_beta += dA K,   dk = dA^T k_beta + beta dk_beta + dA_qk^T Q + dKd,   dq = dA_qk K + dQd
        dbeta = rowsum(dk_beta * K) + rowsum(dv_beta * V)

    dA is written to memory and read back in slices (`chunk_product_rows`), like L_inv in the forward."""
    n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    r = tl.arange(0, C)
    t = n * C + r
    q += bh * T * K
    k += bh * T * K
    v += bh * T * V
    beta += bh * T
    l_inv += bh * T * C
    w += bh * T * K
    u += bh * T * V
    da_qk += bh * T * C
    dw += bh * T * K
    du_new += bh * T * V
    dqd += bh * T * K
    dkd += bh * T * K
    da += bh * T * C
    dq += bh * T * K
    dk += bh * T * K
    dv += bh * T * V
    dbeta += bh * T
    dBeta = wy_backward(l_inv=l_inv, w=w, u=u, v=v, beta=beta, g_cum=beta, dw=dw, du=du_new, dv=dv,
                        dk_beta=dk, da=da, n=n, T=T, K=K, V=V, C=C, BR=BR, SLICE=SLICE, DECAY=None,
                        PRECISION=PRECISION, ACC=ACC)
    tl.store(dbeta + t, dBeta, mask=t < T)            # beta's gradient through V; the rest is added below
    tl.debug_barrier()          # dA, dk_beta and dbeta are in memory before any thread reads them back
    for i0 in range(0, C, BR):
        b = n * C + i0 + tl.arange(0, BR)
        Beta_b = tl.load(beta + b, mask=b < T, other=0.0)[:, None]
        dBeta_b = tl.load(dbeta + b, mask=b < T, other=0.0)
        c0 = 0
        while c0 < K:           # a runtime bound: a while loop
            cols = c0 + tl.arange(0, BR)
            K_b = chunk_kernels.load_rows(x=k, t=b, cols=cols, T=T, width=K)
            dK_beta = chunk_kernels.load_rows(x=dk, t=b, cols=cols, T=T, width=K)
            # + dA K
            dK_beta += chunk_product_rows(p=da, x=k, scale=beta, n=n, i0=i0, cols=cols, T=T, width=K, C=C,
                                          BR=BR,
                                          TRANSPOSE=False, SCALE=False, PRECISION=PRECISION, ACC=ACC)
            dBeta_b += tl.sum(dK_beta * K_b, axis=1)
            dK = Beta_b * dK_beta + chunk_kernels.load_rows(x=dkd, t=b, cols=cols, T=T, width=K)
            dK += chunk_product_rows(p=da, x=k, scale=beta, n=n, i0=i0, cols=cols, T=T, width=K, C=C, BR=BR,
                                     TRANSPOSE=True, SCALE=True, PRECISION=PRECISION, ACC=ACC)  # dA^T k_beta
            dK += chunk_product_rows(p=da_qk, x=q, scale=beta, n=n, i0=i0, cols=cols, T=T, width=K, C=C,
                                     BR=BR,
                                     TRANSPOSE=True, SCALE=False, PRECISION=PRECISION, ACC=ACC)  # dA_qk^T Q
            dQ = chunk_product_rows(p=da_qk, x=k, scale=beta, n=n, i0=i0, cols=cols, T=T, width=K, C=C, BR=BR,
                                    TRANSPOSE=False, SCALE=False, PRECISION=PRECISION, ACC=ACC)  # dA_qk K
            dQ += chunk_kernels.load_rows(x=dqd, t=b, cols=cols, T=T, width=K)
            chunk_kernels.store_rows(x=dq, t=b, cols=cols, X=dQ, T=T, width=K)
            chunk_kernels.store_rows(x=dk, t=b, cols=cols, X=dK, T=T, width=K)
            c0 += BR
        tl.store(dbeta + b, dBeta_b, mask=b < T)


@triton.jit
def gated_deltanet_intra_backward_kernel(
    # pointers: inputs
    q,          # [B*H, T, K]
    k,          # [B*H, T, K]
    v,          # [B*H, T, V]
    g_cum,      # [B*H, N*C]     G = cumsum(g) inside each chunk (from the launcher)
    beta,       # [B*H, T]
    l_inv,      # [B*H, T, C]    L_inv, from the forward's intra-chunk kernel
    w,          # [B*H, T, K]    W
    u,          # [B*H, T, V]    U
    a_qk,       # [B*H, T, C]    A_qk = Q K^T * Gamma, from the forward's intra-chunk kernel
    da_qk,      # [B*H, T, C]    dA_qk (overwritten by dA_qk * Gamma)
    dw,         # [B*H, T, K]    dW
    du_new,     # [B*H, T, V]    dU = dU'
    dqd,        # [B*H, T, K]    dQd
    dkd,        # [B*H, T, K]    dKd
    ddecay,     # [B*H, N, K]    dd, per key row (d is one factor per head: they are summed)
    # pointers: outputs
    da,         # [B*H, T, C]    dA * Gamma (written, then read back in slices)
    dq,         # [B*H, T, K]
    dk,         # [B*H, T, K]
    dv,         # [B*H, T, V]
    dbeta,      # [B*H, T]
    dg_cum,     # [B*H, N*C]     dG (the launcher turns it into dg)
    # sizes
    T,
    K,
    V,
    C: tl.constexpr,
    BR: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """Lesson 05's intra-chunk backward plus the decay (`chunked.gated_deltanet_factors_backward`), with
    Gamma_ij = exp(G_i - G_j) (i >= j) rebuilt as the forward builds it. What changed is marked "decay":

        dA (WY);  dX = diag(beta) (dA Gamma) K,  dY = (dA Gamma)^T diag(beta) K:   dk += dX + dY
        dq = (dA_qk Gamma) K + exp(G) dQd,   dk += (dA_qk Gamma)^T Q + beta exp(G) dk_beta + exp(G_C - G) dKd
        dG = pair(dA_qk * A_qk) + rowsum(K * (dX - dY)) + rowsum(dk_beta * k_beta) + rowsum(dQd * Qd)
             - rowsum(dKd * Kd),   dG_C += sum(dKd * Kd) + sum(dd * d)

    (pair(E) = rowsum(E) - colsum(E); the pairs of A enter through dX and dY: rowsum(dM * M) =
    rowsum(K * dX) and colsum(dM * M) = rowsum(K * dY).)"""
    n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    N = tl.cdiv(T, C)
    r = tl.arange(0, C)
    t = n * C + r
    q += bh * T * K
    k += bh * T * K
    v += bh * T * V
    g_cum += bh * N * C                                                                     # decay
    beta += bh * T
    l_inv += bh * T * C
    w += bh * T * K
    u += bh * T * V
    a_qk += bh * T * C                                                                      # decay
    da_qk += bh * T * C
    dw += bh * T * K
    du_new += bh * T * V
    dqd += bh * T * K
    dkd += bh * T * K
    ddecay += (bh * N + n) * K                                                              # decay
    da += bh * T * C
    dq += bh * T * K
    dk += bh * T * K
    dv += bh * T * V
    dbeta += bh * T
    dg_cum += bh * N * C                                                                    # decay
    dBeta = wy_backward(l_inv=l_inv, w=w, u=u, v=v, beta=beta, g_cum=g_cum, dw=dw, du=du_new, dv=dv,
                        dk_beta=dk, da=da, n=n, T=T, K=K, V=V, C=C, BR=BR, SLICE=SLICE, DECAY="head",
                        PRECISION=PRECISION, ACC=ACC)  # decay: dA * Gamma
    tl.store(dbeta + t, dBeta, mask=t < T)            # beta's gradient through V; the rest is added below
    dG_cols = tl.zeros([C], dtype=ACC)                                               # decay
    for i0 in range(0, C, BR):      # pair(dA_qk * A_qk), then dA_qk * Gamma, BR rows at a time: decay
        b = n * C + i0 + tl.arange(0, BR)
        dA_qk = chunk_kernels.load_rows(x=da_qk, t=b, cols=r, T=T, width=C)
        E = dA_qk * chunk_kernels.load_rows(x=a_qk, t=b, cols=r, T=T, width=C)
        tl.store(dg_cum + b, tl.sum(E, axis=1))             # rowsum(E): dG of these rows, so far
        dG_cols += tl.sum(E, axis=0)                        # colsum(E): subtracted below
        lower = (i0 + tl.arange(0, BR))[:, None] >= r[None, :]
        Gamma = tl.exp(tl.where(lower, tl.load(g_cum + b)[:, None] - tl.load(g_cum + t)[None, :], 0.0))
        chunk_kernels.store_rows(x=da_qk, t=b, cols=r, X=tl.where(lower, dA_qk * Gamma, 0.0), T=T, width=C)
    tl.debug_barrier()          # every thread has written its rows of dG before they are read back
    tl.store(dg_cum + t, tl.load(dg_cum + t) - dG_cols)                                     # decay
    tl.debug_barrier()          # dA, dA_qk, dG, dbeta and dk_beta are in memory before they are read back
    G_C = tl.load(g_cum + n * C + C - 1)                                                    # decay
    dDecay = tl.zeros([BR], dtype=ACC)      # decay: dd summed over the key rows (one d per head)
    c0 = 0
    while c0 < K:
        dDecay += tl.load(ddecay + c0 + tl.arange(0, BR), mask=c0 + tl.arange(0, BR) < K, other=0.0)
        c0 += BR
    dG_C = tl.sum(dDecay) * tl.exp(G_C)                                                    # decay: dd * d
    for i0 in range(0, C, BR):      # BR rows at a time, in order: the last block adds dG_C
        b = n * C + i0 + tl.arange(0, BR)
        Beta_b = tl.load(beta + b, mask=b < T, other=0.0)[:, None]
        dBeta_b = tl.load(dbeta + b, mask=b < T, other=0.0)
        G_b = tl.load(g_cum + b)                                                            # decay
        Decay_in = tl.exp(G_b)[:, None]                                                     # decay
        Decay_out = tl.exp(G_C - G_b)[:, None]                                              # decay
        dG_b = tl.load(dg_cum + b)
        c0 = 0
        while c0 < K:           # a runtime bound: a while loop
            cols = c0 + tl.arange(0, BR)
            K_b = chunk_kernels.load_rows(x=k, t=b, cols=cols, T=T, width=K)
            dQd = chunk_kernels.load_rows(x=dqd, t=b, cols=cols, T=T, width=K)
            Q_b = chunk_kernels.load_rows(x=q, t=b, cols=cols, T=T, width=K)
            dG_b += tl.sum(dQd * Decay_in * Q_b, axis=1)
            dQ = Decay_in * dQd + chunk_product_rows(p=da_qk, x=k, scale=beta, n=n, i0=i0, cols=cols, T=T,
                                                     width=K, C=C, BR=BR, TRANSPOSE=False, SCALE=False,
                                                     PRECISION=PRECISION, ACC=ACC)  # (dA_qk Gamma) K
            chunk_kernels.store_rows(x=dq, t=b, cols=cols, X=dQ, T=T, width=K)
            Z = chunk_product_rows(p=da, x=k, scale=beta, n=n, i0=i0, cols=cols, T=T, width=K, C=C, BR=BR,
                                   TRANSPOSE=False, SCALE=False, PRECISION=PRECISION, ACC=ACC)  # (dA Gamma) K
            dBeta_b += tl.sum(Z * K_b, axis=1)
            dK = Beta_b * Z                                                                 # dX
            dG_b += tl.sum(K_b * dK, axis=1)
            # (dA Gamma)^T k_beta
            dY = chunk_product_rows(p=da, x=k, scale=beta, n=n, i0=i0, cols=cols, T=T, width=K, C=C, BR=BR,
                                    TRANSPOSE=True, SCALE=True, PRECISION=PRECISION, ACC=ACC)
            dK += dY
            dG_b -= tl.sum(K_b * dY, axis=1)
            # (dA_qk Gamma)^T Q
            dK += chunk_product_rows(p=da_qk, x=q, scale=beta, n=n, i0=i0, cols=cols, T=T, width=K, C=C,
                                     BR=BR,
                                     TRANSPOSE=True, SCALE=False, PRECISION=PRECISION, ACC=ACC)
            dK_beta = chunk_kernels.load_rows(x=dk, t=b, cols=cols, T=T, width=K)
            dBeta_b += tl.sum(dK_beta * Decay_in * K_b, axis=1)
            dG_b += tl.sum(dK_beta * Beta_b * Decay_in * K_b, axis=1)                      # decay
            dK += Beta_b * Decay_in * dK_beta
            dKd = chunk_kernels.load_rows(x=dkd, t=b, cols=cols, T=T, width=K)
            dK += Decay_out * dKd
            dKd_Kd = tl.sum(dKd * Decay_out * K_b, axis=1)                                  # decay
            dG_b -= dKd_Kd
            dG_C += tl.sum(dKd_Kd)
            chunk_kernels.store_rows(x=dk, t=b, cols=cols, X=dK, T=T, width=K)
            c0 += BR
        tl.store(dbeta + b, dBeta_b, mask=b < T)
        tl.store(dg_cum + b, tl.where(b == n * C + C - 1, dG_b + dG_C, dG_b))              # decay


@triton.jit
def kda_intra_backward_kernel(
    # pointers: inputs
    q,          # [B*H, T, K]
    k,          # [B*H, T, K]
    v,          # [B*H, T, V]
    g_cum,      # [B*H, N*C, K]  G = cumsum(g) inside each chunk, per channel (from the launcher)
    beta,       # [B*H, T]
    l_inv,      # [B*H, T, C]    L_inv, from the forward's intra-chunk kernel
    w,          # [B*H, T, K]    W
    u,          # [B*H, T, V]    U
    da_qk,      # [B*H, T, C]    dA_qk
    dw,         # [B*H, T, K]    dW
    du_new,     # [B*H, T, V]    dU = dU'
    dqd,        # [B*H, T, K]    dQd
    dkd,        # [B*H, T, K]    dKd
    ddecay,     # [B*H, N, K]    dd, per key row
    # pointers: outputs
    da,         # [B*H, T, C]    dA (written, then read back in blocks)
    dq,         # [B*H, T, K]
    dk,         # [B*H, T, K]
    dv,         # [B*H, T, V]
    dbeta,      # [B*H, T]
    dg_cum,     # [B*H, N*C, K]  dG, per channel (the launcher turns it into dg)
    # sizes
    T,
    K,
    V,
    C: tl.constexpr,
    BR: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """Lesson 06's intra-chunk backward with the decay per channel (`chunked.kda_factors_backward`): the
    pairs sit inside sums over channels, so (dA Gamma) K becomes `decayed_product_rows`, decayed(dA) K,
    and every dG term is per channel:

        Z = decayed(dA) K,  dX = diag(beta) Z,  dY = decayed(dA)^T diag(beta) K,   dk += dX + dY
        dq = decayed(dA_qk) K + exp(G) dQd
        dk += decayed(dA_qk)^T Q + beta exp(G) dk_beta + exp(G_C - G) dKd
        dG = K (dX - dY) + Q decayed(dA_qk) K - K decayed(dA_qk)^T Q + dk_beta k_beta + dQd Qd - dKd Kd
        dG_C += colsum(dKd Kd) + dd d,   dbeta += rowsum(Z K) + rowsum(dk_beta exp(G) K)

    (all elementwise, [C, K]). After the WY form's backward, the chunk is taken in blocks of BR rows and
    BR channels: every tile is [BR, BR]."""
    n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    N = tl.cdiv(T, C)
    t = n * C + tl.arange(0, C)
    q += bh * T * K
    k += bh * T * K
    v += bh * T * V
    g_cum += bh * N * C * K                                                              # per channel
    beta += bh * T
    l_inv += bh * T * C
    w += bh * T * K
    u += bh * T * V
    da_qk += bh * T * C
    dw += bh * T * K
    du_new += bh * T * V
    dqd += bh * T * K
    dkd += bh * T * K
    ddecay += (bh * N + n) * K
    da += bh * T * C
    dq += bh * T * K
    dk += bh * T * K
    dv += bh * T * V
    dbeta += bh * T
    dg_cum += bh * N * C * K                                                             # per channel
    dBeta = wy_backward(l_inv=l_inv, w=w, u=u, v=v, beta=beta, g_cum=beta, dw=dw, du=du_new, dv=dv,
                        dk_beta=dk, da=da, n=n, T=T, K=K, V=V, C=C, BR=BR, SLICE=SLICE, DECAY=None,
                        PRECISION=PRECISION, ACC=ACC)
    tl.store(dbeta + t, dBeta, mask=t < T)            # beta's gradient through V; the rest is added below
    tl.debug_barrier()          # dA, dk_beta and dbeta are in memory before any thread reads them back
    c0 = 0
    while c0 < K:               # BR channels at a time (a runtime bound: a while loop)
        cols = c0 + tl.arange(0, BR)
        # the chunk's last row
        G_C = tl.load(g_cum + (n * C + C - 1) * K + cols, mask=cols < K, other=0.0)
        dG_C = tl.load(ddecay + cols, mask=cols < K, other=0.0) * tl.exp(G_C)             # dd * d
        for i0 in range(0, C, BR):      # BR rows at a time, in order: the last block adds dG_C
            b = n * C + i0 + tl.arange(0, BR)
            K_b = chunk_kernels.load_rows(x=k, t=b, cols=cols, T=T, width=K)
            Beta_b = tl.load(beta + b, mask=b < T, other=0.0)[:, None]
            G_b = chunk_kernels.load_rows(x=g_cum, t=b, cols=cols, T=N * C, width=K)
            Decay_in = tl.exp(G_b)
            Decay_out = tl.exp(G_C[None, :] - G_b)
            dQ = decayed_product_rows(p=da_qk, y=k, scale=beta, g_cum=g_cum, n=n, i0=i0, cols=cols, T=T, K=K,
                                      C=C, BR=BR, TRANSPOSE=False, SCALE=False, PRECISION=PRECISION, ACC=ACC)
            dQ += Decay_in * chunk_kernels.load_rows(x=dqd, t=b, cols=cols, T=T, width=K)
            chunk_kernels.store_rows(x=dq, t=b, cols=cols, X=dQ, T=T, width=K)
            dG = chunk_kernels.load_rows(x=q, t=b, cols=cols, T=T, width=K) * dQ           # Q dX_qk + dQd Qd
            Z = decayed_product_rows(p=da, y=k, scale=beta, g_cum=g_cum, n=n, i0=i0, cols=cols, T=T, K=K, C=C,
                                     BR=BR, TRANSPOSE=False, SCALE=False, PRECISION=PRECISION, ACC=ACC)
            dBeta_b = tl.sum(Z * K_b, axis=1)
            dK = Beta_b * Z                                                                 # dX
            dY = decayed_product_rows(p=da, y=k, scale=beta, g_cum=g_cum, n=n, i0=i0, cols=cols, T=T, K=K,
                                      C=C, BR=BR, TRANSPOSE=True, SCALE=True, PRECISION=PRECISION, ACC=ACC)
            dG += K_b * (dK - dY)
            dK += dY
            dY_qk = decayed_product_rows(p=da_qk, y=q, scale=beta, g_cum=g_cum, n=n, i0=i0, cols=cols, T=T,
                                         K=K, C=C, BR=BR, TRANSPOSE=True, SCALE=False, PRECISION=PRECISION,
                                         ACC=ACC)
            dG -= K_b * dY_qk
            dK += dY_qk
            dK_beta = chunk_kernels.load_rows(x=dk, t=b, cols=cols, T=T, width=K)
            dBeta_b += tl.sum(dK_beta * Decay_in * K_b, axis=1)
            dG += dK_beta * Beta_b * Decay_in * K_b                                         # dk_beta k_beta
            dK += Beta_b * Decay_in * dK_beta
            dKd = chunk_kernels.load_rows(x=dkd, t=b, cols=cols, T=T, width=K)
            dK += Decay_out * dKd
            dKd_Kd = dKd * Decay_out * K_b
            dG -= dKd_Kd
            dG_C += tl.sum(dKd_Kd, axis=0)
            # the chunk's last row
            dG = tl.where((b == n * C + C - 1)[:, None], dG + dG_C[None, :], dG)
            chunk_kernels.store_rows(x=dk, t=b, cols=cols, X=dK, T=T, width=K)
            chunk_kernels.store_rows(x=dg_cum, t=b, cols=cols, X=dG, T=N * C, width=K)
            tl.store(dbeta + b, tl.load(dbeta + b, mask=b < T, other=0.0) + dBeta_b, mask=b < T)
            tl.debug_barrier()  # this block's dbeta is in memory before the next channels add to it
        c0 += BR


# ---------------------------------------------------------------------------------------------------
# The launcher

BACKWARD_KERNELS = {    # mixer name: its intra-chunk backward kernel (step 1')
    "linear_attention": linear_attention_intra_backward_kernel,
    "deltanet": deltanet_intra_backward_kernel,
    "gated_deltanet": gated_deltanet_intra_backward_kernel,
    "kda": kda_intra_backward_kernel,
}
# A tensor a kernel may be given in place of one the mixer does not have, and the switch that keeps the
# kernel from reading it (as `chunk_kernels.READ_ONLY_UNDER`).
READ_ONLY_UNDER = {**chunk_kernels.READ_ONLY_UNDER, "ds_t": "HAS_DS_T", "dw": "DELTA", "ddecay": "DECAY"}


def backward_launches(mixer, T, K, V, chunk_size, heads, *, has_ds_t, precision="ieee", acc=tl.float32):
    """The four launches of `mixer`'s backward after the forward's recompute: [(step, kernel, grid,
    constexprs, options)], the constexprs those each kernel takes (as `chunk_kernels.launches`). The
    launcher runs them; `gpu_targets` compiles the same ones."""
    C = chunk_size
    N = triton.cdiv(T, C)
    sizes = chunk_kernels.block_sizes(K, V)
    switches = dict(DELTA=mixer.delta, DECAY=mixer.decay, HAS_DS_T=has_ds_t, PRECISION=precision, ACC=acc)
    constexprs = dict(K=K, V=V, C=C, SLICE=SLICE, **sizes, **switches)
    rows = (N * C // sizes["BR"], heads)                        # one program per block of BR rows
    steps = [("outputs", chunk_output_backward_kernel, rows),
             ("walk", chunk_walk_backward_kernel, (triton.cdiv(V, sizes["BV"]), heads)),
             ("states", chunk_state_grad_kernel, rows),
             ("intra", BACKWARD_KERNELS[mixer.name], (N, heads))]
    runtime = {"outputs": ("K", "V"), "walk": (), "states": ("K", "V"), "intra": ("K", "V")}   # runtime sizes
    return [(step, kernel, grid, {n: value for n, value in constexprs.items()
                                  if n in kernel.arg_names and n not in runtime[step]}, LAUNCH)
            for step, kernel, grid in steps]


def triton_chunked_backward(mixer, do, dS_T, q, k, v, g=None, beta=None, chunk_size=64, initial_state=None,
                            input_precision="ieee"):
    """The gradients of `mixer`'s chunked form (a name or a `contract.Mixer`) as Triton kernels, given do
    [B, H, T, V] and dS_T [B, H, K, V] (None: the loss does not use the final state): the same numbers as
    `chunked.chunked_backward`, up to the precision of the products (input_precision, as the forward's).

    Recomputes the forward's factors and states with the forward's own kernels (`chunk_kernels.run`, its
    intra-chunk and scan steps), then runs `backward_launches`, then dg = the reverse cumulative sum of dG
    inside each chunk. Returns {"q", "k", "v", ["g",] ["beta",] "initial_state": gradient}: dq, dk, dv in
    their inputs' dtypes, the others in float32 (float64 for float64 inputs; None for an initial state
    that was not given)."""
    from kimik3_lessons import mixers
    mixer = mixers.get(mixer) if isinstance(mixer, str) else mixer
    tensors = chunk_kernels.chunk_tensors(mixer, q, k, v, g, beta, chunk_size=chunk_size,
                                          initial_state=initial_state, input_precision=input_precision)
    B, H, T, K, V = contract.check_inputs(q, k, v, g, beta, initial_state, **mixer.switches)
    if not isinstance(do, torch.Tensor) or do.shape != (B, H, T, V):
        raise ValueError(f"do must be [B, H, T, V] = [{B}, {H}, {T}, {V}] like o, "
                         f"got {contract.shape_str(do)}")
    if dS_T is not None and (not isinstance(dS_T, torch.Tensor) or dS_T.shape != (B, H, K, V)):
        raise ValueError(f"dS_T must be [B, H, K, V] = [{B}, {H}, {K}, {V}] like the final state, "
                         f"got {contract.shape_str(dS_T)}")
    contract.check_triton_inputs(do=do, dS_T=dS_T)
    chunk_kernels.run(mixer, tensors, chunk_size, input_precision, steps=("intra", "scan"))
    C, N, dtype = chunk_size, triton.cdiv(T, chunk_size), tensors["s_out"].dtype

    def new(*shape):
        return torch.empty(shape, dtype=dtype, device=tensors["s_out"].device)

    g_shape = (B, H, N * C, K) if mixer.decay == "channel" else (B, H, N * C)
    tensors.update(do=(do if do.dtype in (torch.bfloat16, torch.float16) else do.to(dtype)).contiguous(),
                   ds_t=None if dS_T is None else dS_T.to(dtype).contiguous(),
                   dh=new(B, H, N, K, V), du_new=new(B, H, T, V), ds0=new(B, H, K, V), dqd=new(B, H, T, K),
                   dw=new(B, H, T, K) if mixer.delta else None, dkd=new(B, H, T, K), da_qk=new(B, H, T, C),
                   ddecay=new(B, H, N, K) if mixer.decay else None, da=new(B, H, T, C), dq=new(B, H, T, K),
                   dk=new(B, H, T, K), dv=new(B, H, T, V) if mixer.delta else None,
                   dbeta=new(B, H, T) if mixer.delta else None,
                   dg_cum=new(*g_shape) if mixer.decay else None)
    for _, kernel, grid, constexprs, options in backward_launches(mixer, T, K, V, C, B * H,
                                                                  has_ds_t=dS_T is not None,
                                                                  precision=input_precision,
                                                                  acc=chunk_kernels.acc_dtype(tensors)):
        chunk_kernels.launch(kernel, grid, tensors, options, read_only_under=READ_ONLY_UNDER,
                             **{"T": T, "K": K, "V": V, **constexprs})
    grads = dict(q=tensors["dq"].to(q.dtype), k=tensors["dk"].to(k.dtype),
                 v=(tensors["dv"] if mixer.delta else tensors["du_new"]).to(v.dtype))
    if mixer.decay:     # dg_t = dG_t + ... + dG_C: the backward of G = cumsum(g) inside each chunk
        dG = tensors["dg_cum"].unflatten(2, (N, C))                 # [B, H, N, C] or [B, H, N, C, K]
        grads["g"] = contract.merge_chunks(dG.flip(3).cumsum(3).flip(3), T)
    if mixer.delta:
        grads["beta"] = tensors["dbeta"]
    grads["initial_state"] = tensors["ds0"] if initial_state is not None else None
    return grads
