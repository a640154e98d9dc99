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

from kimik3_lessons import chunk_kernels, contract


def elu_feature_map(x):
    """phi(x) = elu(x) + 1 (Katharopoulos et al., 2020): positive everywhere, so phi(q) · phi(k) > 0
    can stand in for the attention weight exp(q · k)."""
    return F.elu(x) + 1


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
    q, k, v, _, _, S = contract.prepare(q, k, v, initial_state=initial_state, **MIXER.switches)
    o = q.new_empty(*v.shape)
    for t in range(q.shape[2]):
        o[:, :, t], S = linear_attention_step(S, q[:, :, t], k[:, :, t], v[:, :, t])
    return o.to(out_dtype), S


def parallel(q, k, v, initial_state=None):
    """Masked quadratic attention, with the kernel phi(q) · phi(k) where softmax had exp(q · k):

        O = Q S_0 + tril(Q K^T) V        S_T = S_0 + K^T V

    tril keeps i <= t (a token sees itself). Costs O(T^2 D) time and a [T, T] score matrix per head.
    Returns (o [B, H, T, V] in v's dtype, S_T [B, H, K, V]).
    """
    out_dtype, T = v.dtype, q.shape[2]
    q, k, v, _, _, S = contract.prepare(q, k, v, initial_state=initial_state, **MIXER.switches)
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    A = (q @ k.mT).masked_fill(~causal, 0)          # [B, H, T, T]
    o = q @ S + A @ v
    return o.to(out_dtype), S + k.mT @ v


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
    out_dtype, T = v.dtype, q.shape[2]
    q, k, v, _, _, S0 = contract.prepare(q, k, v, initial_state=initial_state, **MIXER.switches)
    Q, K_, V_ = (contract.split_chunks(x, chunk_size) for x in (q, k, v))        # [B, H, N, C, D]
    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device).tril()
    intra = (Q @ K_.mT).masked_fill(~causal, 0) @ V_       # [B, H, N, C, V]
    KV = K_.mT @ V_                                         # [B, H, N, K, V]: chunk n's write
    S = torch.cat([S0[:, :, None], KV], dim=2).cumsum(dim=2)               # [B, H, N + 1, K, V]: S_0 ... S_N
    O = Q @ S[:, :, :-1] + intra
    return contract.merge_chunks(O, T).to(out_dtype), S[:, :, -1].clone()  # a view would pin all N + 1 states


def normalized(form, q, k, v, **kwargs):
    """Normalized linear attention with any form: o_t = q_t S_t / (q_t · z_t), z_t = sum_{i<=t} k_i.

    z is the state S written with v replaced by ones, so one call of `form` on [v | 1] carries both:
    its state is [B, H, K, V + 1] = [S | z], its last output column is q_t · z_t. With positive
    features (elu_feature_map) the denominator is positive and o_t is a weighted average of the v_i.
    kwargs (chunk_size, initial_state) go to `form`. Returns (o [B, H, T, V], [S | z] [B, H, K, V + 1]).
    """
    contract.check_inputs(q, k, v, **MIXER.switches)   # before [v | 1]: an error must name the v passed
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
# The Triton kernel: the chunked form's first step, inside each chunk, every chunk in parallel. The scan
# across the chunks and the outputs are `chunk_kernels.chunk_scan_kernel` and `chunk_output_kernel`,
# which lessons 05-07 keep, each writing its own intra-chunk kernel.


@triton.jit
def linear_attention_intra_chunk_kernel(
    # pointers
    q,          # [B*H, T, K]
    k,          # [B*H, T, K]
    a_qk,       # [B*H, T, C]  out: A_n
    # sizes
    T,
    K,
    C: tl.constexpr,
    SLICE: tl.constexpr,
    # switches
    PRECISION: tl.constexpr,
    ACC: tl.constexpr,
):
    """A_qk = tril(Q_n K_n^T) for chunk n of head bh: the [C, C] scores of the chunk with itself.

    One program per (chunk, head). The key dimension is summed in slices of SLICE columns, so the tiles
    stay [C, SLICE] at any head size; rows past T read as zeros.
    """
    n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    r = tl.arange(0, C)
    t = n * C + r
    q += bh * T * K
    k += bh * T * K
    a_qk += bh * T * C
    # Q K^T
    A_qk = chunk_kernels.dot_rows(x=q, y=k, t=t, T=T, K=K, C=C, SLICE=SLICE, PRECISION=PRECISION, ACC=ACC)
    chunk_kernels.store_rows(x=a_qk, t=t, cols=r, X=tl.where(r[:, None] >= r[None, :], A_qk, 0.0), T=T,
                             width=C)


def triton_chunked(q, k, v, chunk_size=64, initial_state=None, input_precision="ieee"):
    """The chunked form as Triton kernels (forward). Returns (o in v's dtype, S_T float32 [B, H, K, V]).

    Step 1, `linear_attention_intra_chunk_kernel`: A_qk = tril(Q_n K_n^T) for every chunk at once.
    Step 2, `chunk_kernels.chunk_scan_kernel`: per head and block of value columns, walk the chunks with S
    on chip: store S_n, then S <- S + K_n^T V_n. Step 3, `chunk_kernels.chunk_output_kernel`: O_n = Q_n S_n
    + A_qk V_n, every chunk at once.
    Computes in float32 whatever the input dtype. chunk_size must be a power of two >= 16 (the smallest
    tile `tl.dot` accepts); head dims of any size are padded inside. input_precision "ieee" multiplies in
    full float32; "tf32" rounds the inputs of each product to TF32 (10-bit mantissa) for the tensor cores
    of an A100 or H100: faster, with relative errors near 1e-3 (a T4 has no TF32:
    `contract.fast_input_precision()` picks for the machine). Tensors must be CUDA tensors when Triton is
    compiled, CPU tensors in interpreter mode.
    """
    return chunk_kernels.launch_chunked(MIXER, q, k, v, chunk_size=chunk_size, initial_state=initial_state,
                                        input_precision=input_precision)


MIXER = contract.Mixer(name="linear_attention", title="linear attention", lesson="02", delta=False,
                       decay=None, recurrent=recurrent, chunked=chunked, triton_chunked=triton_chunked,
                       step=linear_attention_step, intra_chunk_kernel=linear_attention_intra_chunk_kernel)
