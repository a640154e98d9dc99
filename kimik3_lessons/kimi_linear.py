"""Lesson 07b: the Kimi Linear layer — lesson 07a's KDA with projections, short convolutions and gates; the
same layer around every mixer of the family.

    q, k = L2Norm(SiLU(ShortConv4(W_q x))), L2Norm(SiLU(ShortConv4(W_k x)));  v = SiLU(ShortConv4(W_v x))
    beta = sigmoid(W_b x);    g = forget_gate(W_fb W_fa x)  per channel, low rank (rank = head dim)
    o = KDA(q / sqrt(K), k, v, g, beta);    y = W_o( sigmoid(W_g x) * RMSNorm(o) )

Parameter names and shapes follow KimiK3's KDA weights (docs/facts.md): q/k/v_proj [H*K, hidden],
q/k/v_conv1d [H*K, 1, 4], f_a_proj [K, hidden], f_b_proj [H*K, K], b_proj [H, hidden], A_log,
dt_bias [H*K], o_norm [K], g_proj [H*K, hidden], o_proj [hidden, H*K].

The layer runs any member of the mixer family (`mixers`, `KDAConfig.mixer`), and its declaration decides
what the layer builds: beta where the mixer is a delta rule, and a forget gate by its decay: none (linear
attention, DeltaNet), one per head (gated DeltaNet: g = mamba2_gate(W_a x), as lesson 06), one per key
channel (KDA, above). Everything else is the same, so two such layers differ only in the write rule.

- `KDAConfig`: the shapes of one layer, its mixer, which forget gate computes a per-channel g
  (`kda.mamba2_gate`, Kimi Linear's, or `kda.bounded_gate`, KimiK3's), how the gates start
  (`gate_start`), and which of the mixer's forms runs a prompt; `state_numbers`, what it holds per sequence
- `short_conv`: the causal depthwise convolution, chainable token by token through its tail
- `KimiDeltaAttention`: the layer; a prompt runs the mixer's chunked form (or a callable given in its
  place), one token its recurrence
- `KDACache`: all it carries while decoding (the state and the convolution tails), at any length
"""

import math
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from kimik3_lessons import gated_deltanet, kda, mixers

__all__ = ["GATE_STARTS", "KDACache", "KDAConfig", "KimiDeltaAttention", "gate_start", "short_conv"]

GATE_STARTS = ("spread", "fla")   # how the forget gates start (`gate_start`)


@dataclass(frozen=True)
class KDAConfig:
    """The shapes of one layer. mixer: the family member it runs ("kda" by default, any of
    `mixers.MIXERS`). forget_gate (for a decay per key channel): "mamba2" is Kimi Linear's, "bounded"
    KimiK3's. gate_start: "spread" or "fla" (`gate_start`). form: which of the mixer's forms
    (`contract.Mixer`) runs a prompt, "chunked" by default."""
    hidden_size: int
    num_heads: int
    head_dim: int
    forget_gate: str = "mamba2"
    conv_size: int = 4
    chunk_size: int = 64      # how a prompt is computed (the chunked forms), not a shape
    norm_eps: float = 1e-5
    mixer: str = "kda"
    gate_start: str = "spread"
    form: str = "chunked"

    def __post_init__(self):
        for name in ("hidden_size", "num_heads", "head_dim", "conv_size", "chunk_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.forget_gate not in ("mamba2", "bounded"):
            raise ValueError(f"forget_gate must be 'mamba2' (Kimi Linear) or 'bounded' (KimiK3), "
                             f"got {self.forget_gate!r}")
        decay = mixers.get(self.mixer).decay                       # a ValueError for an unknown mixer
        if self.forget_gate == "bounded" and decay != "channel":
            raise ValueError(f"forget_gate='bounded' is KimiK3's gate per key channel; {self.mixer} decays "
                             f"{'per head' if decay else 'not at all'}")
        if self.gate_start not in GATE_STARTS:
            raise ValueError(f"gate_start must be one of {GATE_STARTS}, got {self.gate_start!r}")
        if self.form not in ("recurrent", "chunked", "triton_chunked"):
            raise ValueError(f"form must be 'recurrent', 'chunked' or 'triton_chunked', got {self.form!r}")

    @property
    def state_numbers(self):
        """Numbers one layer carries per sequence, at any context length: the state S [H, K, K] and the
        three short-convolution tails [H·K, conv_size - 1] (what `KDACache.nbytes` holds, per sequence)."""
        HK = self.num_heads * self.head_dim
        return HK * self.head_dim + 3 * HK * (self.conv_size - 1)


def gate_start(config):
    """(A_log, dt_bias): how a layer's forget gate starts, for a decay per head (gated DeltaNet, [H] each)
    or per key channel (KDA: A_log [H] for the Mamba-2 gate, [K] for the bounded one; dt_bias [H·K]).

    "spread", Mamba-2's start: rates A uniform in [1, 16] and step sizes dt log-uniform in [0.001, 0.1], so
    that at zero input g = -A·dt, half-lives ln 2 / (A·dt) from under a token to about 700 tokens. The
    Mamba-2 gate gets dt_bias = softplus^{-1}(dt), exp(A_log) = A. KimiK3's bounded gate,
    g = -5 sigmoid(exp(A_log) (x + dt_bias)), has no published start; this one is derived to match:
    A_log = 0 and dt_bias = logit(A·dt / 5) give g = -A·dt at zero input, and the same slope in x to first
    order in A·dt / 5 (at most 0.32), so both gates start with the same spread of half-lives.
    "fla", flash-linear-attention's layers: KDA (fla/layers/kda.py) A uniform in [1, 16] and dt_bias = 0,
    so at zero input the Mamba-2 gate forgets -A ln 2 per token (half-lives 1/16 to 1 token) and the
    bounded gate -2.5 (0.28 tokens) on every channel; gated DeltaNet (fla/layers/gated_deltanet.py)
    A uniform in [0, 16], dt log-uniform in [0.001, 0.1] floored at 1e-4, dt_bias = softplus^{-1}(dt)."""
    H, K = config.num_heads, config.head_dim
    per_head = mixers.get(config.mixer).decay == "head"
    n = H if per_head else H * K                                          # one step size per gated unit
    dt = torch.empty(n).uniform_(math.log(1e-3), math.log(1e-1)).exp()
    softplus_inverse = lambda y: y + torch.log(-torch.expm1(-y))
    if config.gate_start == "fla" and per_head:
        return torch.empty(H).uniform_(0, 16).log(), softplus_inverse(dt.clamp(min=1e-4))
    if config.gate_start == "fla":
        rates = torch.empty(H if config.forget_gate == "mamba2" else K).uniform_(1, 16)
        return rates.log(), torch.zeros(H * K)
    if per_head or config.forget_gate == "mamba2":
        return torch.empty(H).uniform_(1, 16).log(), softplus_inverse(dt)
    A = torch.empty(H * K).uniform_(1, 16)
    return torch.zeros(K), torch.logit(A * dt / 5)


@dataclass(frozen=True)
class KDACache:
    """What a layer carries from one call to the next (its whole decode-time memory), whatever its mixer.

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
    """The Kimi Linear layer. forward(x [B, T, hidden], cache=None) -> (y [B, T, hidden], KDACache).

    Around KDA (the default): forget_gate="mamba2", Kimi Linear's g = -exp(A_log) softplus(f + dt_bias),
    A_log [H] (one rate per head); forget_gate="bounded", KimiK3's g = -5 sigmoid(exp(A_log) (f + dt_bias)),
    A_log [K] (per channel, shared by the heads, as in KimiK3's weight list). Around another member of the
    family (`config.mixer`): beta only for a delta rule, and for gated DeltaNet a gate per head,
    g = mamba2_gate(W_a x) with a_proj [H, hidden], A_log and dt_bias [H] (lesson 06).

    A prompt runs `config.form` of the mixer's declaration (the chunked form by default), or `form`, a
    callable with the forms' signature (q, k, v, [g,] [beta,] initial_state=None) -> (o, S) put in its place
    (a kernel with its own backward, say); one token with a cache runs the recurrence. Passing the returned
    cache back continues the sequence exactly.
    """

    def __init__(self, config, form=None):
        super().__init__()
        if not isinstance(config, KDAConfig):
            raise ValueError(f"config must be a KDAConfig, got {type(config).__name__}")
        if form is not None and not callable(form):
            raise ValueError(f"form must be a callable (q, k, v, [g,] [beta,] initial_state=None) -> (o, S), "
                             f"got {type(form).__name__}")
        self.config = config
        self.rule = mixers.get(config.mixer)
        D, H, K, W = config.hidden_size, config.num_heads, config.head_dim, config.conv_size
        self.num_heads, self.head_dim, self.chunk_size, self.forget_gate = H, K, config.chunk_size, \
            config.forget_gate
        declared = getattr(self.rule, config.form)
        self.mix = form or (declared if config.form == "recurrent" else
                            partial(declared, chunk_size=config.chunk_size))
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(D, H * K, bias=False) for _ in range(3))
        self.q_conv1d, self.k_conv1d, self.v_conv1d = (
            nn.Conv1d(H * K, H * K, W, groups=H * K, bias=False) for _ in range(3))
        if self.rule.decay == "channel":                        # low rank, rank = head dim
            self.f_a_proj = nn.Linear(D, K, bias=False)
            self.f_b_proj = nn.Linear(K, H * K, bias=False)
        elif self.rule.decay == "head":
            self.a_proj = nn.Linear(D, H, bias=False)
        self.b_proj = nn.Linear(D, H, bias=False) if self.rule.delta else None
        if self.rule.decay:
            self.A_log, self.dt_bias = map(nn.Parameter, gate_start(config))
        self.o_norm = nn.RMSNorm(K, eps=config.norm_eps)
        self.g_proj = nn.Linear(D, H * K, bias=False)
        self.o_proj = nn.Linear(H * K, D, bias=False)

    def log_decay(self, x):
        """g <= 0 from x [B, T, hidden]: [B, T, H, K] through the low-rank projection and the forget gate
        (a decay per key channel), [B, T, H] through lesson 06's gate (per head), None without a decay."""
        B, T, _ = x.shape
        H, K = self.num_heads, self.head_dim
        if self.rule.decay == "head":
            return gated_deltanet.mamba2_gate(self.a_proj(x), self.A_log, self.dt_bias)
        if self.rule.decay is None:
            return None
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
        g = self.log_decay(x)
        beta = torch.sigmoid(self.b_proj(x)) if self.rule.delta else None
        inputs = [t.transpose(1, 2) for t in (q, k, v, g, beta) if t is not None]     # [B, H, T, ...]
        mix = self.rule.recurrent if T == 1 and cache is not None else self.mix
        o, S = mix(*inputs, initial_state=None if cache is None else cache.S)
        o = self.o_norm(o.transpose(1, 2)) * torch.sigmoid(self.g_proj(x).view(B, T, H, K))
        cache = KDACache(S, q_tail, k_tail, v_tail, T) if cache is None else \
            cache.advance(T, S, q_tail, k_tail, v_tail)
        return self.o_proj(o.reshape(B, T, H * K)), cache
