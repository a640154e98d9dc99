"""Lesson 07b: the Kimi Linear layer — lesson 07a's KDA with projections, short convolutions and gates.

    q, k = L2Norm(SiLU(ShortConv4(W_q x))), L2Norm(SiLU(ShortConv4(W_k x)));  v = SiLU(ShortConv4(W_v x))
    beta = sigmoid(W_b x);    g = forget_gate(W_fb W_fa x)  per channel, low rank (rank = head dim)
    o = KDA(q / sqrt(K), k, v, g, beta);    y = W_o( sigmoid(W_g x) * RMSNorm(o) )

Parameter names and shapes follow KimiK3's KDA weights (docs/facts.md): q/k/v_proj [H*K, hidden],
q/k/v_conv1d [H*K, 1, 4], f_a_proj [K, hidden], f_b_proj [H*K, K], b_proj [H, hidden], A_log,
dt_bias [H*K], o_norm [K], g_proj [H*K, hidden], o_proj [hidden, H*K].

- `KDAConfig`: the shapes of one layer, and which forget gate computes g (`kda.mamba2_gate`, Kimi
  Linear's, or `kda.bounded_gate`, KimiK3's); `state_numbers`, what it holds per sequence
- `short_conv`: the causal depthwise convolution, chainable token by token through its tail
- `KimiDeltaAttention`: the layer; a prompt runs `kda.chunked`, one token `kda.recurrent`
- `KDACache`: all it carries while decoding (the state and the convolution tails), at any length
"""

import math
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from kimik3_lessons import kda

__all__ = ["KDACache", "KDAConfig", "KimiDeltaAttention", "short_conv"]


@dataclass(frozen=True)
class KDAConfig:
    """The shapes of one KDA layer. forget_gate="mamba2" is Kimi Linear's, "bounded" KimiK3's."""
    hidden_size: int
    num_heads: int
    head_dim: int
    forget_gate: str = "mamba2"
    conv_size: int = 4
    chunk_size: int = 64      # how a prompt is computed (`kda.chunked`), not a shape
    norm_eps: float = 1e-5

    def __post_init__(self):
        for name in ("hidden_size", "num_heads", "head_dim", "conv_size", "chunk_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.forget_gate not in ("mamba2", "bounded"):
            raise ValueError(f"forget_gate must be 'mamba2' (Kimi Linear) or 'bounded' (KimiK3), "
                             f"got {self.forget_gate!r}")

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
    length: the tokens it has seen. `length` and `nbytes` as `gpt2.KVCache` and `mla.LatentCache` have
    them; where those `append` the new tokens, a state cache `advance`s: the new state replaces the old.
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

    def advance(self, num_tokens, S, q_tail, k_tail, v_tail):
        """The cache after `num_tokens` more tokens, given the state and tails they left: nothing of the
        old cache is kept but its count (the new S already holds what it held)."""
        return KDACache(S, q_tail, k_tail, v_tail, self.length + num_tokens)


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

    forget_gate="mamba2": Kimi Linear's g = -exp(A_log) softplus(f + dt_bias), A_log [H] (one rate per
    head); forget_gate="bounded": KimiK3's g = -5 sigmoid(exp(A_log) (f + dt_bias)), A_log [K] (per
    channel, shared by the heads, as in KimiK3's weight list). A prompt (T > 1) runs the chunked form,
    one token the recurrence; passing the returned cache back continues the sequence exactly.
    """

    def __init__(self, config):
        super().__init__()
        if not isinstance(config, KDAConfig):
            raise ValueError(f"config must be a KDAConfig, got {type(config).__name__}")
        self.config = config
        hidden_size, conv_size, forget_gate = config.hidden_size, config.conv_size, config.forget_gate
        H, K = config.num_heads, config.head_dim
        self.num_heads, self.head_dim, self.chunk_size = H, K, config.chunk_size
        self.forget_gate = forget_gate
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
        A_log = torch.empty(H).uniform_(1, 16).log() if forget_gate == "mamba2" else torch.zeros(K)
        self.A_log = nn.Parameter(A_log)
        self.o_norm = nn.RMSNorm(K, eps=config.norm_eps)
        self.g_proj = nn.Linear(hidden_size, H * K, bias=False)
        self.o_proj = nn.Linear(H * K, hidden_size, bias=False)

    def log_decay(self, x):
        """g [B, T, H, K] <= 0 from x [B, T, hidden], through the low-rank projection and the forget gate."""
        B, T, _ = x.shape
        H, K = self.num_heads, self.head_dim
        f = self.f_b_proj(self.f_a_proj(x)).view(B, T, H, K)
        if self.forget_gate == "mamba2":
            return kda.mamba2_gate(f, self.A_log.view(H, 1), self.dt_bias.view(H, K))
        return kda.bounded_gate(f, self.A_log, self.dt_bias.view(H, K))

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
        mix = kda.recurrent if T == 1 else partial(kda.chunked, chunk_size=self.chunk_size)
        o, S = mix(*(t.transpose(1, 2) for t in (q, k, v, g, beta)),
                   initial_state=None if cache is None else cache.S)
        o = self.o_norm(o.transpose(1, 2)) * torch.sigmoid(self.g_proj(x).view(B, T, H, K))
        cache = KDACache(S, q_tail, k_tail, v_tail, T) if cache is None else \
            cache.advance(T, S, q_tail, k_tail, v_tail)
        return self.o_proj(o.reshape(B, T, H * K)), cache
