"""Step 1', the intra-chunk backward, for the two mixers with a decay, each adding to the one before it:
Gated DeltaNet's (`gated_deltanet_intra_backward_kernel`, a decay per head) and KDA's
(`kda_intra_backward_kernel`, a decay per channel). The WY form's backward they call and the mixers without
a decay are `backward.kernels.intra`."""

import triton
import triton.language as tl

from kimik3_lessons import chunk_kernels
from kimik3_lessons.backward.kernels.device import chunk_product_rows, decayed_product_rows
from kimik3_lessons.backward.kernels.intra import wy_backward


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
