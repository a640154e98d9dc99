"""Step 1', the intra-chunk backward: one kernel per mixer, each adding to the one before it. Here the two
mixers without a decay and what the delta rule's kernels share: the WY form's backward (`wy_backward`),
linear attention's kernel (`linear_attention_intra_backward_kernel`) and DeltaNet's
(`deltanet_intra_backward_kernel`). The two with a decay are `backward.kernels.intra_decay`."""

import triton
import triton.language as tl

from kimik3_lessons import chunk_kernels
from kimik3_lessons.backward.kernels.device import chunk_product_rows, load_transposed


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
