"""Lesson 12: what each memory can recall: one small model per mixer of the course, trained on MQAR.

The task is `recall_task`'s and the training loop `recall_training`'s (lesson 11 trains on them too);
this module builds the models.

- `MIXERS`: the models by name, the mixer of each layer and where it comes from
- `RecallConfig`, `RecallModel`: embedding, mixer layers and MLPs, head; `build_mixer` one layer
- `DeltaRuleMixer`: linear attention, DeltaNet, gated DeltaNet in KDA's layer, each from its declaration
  in the mixer family (`mixers`: its forms and switches); KDA is lesson 07b's layer itself
- the gates initialised as flash-linear-attention's layers (`recall_training`'s recipe);
  `zero_input_half_lives`: how long each gated channel remembers
- `state_numbers`: what each layer holds per sequence; `conv_reach`: how far the convolutions alone see
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from kimik3_lessons import gated_deltanet, gpt2, kimi_linear, mixers, mla
from kimik3_lessons.recall_task import (
    BLANK,
    IGNORE,
    MQARTask,
    check_batch,
    mqar_batch,
    mqar_layout,
    query_distances,
)
from kimik3_lessons.recall_training import gated_deltanet_gate_parameters, kimi_linear_gate_init_

# The task's names are re-exported: lesson 12's notebook and exercises call them mqar.*.
__all__ = ["BLANK", "IGNORE", "MIXERS", "Block", "ConvThen", "DeltaRuleMixer", "KDAWithoutDecay",
           "MQARTask", "RecallConfig", "RecallModel", "build_mixer", "check_batch", "conv_reach",
           "mqar_batch", "mqar_layout", "query_distances", "remove_short_convolutions", "state_numbers",
           "zero_input_half_lives"]

MIXERS = {   # name: (the mixer of each layer, where it comes from)
    "attention": (("attention",) * 2, "lesson 01: gpt2.CausalSelfAttention (softmax, KV cache)"),
    "linear_attention": (("linear_attention",) * 2, "lessons 02-03: linear_attention.chunked"),
    "deltanet": (("deltanet",) * 2, "lesson 05: deltanet.chunked"),
    "gated_deltanet": (("gated_deltanet",) * 2, "lesson 06: gated_deltanet.chunked + mamba2_gate"),
    "kda": (("kda",) * 2, "lesson 07b: kimi_linear.KimiDeltaAttention, KimiK3's bounded gate"),
    "mla": (("mla",) * 2, "lesson 08: mla.MultiHeadLatentAttention, NoPE, output gate"),
    "hybrid": (("kda", "kda", "kda", "mla"), "lesson 11's 3:1: three KDA layers, then one MLA layer"),
}


@dataclass(frozen=True)
class RecallConfig:
    """A recall model: `mixer` names the stack (`MIXERS`), `num_heads` heads of hidden_size / num_heads.
    The ablations: `conv=False` (short convolutions fixed to the identity), `decay=False` (g = 0),
    `kda_init="lesson07"` (KDA's gates as lesson 07 starts them, not as the reference layer)."""
    mixer: str
    vocab_size: int = 128
    hidden_size: int = 64
    num_heads: int = 2
    conv_size: int = 4
    conv: bool = True
    decay: bool = True
    chunk_size: int = 64
    kda_init: str = "reference"

    def __post_init__(self):
        if self.mixer not in MIXERS:
            raise ValueError(f"mixer must be one of {', '.join(MIXERS)}, got {self.mixer!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be a multiple of num_heads "
                             f"({self.num_heads})")
        if self.kda_init not in ("reference", "lesson07"):
            raise ValueError(f"kda_init must be 'reference' or 'lesson07', got {self.kda_init!r}")

    @property
    def layers(self):
        return MIXERS[self.mixer][0]

    @property
    def head_dim(self):
        return self.hidden_size // self.num_heads

    def mla_config(self):
        """MLA as KimiK3's (NoPE, output gate), no query LoRA; d_c = hidden / 2, d_r = head_dim / 4."""
        K = self.head_dim
        return mla.MLAConfig(self.hidden_size, self.num_heads, q_lora_rank=None,
                             kv_lora_rank=self.hidden_size // 2, qk_nope_head_dim=K,
                             qk_rope_head_dim=max(2, K // 4), v_head_dim=K, use_rope=False, output_gate=True)

    def kda_config(self):
        return kimi_linear.KDAConfig(self.hidden_size, self.num_heads, self.head_dim, forget_gate="bounded",
                             conv_size=self.conv_size, chunk_size=self.chunk_size)


class KDAWithoutDecay(kimi_linear.KimiDeltaAttention):
    """The "no decay" ablation of KDA: the same layer with its forget gate removed, g = 0."""

    def log_decay(self, x):
        return x.new_zeros(*x.shape[:2], self.num_heads, self.head_dim)


class DeltaRuleMixer(nn.Module):
    """Linear attention, DeltaNet or gated DeltaNet in KDA's layer (lesson 07b): only the write rule differs.

        q, k = L2Norm(SiLU(ShortConv(W x))),  v = SiLU(ShortConv(W_v x)),  beta = sigmoid(W_b x)
        g = mamba2_gate(W_a x)  (one per head, gated DeltaNet only; decay=False sets g = 0; A_log and
                                 dt_bias from `gated_deltanet_gate_parameters`, FLA's GatedDeltaNet init)
        o = chunked(q / sqrt(K), k, v, [g,] [beta]),   y = W_o( sigmoid(W_g x) * RMSNorm(o) )
    rule: a member of the mixer family (`mixers`) with no decay or one per head: "linear_attention",
    "deltanet" or "gated_deltanet"; its declaration says whether it takes beta (`delta`) and a log decay
    per head (`decay`), and gives its `chunked` form."""

    def __init__(self, config, rule):
        super().__init__()
        D, H, K, W = config.hidden_size, config.num_heads, config.head_dim, config.conv_size
        self.rule, self.decay, self.chunk_size, self.num_heads, self.head_dim = (
            mixers.get(rule), config.decay, config.chunk_size, H, K)
        if self.rule.decay == "channel":
            raise ValueError(f"{rule} decays per key channel, which this layer's gate does not: "
                             f"KDA's layer is kimi_linear.KimiDeltaAttention")
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(D, H * K, bias=False) for _ in range(3))
        self.q_conv1d, self.k_conv1d, self.v_conv1d = (
            nn.Conv1d(H * K, H * K, W, groups=H * K, bias=False) for _ in range(3))
        self.b_proj = nn.Linear(D, H, bias=False) if self.rule.delta else None
        if self.rule.decay == "head":
            self.a_proj = nn.Linear(D, H, bias=False)
            self.A_log, self.dt_bias = map(nn.Parameter, gated_deltanet_gate_parameters(H))
        self.o_norm = nn.RMSNorm(K)
        self.g_proj = nn.Linear(D, H * K, bias=False)
        self.o_proj = nn.Linear(H * K, D, bias=False)

    def log_decay(self, x):
        """g [B, T, H] <= 0 from x [B, T, hidden]: lesson 06's Mamba-2 gate, one per head."""
        return gated_deltanet.mamba2_gate(self.a_proj(x), self.A_log, self.dt_bias)

    def forward(self, x):
        B, T, _ = x.shape
        H, K = self.num_heads, self.head_dim
        heads = lambda t: t.view(B, T, H, -1).transpose(1, 2)                   # [B, H, T, K]
        q = heads(kimi_linear.short_conv(self.q_proj(x), self.q_conv1d.weight)[0])
        k = heads(kimi_linear.short_conv(self.k_proj(x), self.k_conv1d.weight)[0])
        v = heads(F.silu(kimi_linear.short_conv(self.v_proj(x), self.v_conv1d.weight)[0]))
        q, k = F.normalize(F.silu(q), dim=-1) * K ** -0.5, F.normalize(F.silu(k), dim=-1)
        inputs = []                                                               # [g,] [beta]
        if self.rule.decay:
            g = self.log_decay(x).transpose(1, 2)                                 # [B, H, T]
            inputs.append(g if self.decay else torch.zeros_like(g))
        if self.rule.delta:
            inputs.append(torch.sigmoid(self.b_proj(x)).transpose(1, 2))          # [B, H, T]
        o, _ = self.rule.chunked(q, k, v, *inputs, chunk_size=self.chunk_size)
        o = self.o_norm(o.transpose(1, 2)) * torch.sigmoid(self.g_proj(x).view(B, T, H, K))
        return self.o_proj(o.reshape(B, T, H * K))


class ConvThen(nn.Module):
    """A short convolution over the layer's input, then a softmax-attention mixer (lesson 01's or 08's,
    which have no convolution of their own): y = attention(ShortConv(x)). No positional encoding."""

    def __init__(self, config, attention):
        super().__init__()
        D = config.hidden_size
        self.conv1d = nn.Conv1d(D, D, config.conv_size, groups=D, bias=False)
        self.attention = attention

    def forward(self, x):
        return self.attention(kimi_linear.short_conv(x, self.conv1d.weight)[0])[0]


def build_mixer(config, kind):
    """One mixer layer of `kind` (see MIXERS), forward(x [B, T, D]) -> y [B, T, D]."""
    if kind == "attention":
        gpt = gpt2.GPTConfig(num_heads=config.num_heads, hidden_size=config.hidden_size)
        return ConvThen(config, gpt2.CausalSelfAttention(gpt))
    if kind == "mla":
        return ConvThen(config, mla.MultiHeadLatentAttention(config.mla_config()))
    if kind == "kda":
        layer = (kimi_linear.KimiDeltaAttention if config.decay else KDAWithoutDecay)(config.kda_config())
        return kimi_linear_gate_init_(layer) if config.kda_init == "reference" else layer
    return DeltaRuleMixer(config, kind)


class Block(nn.Module):
    """h = h + mixer(RMSNorm(h)); h = h + MLP(RMSNorm(h)), with lesson 01's GELU MLP."""

    def __init__(self, config, kind):
        super().__init__()
        D = config.hidden_size
        self.norm1, self.norm2 = nn.RMSNorm(D), nn.RMSNorm(D)
        self.mixer = build_mixer(config, kind)
        self.mlp = gpt2.MLP(gpt2.GPTConfig(num_heads=1, hidden_size=D))

    def forward(self, h):
        out = self.mixer(self.norm1(h))
        h = h + (out[0] if isinstance(out, tuple) else out)          # KDA returns (y, cache)
        return h + self.mlp(self.norm2(h))


class RecallModel(nn.Module):
    """forward(idx [B, T]) -> logits [B, T, vocab]."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        D = config.hidden_size
        self.embed = nn.Embedding(config.vocab_size, D)
        self.blocks = nn.ModuleList(Block(config, kind) for kind in config.layers)
        self.norm = nn.RMSNorm(D)
        self.head = nn.Linear(D, config.vocab_size, bias=False)
        if not config.conv:
            remove_short_convolutions(self)

    def forward(self, idx):
        h = self.embed(idx)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))


def remove_short_convolutions(model):
    """The "no short convolution" ablation: every depthwise Conv1d of `model` becomes the identity
    (weight 1 on the current token, 0 on the W - 1 before it) and stops learning."""
    for module in model.modules():
        if isinstance(module, nn.Conv1d):
            with torch.no_grad():
                module.weight.zero_()[..., -1] = 1.0
            module.weight.requires_grad_(False)


def conv_reach(config):
    """How far back the short convolutions alone see: W - 1 per layer, added up over the layers."""
    return len(config.layers) * (config.conv_size - 1) if config.conv else 0


def state_numbers(config, seq_len):
    """Numbers each layer holds for one sequence after `seq_len` tokens: attention 2·H·K per token (lesson
    01), MLA d_c + d_r per token (lesson 08), each + D (W - 1) for its convolution's tail; a recurrent
    mixer its state H·K·K and q, k, v tails 3·H·K (W - 1) at any length (`KDAConfig.state_numbers`)."""
    c = config.mla_config()
    per_token = {"attention": gpt2.cache_bytes_per_token("mha", num_heads=config.num_heads,
                                                         head_dim=config.head_dim, bytes_per_number=1),
                 "mla": gpt2.cache_bytes_per_token("mla", kv_lora_rank=c.kv_lora_rank,
                                                   qk_rope_head_dim=c.qk_rope_head_dim, bytes_per_number=1)}
    tail = config.hidden_size * (config.conv_size - 1)
    return [per_token[kind] * seq_len + tail if kind in per_token else config.kda_config().state_numbers
            for kind in config.layers]


@torch.no_grad()
def zero_input_half_lives(model):
    """How long each gated layer of `model` remembers at zero input: per layer with a forget gate, the
    half-lives ln 2 / -g in tokens of its channels (KDA, [H·K]) or heads (gated DeltaNet, [H]), with g the
    gate at x = 0 (no projection has a bias, so x = 0 leaves A_log and dt_bias alone). A list of
    (layer index, tensor of half-lives); layers without a gate, or with decay=False, are left out."""
    lives = []
    for i, block in enumerate(model.blocks):
        mixer = block.mixer
        gated = (isinstance(mixer, kimi_linear.KimiDeltaAttention) and not isinstance(mixer, KDAWithoutDecay)
                 or isinstance(mixer, DeltaRuleMixer) and mixer.rule.decay and mixer.decay)
        if gated:
            g = mixer.log_decay(mixer.o_proj.weight.new_zeros(1, 1, model.config.hidden_size))
            lives.append((i, (math.log(2) / -g).flatten()))
    return lives
