"""Lesson 01: GPT-2 (2019) and the KV cache — the baseline every later lesson improves on.

A decoder-only transformer: token + position embeddings, num_layers blocks of
    x = x + Attention(LayerNorm(x))        x = x + MLP(LayerNorm(x))
then a final LayerNorm and the LM head (tied to the token embedding). Attention is softmax attention:
    o_t = sum_{i<=t} softmax_i(q_t · k_i / sqrt(d)) v_i
so the query at position t needs the keys and values of every earlier token. Decoding one token at a
time, those are the same numbers every step: the KV cache keeps them instead of recomputing them.

Shapes: idx [B, T] token ids; activations [B, T, hidden_size]; per layer the cache is a `KVCache`
holding k and v, each [B, num_heads, T_cached, head_dim].

`cache_bytes_per_token` is the course's one formula for what a cache costs per token of context: for
GPT-2's multi-head attention here, and for the variants later lessons meet (GQA, MQA, MLA in lesson 08).
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class GPTConfig:
    """GPT-2 small by default: 12 layers, 12 heads, width 768, 1024 positions, 50257 tokens.
    (GPT-2's own names: n_layer, n_head, n_embd, n_positions.)"""
    block_size: int = 1024
    vocab_size: int = 50257
    num_layers: int = 12
    num_heads: int = 12
    hidden_size: int = 768

    def __post_init__(self):
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be a multiple of num_heads "
                             f"({self.num_heads})")

    @property
    def head_dim(self):
        return self.hidden_size // self.num_heads

    def cache_bytes_per_token(self, bytes_per_number=2):
        """Bytes the KV cache grows by per token: a key and a value per head and layer (2 L hidden)."""
        return cache_bytes_per_token("mha", num_layers=self.num_layers, bytes_per_number=bytes_per_number,
                                     num_heads=self.num_heads, head_dim=self.head_dim)


CACHE_SHAPES = {"mha": ("num_heads", "head_dim"), "gqa": ("num_kv_heads", "head_dim"),
                "mqa": ("head_dim",), "mla": ("kv_lora_rank", "qk_rope_head_dim")}


def cache_bytes_per_token(attention, *, num_layers=1, bytes_per_number=2, **shape):
    """Bytes a cache grows by per token of context, over `num_layers` layers (2 bytes: fp16/bf16).

    Numbers per token and layer:
        mha  2 n_h d_h     a key and a value per head            (num_heads, head_dim)       lesson 01
        gqa  2 n_g d_h     a key and a value per group of heads  (num_kv_heads, head_dim)    lesson 08
        mqa  2 d_h         one key and one value for all heads   (head_dim)                  lesson 08
        mla  d_c + d_r     the latent and the shared rotary key  (kv_lora_rank, qk_rope_head_dim)  lesson 08
    """
    if attention not in CACHE_SHAPES:
        raise ValueError(f"attention must be one of {sorted(CACHE_SHAPES)}, got {attention!r}")
    if set(shape) != set(CACHE_SHAPES[attention]):
        raise ValueError(f"{attention} needs exactly {CACHE_SHAPES[attention]}, got {tuple(shape)}")
    for name, value in shape.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if attention == "mla":
        numbers = shape["kv_lora_rank"] + shape["qk_rope_head_dim"]
    else:  # a key and a value of width head_dim for each key-value head
        kv_heads = {"mha": shape.get("num_heads"), "gqa": shape.get("num_kv_heads"), "mqa": 1}[attention]
        numbers = 2 * kv_heads * shape["head_dim"]
    return numbers * num_layers * bytes_per_number


@dataclass(frozen=True)
class KVCache:
    """One attention layer's cache: the keys and values of every token seen so far.

    k, v [B, num_heads, T_cached, head_dim]. `append` returns the cache with T more tokens.
    """
    k: torch.Tensor
    v: torch.Tensor

    @property
    def length(self):
        """T_cached, the number of tokens held."""
        return self.k.shape[2]

    @property
    def nbytes(self):
        """Bytes held, for the whole batch."""
        return self.k.nbytes + self.v.nbytes

    def append(self, k, v):
        """A new cache with k, v [B, num_heads, T, head_dim] after the cached tokens (torch.cat copies)."""
        return KVCache(torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2))


class CausalSelfAttention(nn.Module):
    """Multi-head softmax attention that reads and extends a KV cache.

    forward(x [B, T, C], cache=None | KVCache) -> (y [B, T, C], KVCache), where the returned cache
    holds the keys and values of every position seen so far. The T new queries sit at positions
    T_cached ... T_cached + T - 1: query i may read keys 0 ... T_cached + i.
    """

    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_heads
        self.c_attn = nn.Linear(config.hidden_size, 3 * config.hidden_size)  # q, k, v in one matmul
        self.c_proj = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, T, self.num_heads, C // self.num_heads).transpose(1, 2) for z in (q, k, v))
        cache = KVCache(k, v) if cache is None else cache.append(k, v)
        k, v = cache.k, cache.v
        past = k.shape[2] - T
        scores = q @ k.mT / math.sqrt(q.shape[-1])          # [B, nh, T, past + T]
        allowed = torch.ones(T, past + T, dtype=torch.bool, device=x.device).tril(diagonal=past)
        scores = scores.masked_fill(~allowed, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v                                   # [B, nh, T, hd]
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y), cache


class MLP(nn.Module):
    """The feed-forward block: Linear(C, 4C), GELU (tanh approximation, as GPT-2), Linear(4C, C)."""

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.hidden_size, 4 * config.hidden_size)
        self.c_proj = nn.Linear(4 * config.hidden_size, config.hidden_size)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)). Returns (x, this layer's KVCache)."""

    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.hidden_size)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.hidden_size)
        self.mlp = MLP(config)

    def forward(self, x, cache=None):
        a, cache = self.attn(self.ln_1(x), cache)
        x = x + a
        return x + self.mlp(self.ln_2(x)), cache


class GPT(nn.Module):
    """GPT-2. forward(idx [B, T], cache=None) -> (logits [B, T, vocab], cache).

    cache is a list with one `KVCache` per layer; pass back what the previous call returned to
    continue the sequence. Decoding one token with the cache equals the last row of a full forward.
    """

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        self.wpe = nn.Embedding(config.block_size, config.hidden_size)
        self.h = nn.ModuleList(Block(config) for _ in range(config.num_layers))
        self.ln_f = nn.LayerNorm(config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: the output layer is the embedding, transposed
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2 scales the residual projections by 1/sqrt(2L)
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.num_layers))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_parameters(self):
        """Parameters counted once each (the tied embedding / LM head matrix is one tensor)."""
        return sum(p.numel() for p in self.parameters())

    def _check_cache(self, cache, batch_size):
        cfg = self.config
        if not isinstance(cache, (list, tuple)) or len(cache) != cfg.num_layers or \
                not all(isinstance(c, KVCache) for c in cache):
            raise ValueError(f"cache must be a list of one KVCache per layer ({cfg.num_layers}), "
                             f"got {type(cache).__name__}")
        k = cache[0].k
        if k.dim() != 4 or tuple(k.shape[:2]) != (batch_size, cfg.num_heads) or k.shape[3] != cfg.head_dim:
            raise ValueError(f"cache keys must be [B={batch_size}, num_heads={cfg.num_heads}, T, "
                             f"head_dim={cfg.head_dim}], got {list(k.shape)}")
        return k.shape[2]

    def features(self, idx, cache=None):
        """The transformer without its LM head: (final hidden states [B, T, C], cache)."""
        if idx.dim() != 2 or idx.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"idx must be integer token ids [B, T], got {idx.dtype} {list(idx.shape)}")
        B, T = idx.shape
        past = 0 if cache is None else self._check_cache(cache, B)
        if past + T > self.config.block_size:
            raise ValueError(f"{past} cached + {T} new tokens exceed block_size {self.config.block_size}")
        pos = torch.arange(past, past + T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        new_cache = []
        for i, block in enumerate(self.h):
            x, layer_cache = block(x, None if cache is None else cache[i])
            new_cache.append(layer_cache)
        return self.ln_f(x), new_cache

    def forward(self, idx, cache=None):
        x, cache = self.features(idx, cache)
        return self.lm_head(x), cache

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, use_cache=True, temperature=0.0, top_k=None):
        """Append `max_new_tokens` tokens to idx [B, T]. temperature 0 is greedy (argmax).

        With the cache each step feeds only the newest token; without it each step re-runs the whole
        sequence — the same numbers, recomputed.
        """
        if idx.shape[1] + max_new_tokens > self.config.block_size:
            raise ValueError(f"{idx.shape[1]} prompt + {max_new_tokens} new tokens exceed block_size "
                             f"{self.config.block_size}")
        cache, step_input = None, idx
        for _ in range(max_new_tokens):
            x, new_cache = self.features(step_input, cache)
            next_id = sample(self.lm_head(x[:, -1]), temperature, top_k)  # only the last row is needed
            idx = torch.cat([idx, next_id], dim=1)
            cache, step_input = (new_cache, next_id) if use_cache else (None, idx)
        return idx

    @classmethod
    def from_hf(cls, hf_model):
        """Build a GPT from a Hugging Face `GPT2LMHeadModel` with the same weights.

        Hugging Face stores c_attn, c_proj and c_fc as `Conv1D` with weight [in, out]; nn.Linear keeps
        [out, in], so those matrices are transposed. The LM head is tied to wte, so it is not copied.
        """
        hf = hf_model.config
        config = GPTConfig(block_size=hf.n_positions, vocab_size=hf.vocab_size, num_layers=hf.n_layer,
                           num_heads=hf.n_head, hidden_size=hf.n_embd)
        model = cls(config)
        source = hf_model.state_dict()
        conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
        with torch.no_grad():
            for name, p in model.named_parameters():
                w = source[f"transformer.{name}"]
                p.copy_(w.t() if name.endswith(conv1d) else w)
        return model


def sample(logits, temperature=0.0, top_k=None):
    """Next token ids [B, 1] from logits [B, vocab]: argmax at temperature 0, else softmax sampling
    of logits / temperature, optionally restricted to the top_k most likely tokens."""
    if temperature == 0.0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
