"""Lesson 06: Gated DeltaNet — the delta rule with a scalar decay per head (Yang, Kautz, Hatamizadeh 2025).

Each step first forgets, multiplying the whole state by alpha_t = exp(g_t) (g_t <= 0), then takes the
delta-rule step of lesson 05:
    S_t = alpha_t (I - beta_t k_t^T k_t) S_{t-1} + beta_t k_t^T v_t        o_t = q_t S_t
Shapes: q, k [B, H, T, K]; v [B, H, T, V]; g, beta [B, H, T]; state S [B, H, K, V].

- `mamba2_gate`: the data-dependent log decay g = -exp(A_log) softplus(x + dt_bias)
- `recurrent`: the definition, one token at a time (one token with a state is the decode step)
- `chunked`: the chunkwise-parallel form with the decay mask Gamma_ij = exp(G_i - G_j)
- `triton_chunked`: the chunked form as a Triton kernel (forward)
`decayed_wy_representation` and the Triton helper `ut_transform_tile` are reused by lesson 07 (KDA);
the state scan between chunks is lesson 05's `deltanet.chunk_state_scan`, given the decay.
No scaling or normalization happens inside: layers L2-normalize q and k themselves.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kimik3_lessons import contract, deltanet


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


def gated_delta_step(S, q_t, k_t, v_t, g_t, beta_t):
    """One token of the gated delta rule: decay the state, then the delta-rule step. Returns (o_t, S_t).

        S <- exp(g_t) S;    u_t = beta_t (v_t - k_t S);    S_t = S + k_t^T u_t;    o_t = q_t S_t

    S [B, H, K, V]; q_t, k_t [B, H, K]; v_t [B, H, V]; g_t, beta_t [B, H].
    """
    S = torch.exp(g_t)[..., None, None] * S
    return deltanet.delta_rule_step(S, q_t, k_t, v_t, beta_t)


def recurrent(q, k, v, g, beta, initial_state=None):
    """The definition, one token at a time. Returns (o [B, H, T, V] in v's dtype, S [B, H, K, V]).

    Computes in float32 (float64 for float64 inputs); the final state stays in that precision.
    """
    B, H, T, K, V = contract.check_inputs(q, k, v, g=g, beta=beta, initial_state=initial_state,
                                            gate="scalar", delta=True)
    dtype, out_dtype = contract.compute_dtype(q), v.dtype
    q, k, v, g, beta = (x.to(dtype) for x in (q, k, v, g, beta))
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(dtype)
    o = q.new_empty(B, H, T, V)
    for t in range(T):
        o[:, :, t], S = gated_delta_step(S, q[:, :, t], k[:, :, t], v[:, :, t], g[:, :, t], beta[:, :, t])
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


def decayed_wy_representation(A, k_decayed, v, beta):
    """Lesson 05's WY form with decay: W = T diag(beta) k_decayed, U = T diag(beta) v, T = (I + A)^{-1}.

    A [..., C, C] is strictly lower-triangular and already holds beta and the decay; k_decayed is
    exp(G) * K [..., C, K], the keys as seen from the start of the chunk; v [..., C, V]; beta [..., C].
    The leading dims hold every chunk of every head, so all of them are transformed at once.
    """
    T = deltanet.ut_transform(A)
    return T @ (beta[..., None] * k_decayed), T @ (beta[..., None] * v)


def chunked(q, k, v, g, beta, chunk_size=64, initial_state=None):
    """The chunkwise-parallel form. Returns (o [B, H, T, V] in v's dtype, S [B, H, K, V]).

    Per chunk of C tokens, with G = cumsum(g) inside the chunk and Gamma = decay_mask(G):
        A = strict_tril(diag(beta) K K^T * Gamma)
        W = T diag(beta) (exp(G) * K),  U = T diag(beta) V,  T = (I + A)^{-1}  (`decayed_wy_representation`)
    then lesson 05's `chunk_state_scan`, given the decay across each chunk, for the state S_n before
    each chunk and U' = U - W S_n, and at last
        O = (exp(G) * Q) S_n + (Q K^T * Gamma) U'.
    Everything but the scan is computed for all chunks at once. Any T works (zero-padded);
    chunk_size 1 is the recurrence, >= T the quadratic form.
    """
    B, H, T, K, V = contract.check_inputs(q, k, v, g=g, beta=beta, initial_state=initial_state,
                                            gate="scalar", delta=True)
    contract.check_chunk_size(chunk_size)
    dtype, out_dtype = contract.compute_dtype(q), v.dtype
    q, k, v, g, beta = (contract.split_chunks(x.to(dtype), chunk_size) for x in (q, k, v, g, beta))
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(dtype)

    G = g.cumsum(-1)                                                  # [B, H, N, C]
    Gamma = decay_mask(G)                                             # [B, H, N, C, C]
    A = (beta[..., None] * (k @ k.mT) * Gamma).tril(-1)
    W, U = decayed_wy_representation(A, torch.exp(G)[..., None] * k, v, beta)
    Kd = torch.exp(G[..., -1:] - G)[..., None] * k                   # each write, decayed to the chunk's end
    S_n, U_new, S = deltanet.chunk_state_scan(W, U, Kd, S, decay=torch.exp(G[..., -1:]))
    O = (torch.exp(G)[..., None] * q) @ S_n + ((q @ k.mT) * Gamma) @ U_new
    return contract.merge_chunks(O, T).to(out_dtype), S


# ---------------------------------------------------------------------------------------------------
# The Triton kernel: one program per (batch, head, block of value columns), the state on chip.


@triton.jit
def ut_transform_tile(A, C: tl.constexpr, LOG_C: tl.constexpr, PRECISION: tl.constexpr):
    """T = (I + A)^{-1} of a strictly lower-triangular tile A [C, C] (C = 2^LOG_C), by doubling.

    A tile cannot be indexed row by row, so instead of lesson 05's forward substitution the inverse
    grows by blocks: T starts as the inverse of every 1x1 diagonal block (the identity); merging two
    solved blocks of size s into one of size 2s needs only its lower-left quadrant,
        [[I + A11, 0], [A21, I + A22]]^{-1} = [[T11, 0], [-T22 A21 T11, T22]],
    that is T <- T - T A_quadrants T for every pair at once: LOG_C steps of two matmuls each.
    """
    r = tl.arange(0, C)
    T = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    for level in tl.static_range(LOG_C):
        s = 1 << level
        quadrant = ((r[:, None] // (2 * s)) == (r[None, :] // (2 * s))) & \
            ((r[:, None] // s) % 2 == 1) & ((r[None, :] // s) % 2 == 0)
        TA = tl.dot(T, tl.where(quadrant, A, 0.0), input_precision=PRECISION)
        T = T - tl.dot(TA, T, input_precision=PRECISION)
    return T


@triton.jit
def gated_delta_chunk_kernel(q, k, v, g, beta, o, s0, s_out, T, K, V,
                             C: tl.constexpr, LOG_C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                             HAS_INITIAL_STATE: tl.constexpr, PRECISION: tl.constexpr):
    """For each chunk of one head, with G = cumsum(g), Gamma_ij = exp(G_i - G_j) (i >= j):
        A = strict_tril(diag(beta) K K^T * Gamma);  T = (I + A)^{-1};  W = T diag(beta) (exp(G) K);
        U = T diag(beta) V;  U' = U - W S;  O = (exp(G) Q) S + (Q K^T * Gamma) U';
        S <- exp(G_C) S + (exp(G_C - G) K)^T U'.
    q, k [B*H, T, K], v, o [B*H, T, V], g, beta [B*H, T], s0, s_out [B*H, K, V], contiguous float32.
    Program (i_v, bh) owns value columns i_v*BV ... of head bh; rows past T read 0 (g = 0: no decay).
    """
    i_v, bh = tl.program_id(0), tl.program_id(1)
    q, k, v, o = q + bh * T * K, k + bh * T * K, v + bh * T * V, o + bh * T * V
    g, beta = g + bh * T, beta + bh * T
    rc, rk, rv = tl.arange(0, C), tl.arange(0, BK), i_v * BV + tl.arange(0, BV)
    state_offsets = bh * K * V + rk[:, None] * V + rv[None, :]
    state_mask = (rk[:, None] < K) & (rv[None, :] < V)
    if HAS_INITIAL_STATE:
        S = tl.load(s0 + state_offsets, mask=state_mask, other=0.0)
    else:
        S = tl.zeros([BK, BV], dtype=tl.float32)
    lower = rc[:, None] >= rc[None, :]
    for start in range(0, T, C):
        t = start + rc
        Q = tl.load(q + t[:, None] * K + rk[None, :], mask=(t[:, None] < T) & (rk[None, :] < K), other=0.0)
        Kc = tl.load(k + t[:, None] * K + rk[None, :], mask=(t[:, None] < T) & (rk[None, :] < K), other=0.0)
        Vc = tl.load(v + t[:, None] * V + rv[None, :], mask=(t[:, None] < T) & (rv[None, :] < V), other=0.0)
        b = tl.load(beta + t, mask=t < T, other=0.0)
        G = tl.cumsum(tl.load(g + t, mask=t < T, other=0.0), axis=0)
        # Gamma: pairwise differences, masked to 0 above the diagonal, then exponentiated (never > 1).
        Gamma = tl.where(lower, tl.exp(tl.where(lower, G[:, None] - G[None, :], 0.0)), 0.0)
        A = tl.where(rc[:, None] > rc[None, :],
                     b[:, None] * tl.dot(Kc, tl.trans(Kc), input_precision=PRECISION) * Gamma, 0.0)
        Tm = ut_transform_tile(A, C, LOG_C, PRECISION)
        W = tl.dot(Tm, (b * tl.exp(G))[:, None] * Kc, input_precision=PRECISION)
        U = tl.dot(Tm, b[:, None] * Vc, input_precision=PRECISION)
        U_new = U - tl.dot(W, S, input_precision=PRECISION)
        Aqk = tl.dot(Q, tl.trans(Kc), input_precision=PRECISION) * Gamma
        O = tl.dot(tl.exp(G)[:, None] * Q, S, input_precision=PRECISION) + \
            tl.dot(Aqk, U_new, input_precision=PRECISION)
        tl.store(o + t[:, None] * V + rv[None, :], O, mask=(t[:, None] < T) & (rv[None, :] < V))
        G_C = tl.sum(tl.where(rc == C - 1, G, 0.0), axis=0)
        Kd = tl.exp(G_C - G)[:, None] * Kc
        S = tl.exp(G_C) * S + tl.dot(tl.trans(Kd), U_new, input_precision=PRECISION)
    tl.store(s_out + state_offsets, S, mask=state_mask)


def triton_chunked(q, k, v, g, beta, chunk_size=64, initial_state=None, input_precision="ieee"):
    """The chunked form as a Triton kernel (forward). Returns (o in v's dtype, S_T float32 [B, H, K, V]).

    Computes in float32 whatever the input dtype. chunk_size must be a power of two >= 16 (the
    smallest `tl.dot` tile); head dims of any size are padded to powers of two inside. input_precision
    "ieee" is exact float32, "tf32" uses a GPU's tensor cores (faster, relative error about 1e-3).
    Tensors must be CUDA tensors when Triton is compiled, CPU tensors in interpreter mode.
    """
    return launch_chunk_kernel(gated_delta_chunk_kernel, "scalar", q, k, v, g, beta, chunk_size,
                               initial_state, input_precision)


def launch_chunk_kernel(kernel, gate, q, k, v, g, beta, chunk_size, initial_state, input_precision):
    """Check the inputs (`gate` "scalar" or "channel"), cast them to contiguous float32 and launch a gated
    delta-rule chunk kernel on a grid of (blocks of value columns, B * H). Lesson 07's KDA kernel shares
    this launcher. Returns (o in v's dtype, S_T float32 [B, H, K, V])."""
    B, H, T, K, V = contract.check_inputs(q, k, v, g=g, beta=beta, initial_state=initial_state, gate=gate,
                                          delta=True)
    contract.check_triton_options(chunk_size, input_precision)
    contract.check_triton_inputs(q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state)
    out_dtype = v.dtype
    q, k, v, g, beta = (x.to(torch.float32).contiguous() for x in (q, k, v, g, beta))
    s0 = None if initial_state is None else initial_state.to(torch.float32).contiguous()
    o = q.new_empty(B, H, T, V)
    S = q.new_empty(B, H, K, V)
    BK, BV = max(16, triton.next_power_of_2(K)), min(64, max(16, triton.next_power_of_2(V)))
    grid = (triton.cdiv(V, BV), B * H)
    # Without an initial state the kernel never reads s0 (HAS_INITIAL_STATE=False): S stands in for it.
    kernel[grid](q, k, v, g, beta, o, S if s0 is None else s0, S, T, K, V,
                 C=chunk_size, LOG_C=chunk_size.bit_length() - 1, BK=BK, BV=BV,
                 HAS_INITIAL_STATE=s0 is not None, PRECISION=input_precision)
    return o.to(out_dtype), S
