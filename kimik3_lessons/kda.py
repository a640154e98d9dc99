"""Lesson 07: KDA — Kimi Delta Attention, the gated delta rule with a decay per key channel (Kimi Linear).

    S <- Diag(exp(g_t)) S;     u_t = beta_t (v_t - k_t S);     S_t = S + k_t^T u_t;     o_t = q_t S_t

Shapes: q, k, g [B, H, T, K] (g <= 0: channel d of the state keeps exp(g_td) of itself each step);
v [B, H, T, V]; beta [B, H, T]; state S [B, H, K, V]. With every channel equal this is lesson 06's
gated DeltaNet. No scaling or normalization happens inside the forms: the layer does it.

- gates: KimiK3's `bounded_gate`, and lesson 06's `mamba2_gate` (Kimi Linear's), re-exported
- `recurrent`: the definition, one token at a time (one token with a state is the decode step)
- `chunked`: the chunkwise-parallel form, with `decayed_scores`, its per-channel pairwise factors
- `triton_chunked`: the chunked form as Triton kernels (forward): lesson 06's, decay per channel
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

from kimik3_lessons import chunk_kernels, contract, deltanet
from kimik3_lessons.gated_deltanet import decayed_wy_representation, mamba2_gate

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
    by lesson 06's `decayed_wy_representation`; lesson 05's `chunk_state_scan`, with the decay across a
    chunk taken per channel, exp(G_C) [K], gives the state S_n before each chunk and U' = U - W S_n; then
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
    W, U = decayed_wy_representation(A, decay_in * k, v, beta)
    G_C = G[..., -1:, :]
    S_n, U_new, S = deltanet.chunk_state_scan(W, U, torch.exp(G_C - G) * k, S,
                                              decay=torch.exp(G_C[..., 0, :]))
    O = (decay_in * q) @ S_n + Aqk @ U_new
    return contract.merge_chunks(O, T).to(out_dtype), S


# ---------------------------------------------------------------------------------------------------
# The Triton kernel: lesson 06's intra-chunk kernel with the decay per key channel. The pairwise factors
# are built as `decayed_scores` builds them, through reference rows, on a tile: a tile cannot be cut into
# blocks, so every level works on the whole [C, C] tile with masks, and a one-hot product fetches each
# row's reference. The channels are independent, so the kernel sums them in blocks of BK.


@triton.jit
def decayed_scores_tile(x, y, g_cum, n, T, K, C: tl.constexpr, LOG_C: tl.constexpr, SLICE: tl.constexpr,
                        PRECISION: tl.constexpr):
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
    Diagonal = tl.zeros([C], dtype=tl.float32)
    k0 = 0
    while k0 < K:               # a runtime bound: a while loop (the rules in `chunk_kernels`)
        cols = k0 + tl.arange(0, SLICE)
        X = chunk_kernels.load_rows(x, t, cols, T, K)
        Diagonal += tl.sum(X * chunk_kernels.load_rows(y, t, cols, T, K), axis=1)
        k0 += SLICE
    P = tl.where(r[:, None] == r[None, :], Diagonal[:, None], 0.0)
    for level in range(LOG_C):                           # a loop, not unrolled: one level's tiles at a time
        s = C >> level
        half = s // 2
        upper = (r % s) < half                               # in the upper half of its block
        ref = n * C + (r // s) * s + half - 1                # the block's reference row
        quadrant = ((r[:, None] // s) == (r[None, :] // s)) & ((r[:, None] % s) >= half) & upper[None, :]
        P_level = tl.zeros([C, C], dtype=tl.float32)
        k0 = 0
        while k0 < K:
            cols = k0 + tl.arange(0, SLICE)
            G = chunk_kernels.load_rows(g_cum, t, cols, n * C + C, K)
            G_ref = chunk_kernels.load_rows(g_cum, ref, cols, n * C + C, K)   # row i: G at its reference row
            X_i = chunk_kernels.load_rows(x, t, cols, T, K) * tl.exp(tl.where(upper[:, None], 0.0, G - G_ref))
            Y_j = tl.where(upper[:, None], chunk_kernels.load_rows(y, t, cols, T, K)
                           * tl.exp(tl.where(upper[:, None], G_ref - G, 0.0)), 0.0)          # <= 1 too
            P_level = tl.dot(X_i, tl.trans(Y_j), acc=P_level, input_precision=PRECISION)
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
    A = decayed_scores_tile(k, k, g_cum, n, T, K, C, LOG_C, SLICE, PRECISION)                # per channel
    L_inv = deltanet.forward_substitution_tile(tl.where(r[:, None] > r[None, :], Beta[:, None] * A, 0.0), C)
    chunk_kernels.store_rows(l_inv, t, r, T, C, L_inv)                  # read back by `deltanet.wy_slices`
    tl.debug_barrier()          # all of L_inv is in memory before any thread reads a slice of it back
    deltanet.wy_slices(l_inv, beta, g_cum, k, w, n, T, K, C, SLICE, "channel", PRECISION)   # e^G per channel
    deltanet.wy_slices(l_inv, beta, g_cum, v, u, n, T, V, C, SLICE, None, PRECISION)        # U
    k0 = 0
    while k0 < K:
        cols = k0 + tl.arange(0, SLICE)
        Q_n = chunk_kernels.load_rows(q, t, cols, T, K)
        K_n = chunk_kernels.load_rows(k, t, cols, T, K)
        G_n = chunk_kernels.load_rows(g_cum, t, cols, N * C, K)
        G_C = tl.load(g_cum + (n * C + C - 1) * K + cols, mask=cols < K, other=0.0)   # the chunk's last row
        chunk_kernels.store_rows(qd, t, cols, T, K, tl.exp(G_n) * Q_n)
        chunk_kernels.store_rows(kd, t, cols, T, K, tl.exp(G_C[None, :] - G_n) * K_n)
        tl.store(decay + cols, tl.exp(G_C), mask=cols < K)
        k0 += SLICE
    A_qk = decayed_scores_tile(q, k, g_cum, n, T, K, C, LOG_C, SLICE, PRECISION)
    chunk_kernels.store_rows(a_qk, t, r, T, C, A_qk)


def triton_chunked(q, k, v, g, beta, chunk_size=64, initial_state=None, input_precision="ieee"):
    """KDA's chunked form as Triton kernels (forward). Returns (o in v's dtype, S_T float32 [B, H, K, V]).

    `kda_intra_chunk_kernel` for every chunk at once, then the scan over chunks and the outputs every mixer
    shares, with the decay per key row. Computes in float32 whatever the input dtype; chunk_size is a
    power of two >= 16; input_precision "ieee" (exact float32) or "tf32" (tensor cores, sm_80+, errors
    near 1e-3). Tensors must be CUDA tensors when Triton is compiled, CPU tensors in interpreter mode.
    """
    return chunk_kernels.launch_chunked(MIXER, q, k, v, g=g, beta=beta, chunk_size=chunk_size,
                                        initial_state=initial_state, input_precision=input_precision)


# ---------------------------------------------------------------------------------------------------
# The Kimi Linear layer: projections, short convolutions, the gates, the output gate.
#     q, k = L2Norm(SiLU(ShortConv4(W_q x))), L2Norm(SiLU(ShortConv4(W_k x)));  v = SiLU(ShortConv4(W_v x))
#     beta = sigmoid(W_b x);    g = gate(W_fb W_fa x)  per channel, low rank (rank = head dim)
#     o = KDA(q / sqrt(K), k, v, g, beta);    y = W_o( sigmoid(W_g x) * RMSNorm(o) )
# Parameter names and shapes follow KimiK3's KDA weights (docs/facts.md): q/k/v_proj [H*K, hidden],
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
    length: the tokens it has seen (as `gpt2.KVCache.length` and `mla.LatentCache.length`, which hold them).
    """
    S: torch.Tensor
    q_tail: torch.Tensor
    k_tail: torch.Tensor
    v_tail: torch.Tensor
    length: int = 0

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
        length = T if cache is None else cache.length + T
        return self.o_proj(o.reshape(B, T, H * K)), KDACache(S, q_tail, k_tail, v_tail, length)


MIXER = contract.Mixer(name="kda", title="KDA", lesson="07", delta=True, decay="channel", recurrent=recurrent,
                       chunked=chunked, triton_chunked=triton_chunked, step=kda_step,
                       intra_chunk_kernel=kda_intra_chunk_kernel, cache=KDACache, layer=KimiDeltaAttention)
