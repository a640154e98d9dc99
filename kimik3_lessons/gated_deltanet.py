"""Lesson 06: Gated DeltaNet — the delta rule with a scalar decay per head (Yang, Kautz, Hatamizadeh 2025).

Each step first forgets, multiplying the whole state by alpha_t = exp(g_t) (g_t <= 0), then takes the
delta-rule step of lesson 05:
    S_t = alpha_t (I - beta_t k_t^T k_t) S_{t-1} + beta_t k_t^T v_t        o_t = q_t S_t
Shapes: q, k [B, H, T, K]; v [B, H, T, V]; g, beta [B, H, T]; state S [B, H, K, V].

- `mamba2_gate`: the data-dependent log decay g = -exp(A_log) softplus(x + dt_bias)
- `recurrent`: the definition, one token at a time (one token with a state is the decode step)
- `chunked`: the chunkwise-parallel form with the decay mask Gamma_ij = exp(G_i - G_j)
- `triton_chunked`: the chunked form as Triton kernels (forward): `gated_deltanet_intra_chunk_kernel` is
  lesson 05's intra-chunk kernel plus the decay (G, Gamma, the decayed queries and keys, d_n = exp(G_C)),
  and the scan over chunks and the outputs are the kernels every mixer shares, with their DECAY switch on
W and U are lesson 05's `deltanet.wy_representation`, given this A and the decayed keys; the state scan
between chunks is lesson 05's `deltanet.chunk_state_scan`, given the decay.
No scaling or normalization happens inside: layers L2-normalize q and k themselves.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kimik3_lessons import chunk_kernels, contract, deltanet


def mamba2_gate(x, A_log, dt_bias):
    """The Mamba-2 forget gate in log space: g = -exp(A_log) * softplus(x + dt_bias) <= 0.

    softplus(x + dt_bias) is a data-dependent step size dt > 0, exp(A_log) > 0 a learned rate: the
    state keeps alpha = exp(g) = exp(-rate * dt) of itself. A_log and dt_bias broadcast against x.
    Computed in float32 (float64 stays float64).
    """
    dtype = contract.compute_dtype(x)
    return -torch.exp(A_log.to(dtype)) * F.softplus(x.to(dtype) + dt_bias.to(dtype))


# ---------------------------------------------------------------------------------------------------
# The definition: one token at a time


def gated_deltanet_step(S, q_t, k_t, v_t, g_t, beta_t):
    """One token of the gated delta rule: decay the state, then the delta-rule step. Returns (o_t, S_t).

        S <- exp(g_t) S;    u_t = beta_t (v_t - k_t S);    S_t = S + k_t^T u_t;    o_t = q_t S_t

    S [B, H, K, V]; q_t, k_t [B, H, K]; v_t [B, H, V]; g_t, beta_t [B, H].
    """
    S = torch.exp(g_t)[..., None, None] * S
    return deltanet.deltanet_step(S, q_t, k_t, v_t, beta_t)


def recurrent(q, k, v, g, beta, initial_state=None):
    """The definition, one token at a time. Returns (o [B, H, T, V] in v's dtype, S [B, H, K, V]).

    Computes in float32 (float64 for float64 inputs); the final state stays in that precision.
    """
    out_dtype = v.dtype
    q, k, v, g, beta, S = contract.prepare(q, k, v, g=g, beta=beta, initial_state=initial_state,
                                           **MIXER.switches)
    o = q.new_empty(*v.shape)
    for t in range(q.shape[2]):
        o[:, :, t], S = gated_deltanet_step(S, q[:, :, t], k[:, :, t], v[:, :, t], g[:, :, t], beta[:, :, t])
    return o.to(out_dtype), S


# ---------------------------------------------------------------------------------------------------
# The chunked form


def decay_mask(G):
    """Gamma_ij = exp(G_i - G_j) for i >= j, else 0: what token j's write keeps by the time of token i.

    G [..., C] is the cumulative log decay inside a chunk (G_i = g_1 + ... + g_i); returns [..., C, C].
    The differences are formed first and the upper triangle masked to -inf before exponentiating, so
    no exponent is ever positive: exp(-G) alone would overflow float32 once G < -88.
    """
    C = G.shape[-1]
    causal = torch.ones(C, C, dtype=torch.bool, device=G.device).tril()
    return torch.exp((G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")))


def chunked(q, k, v, g, beta, chunk_size=64, initial_state=None):
    """The chunkwise-parallel form. Returns (o [B, H, T, V] in v's dtype, S [B, H, K, V]).

    Per chunk of C tokens, with G = cumsum(g) inside the chunk and Gamma = decay_mask(G):
        A = strict_tril(diag(beta) K K^T * Gamma)
        W = L_inv diag(beta) (exp(G) * K),  U = L_inv diag(beta) V,  L_inv = (I + A)^{-1}
        (lesson 05's `deltanet.wy_representation`, given this A and the keys exp(G) * K)
    then lesson 05's `chunk_state_scan`, given the decay across each chunk, for the state S_n before
    each chunk and U' = U - W S_n, and at last
        O = (exp(G) * Q) S_n + (Q K^T * Gamma) U'.
    Everything but the scan is computed for all chunks at once. Any T works (zero-padded);
    chunk_size 1 is the recurrence, >= T the quadratic form.
    """
    contract.check_chunk_size(chunk_size)
    T, out_dtype = q.shape[2], v.dtype
    q, k, v, g, beta, S = contract.prepare(q, k, v, g=g, beta=beta, initial_state=initial_state,
                                           **MIXER.switches)
    q, k, v, g, beta = (contract.split_chunks(x, chunk_size) for x in (q, k, v, g, beta))

    G = g.cumsum(-1)                                                  # [B, H, N, C]
    Gamma = decay_mask(G)                                             # [B, H, N, C, C]
    A = (beta[..., None] * (k @ k.mT) * Gamma).tril(-1)
    W, U = deltanet.wy_representation(A, beta[..., None] * (torch.exp(G)[..., None] * k), beta[..., None] * v)
    Kd = torch.exp(G[..., -1:] - G)[..., None] * k                   # each write, decayed to the chunk's end
    S_n, U_new, S = deltanet.chunk_state_scan(W, U, Kd, S, decay=torch.exp(G[..., -1:]))
    O = (torch.exp(G)[..., None] * q) @ S_n + ((q @ k.mT) * Gamma) @ U_new
    return contract.merge_chunks(O, T).to(out_dtype), S


# ---------------------------------------------------------------------------------------------------
# The Triton kernel: lesson 05's intra-chunk kernel with the decay. What changed is marked "decay".


@triton.jit
def gated_deltanet_intra_chunk_kernel(
    # pointers: inputs
    q,          # [B*H, T, K]
    k,          # [B*H, T, K]
    v,          # [B*H, T, V]
    g_cum,      # [B*H, N*C]     G = cumsum(g) inside each chunk (from the launcher)
    beta,       # [B*H, T]
    # pointers: outputs
    a_qk,       # [B*H, T, C]    A_n = tril(Q_n K_n^T * Gamma)
    l_inv,      # [B*H, T, C]    L_inv = (I + A)^{-1} (read back by `deltanet.wy_slices`)
    w,          # [B*H, T, K]    W_n
    u,          # [B*H, T, V]    U_n
    qd,         # [B*H, T, K]    Qd_n = exp(G) Q_n
    kd,         # [B*H, T, K]    Kd_n = exp(G_C - G) K_n
    decay,      # [B*H, N, K]    d_n = exp(G_C), the same for every key row
    # sizes
    T,
    K,
    V,
    C: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """Everything chunk n of head bh needs from itself, with G = cumsum(g) inside the chunk (g_cum, from the
    launcher) and Gamma_ij = exp(G_i - G_j) (i >= j, else 0):

        A     = strict_tril(diag(Beta) K K^T * Gamma)   A_qk = tril(Q K^T * Gamma)
        L_inv = (I + A)^{-1}                             row by row (`deltanet.forward_substitution_tile`)
        W     = L_inv diag(Beta exp(G)) K                U = L_inv diag(Beta) V
        Qd    = exp(G) Q,  Kd = exp(G_C - G) K,  d_n = exp(G_C) for every key row

    Lesson 05's kernel plus the lines marked "decay". Rows past T read beta = 0, k = 0 (and g = 0).
    """
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
    a_qk += bh * T * C
    l_inv += bh * T * C
    w += bh * T * K
    u += bh * T * V
    qd += bh * T * K                                                                        # decay
    kd += bh * T * K                                                                        # decay
    decay += (bh * N + n) * K                                                               # decay
    Beta = tl.load(beta + t, mask=t < T, other=0.0)
    G = tl.load(g_cum + t)                                                                  # decay
    G_C = tl.load(g_cum + n * C + C - 1)                                                    # decay
    lower = r[:, None] >= r[None, :]
    Gamma = tl.where(lower, tl.exp(tl.where(lower, G[:, None] - G[None, :], 0.0)), 0.0)    # decay: never > 1
    A = chunk_kernels.dot_rows(x=k, y=k, t=t, T=T, K=K, C=C, SLICE=SLICE, PRECISION=PRECISION, ACC=ACC)
    A = tl.where(r[:, None] > r[None, :], Beta[:, None] * A * Gamma, 0.0)                  # decay: * Gamma
    L_inv = deltanet.forward_substitution_tile(A=A, C=C)
    chunk_kernels.store_rows(x=l_inv, t=t, cols=r, X=L_inv, T=T, width=C)     # read back by `wy_slices`
    tl.debug_barrier()          # all of L_inv is in memory before any thread reads a slice of it back
    deltanet.wy_slices(l_inv=l_inv, beta=beta, g_cum=g_cum, x=k, out=w, n=n, T=T, width=K, C=C, SLICE=SLICE,
                       DECAY="head", PRECISION=PRECISION, ACC=ACC)  # decay: e^G K
    deltanet.wy_slices(l_inv=l_inv, beta=beta, g_cum=g_cum, x=v, out=u, n=n, T=T, width=V, C=C, SLICE=SLICE,
                       DECAY=None, PRECISION=PRECISION, ACC=ACC)
    k0 = 0
    while k0 < K:                                                                          # decay
        cols = k0 + tl.arange(0, SLICE)
        Q_n = chunk_kernels.load_rows(x=q, t=t, cols=cols, T=T, width=K)
        K_n = chunk_kernels.load_rows(x=k, t=t, cols=cols, T=T, width=K)
        chunk_kernels.store_rows(x=qd, t=t, cols=cols, X=tl.exp(G)[:, None] * Q_n, T=T, width=K)
        chunk_kernels.store_rows(x=kd, t=t, cols=cols, X=tl.exp(G_C - G)[:, None] * K_n, T=T, width=K)
        tl.store(decay + cols, tl.zeros([SLICE], dtype=ACC) + tl.exp(G_C), mask=cols < K)
        k0 += SLICE
    A_qk = chunk_kernels.dot_rows(x=q, y=k, t=t, T=T, K=K, C=C, SLICE=SLICE, PRECISION=PRECISION, ACC=ACC)
    chunk_kernels.store_rows(x=a_qk, t=t, cols=r, X=A_qk * Gamma, T=T, width=C)            # decay: * Gamma


def triton_chunked(q, k, v, g, beta, chunk_size=64, initial_state=None, input_precision="ieee"):
    """The chunked form as Triton kernels (forward). Returns (o in v's dtype, S_T float32 [B, H, K, V]).

    `gated_deltanet_intra_chunk_kernel` for every chunk at once, then the scan over chunks and the outputs
    every mixer shares, with the decay. Computes in float32 whatever the input dtype; chunk_size is a
    power of two >= 16; input_precision "ieee" (exact float32) or "tf32" (tensor cores, sm_80+, errors
    near 1e-3). Tensors must be CUDA tensors when Triton is compiled, CPU tensors in interpreter mode.
    """
    return chunk_kernels.launch_chunked(MIXER, q, k, v, g=g, beta=beta, chunk_size=chunk_size,
                                        initial_state=initial_state, input_precision=input_precision)


MIXER = contract.Mixer(name="gated_deltanet", title="gated DeltaNet", lesson="06", delta=True, decay="head",
                       recurrent=recurrent, chunked=chunked, triton_chunked=triton_chunked,
                       step=gated_deltanet_step, intra_chunk_kernel=gated_deltanet_intra_chunk_kernel)
