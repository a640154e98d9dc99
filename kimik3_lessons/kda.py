"""Lesson 07a: KDA — Kimi Delta Attention, the gated delta rule with a decay per key channel (Kimi Linear).

    S <- Diag(exp(g_t)) S;     u_t = beta_t (v_t - k_t S);     S_t = S + k_t^T u_t;     o_t = q_t S_t

Shapes: q, k, g [B, H, T, K] (g <= 0: channel d of the state keeps exp(g_td) of itself each step);
v [B, H, T, V]; beta [B, H, T]; state S [B, H, K, V]. With every channel equal this is lesson 06's
gated DeltaNet. No scaling or normalization happens inside the forms: the layer does it.

- gates: KimiK3's `bounded_gate`, and lesson 06's `mamba2_gate` (Kimi Linear's), re-exported
- `recurrent`: the definition, one token at a time (one token with a state is the decode step)
- `chunked`: the chunkwise-parallel form, with `decayed_scores`, its per-channel pairwise factors
- `triton_chunked`: the chunked form as Triton kernels (forward): lesson 06's, decay per channel
The Kimi Linear layer around these forms is lesson 07b's, in `kimi_linear`.
"""

import torch
import triton
import triton.language as tl

from kimik3_lessons import chunk_kernels, contract, deltanet
from kimik3_lessons.gated_deltanet import mamba2_gate

__all__ = ["bounded_gate", "chunked", "decayed_scores", "kda_step", "mamba2_gate", "recurrent",
           "triton_chunked"]


# ---------------------------------------------------------------------------------------------------
# The gate and the definition: one token at a time


def bounded_gate(x, A_log, dt_bias, bound=5.0):
    """KimiK3's forget gate in log space: g = -bound * sigmoid(exp(A_log) * (x + dt_bias)), in [-bound, 0].

    Unlike the Mamba-2 gate, whose -exp(A_log) softplus(.) is unbounded below, no single token can wipe a
    channel: each step keeps at least exp(-bound) of it (exp(-5) ~ 0.0067). A_log and dt_bias broadcast
    against x. Computed in float32 (float64 stays float64).
    """
    dtype = contract.compute_dtype(x)
    return -bound * torch.sigmoid(torch.exp(A_log.to(dtype)) * (x.to(dtype) + dt_bias.to(dtype)))


def kda_step(S, q_t, k_t, v_t, g_t, beta_t):
    """One token of KDA: decay each key channel (row of S), then the delta-rule step. Returns (o_t, S_t).

    S [B, H, K, V]; q_t, k_t, g_t [B, H, K]; v_t [B, H, V]; beta_t [B, H].
    """
    S = torch.exp(g_t)[..., None] * S
    return deltanet.deltanet_step(S, q_t, k_t, v_t, beta_t)


def recurrent(q, k, v, g, beta, initial_state=None):
    """The definition, one token at a time. Returns (o [B, H, T, V] in v's dtype, S [B, H, K, V]).

    q, k, g [B, H, T, K]; v [B, H, T, V]; beta [B, H, T]. Computes in float32 (float64 for float64
    inputs); the final state stays in that precision. One token with a state is the decode step.
    """
    out_dtype = v.dtype
    q, k, v, g, beta, S = contract.prepare(q, k, v, g=g, beta=beta, initial_state=initial_state,
                                           **MIXER.switches)
    o = q.new_empty(*v.shape)
    for t in range(q.shape[2]):
        o[:, :, t], S = kda_step(S, q[:, :, t], k[:, :, t], v[:, :, t], g[:, :, t], beta[:, :, t])
    return o.to(out_dtype), S


# ---------------------------------------------------------------------------------------------------
# The chunked form: lesson 06's, with the decay factors taken per channel. With G = cumsum(g) per
# channel [C, K] inside a chunk, the pairwise factors become sums over channels,
#     A_ij = beta_i sum_d k_id k_jd exp(G_id - G_jd)  (i > j)
#     Aqk_ij = sum_d q_id k_jd exp(G_id - G_jd)  (i >= j)
# A [C, C, K] tensor of factors would hold C*C*K numbers per chunk (1 GB at B=2, H=8, T=4096, C=K=64);
# `decayed_scores` builds the [C, C] sums by secondary chunking instead, in no more memory than K K^T.


def decayed_scores(X, Y, G):
    """P_ij = sum_d X_id Y_jd exp(G_id - G_jd) for i >= j, else 0.

    X [..., C, K] (leading dims may add to those of Y, G: several X share every decay factor); Y, G
    [..., C, K] with G non-increasing down the chunk (a cumulative sum of log decays); returns
    [..., C, C]. Secondary chunking, all the way down: when all rows i of a block come after all its
    columns j, the factor splits through a reference row r between them,
        exp(G_i - G_j) = exp(G_i - G_r) exp(G_r - G_j),     both exponents <= 0 when j <= r <= i,
    and the block is one matmul, (X_i exp(G_i - G_r)) (Y_j exp(G_r - G_j))^T. Halve the chunk: the
    lower-left quadrant is such a block (r = last row of the upper half); the two diagonal halves are
    the same problem at half the size, solved for all halves at once. After log2(C) levels only the
    diagonal is left, where the decay is exp(0) = 1. C is padded to a power of two inside.
    """
    C, K = X.shape[-2:]
    n = 1 << (C - 1).bit_length()
    if n > C:  # pad: zero rows contribute nothing; repeating G's last row keeps exponents <= 0
        X, Y = (torch.cat([x, x.new_zeros(*x.shape[:-2], n - C, K)], dim=-2) for x in (X, Y))
        G = torch.cat([G, G[..., -1:, :].expand(*G.shape[:-2], n - C, K)], dim=-2)
    P = torch.diag_embed((X * Y).sum(-1))
    s = n
    while s > 1:
        h = s // 2
        Xb, Yb, Gb = (x.unflatten(-2, (n // s, s)) for x in (X, Y, G))    # [..., n/s blocks, s, K]
        G_r = Gb[..., h - 1:h, :]
        rows = Xb[..., h:, :] * (Gb[..., h:, :] - G_r).exp_()
        cols = Yb[..., :h, :] * (G_r - Gb[..., :h, :]).exp_()
        # The diagonal blocks of P as a view [..., s, s, n/s]; write every lower-left quadrant at once.
        blocks = P.unflatten(-2, (n // s, s)).unflatten(-1, (n // s, s)).diagonal(dim1=-4, dim2=-2)
        blocks[..., h:, :h, :] = torch.einsum("...ik,...jk->...ij", rows, cols).movedim(-3, -1)
        s = h
    return P[..., :C, :C]


def chunked(q, k, v, g, beta, chunk_size=64, initial_state=None):
    """The chunkwise-parallel form. Returns (o [B, H, T, V] in v's dtype, S [B, H, K, V]).

    Per chunk, with G = cumsum(g) per channel and `decayed_scores` for the pairwise sums:
        A = beta_i sum_d k_id k_jd exp(G_id - G_jd) (i > j),    Aqk as above (i >= j)
        W = L_inv diag(beta) (exp(G) * K),  U = L_inv diag(beta) V,  L_inv = (I + A)^{-1}
    by lesson 05's `wy_representation`, given this A; lesson 05's `chunk_state_scan`, with the decay
    across a chunk taken per channel, exp(G_C) [K], gives the state S_n before each chunk and
    U' = U - W S_n; then
        O = (exp(G) * Q) S_n + Aqk U'.
    All chunks at once except the scan. Any T works (zero-padded); chunk_size 1 is the recurrence.
    """
    contract.check_chunk_size(chunk_size)
    T, out_dtype = q.shape[2], v.dtype
    q, k, v, g, beta, S = contract.prepare(q, k, v, g=g, beta=beta, initial_state=initial_state,
                                           **MIXER.switches)
    q, k, v, g, beta = (contract.split_chunks(x, chunk_size) for x in (q, k, v, g, beta))

    G = g.cumsum(-2)                                                   # [B, H, N, C, K]
    Akk, Aqk = decayed_scores(torch.stack([k, q]), k, G)             # k and q share every decay factor
    A = (beta[..., None] * Akk).tril(-1)
    decay_in = torch.exp(G)                                           # decay from the chunk's start
    W, U = deltanet.wy_representation(A, beta[..., None] * (decay_in * k), beta[..., None] * v)
    G_C = G[..., -1:, :]
    S_n, U_new, S = deltanet.chunk_state_scan(W, U, torch.exp(G_C - G) * k, S,
                                              decay=torch.exp(G_C[..., 0, :]))
    O = (decay_in * q) @ S_n + Aqk @ U_new
    return contract.merge_chunks(O, T).to(out_dtype), S


# ---------------------------------------------------------------------------------------------------
# The Triton kernel: lesson 06's intra-chunk kernel with the decay per key channel. The pairwise factors
# are built as `decayed_scores` builds them, through reference rows, on a tile: a tile cannot be cut into
# blocks, so every level works on the whole [C, C] tile with masks, and each row loads G at its own
# reference row. The channels are independent, so the kernel sums them in slices of SLICE channels.


@triton.jit
def decayed_scores_tile(
    # pointers
    x,          # [T, K]    q or k
    y,          # [T, K]    k
    g_cum,      # [N*C, K]  G = cumsum(g) inside each chunk, per channel
    # indices
    n,          # the chunk
    # sizes
    T,
    K,
    C: tl.constexpr,
    LOG_C: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """P_ij = sum_d X_id Y_jd exp(G_id - G_jd) for i >= j, else 0, for chunk n's rows of x, y [T, K]:
    P [C, C] (`decayed_scores` on a tile; x = k gives A before beta, x = q gives A_qk), with G read from
    g_cum [N*C, K]. Like `chunk_kernels.dot_rows`, every sum over channels runs in slices of SLICE.

    The diagonal (i = j) has no decay: sum_d X_id Y_id. Then level by level, blocks of size s = C, C/2,
    ..., 2: rows in the lower half of a block and columns in its upper half meet through the block's
    reference row (the last row of its upper half), with exp(G_i - G_ref) <= 1 and exp(G_ref - G_j) <= 1:
    one product per level, summed over the slices (`acc=`), covers every such quadrant.
    """
    r = tl.arange(0, C)
    t = n * C + r
    Diagonal = tl.zeros([C], dtype=ACC)
    k0 = 0
    while k0 < K:               # a runtime bound: a while loop (the rules in `chunk_kernels`)
        cols = k0 + tl.arange(0, SLICE)
        X = chunk_kernels.load_rows(x=x, t=t, cols=cols, T=T, width=K)
        Diagonal += tl.sum(X * chunk_kernels.load_rows(x=y, t=t, cols=cols, T=T, width=K), axis=1)
        k0 += SLICE
    P = tl.where(r[:, None] == r[None, :], Diagonal[:, None], 0.0)
    for level in range(LOG_C):                           # a loop, not unrolled: one level's tiles at a time
        s = C >> level
        half = s // 2
        upper = (r % s) < half                               # in the upper half of its block
        ref = n * C + (r // s) * s + half - 1                # the block's reference row
        quadrant = ((r[:, None] // s) == (r[None, :] // s)) & ((r[:, None] % s) >= half) & upper[None, :]
        P_level = tl.zeros([C, C], dtype=ACC)
        k0 = 0
        while k0 < K:
            cols = k0 + tl.arange(0, SLICE)
            G = chunk_kernels.load_rows(x=g_cum, t=t, cols=cols, T=n * C + C, width=K)
            G_ref = chunk_kernels.load_rows(x=g_cum, t=ref, cols=cols, T=n * C + C, width=K)   # row i's ref
            X_i = chunk_kernels.load_rows(x=x, t=t, cols=cols, T=T, width=K) \
                * tl.exp(tl.where(upper[:, None], 0.0, G - G_ref))                              # <= 1
            Y_j = tl.where(upper[:, None], chunk_kernels.load_rows(x=y, t=t, cols=cols, T=T, width=K)
                           * tl.exp(tl.where(upper[:, None], G_ref - G, 0.0)), 0.0)          # <= 1 too
            P_level = chunk_kernels.mma(X=X_i, Y=tl.trans(Y_j), Acc=P_level, PRECISION=PRECISION)
            k0 += SLICE
        P += tl.where(quadrant, P_level, 0.0)
    return P


@triton.jit
def kda_intra_chunk_kernel(
    # pointers: inputs
    q,          # [B*H, T, K]
    k,          # [B*H, T, K]
    v,          # [B*H, T, V]
    g_cum,      # [B*H, N*C, K]  G = cumsum(g) inside each chunk, per channel (from the launcher)
    beta,       # [B*H, T]
    # pointers: outputs
    a_qk,       # [B*H, T, C]    A_n, the decayed scores of Q_n with K_n
    l_inv,      # [B*H, T, C]    L_inv = (I + A)^{-1} (read back by `deltanet.wy_slices`)
    w,          # [B*H, T, K]    W_n
    u,          # [B*H, T, V]    U_n
    qd,         # [B*H, T, K]    Qd_n = exp(G) * Q_n
    kd,         # [B*H, T, K]    Kd_n = exp(G_C - G) * K_n
    decay,      # [B*H, N, K]    d_n = exp(G_C), per key row
    # sizes
    T,
    K,
    V,
    C: tl.constexpr,
    LOG_C: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """Lesson 06's intra-chunk kernel with G = cumsum(g) per channel [C, K] (g_cum, from the launcher; what
    changed: "per channel"):

        A     = strict_tril(diag(Beta) (sum_d k_id k_jd e^{G_id - G_jd}))  A_qk = the same with q_i, i >= j
        L_inv = (I + A)^{-1}                                              `deltanet.forward_substitution_tile`
        W     = L_inv diag(Beta) (exp(G) * K)                             U = L_inv diag(Beta) V
        Qd    = exp(G) * Q,  Kd = exp(G_C - G) * K,  d_n = exp(G_C)       per channel

    The channels are independent, so every sum over them runs in slices of SLICE, each with its own G.
    Rows past T read beta = 0, k = 0 (and g = 0): no decay and no write.
    """
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
    a_qk += bh * T * C
    l_inv += bh * T * C
    w += bh * T * K
    u += bh * T * V
    qd += bh * T * K
    kd += bh * T * K
    decay += (bh * N + n) * K
    Beta = tl.load(beta + t, mask=t < T, other=0.0)
    A = decayed_scores_tile(x=k, y=k, g_cum=g_cum, n=n, T=T, K=K, C=C, LOG_C=LOG_C, SLICE=SLICE,
                            PRECISION=PRECISION, ACC=ACC)  # per channel
    L_inv = deltanet.forward_substitution_tile(A=tl.where(r[:, None] > r[None, :], Beta[:, None] * A, 0.0),
                                               C=C)
    chunk_kernels.store_rows(x=l_inv, t=t, cols=r, X=L_inv, T=T, width=C)     # read back by `wy_slices`
    tl.debug_barrier()          # all of L_inv is in memory before any thread reads a slice of it back
    deltanet.wy_slices(l_inv=l_inv, beta=beta, g_cum=g_cum, x=k, out=w, n=n, T=T, width=K, C=C, SLICE=SLICE,
                       DECAY="channel", PRECISION=PRECISION, ACC=ACC)  # e^G per channel
    deltanet.wy_slices(l_inv=l_inv, beta=beta, g_cum=g_cum, x=v, out=u, n=n, T=T, width=V, C=C, SLICE=SLICE,
                       DECAY=None, PRECISION=PRECISION, ACC=ACC)                                      # U
    k0 = 0
    while k0 < K:
        cols = k0 + tl.arange(0, SLICE)
        Q_n = chunk_kernels.load_rows(x=q, t=t, cols=cols, T=T, width=K)
        K_n = chunk_kernels.load_rows(x=k, t=t, cols=cols, T=T, width=K)
        G_n = chunk_kernels.load_rows(x=g_cum, t=t, cols=cols, T=N * C, width=K)
        G_C = tl.load(g_cum + (n * C + C - 1) * K + cols, mask=cols < K, other=0.0)   # the chunk's last row
        chunk_kernels.store_rows(x=qd, t=t, cols=cols, X=tl.exp(G_n) * Q_n, T=T, width=K)
        chunk_kernels.store_rows(x=kd, t=t, cols=cols, X=tl.exp(G_C[None, :] - G_n) * K_n, T=T, width=K)
        tl.store(decay + cols, tl.exp(G_C), mask=cols < K)
        k0 += SLICE
    A_qk = decayed_scores_tile(x=q, y=k, g_cum=g_cum, n=n, T=T, K=K, C=C, LOG_C=LOG_C, SLICE=SLICE,
                               PRECISION=PRECISION, ACC=ACC)
    chunk_kernels.store_rows(x=a_qk, t=t, cols=r, X=A_qk, T=T, width=C)


def triton_chunked(q, k, v, g, beta, chunk_size=64, initial_state=None, input_precision="ieee"):
    """KDA's chunked form as Triton kernels (forward). Returns (o in v's dtype, S_T float32 [B, H, K, V]).

    `kda_intra_chunk_kernel` for every chunk at once, then the scan over chunks and the outputs every mixer
    shares, with the decay per key row. Computes in float32 whatever the input dtype; chunk_size is a
    power of two >= 16; input_precision "ieee" (exact float32) or "tf32" (tensor cores, sm_80+, errors
    near 1e-3). Tensors must be CUDA tensors when Triton is compiled, CPU tensors in interpreter mode.
    """
    return chunk_kernels.launch_chunked(MIXER, q, k, v, g=g, beta=beta, chunk_size=chunk_size,
                                        initial_state=initial_state, input_precision=input_precision)


MIXER = contract.Mixer(name="kda", title="KDA", lesson="07a", delta=True, decay="channel",
                       recurrent=recurrent, chunked=chunked, triton_chunked=triton_chunked, step=kda_step,
                       intra_chunk_kernel=kda_intra_chunk_kernel)
