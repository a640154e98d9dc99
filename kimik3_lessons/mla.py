"""Lesson 08 — Multi-head Latent Attention (MLA, DeepSeek-V2): full softmax attention whose KV cache
holds one small latent per token instead of a key and a value for every head.

For a token x (width `hidden`) and H heads, with d_c = kv_lora_rank, d_r = qk_rope_head_dim,
d_n = qk_nope_head_dim, d_v = v_head_dim:

    c      = RMSNorm(W_dkv x)                 the latent, d_c numbers          } the cache:
    k_r    = RoPE(W_kr x)                     one rotary key shared by heads   } d_c + d_r per token
    k_h    = [W_uk,h c ; k_r]                 head h's key   (d_n + d_r)
    v_h    = W_uv,h c                         head h's value (d_v)
    q_h    = [q_n,h ; RoPE(q_r,h)]            from W_q x, or W_uq RMSNorm(W_dq x) (query LoRA)
    o_h,t  = sum_s softmax_s(q_h,t · k_h,s / sqrt(d_n + d_r)) v_h,s
    y      = W_o (sigmoid(W_g x) ⊙ [o_1 ... o_H])      the gate only with output_gate=True

Two ways to compute the same o from the cache:
- explicit (`absorb=False`): up-project every cached latent into per-head keys and values, then ordinary
  multi-head attention;
- absorbed (`absorb=True`): q_n,h · (W_uk,h c_s) = (W_uk,h^T q_n,h) · c_s and
  sum_s p_s W_uv,h c_s = W_uv,h (sum_s p_s c_s): W_uk folds into the query, W_uv moves after the sum,
  and attention runs over the latents directly, like multi-query attention with one shared key of
  width d_c + d_r whose first d_c numbers are also the shared value.

`use_rope=False` is NoPE (Kimi Linear, KimiK3): the shared key part k_r stays, unrotated.
Weight names follow the DeepSeek-V2 / Kimi checkpoints: q_proj (W_q) or q_a_proj (W_dq), q_a_norm,
q_b_proj (W_uq); kv_a_proj (W_dkv and W_kr stacked, d_c + d_r rows); kv_a_norm; kv_b_proj (W_uk and
W_uv, per head); g_proj (W_g); o_proj (W_o).
"""

import math
from dataclasses import dataclass

import torch
from torch import nn

from kimik3_lessons import contract
from kimik3_lessons.gpt2 import cache_bytes_per_token  # noqa: F401 (lesson 01's formula, used here for MLA)


@dataclass(frozen=True)
class MLAConfig:
    """The shapes of one MLA layer. `q_lora_rank=None` is a plain query projection (Kimi Linear),
    `use_rope=False` is NoPE, `output_gate=True` is gated MLA (KimiK3)."""
    hidden_size: int
    num_heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    use_rope: bool = True
    output_gate: bool = False
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6

    def __post_init__(self):
        for name in ("hidden_size", "num_heads", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                     "v_head_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.q_lora_rank is not None and (not isinstance(self.q_lora_rank, int) or self.q_lora_rank < 1):
            raise ValueError(f"q_lora_rank must be a positive integer or None (plain query projection), "
                             f"got {self.q_lora_rank!r}")
        if self.qk_rope_head_dim % 2:
            raise ValueError(f"qk_rope_head_dim must be even (RoPE turns pairs), got {self.qk_rope_head_dim}")

    @property
    def qk_head_dim(self):
        """Width of one head's query and key: d_n + d_r."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def cache_width(self):
        """Numbers cached per token: d_c + d_r."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class LatentCache:
    """Everything an MLA layer keeps between decode steps, for S tokens seen so far:

    c      [B, S, d_c]  the latents, after their RMSNorm;
    k_rope [B, S, d_r]  the shared rotary keys, already rotated to their positions (unrotated under NoPE).

    d_c + d_r numbers per token, however many heads read them. The next token sits at position S.
    """
    c: torch.Tensor
    k_rope: torch.Tensor

    @property
    def length(self):
        """S, the number of cached tokens."""
        return self.c.shape[1]

    @property
    def nbytes(self):
        """Bytes held by the cache."""
        return self.c.numel() * self.c.element_size() + self.k_rope.numel() * self.k_rope.element_size()

    def append(self, c, k_rope):
        """A new cache with T more tokens (c [B, T, d_c], k_rope [B, T, d_r]) after the S cached ones.
        (torch.cat copies; a serving engine writes into preallocated pages instead.)"""
        return LatentCache(torch.cat([self.c, c], dim=1), torch.cat([self.k_rope, k_rope], dim=1))


def rope(x, positions, theta=10000.0):
    """Rotary position embedding of x [..., T, D] at integer `positions` [T].

    Each pair (a, b) = (x_i, x_{i + D/2}) turns by the angle phi = p_t * theta^(-2i/D):
        (a, b) -> (a cos phi - b sin phi,  b cos phi + a sin phi).
    A rotation is orthogonal and R_t^T R_s = R_{s-t}, so RoPE(q, t) · RoPE(k, s) depends on t - s only.
    """
    D = x.shape[-1]
    omega = theta ** (-torch.arange(0, D, 2, dtype=torch.float64, device=x.device) / D)   # [D/2]
    phi = positions.to(torch.float64)[:, None] * omega                                     # [T, D/2]
    cos, sin = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    a, b = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def causal_softmax(scores):
    """softmax_s of scores [..., T, S] where the T queries are the last T of S tokens: query t may read
    the tokens s <= S - T + t. Accumulates in float32 for half-precision scores."""
    T, S = scores.shape[-2:]
    allowed = torch.ones(T, S, dtype=torch.bool, device=scores.device).tril(diagonal=S - T)
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1, dtype=contract.compute_dtype(scores)).to(scores.dtype)


def shared_key_scores(q, k):
    """q [B, H, T, D] · k [B, S, D] -> [B, H, T, S], one key per token read by every head.

    The H·T query rows stack into one [H T, D] × [D, S] matmul per batch element: k is read once,
    never copied per head (this is multi-query attention's trick, and absorbed MLA's).
    """
    B, H, T, D = q.shape
    return (q.reshape(B, H * T, D) @ k.transpose(1, 2)).view(B, H, T, -1)


def shared_value_sum(P, v):
    """sum_s P[b, h, t, s] v[b, s] for P [B, H, T, S] and values v [B, S, D] shared by the heads
    -> [B, H, T, D], again as one [H T, S] × [S, D] matmul per batch element."""
    B, H, T, S = P.shape
    return (P.reshape(B, H * T, S) @ v).view(B, H, T, -1)


class MultiHeadLatentAttention(nn.Module):
    """One MLA layer: x [B, T, hidden] (+ a LatentCache of S earlier tokens) -> y [B, T, hidden]
    and the cache of S + T tokens. `absorb` picks the explicit or the absorbed computation; both give
    the same y, and prefill followed by token-by-token decoding gives the same y as one pass."""

    def __init__(self, config):
        super().__init__()
        if not isinstance(config, MLAConfig):
            raise ValueError(f"config must be an MLAConfig, got {type(config).__name__}")
        self.config = cfg = config
        H, d_c = cfg.num_heads, cfg.kv_lora_rank
        if cfg.q_lora_rank is None:
            self.q_proj = nn.Linear(cfg.hidden_size, H * cfg.qk_head_dim, bias=False)
        else:
            self.q_a_proj = nn.Linear(cfg.hidden_size, cfg.q_lora_rank, bias=False)
            self.q_a_norm = nn.RMSNorm(cfg.q_lora_rank, eps=cfg.norm_eps)
            self.q_b_proj = nn.Linear(cfg.q_lora_rank, H * cfg.qk_head_dim, bias=False)
        self.kv_a_proj = nn.Linear(cfg.hidden_size, cfg.cache_width, bias=False)
        self.kv_a_norm = nn.RMSNorm(d_c, eps=cfg.norm_eps)
        self.kv_b_proj = nn.Linear(d_c, H * (cfg.qk_nope_head_dim + cfg.v_head_dim), bias=False)
        self.g_proj = nn.Linear(cfg.hidden_size, H * cfg.v_head_dim, bias=False) if cfg.output_gate else None
        self.o_proj = nn.Linear(H * cfg.v_head_dim, cfg.hidden_size, bias=False)
        self.scale = 1.0 / math.sqrt(cfg.qk_head_dim)

    def rotate(self, x, positions):
        """RoPE on the rotary part of queries and keys; the identity under NoPE."""
        return rope(x, positions, self.config.rope_theta) if self.config.use_rope else x

    def queries(self, x, positions):
        """q = W_q x, or W_uq RMSNorm(W_dq x) with query LoRA; split per head into
        q_nope [B, H, T, d_n] and q_rope [B, H, T, d_r] (rotated to `positions`)."""
        cfg = self.config
        B, T, _ = x.shape
        q = self.q_proj(x) if cfg.q_lora_rank is None else self.q_b_proj(self.q_a_norm(self.q_a_proj(x)))
        q_nope, q_rope = q.view(B, T, cfg.num_heads, cfg.qk_head_dim).transpose(1, 2).split(
            [cfg.qk_nope_head_dim, cfg.qk_rope_head_dim], dim=-1)
        return q_nope, self.rotate(q_rope, positions)

    def latents(self, x, positions):
        """What the cache keeps for tokens x [B, T, hidden] at `positions`:
        c = RMSNorm(W_dkv x) [B, T, d_c] and k_rope = RoPE(W_kr x) [B, T, d_r]."""
        c, k_rope = self.kv_a_proj(x).split([self.config.kv_lora_rank, self.config.qk_rope_head_dim], dim=-1)
        return self.kv_a_norm(c), self.rotate(k_rope, positions)

    def up_projections(self):
        """W_uk [H, d_n, d_c] and W_uv [H, d_v, d_c]: the rows of kv_b_proj, head by head."""
        cfg = self.config
        W = self.kv_b_proj.weight.view(cfg.num_heads, cfg.qk_nope_head_dim + cfg.v_head_dim, cfg.kv_lora_rank)
        return W.split([cfg.qk_nope_head_dim, cfg.v_head_dim], dim=1)

    def attend_explicit(self, q_nope, q_rope, cache):
        """Multi-head attention over up-projected latents: q_* [B, H, T, *] -> o [B, H, T, d_v].

        k_h,s = [W_uk,h c_s ; k_rope_s] and v_h,s = W_uv,h c_s are built for all S cached tokens:
        H (d_n + d_v) S numbers and S d_c H (d_n + d_v) multiply-adds at every step.
        """
        cfg = self.config
        B, H, T, _ = q_nope.shape
        S = cache.length
        kv = self.kv_b_proj(cache.c).view(B, S, H, cfg.qk_nope_head_dim + cfg.v_head_dim).transpose(1, 2)
        k_nope, v = kv.split([cfg.qk_nope_head_dim, cfg.v_head_dim], dim=-1)           # [B, H, S, *]
        k = torch.cat([k_nope, cache.k_rope[:, None].expand(B, H, S, cfg.qk_rope_head_dim)], dim=-1)
        q = torch.cat([q_nope, q_rope], dim=-1)
        P = causal_softmax(q @ k.mT * self.scale)                         # [B, H, T, S]
        return P @ v

    def attend_absorbed(self, q_nope, q_rope, cache):
        """Attention over the latents themselves: q_* [B, H, T, *] -> o [B, H, T, d_v].

            q_c,h = W_uk,h^T q_nope,h                                   [B, H, T, d_c]
            s_h,t,s = (q_c,h,t · c_s + q_rope,h,t · k_rope_s) / sqrt(d_n + d_r)
            o_h,t = W_uv,h (sum_s p_h,t,s c_s)

        No per-head key or value is ever built: every head reads the same c and k_rope, so the scores
        and the weighted sum are single matmuls with the heads stacked as rows (`shared_key_scores`).
        """
        W_uk, W_uv = self.up_projections()
        q_c = torch.einsum("bhtn,hnc->bhtc", q_nope, W_uk)
        scores = shared_key_scores(q_c, cache.c) + shared_key_scores(q_rope, cache.k_rope)
        P = causal_softmax(scores * self.scale)
        return torch.einsum("bhtc,hvc->bhtv", shared_value_sum(P, cache.c), W_uv)

    def check_inputs(self, x, cache):
        """ValueError unless x is [B, T, hidden] and cache is None or a LatentCache of B sequences."""
        cfg = self.config
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != cfg.hidden_size:
            got = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be [B, T, hidden_size] = [B, T, {cfg.hidden_size}], got {got}")
        if cache is None:
            return
        if not isinstance(cache, LatentCache):
            raise ValueError(f"cache must be a LatentCache or None, got {type(cache).__name__}")
        B, S = x.shape[0], cache.length
        for name, t, width in (("cache.c", cache.c, cfg.kv_lora_rank), ("cache.k_rope", cache.k_rope,
                                                                         cfg.qk_rope_head_dim)):
            if t.dim() != 3 or tuple(t.shape) != (B, S, width):
                raise ValueError(f"{name} must be [B, S, {width}] = [{B}, {S}, {width}] for x of batch {B}, "
                                 f"got {list(t.shape)}")

    def forward(self, x, cache=None, absorb=None):
        """x [B, T, hidden] -> (y [B, T, hidden], LatentCache of S + T tokens).

        The T new tokens sit at positions S ... S + T - 1, where S = cache.length (0 without a cache).
        absorb: True or False picks the computation; None (the default) absorbs when decoding one token,
        where reading the latents directly saves the most, and computes explicitly for a prompt.
        """
        if absorb is None:
            absorb = x.shape[1] == 1
        self.check_inputs(x, cache)
        B, T, _ = x.shape
        start = 0 if cache is None else cache.length
        positions = torch.arange(start, start + T, device=x.device)
        q_nope, q_rope = self.queries(x, positions)
        c, k_rope = self.latents(x, positions)
        cache = LatentCache(c, k_rope) if cache is None else cache.append(c, k_rope)
        attend = self.attend_absorbed if absorb else self.attend_explicit
        o = attend(q_nope, q_rope, cache).transpose(1, 2).reshape(B, T, -1)              # [B, T, H d_v]
        if self.g_proj is not None:
            o = torch.sigmoid(self.g_proj(x)) * o
        return self.o_proj(o), cache
