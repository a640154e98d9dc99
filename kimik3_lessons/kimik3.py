"""Lesson 11: KimiK3 assembled — the published configuration counted, and a tiny KimiK3 that runs.

Every piece was built in an earlier lesson; this module only stacks them:

    h_0 = E[idx]                                             token embedding, no positional encoding
    for layer l = 0 … L-1 (L = 4 · cycles + 1: cycles × (KDA, KDA, KDA, MLA), then one last MLA;
                           the article counts the 23 cycles only, 92 layers: `final_mla=False`):
        a_l = Mixer_l( RMSNorm( AttnRes_{2l}(sources) ) )    KDA (lesson 07) or gated NoPE MLA (lesson 08)
        m_l = FFN_l( RMSNorm( AttnRes_{2l+1}(sources) ) )    SiTU MLP in layer 0, latent MoE after (lesson 09)
    logits = W_lm RMSNorm( AttnRes_{2L}(sources) )           untied LM head

The residual stream is Block AttnRes (lesson 10): `sources` are the embedding, the sum of each finished
block of 12 layers' outputs, and the running sum of the current block. Decoding keeps, per sequence,
each KDA layer's recurrent state and conv tails (constant size) and each MLA layer's latents (d_c + d_r
numbers per token).

- `KimiK3Config`: `.full()` (the published shapes), `.tiny()` (the same structure, small widths)
- `layer_kinds`: the mixer of every layer; `count_parameters`: total / active / per component, from
  the shapes alone; `decode_memory_bytes`: what decoding holds against context length
- `KimiK3`: the runnable model, `forward(idx, cache=None) -> (logits, cache)`; `memory=False` runs
  every mixer `without_memory` (no token reads another's KDA state or MLA latents), the control of the
  recall task the tiny model learns
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from kimik3_lessons import attnres, mla, moe
from kimik3_lessons.kimi_linear import KDACache, KDAConfig, KimiDeltaAttention


@dataclass(frozen=True)
class KimiK3Config:
    """The shapes of a KimiK3 model. Layer kinds: `num_cycles` × (`kda_per_cycle` KDA, 1 MLA), then one
    last MLA layer (`final_mla`; the published configuration has it, the article's 23 cycles do not)."""
    vocab_size: int
    hidden_size: int
    num_cycles: int
    kda_per_cycle: int
    # KDA layers (lesson 07), KimiK3's bounded gate
    kda_heads: int
    kda_head_dim: int
    conv_size: int
    # MLA layers (lesson 08): query LoRA, NoPE, output gate
    mla_heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    # FFNs (lesson 09): dense SiTU MLP in the first layers, latent MoE in the others
    first_dense_layers: int
    dense_intermediate_size: int
    num_experts: int
    top_k: int
    num_shared_experts: int
    expert_hidden_size: int
    latent_size: int
    # residual stream (lesson 10): decoder layers per AttnRes block
    attnres_block_size: int
    norm_eps: float = 1e-5
    chunk_size: int = 64  # KDA's chunk length for prompts: how it computes, not a shape
    final_mla: bool = True

    def __post_init__(self):
        if not isinstance(self.final_mla, bool):
            raise ValueError(f"final_mla must be True or False, got {self.final_mla!r}")
        for name, value in self.__dict__.items():
            smallest = 0 if name == "kda_per_cycle" else 1   # no KDA layers at all: an all-MLA stack
            if name not in ("norm_eps", "final_mla") and (not isinstance(value, int) or value < smallest):
                raise ValueError(f"{name} must be an integer >= {smallest}, got {value!r}")
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k must be at most num_experts = {self.num_experts}, got {self.top_k}")
        if self.first_dense_layers > self.num_layers:
            raise ValueError(f"first_dense_layers must be at most num_layers = {self.num_layers}, "
                             f"got {self.first_dense_layers}")

    @classmethod
    def full(cls):
        """KimiK3 as published (docs/facts.md): 93 layers at width 7168, 896 experts, 2.8T parameters."""
        return cls(vocab_size=163840, hidden_size=7168, num_cycles=23, kda_per_cycle=3,
                   kda_heads=96, kda_head_dim=128, conv_size=4,
                   mla_heads=96, q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                   qk_rope_head_dim=64, v_head_dim=128,
                   first_dense_layers=1, dense_intermediate_size=33792, num_experts=896, top_k=16,
                   num_shared_experts=2, expert_hidden_size=3072, latent_size=3584,
                   attnres_block_size=12)

    @classmethod
    def tiny(cls):
        """The same structure at toy widths: 2 cycles + the last MLA = 9 layers, AttnRes blocks of 4
        layers (so blocks end after layers 4 and 8), 8 experts with 2 routed per token."""
        return cls(vocab_size=128, hidden_size=64, num_cycles=2, kda_per_cycle=3,
                   kda_heads=2, kda_head_dim=16, conv_size=4,
                   mla_heads=2, q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16,
                   qk_rope_head_dim=8, v_head_dim=16,
                   first_dense_layers=1, dense_intermediate_size=128, num_experts=8, top_k=2,
                   num_shared_experts=1, expert_hidden_size=32, latent_size=32,
                   attnres_block_size=4, chunk_size=16)

    @property
    def num_layers(self):
        return self.num_cycles * (self.kda_per_cycle + 1) + self.final_mla

    def mla_config(self):
        """The shapes of one MLA layer: query LoRA, NoPE (the rotary part stays, unrotated), output gate."""
        return mla.MLAConfig(self.hidden_size, self.mla_heads, self.q_lora_rank, self.kv_lora_rank,
                             self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim,
                             use_rope=False, output_gate=True, norm_eps=self.norm_eps)

    def kda_config(self):
        """The shapes of one KDA layer: KimiK3's bounded gate."""
        return KDAConfig(self.hidden_size, self.kda_heads, self.kda_head_dim, forget_gate="bounded",
                         conv_size=self.conv_size, chunk_size=self.chunk_size, norm_eps=self.norm_eps)

    def moe_config(self):
        """The shapes of one MoE layer (`moe.LatentMoE`, `moe.moe_costs`)."""
        return moe.MoEConfig(hidden_size=self.hidden_size, latent_size=self.latent_size,
                             num_experts=self.num_experts, top_k=self.top_k,
                             num_shared_experts=self.num_shared_experts,
                             expert_hidden_size=self.expert_hidden_size, norm_eps=self.norm_eps)


def layer_kinds(config):
    """The mixer of each layer, in order: `num_cycles` × (kda × kda_per_cycle, mla), then one last mla
    if `config.final_mla`. Full KimiK3: 93 entries, MLA at 1-based positions 4, 8, …, 92 and 93."""
    return (["kda"] * config.kda_per_cycle + ["mla"]) * config.num_cycles + ["mla"] * config.final_mla


# ---------------------------------------------------------------------------------------------------
# Counting: one formula per component, from the shapes the configuration implies.


def kda_layer_parameters(config):
    """Parameters of one KDA mixer by piece (H heads of width K, hidden D, projection width HK = H·K):
    q/k/v projections 3·HK·D; their short convs 3·HK·conv; forget gate f_a K·D + f_b HK·K, A_log K,
    dt_bias HK; beta b_proj H·D; output RMSNorm K, gate g_proj HK·D and o_proj D·HK."""
    H, K, D = config.kda_heads, config.kda_head_dim, config.hidden_size
    HK = H * K
    return {"q/k/v projections": 3 * HK * D, "short convolutions": 3 * HK * config.conv_size,
            "forget gate": K * D + HK * K + K + HK, "beta": H * D,
            "output norm + gate + projection": K + 2 * HK * D}


def mla_layer_parameters(config):
    """Parameters of one MLA mixer by piece (H heads, hidden D, ranks d_q' and d_c, head dims d_n, d_r, d_v):
    query LoRA d_q'·D + d_q' + H(d_n + d_r)·d_q'; latent kv_a (d_c + d_r)·D, its norm d_c, kv_b
    H(d_n + d_v)·d_c; output gate g_proj H·d_v·D and o_proj D·H·d_v."""
    c, D = config.mla_config(), config.hidden_size
    H, Hv = c.num_heads, c.num_heads * c.v_head_dim
    return {"query LoRA": c.q_lora_rank * D + c.q_lora_rank + H * c.qk_head_dim * c.q_lora_rank,
            "latent kv": c.cache_width * D + c.kv_lora_rank
            + H * (c.qk_nope_head_dim + c.v_head_dim) * c.kv_lora_rank,
            "output gate + projection": 2 * Hv * D}


def count_parameters(config):
    """Total and active parameters of the model `config` describes, and where they sit.

    Returns {"total": n, "active": n, "components": {name: (total, active)}}. Active is one token's path:
    every dense weight (mixers, norms, AttnRes, router, shared experts, latent projections, LM head) plus
    its top_k routed experts out of num_experts; the input embedding is a table lookup, not counted as
    active. The MoE terms come from lesson 09's `moe.moe_costs`. Equals sum(p.numel()) of `KimiK3(config)`.
    """
    kinds = layer_kinds(config)
    D, V, L = config.hidden_size, config.vocab_size, config.num_layers
    n_moe = L - config.first_dense_layers
    kda_layer = sum(kda_layer_parameters(config).values())
    mla_layer = sum(mla_layer_parameters(config).values())
    parts = {
        "embedding": (V * D, 0),
        "KDA mixers": (kinds.count("kda") * kda_layer,) * 2,
        "MLA mixers": (kinds.count("mla") * mla_layer,) * 2,
        "dense SiTU MLP": (config.first_dense_layers * 3 * config.dense_intermediate_size * D,) * 2,
    }
    for name, (params, _) in moe.moe_costs(config.moe_config()).items():
        active = params // config.num_experts * config.top_k if name == "routed experts" else params
        parts[f"MoE {name}"] = (n_moe * params, n_moe * active)
    parts["RMSNorms"] = ((2 * L + 1) * D,) * 2                # input + post-attention per layer, final
    parts["AttnRes queries + key norms"] = (2 * (2 * L + 1) * D,) * 2   # two mix points per layer + final
    parts["LM head"] = (V * D,) * 2
    return {"total": sum(t for t, _ in parts.values()), "active": sum(a for _, a in parts.values()),
            "components": parts}


def decode_memory_bytes(config, context, stack="kimik3", bytes_per_number=2):
    """Bytes one sequence holds while decoding after `context` tokens (int or array), over all L layers.

        "kimik3"   n_kda · KDAConfig.state_numbers + n_mla · (d_c + d_r) · context     (the hybrid)
        "all-mla"  L · (d_c + d_r) · context                                          (every layer MLA)
        "mha"      L · 2 · n_h · d_v · context      every layer multi-head attention with MLA's heads
    Caches per token from lesson 01's `cache_bytes_per_token` (as lesson 08 uses it); bfloat16 by default.
    """
    kinds, L = layer_kinds(config), config.num_layers
    latent = dict(kv_lora_rank=config.kv_lora_rank, qk_rope_head_dim=config.qk_rope_head_dim)
    if stack == "kimik3":
        per_token = mla.cache_bytes_per_token("mla", num_layers=kinds.count("mla"),
                                              bytes_per_number=bytes_per_number, **latent)
        states = kinds.count("kda") * config.kda_config().state_numbers * bytes_per_number
        return states + per_token * context
    if stack == "all-mla":
        return mla.cache_bytes_per_token("mla", num_layers=L, bytes_per_number=bytes_per_number,
                                         **latent) * context
    if stack == "mha":
        return mla.cache_bytes_per_token("mha", num_layers=L, bytes_per_number=bytes_per_number,
                                         num_heads=config.mla_heads, head_dim=config.v_head_dim) * context
    raise ValueError(f"stack must be 'kimik3', 'all-mla' or 'mha', got {stack!r}")


# ---------------------------------------------------------------------------------------------------
# The model


class DecoderLayer(nn.Module):
    """One KimiK3 layer: a mixer (KDA or MLA) and an FFN (dense SiTU MLP or latent MoE), each behind
    its RMSNorm. The residual connections are not here: BlockAttnRes mixes the inputs of both."""

    def __init__(self, config, kind, dense):
        super().__init__()
        D, eps = config.hidden_size, config.norm_eps
        self.kind = kind
        self.input_layernorm = nn.RMSNorm(D, eps=eps)
        self.self_attn = KimiDeltaAttention(config.kda_config()) if kind == "kda" else \
            mla.MultiHeadLatentAttention(config.mla_config())
        self.post_attention_layernorm = nn.RMSNorm(D, eps=eps)
        self.mlp = moe.SiTUMLP(D, config.dense_intermediate_size) if dense else \
            moe.LatentMoE(config.moe_config())

    def attention(self, h, cache, memory=True):
        """The mixer on RMSNorm(h) [B, T, D], continuing `cache` -> (output, the layer's new cache).
        (MLA attends over its latents absorbed when decoding one token, explicitly on a prompt.)
        memory=False: `without_memory`, and no cache."""
        x = self.input_layernorm(h)
        return self.self_attn(x, cache) if memory else (without_memory(self.self_attn, x), None)

    def ffn(self, h):
        return self.mlp(self.post_attention_layernorm(h))


def without_memory(mixer, x):
    """The mixer with no memory of the past: each token of x [B, T, D] read as a sequence of its own, so
    no token reads another's KDA state or MLA latents (a KDA state starts empty at every token, an MLA
    token attends to itself alone). KDA's short convolutions keep their window: each one-token sequence
    gets, as its convolution tails, the projections of the W - 1 real tokens before it. What is left can
    see W - 1 tokens back per KDA layer, and nothing further. Returns y [B, T, D]."""
    B, T, D = x.shape
    if not isinstance(mixer, KimiDeltaAttention):
        return mixer(x.reshape(B * T, 1, D))[0].view(B, T, D)
    W, H, K = mixer.config.conv_size, mixer.num_heads, mixer.head_dim

    def tails(proj):                   # [B T, H K, W - 1]: the projections of the W - 1 tokens before each
        before = F.pad(proj(x), (0, 0, W - 1, 0)).unfold(1, W - 1, 1)[:, :T]           # [B, T, H K, W - 1]
        return before.reshape(B * T, H * K, W - 1)

    empty = KDACache(x.new_zeros(B * T, H, K, K), tails(mixer.q_proj), tails(mixer.k_proj),
                     tails(mixer.v_proj))
    return mixer(x.reshape(B * T, 1, D), empty)[0].view(B, T, D)


class KimiK3(nn.Module):
    """KimiK3 from the lesson modules. forward(idx [B, T], cache=None) -> (logits [B, T, vocab], cache).

    cache is a list with one entry per layer: a `kimi_linear.KDACache` (recurrent state + conv tails) for a
    KDA layer, an `mla.LatentCache` (latents of every token so far) for an MLA layer. Passing back what a
    call returned continues the sequence: prefill then token-by-token decoding equals one pass.
    """

    def __init__(self, config):
        super().__init__()
        if not isinstance(config, KimiK3Config):
            raise ValueError(f"config must be a KimiK3Config, got {type(config).__name__}")
        self.config = config
        self.kinds = layer_kinds(config)
        D = config.hidden_size
        self.embed_tokens = nn.Embedding(config.vocab_size, D)
        self.layers = nn.ModuleList(DecoderLayer(config, kind, dense=l < config.first_dense_layers)
                                    for l, kind in enumerate(self.kinds))
        self.attn_res = attnres.BlockAttnRes(D, config.num_layers, config.attnres_block_size,
                                             norm_eps=config.norm_eps)
        self.norm = nn.RMSNorm(D, eps=config.norm_eps)
        self.lm_head = nn.Linear(D, config.vocab_size, bias=False)  # untied from the embedding

    def check_inputs(self, idx, cache):
        if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.dtype not in (torch.int64, torch.int32):
            got = f"{idx.dtype} {list(idx.shape)}" if isinstance(idx, torch.Tensor) else type(idx).__name__
            raise ValueError(f"idx must be integer token ids [B, T], got {got}")
        if idx.numel() and not 0 <= idx.min() <= idx.max() < self.config.vocab_size:
            raise ValueError(f"idx must hold token ids in [0, vocab_size = {self.config.vocab_size}), "
                             f"got values in [{idx.min().item()}, {idx.max().item()}]")
        if cache is None:
            return
        if not isinstance(cache, (list, tuple)) or len(cache) != len(self.layers):
            got = f"length {len(cache)}" if isinstance(cache, (list, tuple)) else type(cache).__name__
            raise ValueError(f"cache must be a list with one entry per layer ({len(self.layers)}), got {got}")
        for l, (kind, entry) in enumerate(zip(self.kinds, cache, strict=True)):
            expected = KDACache if kind == "kda" else mla.LatentCache
            if not isinstance(entry, expected):
                raise ValueError(f"cache[{l}] must be a {expected.__name__} ({kind} layer), "
                                 f"got {type(entry).__name__}")

    def forward(self, idx, cache=None, memory=True):
        """The call protocol of BlockAttnRes (lesson 10), with each mixer continuing its cache.
        memory=False runs every mixer `without_memory` (the recall task's control): returns (logits, None)."""
        self.check_inputs(idx, cache)
        if cache is not None and not memory:
            raise ValueError("memory=False reads no past, so it takes no cache")
        cache = [None] * len(self.layers) if cache is None else cache
        res = self.attn_res
        state = res.start(self.embed_tokens(idx))
        new_cache = []
        for l, layer in enumerate(self.layers):
            out, layer_cache = layer.attention(res.mix_before_attention(state, l), cache[l], memory)
            state.add_sublayer_output(out)
            state.add_sublayer_output(layer.ffn(res.mix_before_mlp(state, l)))
            new_cache.append(layer_cache)
        return self.lm_head(self.norm(res.mix_final(state))), new_cache if memory else None
