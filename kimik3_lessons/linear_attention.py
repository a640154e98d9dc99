"""Lessons 02–03: linear attention — a constant-size state, and the chunkwise-parallel form.

Replace softmax's exp(q · k) by a product of features phi(q) · phi(k) and the sum over the past
re-associates into a state that does not grow with the context:

    S_t = S_{t-1} + k_t^T v_t        o_t = q_t S_t            (S is [K, V] per head)

The same numbers come out of three orders of computation, all [B, H, T, D] in, `(o, S_T)` out:
    `recurrent`  one token at a time (the definition, and the decode step),
    `parallel`   masked quadratic attention O = tril(Q K^T) V (lesson 02),
    `chunked`    within a chunk (Q K^T) V, across chunks Q (K^T V)  (lesson 03),
and `triton_chunked`, the chunked form as a Triton kernel. No feature map or scaling happens inside a
form: the caller applies `elu_feature_map` to q and k. `normalized(form, ...)` divides by q_t · z_t,
z_t = sum_{i<=t} k_i, with any of the forms.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kimik3_lessons import contract


def elu_feature_map(x):
    """phi(x) = elu(x) + 1 (Katharopoulos et al., 2020): positive everywhere, so phi(q) · phi(k) > 0
    can stand in for the attention weight exp(q · k)."""
    return F.elu(x) + 1


def _prepare(q, k, v, initial_state):
    """Check the contract, cast to the compute dtype; return (q, k, v, S0, B, H, T, K, V)."""
    B, H, T, K, V = contract.check_inputs(q, k, v, initial_state=initial_state)
    dtype = contract.compute_dtype(q)
    S = q.new_zeros(B, H, K, V, dtype=dtype) if initial_state is None else initial_state.to(dtype)
    return q.to(dtype), k.to(dtype), v.to(dtype), S, B, H, T, K, V


def linear_attention_step(S, q_t, k_t, v_t):
    """One token (the decode step); returns (o_t, S_t).

        S_t = S + k_t^T v_t        o_t = q_t S_t

    S [B, H, K, V]; q_t, k_t [B, H, K]; v_t [B, H, V]. The cost and the memory do not depend on how
    many tokens came before: that is the whole point.
    """
    S = S + k_t[..., :, None] * v_t[..., None, :]
    o_t = torch.einsum("bhk,bhkv->bhv", q_t, S)
    return o_t, S


def recurrent(q, k, v, initial_state=None):
    """The definition, one token at a time. Returns (o [B, H, T, V] in v's dtype, S_T [B, H, K, V]).

    Computes in float32 (float64 for float64 inputs); the final state stays in that precision.
    """
    out_dtype = v.dtype
    q, k, v, S, B, H, T, K, V = _prepare(q, k, v, initial_state)
    o = q.new_empty(B, H, T, V)
    for t in range(T):
        o[:, :, t], S = linear_attention_step(S, q[:, :, t], k[:, :, t], v[:, :, t])
    return o.to(out_dtype), S


def parallel(q, k, v, initial_state=None):
    """Masked quadratic attention, with the kernel phi(q) · phi(k) where softmax had exp(q · k):

        O = Q S_0 + tril(Q K^T) V        S_T = S_0 + K^T V

    tril keeps i <= t (a token sees itself). Costs O(T^2 D) time and a [T, T] score matrix per head.
    Returns (o [B, H, T, V] in v's dtype, S_T [B, H, K, V]).
    """
    out_dtype = v.dtype
    q, k, v, S, B, H, T, K, V = _prepare(q, k, v, initial_state)
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    A = (q @ k.transpose(-1, -2)).masked_fill(~causal, 0)          # [B, H, T, T]
    o = q @ S + A @ v
    return o.to(out_dtype), S + k.transpose(-1, -2) @ v


def chunked(q, k, v, chunk_size=64, initial_state=None):
    """The chunkwise-parallel form: split T into N chunks of C tokens (the last one zero-padded).

    For chunk n with rows Q_n, K_n, V_n [C, D] and S_n the state before it:
        O_n = Q_n S_n + tril(Q_n K_n^T) V_n      (past chunks through the state, this chunk quadratically)
        S_{n+1} = S_n + K_n^T V_n
    Without decay the walk over chunks is a running sum, so every S_n comes from one cumsum and all
    chunks are computed at once. C = 1 is the recurrence, C >= T the quadratic form.
    Returns (o [B, H, T, V] in v's dtype, S_T [B, H, K, V]).
    """
    contract.check_chunk_size(chunk_size)
    out_dtype = v.dtype
    q, k, v, S0, B, H, T, K, V = _prepare(q, k, v, initial_state)
    Q, K_, V_ = (contract.split_chunks(x, chunk_size) for x in (q, k, v))        # [B, H, N, C, D]
    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device).tril()
    intra = (Q @ K_.transpose(-1, -2)).masked_fill(~causal, 0) @ V_       # [B, H, N, C, V]
    KV = K_.transpose(-1, -2) @ V_                                         # [B, H, N, K, V]: chunk n's write
    S = torch.cat([S0[:, :, None], KV], dim=2).cumsum(dim=2)               # [B, H, N + 1, K, V]: S_0 ... S_N
    o = Q @ S[:, :, :-1] + intra
    return contract.merge_chunks(o, T).to(out_dtype), S[:, :, -1].clone()  # a view would pin all N + 1 states


def normalized(form, q, k, v, **kwargs):
    """Normalized linear attention with any form: o_t = q_t S_t / (q_t · z_t), z_t = sum_{i<=t} k_i.

    z is the state S written with v replaced by ones, so one call of `form` on [v | 1] carries both:
    its state is [B, H, K, V + 1] = [S | z], its last output column is q_t · z_t. With positive
    features (elu_feature_map) the denominator is positive and o_t is a weighted average of the v_i.
    kwargs (chunk_size, initial_state) go to `form`. Returns (o [B, H, T, V], [S | z] [B, H, K, V + 1]).
    """
    ones = v.new_ones(*v.shape[:-1], 1)
    o, state = form(q, k, torch.cat([v, ones], dim=-1), **kwargs)
    return o[..., :-1] / o[..., -1:], state


def chunked_flops(seq_len, head_dim, chunk_size):
    """FLOPs of `chunked` per head and per sequence: {"state": ..., "intra": ..., "total": ...}.

    Convention: matrix products only, a multiply-add counts 2 FLOPs (an [m, n] @ [n, p] product is
    2 m n p), the mask and the additions of the state are not counted, and K = V = d = head_dim.
    The sequence is padded up to L = N C (N = ceil(seq_len / C) chunks), as `chunked` computes it.
    Per chunk: Q S and K^T V cost 2 C d^2 each; Q K^T and (masked) A V cost 2 C^2 d each. So

        state = 4 L d^2   (independent of C)        intra = 4 L C d   (linear in C)

    exactly twice the article's 2 L d^2 + 2 L C d, which counts a multiply-add as one FLOP.
    C = 1 is the recurrence (4 L d^2 + 4 L d); C = L adds 4 L^2 d, the quadratic form.
    """
    contract.check_chunk_size(chunk_size)
    L = -(-seq_len // chunk_size) * chunk_size
    state = 4 * L * head_dim**2
    intra = 4 * L * chunk_size * head_dim
    return {"state": state, "intra": intra, "total": state + intra}


# ---------------------------------------------------------------------------------------------------
# The Triton kernel: the chunked form, one program per (batch, head), the state on chip.


@triton.jit
def chunked_kernel(q, k, v, o, s0, s_out, T, K, V,
                   C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                   HAS_INITIAL_STATE: tl.constexpr, PRECISION: tl.constexpr):
    """O_n = Q_n S + tril(Q_n K_n^T) V_n;  S <- S + K_n^T V_n  for the chunks n = 0, 1, ... of one head.

    q, k [B*H, T, K], v, o [B*H, T, V], s0, s_out [B*H, K, V], all contiguous float32. Head dims are
    padded to the blocks BK, BV (powers of two) by masked loads; the tail chunk past T is masked too.
    """
    bh = tl.program_id(0)
    q, k, v, o = q + bh * T * K, k + bh * T * K, v + bh * T * V, o + bh * T * V
    rc, rk, rv = tl.arange(0, C), tl.arange(0, BK), tl.arange(0, BV)
    state_offsets = rk[:, None] * V + rv[None, :]
    state_mask = (rk[:, None] < K) & (rv[None, :] < V)
    # The state S [BK, BV] lives on chip for the whole sequence, in float32.
    if HAS_INITIAL_STATE:
        S = tl.load(s0 + bh * K * V + state_offsets, mask=state_mask, other=0.0)
    else:
        S = tl.zeros([BK, BV], dtype=tl.float32)
    causal = rc[:, None] >= rc[None, :]
    for start in range(0, T, C):
        t = start + rc
        # Load this chunk: Q [C, BK], K^T [BK, C] (read transposed), V [C, BV]; rows past T read 0.
        Q = tl.load(q + t[:, None] * K + rk[None, :], mask=(t[:, None] < T) & (rk[None, :] < K), other=0.0)
        Kt = tl.load(k + t[None, :] * K + rk[:, None], mask=(t[None, :] < T) & (rk[:, None] < K), other=0.0)
        Vc = tl.load(v + t[:, None] * V + rv[None, :], mask=(t[:, None] < T) & (rv[None, :] < V), other=0.0)
        # Within the chunk, quadratic: A = tril(Q K^T). Across chunks, through the state: Q S.
        A = tl.where(causal, tl.dot(Q, Kt, input_precision=PRECISION), 0.0)
        O = tl.dot(Q, S, input_precision=PRECISION) + tl.dot(A, Vc, input_precision=PRECISION)
        tl.store(o + t[:, None] * V + rv[None, :], O, mask=(t[:, None] < T) & (rv[None, :] < V))
        # Fold this chunk into the state: S <- S + K^T V.
        S += tl.dot(Kt, Vc, input_precision=PRECISION)
    tl.store(s_out + bh * K * V + state_offsets, S, mask=state_mask)


def triton_chunked(q, k, v, chunk_size=64, initial_state=None, input_precision="ieee"):
    """The chunked form as a Triton kernel (forward). Returns (o in v's dtype, S_T float32 [B, H, K, V]).

    One program per (batch, head) walks the chunks, keeping S on chip. Computes in float32 whatever the
    input dtype. chunk_size must be a power of two >= 16 (the smallest tile `tl.dot` accepts); head
    dims of any size are padded to powers of two inside. input_precision "ieee" multiplies in full
    float32; "tf32" rounds the inputs of each product to TF32 (10-bit mantissa) for a GPU's tensor cores:
    faster, with relative errors near 1e-3.
    Tensors must be CUDA tensors when Triton is compiled, CPU tensors in interpreter mode.
    """
    B, H, T, K, V = contract.check_inputs(q, k, v, initial_state=initial_state)
    contract.check_triton_options(chunk_size, input_precision)
    contract.check_triton_inputs(q=q, k=k, v=v, initial_state=initial_state)
    out_dtype = v.dtype
    q, k, v = (x.to(torch.float32).contiguous() for x in (q, k, v))
    s0 = None if initial_state is None else initial_state.to(torch.float32).contiguous()
    o = torch.empty(B, H, T, V, dtype=torch.float32, device=q.device)
    S = torch.empty(B, H, K, V, dtype=torch.float32, device=q.device)
    BK, BV = (max(16, triton.next_power_of_2(n)) for n in (K, V))
    # Without an initial state the kernel never reads s0 (HAS_INITIAL_STATE=False): S stands in for it.
    chunked_kernel[(B * H,)](q, k, v, o, s0 if s0 is not None else S, S, T, K, V,
                             C=chunk_size, BK=BK, BV=BV, HAS_INITIAL_STATE=s0 is not None,
                             PRECISION=input_precision)
    return o.to(out_dtype), S
