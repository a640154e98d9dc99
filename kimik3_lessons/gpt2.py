"""Lesson 01: GPT-2 (2019) and the KV cache — the baseline every later lesson improves on.

A decoder-only transformer: token + position embeddings, n_layer blocks of
    x = x + Attention(LayerNorm(x))        x = x + MLP(LayerNorm(x))
then a final LayerNorm and the LM head (tied to the token embedding). Attention is softmax attention:
    o_t = sum_{i<=t} softmax_i(q_t · k_i / sqrt(d)) v_i
so the query at position t needs the keys and values of every earlier token. Decoding one token at a
time, those are the same numbers every step: the KV cache keeps them instead of recomputing them.

Shapes: idx [B, T] token ids; activations [B, T, n_embd]; per layer the cache is a pair (k, v), each
[B, n_head, T_cached, head_dim].
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    """GPT-2 small by default: 12 layers, 12 heads, width 768, 1024 positions, 50257 tokens."""
    block_size: int = 1024
    vocab_size: int = 50257
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")


def kv_cache_bytes(config, seq_len, batch_size=1, bytes_per_number=2):
    """Bytes the KV cache holds: a key and a value of width n_embd, per layer, per token.

        2 · n_layer · n_embd · seq_len · batch_size · bytes_per_number   (2 bytes: fp16/bf16)
    """
    return 2 * config.n_layer * config.n_embd * seq_len * batch_size * bytes_per_number


class CausalSelfAttention(nn.Module):
    """Multi-head softmax attention that reads and extends a KV cache.

    forward(x [B, T, C], kv_cache=None | (k, v)) -> (y [B, T, C], (k, v)), where the returned k, v
    [B, n_head, T_cached + T, head_dim] hold every position seen so far. The T new queries sit at
    positions T_cached ... T_cached + T - 1: query i may read keys 0 ... T_cached + i.
    """

    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)  # q, k, v in one matmul
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)

    def forward(self, x, kv_cache=None):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))
        if kv_cache is not None:
            k = torch.cat([kv_cache[0], k], dim=2)
            v = torch.cat([kv_cache[1], v], dim=2)
        past = k.shape[2] - T
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])          # [B, nh, T, past + T]
        allowed = torch.ones(T, past + T, dtype=torch.bool, device=x.device).tril(diagonal=past)
        scores = scores.masked_fill(~allowed, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v                                   # [B, nh, T, hd]
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y), (k, v)


class MLP(nn.Module):
    """The feed-forward block: Linear(C, 4C), GELU (tanh approximation, as GPT-2), Linear(4C, C)."""

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)). Returns (x, this layer's kv cache)."""

    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x, kv_cache=None):
        a, kv_cache = self.attn(self.ln_1(x), kv_cache)
        x = x + a
        return x + self.mlp(self.ln_2(x)), kv_cache


class GPT(nn.Module):
    """GPT-2. forward(idx [B, T], kv_cache=None) -> (logits [B, T, vocab], kv_cache).

    kv_cache is a list with one (k, v) pair per layer; pass back what the previous call returned to
    continue the sequence. Decoding one token with the cache equals the last row of a full forward.
    """

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.h = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: the output layer is the embedding, transposed
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2 scales the residual projections by 1/sqrt(2L)
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_parameters(self):
        """Parameters counted once each (the tied embedding / LM head matrix is one tensor)."""
        return sum(p.numel() for p in self.parameters())

    def _check_cache(self, kv_cache, batch_size):
        if len(kv_cache) != self.config.n_layer:
            raise ValueError(f"kv_cache must hold one (k, v) pair per layer ({self.config.n_layer}), "
                             f"got {len(kv_cache)}")
        k = kv_cache[0][0]
        hd = self.config.n_embd // self.config.n_head
        if k.dim() != 4 or k.shape[0] != batch_size or k.shape[1] != self.config.n_head or k.shape[3] != hd:
            raise ValueError(f"kv_cache keys must be [B={batch_size}, n_head={self.config.n_head}, T, "
                             f"head_dim={hd}], got {list(k.shape)}")
        return k.shape[2]

    def features(self, idx, kv_cache=None):
        """The transformer without its LM head: (final hidden states [B, T, C], kv_cache)."""
        if idx.dim() != 2 or idx.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"idx must be integer token ids [B, T], got {idx.dtype} {list(idx.shape)}")
        B, T = idx.shape
        past = 0 if kv_cache is None else self._check_cache(kv_cache, B)
        if past + T > self.config.block_size:
            raise ValueError(f"{past} cached + {T} new tokens exceed block_size {self.config.block_size}")
        pos = torch.arange(past, past + T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        new_cache = []
        for i, block in enumerate(self.h):
            x, kv = block(x, None if kv_cache is None else kv_cache[i])
            new_cache.append(kv)
        return self.ln_f(x), new_cache

    def forward(self, idx, kv_cache=None):
        x, kv_cache = self.features(idx, kv_cache)
        return self.lm_head(x), kv_cache

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, use_cache=True, temperature=0.0, top_k=None):
        """Append `max_new_tokens` tokens to idx [B, T]. temperature 0 is greedy (argmax).

        With the cache each step feeds only the newest token; without it each step re-runs the whole
        sequence — the same numbers, recomputed.
        """
        if idx.shape[1] + max_new_tokens > self.config.block_size:
            raise ValueError(f"{idx.shape[1]} prompt + {max_new_tokens} new tokens exceed block_size "
                             f"{self.config.block_size}")
        kv_cache, step_input = None, idx
        for _ in range(max_new_tokens):
            x, cache = self.features(step_input, kv_cache)
            next_id = sample(self.lm_head(x[:, -1]), temperature, top_k)  # only the last row is needed
            idx = torch.cat([idx, next_id], dim=1)
            kv_cache, step_input = (cache, next_id) if use_cache else (None, idx)
        return idx

    @classmethod
    def from_hf(cls, hf_model):
        """Build a GPT from a Hugging Face `GPT2LMHeadModel` with the same weights.

        Hugging Face stores c_attn, c_proj and c_fc as `Conv1D` with weight [in, out]; nn.Linear keeps
        [out, in], so those matrices are transposed. The LM head is tied to wte, so it is not copied.
        """
        hf = hf_model.config
        config = GPTConfig(block_size=hf.n_positions, vocab_size=hf.vocab_size, n_layer=hf.n_layer,
                           n_head=hf.n_head, n_embd=hf.n_embd)
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
