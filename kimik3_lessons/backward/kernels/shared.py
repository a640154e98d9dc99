"""The three kernels the four mixers share, steps 3' and 2' of every backward: `chunk_output_backward_kernel`,
the backward of each chunk's outputs; `chunk_walk_backward_kernel`, the forward's walk run backward with dS
on chip; `chunk_state_grad_kernel`, what the states give each chunk. The tensors they read, by name, are
written where `backward.kernels` begins."""

import triton
import triton.language as tl

from kimik3_lessons import chunk_kernels
from kimik3_lessons.backward.kernels.device import load_transposed


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
