"""The backward pass as Triton kernels: the steps of `chunked.chunked_backward`, kernel by kernel.

The launcher (`triton_chunked_backward`) first recomputes the forward's factors and states with the
forward's own kernels (the mixer's intra-chunk kernel and `chunk_kernels.chunk_scan_kernel`: keep the
inputs, recompute the rest, as flash-linear-attention's chunk_* functions do), then runs

  2'. `chunk_walk_backward_kernel`, shared by the four mixers, one program per (block of BV value columns,
      head): the forward's walk run backward, chunk N-1 first, with dS [K, BV] on chip,
          dh_n = dS,   dU'_n = A_qk,n^T dO_n + Kd_n dS,   dS <- d_n * dS + Qd_n^T dO_n - W_n^T dU'_n;
  3'. `chunk_state_grad_kernel`, shared, one program per (chunk, block of BK key columns, head): what the
      states give each chunk, summed over V in slices,
          dQd = dO S_n^T,  dW = -dU' S_n^T,  dKd = U' dh_n^T,  dd = rowsum(S_n * dh_n),  dA_qk = tril(dO U'^T);
  1'. the mixer's *intra-chunk backward kernel* (`BACKWARD_KERNELS`), one program per (chunk, head): the
      gradients of the factors back into q, k, v, [g,] [beta], through the WY form and the decay.
Then the launcher turns dG into dg (a reverse cumulative sum inside each chunk, one PyTorch line, as the
forward's cumsum is).

The kernels keep the rules written where `chunk_kernels` begins (names, argument groups, loops), and:
  - every product is thin: a [C, C] matrix (L_inv, dA, dA_qk) multiplies a slice of SLICE columns by
    reading the matrix back from memory SLICE columns (or rows, for its transpose) at a time
    (`chunk_product`), so no thread holds a row of a [C, C] tile and a column of X C long;
  - the gradient through L_inv = (I + A)^{-1} needs no [C, C] x [C, C] product: dA = -(dk_beta W^T +
    dv_beta U^T) (`chunked.wy_backward`);
  - KDA's per-channel pairs are taken through reference rows, level by level, as the forward's
    `kda.decayed_scores_tile` takes them (`decayed_product_slice`).

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
def chunk_product(
    # pointers
    p,          # [T, C]      P: one [C, C] matrix per chunk, rows t of the chunk
    x,          # [T, width]
    scale,      # [T]         a factor per row of x (read under SCALE)
    # indices
    n,          # the chunk
    cols,       # [SLICE]     the columns of x
    # sizes
    T,
    width,
    C: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    TRANSPOSE: tl.constexpr,
    SCALE: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """P X[:, cols] for chunk n (TRANSPOSE: P^T X[:, cols]), [C, SLICE]; under SCALE the rows of X are
    multiplied by `scale` first (diag(scale) X, e.g. k_beta = diag(beta) K).

    P is read back from p SLICE columns at a time (for P^T, SLICE rows, transposed), each with the SLICE
    rows of X it multiplies, and the products accumulate: every product is SLICE deep."""
    t = n * C + tl.arange(0, C)
    OUT = tl.zeros([C, SLICE], dtype=tl.float32)
    for j0 in range(0, C, SLICE):
        j = n * C + j0 + tl.arange(0, SLICE)                       # rows j of X: columns j of P
        X_j = chunk_kernels.load_rows(x=x, t=j, cols=cols, T=T, width=width)
        if SCALE:
            X_j *= tl.load(scale + j, mask=j < T, other=0.0)[:, None]
        if TRANSPOSE:
            P_j = tl.trans(chunk_kernels.load_rows(x=p, t=j, cols=tl.arange(0, C), T=T, width=C))
        else:
            P_j = chunk_kernels.load_rows(x=p, t=t, cols=j0 + tl.arange(0, SLICE), T=T, width=C)
        OUT = tl.dot(P_j, X_j, acc=OUT, input_precision=PRECISION)
    return OUT


@triton.jit
def decayed_product_slice(
    # pointers
    p,          # [T, C]        P, lower triangular: one [C, C] matrix per chunk
    y,          # [T, K]
    scale,      # [T]           a factor per row of y (read under SCALE)
    g_cum,      # [N*C, K]      G = cumsum(g) inside each chunk, per channel
    # indices
    n,          # the chunk
    cols,       # [SLICE]       the channels
    # sizes
    T,
    K,
    C: tl.constexpr,
    LOG_C: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    TRANSPOSE: tl.constexpr,
    SCALE: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Z_i = sum_{j <= i} P_ij exp(G_i - G_j) * Y_j for chunk n and channels cols, [C, SLICE]
    (`chunked.decayed_product` on a tile); TRANSPOSE: Z_j = sum_{i >= j} P_ij exp(G_i - G_j) * Y_i.
    Under SCALE the rows of Y are multiplied by `scale` first.

    On the diagonal the factor is 1. Then level by level, blocks of s = C, C/2, ..., 2 rows: rows in the
    lower half of a block meet columns in its upper half through the block's reference row r (the upper
    half's last), exp(G_i - G_j) = exp(G_i - G_r) exp(G_r - G_j), both <= 1. The side summed over is scaled
    to r and multiplied by P's quadrant, read back SLICE columns (or rows) at a time; the result is scaled
    from r to its own rows."""
    r = tl.arange(0, C)
    t = n * C + r
    G = chunk_kernels.load_rows(x=g_cum, t=t, cols=cols, T=n * C + C, width=K)
    Y = chunk_kernels.load_rows(x=y, t=t, cols=cols, T=T, width=K)
    if SCALE:
        Y *= tl.load(scale + t, mask=t < T, other=0.0)[:, None]
    Z = tl.load(p + t * C + r, mask=t < T, other=0.0)[:, None] * Y            # the diagonal
    for level in range(LOG_C):
        s = C >> level
        half = s // 2
        G_ref = chunk_kernels.load_rows(x=g_cum, t=n * C + (r // s) * s + half - 1, cols=cols, T=n * C + C,
                                        width=K)                                # each row's reference
        upper = (r % s) < half
        ACC = tl.zeros([C, SLICE], dtype=tl.float32)
        for j0 in range(0, C, SLICE):
            j = j0 + tl.arange(0, SLICE)                    # the rows summed over, inside the chunk
            G_j = chunk_kernels.load_rows(x=g_cum, t=n * C + j, cols=cols, T=n * C + C, width=K)
            G_ref_j = chunk_kernels.load_rows(x=g_cum, t=n * C + (j // s) * s + half - 1, cols=cols,
                                              T=n * C + C, width=K)
            Y_j = chunk_kernels.load_rows(x=y, t=n * C + j, cols=cols, T=T, width=K)
            if SCALE:
                Y_j *= tl.load(scale + n * C + j, mask=n * C + j < T, other=0.0)[:, None]
            same_block = (r[:, None] // s) == (j[None, :] // s)
            if TRANSPOSE:    # sum over rows i (lower halves) for columns j (upper halves): P^T's quadrant
                lower_j = (j % s) >= half
                Y_j = tl.where(lower_j[:, None], Y_j * tl.exp(tl.where(lower_j[:, None], G_j - G_ref_j, 0.0)),
                               0.0)
                P_j = tl.trans(chunk_kernels.load_rows(x=p, t=n * C + j, cols=r, T=T, width=C))   # [C, SLICE]
                quadrant = same_block & upper[:, None] & lower_j[None, :]
            else:            # sum over columns j (upper halves) for rows i (lower halves)
                upper_j = (j % s) < half
                Y_j = tl.where(upper_j[:, None], Y_j * tl.exp(tl.where(upper_j[:, None], G_ref_j - G_j, 0.0)),
                               0.0)
                P_j = chunk_kernels.load_rows(x=p, t=t, cols=j, T=T, width=C)
                quadrant = same_block & (~upper)[:, None] & upper_j[None, :]
            ACC = tl.dot(tl.where(quadrant, P_j, 0.0), Y_j, acc=ACC, input_precision=PRECISION)
        if TRANSPOSE:        # from the reference row to the columns j (upper halves)
            Z += tl.where(upper[:, None], ACC * tl.exp(tl.where(upper[:, None], G_ref - G, 0.0)), 0.0)
        else:                # from the reference row to the rows i (lower halves)
            Z += tl.where(upper[:, None], 0.0, ACC * tl.exp(tl.where(upper[:, None], 0.0, G - G_ref)))
    return Z


# ---------------------------------------------------------------------------------------------------
# The two kernels the four mixers share


@triton.jit
def chunk_walk_backward_kernel(
    # pointers: inputs
    a_qk,       # [B*H, T, C]     A_qk,n
    qd,         # [B*H, T, K]     Qd_n
    kd,         # [B*H, T, K]     Kd_n
    w,          # [B*H, T, K]     W_n (read under DELTA)
    decay,      # [B*H, N, K]     d_n, one factor per key row (read under DECAY)
    do,         # [B*H, T, V]     dO
    ds_t,       # [B*H, K, V]     the gradient of the final state (read under HAS_DS_T)
    # pointers: outputs
    dh,         # [B*H, N, K, V]  dS_{n+1}, the gradient of the state chunk n leaves
    du_new,     # [B*H, T, V]     dU'_n
    ds0,        # [B*H, K, V]     the gradient of the initial state
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
    HAS_DS_T: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """`chunk_kernels.chunk_scan_kernel` run backward: chunks n = N-1, ..., 0 of one head, value columns
    i_v*BV ... i_v*BV + BV - 1, with dS on chip from ds_t (or zeros) to ds0:

        dh_n  = dS                                        the gradient of S_{n+1}, for the next kernel
        dU'_n = A_qk,n^T dO_n + Kd_n dS                  (written to du_new)
        dS   <- d_n * dS + Qd_n^T dO_n - W_n^T dU'_n     (W under DELTA; d_n under DECAY, else 1)

    Kd and W trade places with the forward: there Kd^T U' is written into S and W S read out of it. dS
    is one [BK, BV] tile or two (SPLIT_K: the key rows 0..BK-1, dS_top, and BK..K-1, dS_bottom); the
    chunk's rows are taken BR at a time, each row of dU' needing only its row of Kd and its column of A_qk.
    """
    i_v = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    cols_k = tl.arange(0, BK)
    cols_v = i_v * BV + tl.arange(0, BV)
    N = tl.cdiv(T, C)
    a_qk += bh * T * C
    qd += bh * T * K
    kd += bh * T * K
    w += bh * T * K
    decay += bh * N * K
    do += bh * T * V
    ds_t += bh * K * V
    dh += bh * N * K * V
    du_new += bh * T * V
    ds0 += bh * K * V
    dS_top = tl.zeros([BK, BV], dtype=tl.float32)
    dS_bottom = tl.zeros([BK, BV], dtype=tl.float32)
    if HAS_DS_T:
        dS_top += chunk_kernels.load_rows(x=ds_t, t=cols_k, cols=cols_v, T=K, width=V)
        if SPLIT_K:
            dS_bottom += chunk_kernels.load_rows(x=ds_t, t=BK + cols_k, cols=cols_v, T=K, width=V)
    n = N - 1
    while n >= 0:               # a loop over a runtime size: see "loops" in `chunk_kernels`
        chunk_kernels.store_rows(x=dh + n * K * V, t=cols_k, cols=cols_v, X=dS_top, T=K, width=V)
        if SPLIT_K:
            chunk_kernels.store_rows(x=dh + n * K * V, t=BK + cols_k, cols=cols_v, X=dS_bottom, T=K, width=V)
        chunk = n * C + tl.arange(0, C)
        dO_n = chunk_kernels.load_rows(x=do, t=chunk, cols=cols_v, T=T, width=V)          # [C, BV]
        Write_top = tl.zeros([BK, BV], dtype=tl.float32)     # Qd^T dO - W^T dU', into dS
        Write_bottom = tl.zeros([BK, BV], dtype=tl.float32)
        for r0 in range(0, C, BR):
            t = n * C + r0 + tl.arange(0, BR)
            A_t = chunk_kernels.load_rows(x=a_qk, t=chunk, cols=r0 + tl.arange(0, BR), T=T, width=C)  # [C, BR]
            dU_t = tl.dot(tl.trans(A_t), dO_n, input_precision=PRECISION)
            dU_t += chunk_kernels.times_state(x=kd, t=t, T=T, K=K, S_top=dS_top, S_bottom=dS_bottom, BK=BK,
                                              SPLIT_K=SPLIT_K, PRECISION=PRECISION)
            chunk_kernels.store_rows(x=du_new, t=t, cols=cols_v, X=dU_t, T=T, width=V)
            dO_t = chunk_kernels.load_rows(x=do, t=t, cols=cols_v, T=T, width=V)
            Write_top += tl.dot(tl.trans(chunk_kernels.load_rows(x=qd, t=t, cols=cols_k, T=T, width=K)), dO_t,
                                input_precision=PRECISION)
            if DELTA:
                Write_top -= tl.dot(tl.trans(chunk_kernels.load_rows(x=w, t=t, cols=cols_k, T=T, width=K)),
                                    dU_t, input_precision=PRECISION)
            if SPLIT_K:
                Write_bottom += tl.dot(tl.trans(chunk_kernels.load_rows(x=qd, t=t, cols=BK + cols_k, T=T,
                                                                        width=K)), dO_t, input_precision=PRECISION)
                if DELTA:
                    Write_bottom -= tl.dot(tl.trans(chunk_kernels.load_rows(x=w, t=t, cols=BK + cols_k, T=T,
                                                                            width=K)), dU_t,
                                           input_precision=PRECISION)
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
def chunk_state_grad_kernel(
    # pointers: inputs
    do,         # [B*H, T, V]     dO
    u_new,      # [B*H, T, V]     U'_n
    du_new,     # [B*H, T, V]     dU'_n (read under DELTA)
    h,          # [B*H, N, K, V]  S_n
    dh,         # [B*H, N, K, V]  dS_{n+1}
    # pointers: outputs
    dqd,        # [B*H, T, K]     dQd
    dw,         # [B*H, T, K]     dW (written under DELTA)
    dkd,        # [B*H, T, K]     dKd
    da_qk,      # [B*H, T, C]     dA_qk (written by the first key block)
    ddecay,     # [B*H, N, K]     dd (written under DECAY)
    # sizes
    T,
    K,
    V,
    C: tl.constexpr,
    BK: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    DELTA: tl.constexpr,
    DECAY: tl.constexpr,      # the mixer's decay: None, "head" or "channel" (`Mixer.decay`)
    PRECISION: tl.constexpr,
):
    """What the states give chunk n, for key columns i_k*BK ... i_k*BK + BK - 1, summed over V in slices:

        dQd = dO S_n^T      dW = -dU' S_n^T      dKd = U' dh_n^T      dd = rowsum(S_n * dh_n)
        dA_qk = tril(dO U'^T)          (by the programs of the first key block only: it has no key column)

    the gradients of O_n = Qd_n S_n + A_qk U'_n, U'_n = U_n - W_n S_n and S_{n+1} = d_n * S_n + Kd_n^T U'_n
    that need S_n or dS_{n+1}. One program per (chunk, key block, head): every chunk at once."""
    n = tl.program_id(0)
    i_k = tl.program_id(1)
    bh = tl.program_id(2).to(tl.int64)
    N = tl.cdiv(T, C)
    r = tl.arange(0, C)
    t = n * C + r
    rows = i_k * BK + tl.arange(0, BK)              # key rows of the state, key columns of dQd, dW, dKd
    do += bh * T * V
    u_new += bh * T * V
    du_new += bh * T * V
    h += (bh * N + n) * K * V
    dh += (bh * N + n) * K * V
    dqd += bh * T * K
    dw += bh * T * K
    dkd += bh * T * K
    da_qk += bh * T * C
    ddecay += (bh * N + n) * K
    dQd = tl.zeros([C, BK], dtype=tl.float32)
    dW = tl.zeros([C, BK], dtype=tl.float32)
    dKd = tl.zeros([C, BK], dtype=tl.float32)
    dDecay = tl.zeros([BK], dtype=tl.float32)
    dA_qk = tl.zeros([C, C], dtype=tl.float32)
    v0 = 0
    while v0 < V:               # a runtime bound: a while loop
        cols = v0 + tl.arange(0, SLICE)
        dO = chunk_kernels.load_rows(x=do, t=t, cols=cols, T=T, width=V)
        U_new = chunk_kernels.load_rows(x=u_new, t=t, cols=cols, T=T, width=V)
        S = chunk_kernels.load_rows(x=h, t=rows, cols=cols, T=K, width=V)             # [BK, SLICE]
        dS = chunk_kernels.load_rows(x=dh, t=rows, cols=cols, T=K, width=V)
        dQd = tl.dot(dO, tl.trans(S), acc=dQd, input_precision=PRECISION)
        dKd = tl.dot(U_new, tl.trans(dS), acc=dKd, input_precision=PRECISION)
        if DELTA:
            dU_new = chunk_kernels.load_rows(x=du_new, t=t, cols=cols, T=T, width=V)
            dW = tl.dot(dU_new, tl.trans(S), acc=dW, input_precision=PRECISION)
        if DECAY is not None:
            dDecay += tl.sum(S * dS, axis=1)
        if i_k == 0:
            dA_qk = tl.dot(dO, tl.trans(U_new), acc=dA_qk, input_precision=PRECISION)
        v0 += SLICE
    chunk_kernels.store_rows(x=dqd, t=t, cols=rows, X=dQd, T=T, width=K)
    chunk_kernels.store_rows(x=dkd, t=t, cols=rows, X=dKd, T=T, width=K)
    if DELTA:
        chunk_kernels.store_rows(x=dw, t=t, cols=rows, X=-dW, T=T, width=K)
    if DECAY is not None:
        tl.store(ddecay + rows, dDecay, mask=rows < K)
    if i_k == 0:
        chunk_kernels.store_rows(x=da_qk, t=t, cols=r, X=tl.where(r[:, None] >= r[None, :], dA_qk, 0.0), T=T,
                                 width=C)


# ---------------------------------------------------------------------------------------------------
# Step 1', the intra-chunk backward: one kernel per mixer, each adding to the one before it


@triton.jit
def wy_backward_slices(
    # pointers: inputs
    l_inv,      # [T, C]      L_inv = (I + A)^{-1}, as the forward's intra-chunk kernel stored it
    w,          # [T, K]      W
    u,          # [T, V]      U
    v,          # [T, V]
    beta,       # [T]
    dw,         # [T, K]      dW
    du,         # [T, V]      dU (= dU')
    # pointers: outputs
    dv,         # [T, V]      dv = diag(beta) dv_beta
    dk_beta,    # [T, K]      dk_beta = L_inv^T dW (the caller adds to it; its dk)
    # indices
    n,          # the chunk
    # sizes
    T,
    K,
    V,
    C: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
):
    """The backward of the WY form (`chunked.wy_backward`) for chunk n, SLICE columns at a time:

        dv_beta = L_inv^T dU,  dk_beta = L_inv^T dW,  dA = -(dk_beta W^T + dv_beta U^T), strictly lower

    Writes dv = diag(beta) dv_beta and dk_beta; returns (dA [C, C], rowsum(dv_beta * V) [C], beta's
    gradient through v_beta)."""
    r = tl.arange(0, C)
    t = n * C + r
    Beta = tl.load(beta + t, mask=t < T, other=0.0)
    dA = tl.zeros([C, C], dtype=tl.float32)
    dBeta = tl.zeros([C], dtype=tl.float32)
    c0 = 0
    while c0 < V:               # a runtime bound: a while loop
        cols = c0 + tl.arange(0, SLICE)
        dV_beta = chunk_product(p=l_inv, x=du, scale=beta, n=n, cols=cols, T=T, width=V, C=C, SLICE=SLICE,
                                TRANSPOSE=True, SCALE=False, PRECISION=PRECISION)
        dA = tl.dot(dV_beta, tl.trans(chunk_kernels.load_rows(x=u, t=t, cols=cols, T=T, width=V)), acc=dA,
                    input_precision=PRECISION)
        dBeta += tl.sum(dV_beta * chunk_kernels.load_rows(x=v, t=t, cols=cols, T=T, width=V), axis=1)
        chunk_kernels.store_rows(x=dv, t=t, cols=cols, X=Beta[:, None] * dV_beta, T=T, width=V)
        c0 += SLICE
    c0 = 0
    while c0 < K:
        cols = c0 + tl.arange(0, SLICE)
        dK_beta = chunk_product(p=l_inv, x=dw, scale=beta, n=n, cols=cols, T=T, width=K, C=C, SLICE=SLICE,
                                TRANSPOSE=True, SCALE=False, PRECISION=PRECISION)
        dA = tl.dot(dK_beta, tl.trans(chunk_kernels.load_rows(x=w, t=t, cols=cols, T=T, width=K)), acc=dA,
                    input_precision=PRECISION)
        chunk_kernels.store_rows(x=dk_beta, t=t, cols=cols, X=dK_beta, T=T, width=K)
        c0 += SLICE
    return tl.where(r[:, None] > r[None, :], -dA, 0.0), dBeta


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
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
):
    """A_qk = tril(Q K^T) backward for chunk n of head bh (dv = dU' needs no kernel):

        dq = dA_qk K + dQd          dk = dA_qk^T Q + dKd"""
    n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    t = n * C + tl.arange(0, C)
    q += bh * T * K
    k += bh * T * K
    da_qk += bh * T * C
    dqd += bh * T * K
    dkd += bh * T * K
    dq += bh * T * K
    dk += bh * T * K
    c0 = 0
    while c0 < K:               # a runtime bound: a while loop
        cols = c0 + tl.arange(0, SLICE)
        dQ = chunk_product(p=da_qk, x=k, scale=k, n=n, cols=cols, T=T, width=K, C=C, SLICE=SLICE,
                           TRANSPOSE=False, SCALE=False, PRECISION=PRECISION)
        dK = chunk_product(p=da_qk, x=q, scale=q, n=n, cols=cols, T=T, width=K, C=C, SLICE=SLICE,
                           TRANSPOSE=True, SCALE=False, PRECISION=PRECISION)
        dQ += chunk_kernels.load_rows(x=dqd, t=t, cols=cols, T=T, width=K)
        dK += chunk_kernels.load_rows(x=dkd, t=t, cols=cols, T=T, width=K)
        chunk_kernels.store_rows(x=dq, t=t, cols=cols, X=dQ, T=T, width=K)
        chunk_kernels.store_rows(x=dk, t=t, cols=cols, X=dK, T=T, width=K)
        c0 += SLICE


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
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
):
    """Lesson 03's backward plus the WY form's (`chunked.deltanet_factors_backward`), for chunk n:

        dv, dk_beta, dA       `wy_backward_slices`
        dk_beta += dA K,   dk = dA^T k_beta + beta dk_beta + dA_qk^T Q + dKd,   dq = dA_qk K + dQd
        dbeta = rowsum(dk_beta * K) + rowsum(dv_beta * V)

    dA is written to memory and read back in slices (`chunk_product`), like L_inv in the forward."""
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
    Beta = tl.load(beta + t, mask=t < T, other=0.0)
    dA, dBeta = wy_backward_slices(l_inv=l_inv, w=w, u=u, v=v, beta=beta, dw=dw, du=du_new, dv=dv, dk_beta=dk,
                                   n=n, T=T, K=K, V=V, C=C, SLICE=SLICE, PRECISION=PRECISION)
    chunk_kernels.store_rows(x=da, t=t, cols=r, X=dA, T=T, width=C)
    tl.debug_barrier()          # dA and dk_beta are in memory before any thread reads a slice back
    c0 = 0
    while c0 < K:               # a runtime bound: a while loop
        cols = c0 + tl.arange(0, SLICE)
        K_c = chunk_kernels.load_rows(x=k, t=t, cols=cols, T=T, width=K)
        dK_beta = chunk_kernels.load_rows(x=dk, t=t, cols=cols, T=T, width=K)
        dK_beta += chunk_product(p=da, x=k, scale=beta, n=n, cols=cols, T=T, width=K, C=C, SLICE=SLICE,
                                 TRANSPOSE=False, SCALE=False, PRECISION=PRECISION)
        dBeta += tl.sum(dK_beta * K_c, axis=1)
        dK = Beta[:, None] * dK_beta + chunk_kernels.load_rows(x=dkd, t=t, cols=cols, T=T, width=K)
        dK += chunk_product(p=da, x=k, scale=beta, n=n, cols=cols, T=T, width=K, C=C, SLICE=SLICE,
                            TRANSPOSE=True, SCALE=True, PRECISION=PRECISION)
        dK += chunk_product(p=da_qk, x=q, scale=beta, n=n, cols=cols, T=T, width=K, C=C, SLICE=SLICE,
                            TRANSPOSE=True, SCALE=False, PRECISION=PRECISION)
        dQ = chunk_product(p=da_qk, x=k, scale=beta, n=n, cols=cols, T=T, width=K, C=C, SLICE=SLICE,
                           TRANSPOSE=False, SCALE=False, PRECISION=PRECISION)
        dQ += chunk_kernels.load_rows(x=dqd, t=t, cols=cols, T=T, width=K)
        chunk_kernels.store_rows(x=dq, t=t, cols=cols, X=dQ, T=T, width=K)
        chunk_kernels.store_rows(x=dk, t=t, cols=cols, X=dK, T=T, width=K)
        c0 += SLICE
    tl.store(dbeta + t, dBeta, mask=t < T)


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
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
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
    Beta = tl.load(beta + t, mask=t < T, other=0.0)
    G = tl.load(g_cum + t)                                                                  # decay
    G_C = tl.load(g_cum + n * C + C - 1)                                                    # decay
    lower = r[:, None] >= r[None, :]
    Gamma = tl.where(lower, tl.exp(tl.where(lower, G[:, None] - G[None, :], 0.0)), 0.0)    # decay
    dA, dBeta = wy_backward_slices(l_inv=l_inv, w=w, u=u, v=v, beta=beta, dw=dw, du=du_new, dv=dv, dk_beta=dk,
                                   n=n, T=T, K=K, V=V, C=C, SLICE=SLICE, PRECISION=PRECISION)
    chunk_kernels.store_rows(x=da, t=t, cols=r, X=dA * Gamma, T=T, width=C)               # decay: * Gamma
    dA_qk = chunk_kernels.load_rows(x=da_qk, t=t, cols=r, T=T, width=C)
    E = dA_qk * chunk_kernels.load_rows(x=a_qk, t=t, cols=r, T=T, width=C)                 # decay
    dG = tl.sum(E, axis=1) - tl.sum(E, axis=0)                                              # decay
    tl.debug_barrier()          # every thread has read dA_qk before it is overwritten
    chunk_kernels.store_rows(x=da_qk, t=t, cols=r, X=dA_qk * Gamma, T=T, width=C)          # decay: * Gamma
    tl.debug_barrier()          # dA, dA_qk and dk_beta are in memory before any thread reads a slice back
    dG_C = tl.zeros([SLICE], dtype=tl.float32)          # decay: dG_C, a slice of channels at a time
    c0 = 0
    while c0 < K:               # a runtime bound: a while loop
        cols = c0 + tl.arange(0, SLICE)
        K_c = chunk_kernels.load_rows(x=k, t=t, cols=cols, T=T, width=K)
        Z = chunk_product(p=da, x=k, scale=beta, n=n, cols=cols, T=T, width=K, C=C, SLICE=SLICE,
                          TRANSPOSE=False, SCALE=False, PRECISION=PRECISION)
        dBeta += tl.sum(Z * K_c, axis=1)
        dX = Beta[:, None] * Z
        dY = chunk_product(p=da, x=k, scale=beta, n=n, cols=cols, T=T, width=K, C=C, SLICE=SLICE,
                           TRANSPOSE=True, SCALE=True, PRECISION=PRECISION)
        Decay_in = tl.exp(G)[:, None]                                                       # decay
        Decay_out = tl.exp(G_C - G)[:, None]                                                # decay
        dK_beta = chunk_kernels.load_rows(x=dk, t=t, cols=cols, T=T, width=K)
        dBeta += tl.sum(dK_beta * Decay_in * K_c, axis=1)
        dQd = chunk_kernels.load_rows(x=dqd, t=t, cols=cols, T=T, width=K)
        dKd = chunk_kernels.load_rows(x=dkd, t=t, cols=cols, T=T, width=K)
        dQ = chunk_product(p=da_qk, x=k, scale=beta, n=n, cols=cols, T=T, width=K, C=C, SLICE=SLICE,
                           TRANSPOSE=False, SCALE=False, PRECISION=PRECISION) + Decay_in * dQd
        dK = dX + dY + Beta[:, None] * Decay_in * dK_beta + Decay_out * dKd
        dK += chunk_product(p=da_qk, x=q, scale=beta, n=n, cols=cols, T=T, width=K, C=C, SLICE=SLICE,
                            TRANSPOSE=True, SCALE=False, PRECISION=PRECISION)
        Q_c = chunk_kernels.load_rows(x=q, t=t, cols=cols, T=T, width=K)
        dKd_Kd = dKd * Decay_out * K_c
        dG += tl.sum(K_c * (dX - dY) + dK_beta * Beta[:, None] * Decay_in * K_c + dQd * Decay_in * Q_c
                     - dKd_Kd, axis=1)                                                      # decay
        dG_C += tl.sum(dKd_Kd, axis=0) + tl.load(ddecay + cols, mask=cols < K, other=0.0) * tl.exp(G_C)
        chunk_kernels.store_rows(x=dq, t=t, cols=cols, X=dQ, T=T, width=K)
        chunk_kernels.store_rows(x=dk, t=t, cols=cols, X=dK, T=T, width=K)
        c0 += SLICE
    tl.store(dbeta + t, dBeta, mask=t < T)
    tl.store(dg_cum + t, tl.where(r == C - 1, dG + tl.sum(dG_C), dG))                      # decay


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
    da,         # [B*H, T, C]    dA (written, then read back in slices)
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
    LOG_C: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
):
    """Lesson 06's intra-chunk backward with the decay per channel (`chunked.kda_factors_backward`): the
    pairs sit inside sums over channels, so (dA Gamma) K becomes `decayed_product_slice` (what changed:
    "per channel"):

        Z = decayed(dA) K,  dX = diag(beta) Z,  dY = decayed(dA)^T diag(beta) K,   dk += dX + dY
        dq = decayed(dA_qk) K + exp(G) dQd,   dk += decayed(dA_qk)^T Q + beta exp(G) dk_beta + exp(G_C - G) dKd
        dG = K (dX - dY) + Q decayed(dA_qk) K - K decayed(dA_qk)^T Q + dk_beta k_beta + dQd Qd - dKd Kd
        dG_C += colsum(dKd Kd) + dd d                   (all elementwise, [C, K])"""
    n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    N = tl.cdiv(T, C)
    r = tl.arange(0, C)
    t = n * C + r
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
    Beta = tl.load(beta + t, mask=t < T, other=0.0)
    dA, dBeta = wy_backward_slices(l_inv=l_inv, w=w, u=u, v=v, beta=beta, dw=dw, du=du_new, dv=dv, dk_beta=dk,
                                   n=n, T=T, K=K, V=V, C=C, SLICE=SLICE, PRECISION=PRECISION)
    chunk_kernels.store_rows(x=da, t=t, cols=r, X=dA, T=T, width=C)
    tl.debug_barrier()          # dA and dk_beta are in memory before any thread reads a slice back
    c0 = 0
    while c0 < K:               # a runtime bound: a while loop
        cols = c0 + tl.arange(0, SLICE)
        K_c = chunk_kernels.load_rows(x=k, t=t, cols=cols, T=T, width=K)
        Q_c = chunk_kernels.load_rows(x=q, t=t, cols=cols, T=T, width=K)
        G = chunk_kernels.load_rows(x=g_cum, t=t, cols=cols, T=N * C, width=K)            # per channel
        G_C = tl.load(g_cum + (n * C + C - 1) * K + cols, mask=cols < K, other=0.0)      # the chunk's last row
        Z = decayed_product_slice(p=da, y=k, scale=beta, g_cum=g_cum, n=n, cols=cols, T=T, K=K, C=C,
                                  LOG_C=LOG_C, SLICE=SLICE, TRANSPOSE=False, SCALE=False, PRECISION=PRECISION)
        dBeta += tl.sum(Z * K_c, axis=1)
        dX = Beta[:, None] * Z
        dY = decayed_product_slice(p=da, y=k, scale=beta, g_cum=g_cum, n=n, cols=cols, T=T, K=K, C=C,
                                   LOG_C=LOG_C, SLICE=SLICE, TRANSPOSE=True, SCALE=True, PRECISION=PRECISION)
        dX_qk = decayed_product_slice(p=da_qk, y=k, scale=beta, g_cum=g_cum, n=n, cols=cols, T=T, K=K, C=C,
                                      LOG_C=LOG_C, SLICE=SLICE, TRANSPOSE=False, SCALE=False, PRECISION=PRECISION)
        dY_qk = decayed_product_slice(p=da_qk, y=q, scale=beta, g_cum=g_cum, n=n, cols=cols, T=T, K=K, C=C,
                                      LOG_C=LOG_C, SLICE=SLICE, TRANSPOSE=True, SCALE=False, PRECISION=PRECISION)
        Decay_in = tl.exp(G)
        Decay_out = tl.exp(G_C[None, :] - G)
        dK_beta = chunk_kernels.load_rows(x=dk, t=t, cols=cols, T=T, width=K)
        dBeta += tl.sum(dK_beta * Decay_in * K_c, axis=1)
        dQd = chunk_kernels.load_rows(x=dqd, t=t, cols=cols, T=T, width=K)
        dKd = chunk_kernels.load_rows(x=dkd, t=t, cols=cols, T=T, width=K)
        dQ = dX_qk + Decay_in * dQd
        dK = dX + dY + dY_qk + Beta[:, None] * Decay_in * dK_beta + Decay_out * dKd
        dKd_Kd = dKd * Decay_out * K_c
        dG = K_c * (dX - dY) + Q_c * dX_qk - K_c * dY_qk + dK_beta * Beta[:, None] * Decay_in * K_c \
            + dQd * Decay_in * Q_c - dKd_Kd
        dG_C = tl.sum(dKd_Kd, axis=0) + tl.load(ddecay + cols, mask=cols < K, other=0.0) * tl.exp(G_C)
        dG = tl.where((r == C - 1)[:, None], dG + dG_C[None, :], dG)
        chunk_kernels.store_rows(x=dq, t=t, cols=cols, X=dQ, T=T, width=K)
        chunk_kernels.store_rows(x=dk, t=t, cols=cols, X=dK, T=T, width=K)
        chunk_kernels.store_rows(x=dg_cum, t=t, cols=cols, X=dG, T=N * C, width=K)
        c0 += SLICE
    tl.store(dbeta + t, dBeta, mask=t < T)


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


def backward_launches(mixer, T, K, V, chunk_size, heads, *, has_ds_t, precision="ieee"):
    """The three launches of `mixer`'s backward after the forward's recompute: [(step, kernel, grid,
    constexprs, options)], the constexprs those each kernel takes (as `chunk_kernels.launches`). The
    launcher runs them; `gpu_targets` compiles the same ones."""
    C = chunk_size
    N = triton.cdiv(T, C)
    sizes = chunk_kernels.block_sizes(K, V)
    switches = dict(DELTA=mixer.delta, DECAY=mixer.decay, HAS_DS_T=has_ds_t, PRECISION=precision)
    constexprs = dict(K=K, V=V, C=C, LOG_C=C.bit_length() - 1, SLICE=SLICE, **sizes, **switches)
    steps = [("walk", chunk_walk_backward_kernel, (triton.cdiv(V, sizes["BV"]), heads)),
             ("states", chunk_state_grad_kernel, (N, triton.cdiv(K, sizes["BK"]), heads)),
             ("intra", BACKWARD_KERNELS[mixer.name], (N, heads))]
    runtime = {"walk": (), "states": ("K", "V"), "intra": ("K", "V")}    # sizes the kernel takes at run time
    return [(step, kernel, grid, {n: value for n, value in constexprs.items()
                                  if n in kernel.arg_names and n not in runtime[step]}, LAUNCH)
            for step, kernel, grid in steps]


def triton_chunked_backward(mixer, do, dS_T, q, k, v, g=None, beta=None, chunk_size=64, initial_state=None,
                            input_precision="ieee"):
    """The gradients of `mixer`'s chunked form (a name or a `contract.Mixer`) as Triton kernels, given do
    [B, H, T, V] and dS_T [B, H, K, V] (None: the loss does not use the final state): the same numbers as
    `chunked.chunked_backward`, in float32.

    Recomputes the forward's factors and states with the forward's own kernels (`chunk_kernels.run`, its
    intra-chunk and scan steps), then the backward walk, the states' gradients and the mixer's intra-chunk
    backward (`backward_launches`), then dg = the reverse cumulative sum of dG inside each chunk.
    Returns {"q", "k", "v", ["g",] ["beta",] "initial_state": gradient}: dq, dk, dv in their inputs'
    dtypes, the others in float32 (None for an initial state that was not given)."""
    from kimik3_lessons import mixers
    mixer = mixers.get(mixer) if isinstance(mixer, str) else mixer
    tensors = chunk_kernels.chunk_tensors(mixer, q, k, v, g, beta, chunk_size=chunk_size,
                                          initial_state=initial_state, input_precision=input_precision)
    B, H, T, K, V = contract.check_inputs(q, k, v, g, beta, initial_state, **mixer.switches)
    if not isinstance(do, torch.Tensor) or do.shape != (B, H, T, V):
        raise ValueError(f"do must be [B, H, T, V] = [{B}, {H}, {T}, {V}] like o, got {contract.shape_str(do)}")
    if dS_T is not None and (not isinstance(dS_T, torch.Tensor) or dS_T.shape != (B, H, K, V)):
        raise ValueError(f"dS_T must be [B, H, K, V] = [{B}, {H}, {K}, {V}] like the final state, "
                         f"got {contract.shape_str(dS_T)}")
    contract.check_triton_inputs(do=do, dS_T=dS_T)
    chunk_kernels.run(mixer, tensors, chunk_size, input_precision, steps=("intra", "scan"))
    C, N = chunk_size, triton.cdiv(T, chunk_size)
    new = tensors["q"].new_empty
    g_shape = (B, H, N * C, K) if mixer.decay == "channel" else (B, H, N * C)
    tensors.update(do=do.to(torch.float32).contiguous(),
                   ds_t=None if dS_T is None else dS_T.to(torch.float32).contiguous(),
                   dh=new(B, H, N, K, V), du_new=new(B, H, T, V), ds0=new(B, H, K, V), dqd=new(B, H, T, K),
                   dw=new(B, H, T, K) if mixer.delta else None, dkd=new(B, H, T, K), da_qk=new(B, H, T, C),
                   ddecay=new(B, H, N, K) if mixer.decay else None, da=new(B, H, T, C), dq=new(B, H, T, K),
                   dk=new(B, H, T, K), dv=new(B, H, T, V) if mixer.delta else None,
                   dbeta=new(B, H, T) if mixer.delta else None,
                   dg_cum=new(*g_shape) if mixer.decay else None)
    for _, kernel, grid, constexprs, options in backward_launches(mixer, T, K, V, C, B * H,
                                                                  has_ds_t=dS_T is not None,
                                                                  precision=input_precision):
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

