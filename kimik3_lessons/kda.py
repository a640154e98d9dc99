"""Lesson 07: KDA — Kimi Delta Attention, the gated delta rule with a decay per key channel (Kimi Linear).

    S <- Diag(exp(g_t)) S;     u_t = beta_t (v_t - k_t S);     S_t = S + k_t^T u_t;     o_t = q_t S_t

Shapes: q, k, g [B, H, T, K] (g <= 0: channel d of the state keeps exp(g_td) of itself each step);
v [B, H, T, V]; beta [B, H, T]; state S [B, H, K, V]. With every channel equal this is lesson 06's
gated DeltaNet. No scaling or normalization happens inside the forms: the layer does it.

- gates: KimiK3's `bounded_gate`, and lesson 06's `mamba2_gate` (Kimi Linear's), re-exported
- `recurrent`: the definition, one token at a time (one token with a state is the decode step)
- `chunked`: the chunkwise-parallel form, with `decayed_scores`, its per-channel pairwise factors
- `triton_chunked`: the chunked form as a Triton kernel (forward)
- `KimiDeltaAttention(KDAConfig)`: the Kimi Linear layer, and `KDACache`, all it carries while decoding
"""

import math
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import nn

from kimik3_lessons import contract, deltanet
from kimik3_lessons.gated_deltanet import (
    decayed_wy_representation,
    launch_chunk_kernel,
    mamba2_gate,
    ut_transform_tile,
)

__all__ = ["KDACache", "KDAConfig", "KimiDeltaAttention", "bounded_gate", "chunked", "decayed_scores",
           "kda_step",
           "mamba2_gate", "recurrent", "short_conv", "triton_chunked"]


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
    return deltanet.delta_rule_step(S, q_t, k_t, v_t, beta_t)


def recurrent(q, k, v, g, beta, initial_state=None):
    """The definition, one token at a time. Returns (o [B, H, T, V] in v's dtype, S [B, H, K, V]).

    q, k, g [B, H, T, K]; v [B, H, T, V]; beta [B, H, T]. Computes in float32 (float64 for float64
    inputs); the final state stays in that precision. One token with a state is the decode step.
    """
    B, H, T, K, V = contract.check_inputs(q, k, v, g=g, beta=beta, initial_state=initial_state,
                                            gate="channel", delta=True)
    dtype, out_dtype = contract.compute_dtype(q), v.dtype
    q, k, v, g, beta = (x.to(dtype) for x in (q, k, v, g, beta))
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(dtype)
    o = q.new_empty(B, H, T, V)
    for t in range(T):
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
        W = T diag(beta) (exp(G) * K),  U = T diag(beta) V,  T = (I + A)^{-1}
    by lesson 06's `decayed_wy_representation`; lesson 05's `chunk_state_scan`, with the decay across a
    chunk taken per channel, exp(G_C) [K], gives the state S_n before each chunk and U' = U - W S_n; then
        O = (exp(G) * Q) S_n + Aqk U'.
    All chunks at once except the scan. Any T works (zero-padded); chunk_size 1 is the recurrence.
    """
    B, H, T, K, V = contract.check_inputs(q, k, v, g=g, beta=beta, initial_state=initial_state,
                                            gate="channel", delta=True)
    contract.check_chunk_size(chunk_size)
    dtype, out_dtype = contract.compute_dtype(q), v.dtype
    q, k, v, g, beta = (contract.split_chunks(x.to(dtype), chunk_size) for x in (q, k, v, g, beta))
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(dtype)

    G = g.cumsum(-2)                                                   # [B, H, N, C, K]
    Akk, Aqk = decayed_scores(torch.stack([k, q]), k, G)             # k and q share every decay factor
    A = (beta[..., None] * Akk).tril(-1)
    decay_in = torch.exp(G)                                           # decay from the chunk's start
    W, U = decayed_wy_representation(A, decay_in * k, v, beta)
    G_C = G[..., -1:, :]
    S_n, U_new, S = deltanet.chunk_state_scan(W, U, torch.exp(G_C - G) * k, S,
                                              decay=torch.exp(G_C[..., 0, :]))
    O = (decay_in * q) @ S_n + Aqk @ U_new
    return contract.merge_chunks(O, T).to(out_dtype), S


# ---------------------------------------------------------------------------------------------------
# The Triton kernel: one program per (batch, head, block of value columns), the state on chip.
# The per-channel factors are built as `decayed_scores` builds them, through reference rows, but on a
# tile: a tile cannot be cut into blocks, so every level works on the whole [C, C] tile with masks and a
# one-hot matmul fetches each row's reference. The UT transform is lesson 06's `ut_transform_tile`.


@triton.jit
def decayed_scores_tile(Q, Kc, G, C: tl.constexpr, LOG_C: tl.constexpr, PRECISION: tl.constexpr):
    """A_ij = sum_d k_id k_jd exp(G_id - G_jd) (i > j) and Aqk_ij = sum_d q_id k_jd exp(G_id - G_jd)
    (i >= j) for one chunk: Q, Kc, G [C, BK] -> A, Aqk [C, C].

    Level by level, blocks of size s = C, C/2, ..., 2: rows in the lower half of a block and columns
    in its upper half meet through the block's reference row r (the last row of its upper half), with
    exp(G_i - G_r) <= 1 and exp(G_r - G_j) <= 1: one matmul per level covers every such quadrant.
    The diagonal (i = j) has no decay: it is the diagonal of Q K^T.
    """
    r = tl.arange(0, C)
    A = tl.zeros([C, C], dtype=tl.float32)
    Aqk = tl.where(r[:, None] == r[None, :], tl.dot(Q, tl.trans(Kc), input_precision=PRECISION), 0.0)
    for level in tl.static_range(LOG_C):
        s = C >> level
        h = s // 2
        upper = (r % s) < h                                  # in the upper half of its block
        ref = (r // s) * s + h - 1                           # the block's reference row
        # G_ref [C, BK]: row i holds G at its block's reference row (an exact one-hot gather).
        G_ref = tl.dot(tl.where(ref[:, None] == r[None, :], 1.0, 0.0), G, input_precision="ieee")
        rows = tl.exp(tl.where(upper[:, None], 0.0, G - G_ref))                  # e^{G_i - G_r} <= 1
        cols = tl.where(upper[:, None], Kc * tl.exp(tl.where(upper[:, None], G_ref - G, 0.0)), 0.0)
        quadrant = ((r[:, None] // s) == (r[None, :] // s)) & ((r[:, None] % s) >= h) & upper[None, :]
        A += tl.where(quadrant, tl.dot(Kc * rows, tl.trans(cols), input_precision=PRECISION), 0.0)
        Aqk += tl.where(quadrant, tl.dot(Q * rows, tl.trans(cols), input_precision=PRECISION), 0.0)
    return A, Aqk


@triton.jit
def kda_chunk_kernel(q, k, v, g, beta, o, s0, s_out, T, K, V,
                     C: tl.constexpr, LOG_C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                     HAS_INITIAL_STATE: tl.constexpr, PRECISION: tl.constexpr):
    """For each chunk of one head, with G = cumsum(g) per channel [C, K]:
        A, Aqk = decayed_scores_tile(Q, K, G);  T = (I + diag(beta) A)^{-1};
        W = T diag(beta) (exp(G) K);  U = T diag(beta) V;  U' = U - W S;
        O = (exp(G) Q) S + Aqk U';  S <- Diag(exp(G_C)) S + (exp(G_C - G) K)^T U'.
    q, k, g [B*H, T, K], v, o [B*H, T, V], beta [B*H, T], s0, s_out [B*H, K, V], contiguous float32.
    Program (i_v, bh) owns value columns i_v*BV ... of head bh; rows past T read 0 (g = 0: no decay).
    """
    i_v, bh = tl.program_id(0), tl.program_id(1)
    q, k, g = q + bh * T * K, k + bh * T * K, g + bh * T * K
    v, o, beta = v + bh * T * V, o + bh * T * V, beta + bh * T
    rc, rk, rv = tl.arange(0, C), tl.arange(0, BK), i_v * BV + tl.arange(0, BV)
    state_offsets = bh * K * V + rk[:, None] * V + rv[None, :]
    state_mask = (rk[:, None] < K) & (rv[None, :] < V)
    if HAS_INITIAL_STATE:
        S = tl.load(s0 + state_offsets, mask=state_mask, other=0.0)
    else:
        S = tl.zeros([BK, BV], dtype=tl.float32)
    for start in range(0, T, C):
        t = start + rc
        mask_k = (t[:, None] < T) & (rk[None, :] < K)
        Q = tl.load(q + t[:, None] * K + rk[None, :], mask=mask_k, other=0.0)
        Kc = tl.load(k + t[:, None] * K + rk[None, :], mask=mask_k, other=0.0)
        G = tl.cumsum(tl.load(g + t[:, None] * K + rk[None, :], mask=mask_k, other=0.0), axis=0)
        Vc = tl.load(v + t[:, None] * V + rv[None, :], mask=(t[:, None] < T) & (rv[None, :] < V), other=0.0)
        b = tl.load(beta + t, mask=t < T, other=0.0)
        A, Aqk = decayed_scores_tile(Q, Kc, G, C, LOG_C, PRECISION)
        Tm = ut_transform_tile(b[:, None] * A, C, LOG_C, PRECISION)
        W = tl.dot(Tm, b[:, None] * tl.exp(G) * Kc, input_precision=PRECISION)
        U = tl.dot(Tm, b[:, None] * Vc, input_precision=PRECISION)
        U_new = U - tl.dot(W, S, input_precision=PRECISION)
        O = tl.dot(tl.exp(G) * Q, S, input_precision=PRECISION) + \
            tl.dot(Aqk, U_new, input_precision=PRECISION)
        tl.store(o + t[:, None] * V + rv[None, :], O, mask=(t[:, None] < T) & (rv[None, :] < V))
        G_C = tl.sum(tl.where(rc[:, None] == C - 1, G, 0.0), axis=0)              # the last row [BK]
        Kd = tl.exp(G_C[None, :] - G) * Kc
        S = tl.exp(G_C)[:, None] * S + tl.dot(tl.trans(Kd), U_new, input_precision=PRECISION)
    tl.store(s_out + state_offsets, S, mask=state_mask)


def triton_chunked(q, k, v, g, beta, chunk_size=64, initial_state=None, input_precision="ieee"):
    """KDA's chunked form as a Triton kernel (forward). Returns (o in v's dtype, S_T float32 [B, H, K, V]).

    Computes in float32 whatever the input dtype. chunk_size must be a power of two >= 16 (the
    smallest `tl.dot` tile); head dims of any size are padded to powers of two inside. input_precision
    "ieee" is exact float32, "tf32" uses a GPU's tensor cores (faster, relative error about 1e-3).
    Tensors must be CUDA tensors when Triton is compiled, CPU tensors in interpreter mode.
    Launched by lesson 06's `launch_chunk_kernel`, with g per channel.
    """
    return launch_chunk_kernel(kda_chunk_kernel, "channel", q, k, v, g, beta, chunk_size, initial_state,
                               input_precision)


# ---------------------------------------------------------------------------------------------------
# The Kimi Linear layer: projections, short convolutions, the gates, the output gate.
#     q, k = L2Norm(SiLU(ShortConv4(W_q x))), L2Norm(SiLU(ShortConv4(W_k x)));  v = SiLU(ShortConv4(W_v x))
#     beta = sigmoid(W_b x);    g = gate(W_fb W_fa x)  per channel, low rank (rank = head dim)
#     o = KDA(q / sqrt(K), k, v, g, beta);    y = W_o( sigmoid(W_g x) * RMSNorm(o) )
# Parameter names and shapes follow KimiK3's KDA weights (REFERENCE.md): q/k/v_proj [H*K, hidden],
# q/k/v_conv1d [H*K, 1, 4], f_a_proj [K, hidden], f_b_proj [H*K, K], b_proj [H, hidden], A_log,
# dt_bias [H*K], o_norm [K], g_proj [H*K, hidden], o_proj [hidden, H*K].


@dataclass(frozen=True)
class KDAConfig:
    """The shapes of one KDA layer. gate="mamba2" is Kimi Linear's, "bounded" KimiK3's."""
    hidden_size: int
    num_heads: int
    head_dim: int
    gate: str = "mamba2"
    conv_size: int = 4
    chunk_size: int = 64      # how a prompt is computed (`chunked`), not a shape
    norm_eps: float = 1e-5

    def __post_init__(self):
        for name in ("hidden_size", "num_heads", "head_dim", "conv_size", "chunk_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.gate not in ("mamba2", "bounded"):
            raise ValueError(f"gate must be 'mamba2' (Kimi Linear) or 'bounded' (KimiK3), got {self.gate!r}")

    @property
    def state_numbers(self):
        """Numbers one layer carries per sequence, at any context length: the state S [H, K, K] and the
        three short-convolution tails [H·K, conv_size - 1] (what `KDACache.nbytes` holds, per sequence)."""
        HK = self.num_heads * self.head_dim
        return HK * self.head_dim + 3 * HK * (self.conv_size - 1)


@dataclass(frozen=True)
class KDACache:
    """What a KDA layer carries from one call to the next (its whole decode-time memory).

    S [B, H, K, V]: the recurrent state, in float32 (float64 for a float64 layer).
    q_tail, k_tail, v_tail [B, H*K, conv_size - 1]: the last inputs of each short convolution, so the
    next token's convolution sees the tokens before it. Its size does not grow with the context.
    """
    S: torch.Tensor
    q_tail: torch.Tensor
    k_tail: torch.Tensor
    v_tail: torch.Tensor

    @property
    def nbytes(self):
        """Bytes held, for the whole batch."""
        return sum(x.nbytes for x in (self.S, self.q_tail, self.k_tail, self.v_tail))


def short_conv(x, weight, tail=None):
    """Causal depthwise convolution over time: y_t = sum_i weight[:, 0, i] * x_{t - W + 1 + i}.

    Each channel mixes its own last W inputs (W = 4 in Kimi Linear). x [B, T, D]; weight [D, 1, W];
    tail [B, D, W - 1], the inputs before x (zeros at the start). Returns (y [B, T, D], the new tail
    [B, D, W - 1]) so that calls can be chained token by token.
    """
    B, T, D = x.shape
    W = weight.shape[-1]
    if tail is None:
        tail = x.new_zeros(B, D, W - 1)
    x = torch.cat([tail.to(x.dtype), x.transpose(1, 2)], dim=-1)          # [B, D, W - 1 + T]
    y = sum(weight[:, 0, i, None] * x[..., i:i + T] for i in range(W))
    return y.transpose(1, 2), x[..., T:]


class KimiDeltaAttention(nn.Module):
    """The Kimi Linear KDA layer. forward(x [B, T, hidden], cache=None) -> (y [B, T, hidden], KDACache).

    gate="mamba2": Kimi Linear's g = -exp(A_log) softplus(f + dt_bias), A_log [H] (one rate per head);
    gate="bounded": KimiK3's g = -5 sigmoid(exp(A_log) (f + dt_bias)), A_log [K] (per channel, shared
    by the heads, as in KimiK3's weight list). A prompt (T > 1) runs the chunked form, one token the
    recurrence; passing the returned cache back continues the sequence exactly.
    """

    def __init__(self, config):
        super().__init__()
        if not isinstance(config, KDAConfig):
            raise ValueError(f"config must be a KDAConfig, got {type(config).__name__}")
        self.config = config
        hidden_size, conv_size, gate = config.hidden_size, config.conv_size, config.gate
        H, K = config.num_heads, config.head_dim
        self.num_heads, self.head_dim, self.gate, self.chunk_size = H, K, gate, config.chunk_size
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(hidden_size, H * K, bias=False) for _ in range(3))
        self.q_conv1d, self.k_conv1d, self.v_conv1d = (
            nn.Conv1d(H * K, H * K, conv_size, groups=H * K, bias=False) for _ in range(3))
        self.f_a_proj = nn.Linear(hidden_size, K, bias=False)
        self.f_b_proj = nn.Linear(K, H * K, bias=False)
        self.b_proj = nn.Linear(hidden_size, H, bias=False)
        # Mamba-2's init: step sizes softplus(dt_bias) log-uniform in [0.001, 0.1], rates exp(A_log) in
        # [1, 16]. The bounded gate starts at rate 1 (our choice), so that both gates start with per-channel
        # half-lives between about 1 and 1000 tokens.
        dt = torch.empty(H * K).uniform_(math.log(1e-3), math.log(1e-1)).exp()
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))      # softplus^{-1}(dt)
        A_log = torch.empty(H).uniform_(1, 16).log() if gate == "mamba2" else torch.zeros(K)
        self.A_log = nn.Parameter(A_log)
        self.o_norm = nn.RMSNorm(K, eps=config.norm_eps)
        self.g_proj = nn.Linear(hidden_size, H * K, bias=False)
        self.o_proj = nn.Linear(H * K, hidden_size, bias=False)

    def log_decay(self, x):
        """g [B, T, H, K] <= 0 from x [B, T, hidden], through the low-rank projection and the gate."""
        B, T, _ = x.shape
        H, K = self.num_heads, self.head_dim
        f = self.f_b_proj(self.f_a_proj(x)).view(B, T, H, K)
        if self.gate == "mamba2":
            return mamba2_gate(f, self.A_log.view(H, 1), self.dt_bias.view(H, K))
        return bounded_gate(f, self.A_log, self.dt_bias.view(H, K))

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        H, K = self.num_heads, self.head_dim
        tails = (None, None, None) if cache is None else (cache.q_tail, cache.k_tail, cache.v_tail)
        q, q_tail = short_conv(self.q_proj(x), self.q_conv1d.weight, tails[0])
        k, k_tail = short_conv(self.k_proj(x), self.k_conv1d.weight, tails[1])
        v, v_tail = short_conv(self.v_proj(x), self.v_conv1d.weight, tails[2])
        q = F.normalize(F.silu(q).view(B, T, H, K), dim=-1) * K ** -0.5
        k = F.normalize(F.silu(k).view(B, T, H, K), dim=-1)
        v = F.silu(v).view(B, T, H, K)
        beta = torch.sigmoid(self.b_proj(x))
        g = self.log_decay(x)
        mix = recurrent if T == 1 else partial(chunked, chunk_size=self.chunk_size)
        o, S = mix(*(t.transpose(1, 2) for t in (q, k, v, g, beta)),
                   initial_state=None if cache is None else cache.S)
        o = self.o_norm(o.transpose(1, 2)) * torch.sigmoid(self.g_proj(x).view(B, T, H, K))
        return self.o_proj(o.reshape(B, T, H * K)), KDACache(S, q_tail, k_tail, v_tail)
