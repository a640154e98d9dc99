"""The two kernels the four mixers share, steps 2 and 3 of every chunked form: `chunk_scan_kernel`, the walk
over the chunks with the state on chip, and `chunk_output_kernel`, every chunk's outputs at once. The rules
they keep ("names", "arguments", "loops") and the tensors they read, by name, are written where
`chunk_kernels` begins."""

import triton
import triton.language as tl

from kimik3_lessons.chunk_kernels.device import load_rows, mma, store_rows, times_state


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
