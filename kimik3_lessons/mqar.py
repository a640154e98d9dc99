"""Lesson 12: what each memory can recall: one small model per mixer of the course, trained on MQAR.

The task is `recall_task`'s and the training loop `recall_training`'s (lesson 11 trains on them too);
this module builds the models.

- `MIXERS`: the models by name, the mixer of each layer and where it comes from; the four recurrent rows
  are the mixer family's (`mixers.MIXERS`), each in lesson 07b's layer (`kimi_linear.KimiDeltaAttention`),
  so that they differ only in the write rule and its gate
- `RecallConfig`, `RecallModel`: embedding (and learned positions, for a control), mixer layers and MLPs,
  head; `build_mixer` one layer
- `zero_input_half_lives`: how long each gated channel remembers at zero input; `task_decays`: the gates
  on the task's own tokens; `retention`: how much of a pair's write is left when its query reads it
- `state_numbers`: what each layer holds per sequence; `conv_reach`: how far the convolutions alone see
"""

import itertools
import math
from dataclasses import dataclass

import torch
from torch import nn

from kimik3_lessons import gpt2, kimi_linear, mixers, mla
from kimik3_lessons.recall_task import (
    BLANK,
    IGNORE,
    MQARTask,
    check_batch,
    mqar_batch,
    mqar_layout,
    query_distances,
)

# The task's names are re-exported: lesson 12's notebook and exercises call them mqar.*.
__all__ = ["BLANK", "IGNORE", "MIXERS", "Block", "ConvThen", "MQARTask", "RecallConfig", "RecallModel",
           "build_mixer", "check_batch", "conv_reach", "mqar_batch", "mqar_layout", "query_distances",
           "remove_short_convolutions", "retention", "state_numbers", "task_decays", "zero_input_half_lives"]

MIXERS = {   # name: (the mixer of each layer, where it comes from)
    "attention": (("attention",) * 2, "lesson 01: gpt2.CausalSelfAttention (softmax, KV cache)"),
    **{name: ((name,) * 2, f"lesson {m.lesson}: {name}.chunked in lesson 07b's layer")
       for name, m in mixers.MIXERS.items()},
    "mla": (("mla",) * 2, "lesson 08: mla.MultiHeadLatentAttention, NoPE, output gate"),
    "hybrid": (("kda", "kda", "kda", "mla"), "lesson 11's 3:1: three KDA layers, then one MLA layer"),
}


@dataclass(frozen=True)
class RecallConfig:
    """A recall model: `mixer` names the stack (`MIXERS`), `num_heads` heads of hidden_size / num_heads.
    The recurrent layers: KDA with KimiK3's bounded gate, the gates started by `gate_start`
    (`kimi_linear.gate_start`), prompts run by the declaration's `form` in chunks of `chunk_size`.
    The controls: `conv=False` (short convolutions fixed to the identity), `positions` > 0 (GPT-2's learned
    absolute positions for that many tokens, added to the embedding; 0: none, as every model here)."""
    mixer: str
    vocab_size: int = 128
    hidden_size: int = 64
    num_heads: int = 2
    conv_size: int = 4
    conv: bool = True
    chunk_size: int = 64
    gate_start: str = "spread"
    positions: int = 0
    form: str = "chunked"

    def __post_init__(self):
        if self.mixer not in MIXERS:
            raise ValueError(f"mixer must be one of {', '.join(MIXERS)}, got {self.mixer!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be a multiple of num_heads "
                             f"({self.num_heads})")
        if not isinstance(self.positions, int) or self.positions < 0:
            raise ValueError(f"positions must be a number of tokens >= 0, got {self.positions!r}")

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

    def layer_config(self, kind):
        """Lesson 07b's layer around the family member `kind`; KDA with KimiK3's bounded gate."""
        return kimi_linear.KDAConfig(self.hidden_size, self.num_heads, self.head_dim, mixer=kind,
                                     forget_gate="bounded" if kind == "kda" else "mamba2",
                                     conv_size=self.conv_size, chunk_size=self.chunk_size,
                                     gate_start=self.gate_start, form=self.form)


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


def build_mixer(config, kind, form=None):
    """One mixer layer of `kind` (see MIXERS), forward(x [B, T, D]) -> y [B, T, D] (a recurrent layer
    also returns its cache). form: a callable run in place of the recurrent layer's declared form."""
    if kind == "attention":
        gpt = gpt2.GPTConfig(num_heads=config.num_heads, hidden_size=config.hidden_size)
        return ConvThen(config, gpt2.CausalSelfAttention(gpt))
    if kind == "mla":
        return ConvThen(config, mla.MultiHeadLatentAttention(config.mla_config()))
    return kimi_linear.KimiDeltaAttention(config.layer_config(kind), form)


class Block(nn.Module):
    """h = h + mixer(RMSNorm(h)); h = h + MLP(RMSNorm(h)), with lesson 01's GELU MLP."""

    def __init__(self, config, kind, form=None):
        super().__init__()
        D = config.hidden_size
        self.norm1, self.norm2 = nn.RMSNorm(D), nn.RMSNorm(D)
        self.mixer = build_mixer(config, kind, form)
        self.mlp = gpt2.MLP(gpt2.GPTConfig(num_heads=1, hidden_size=D))

    def forward(self, h):
        out = self.mixer(self.norm1(h))
        h = h + (out[0] if isinstance(out, tuple) else out)          # a recurrent layer returns (y, cache)
        return h + self.mlp(self.norm2(h))


class RecallModel(nn.Module):
    """forward(idx [B, T]) -> logits [B, T, vocab]. form: a callable that the recurrent layers run in
    place of their declared form (`kimi_linear.KimiDeltaAttention`)."""

    def __init__(self, config, form=None):
        super().__init__()
        self.config = config
        D = config.hidden_size
        self.embed = nn.Embedding(config.vocab_size, D)
        self.wpe = nn.Embedding(config.positions, D) if config.positions else None
        self.blocks = nn.ModuleList(Block(config, kind, form) for kind in config.layers)
        self.norm = nn.RMSNorm(D)
        self.head = nn.Linear(D, config.vocab_size, bias=False)
        if not config.conv:
            remove_short_convolutions(self)

    def forward(self, idx):
        h = self.embed(idx)
        if self.wpe is not None:
            if idx.shape[1] > self.config.positions:
                raise ValueError(f"idx has {idx.shape[1]} tokens, more than the {self.config.positions} "
                                 f"positions the model learns")
            h = h + self.wpe(torch.arange(idx.shape[1], device=idx.device))
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
    return [per_token[kind] * seq_len + tail if kind in per_token else config.layer_config(kind).state_numbers
            for kind in config.layers]


def gated_layers(model):
    """The layers of `model` with a forget gate: [(layer index, layer)]."""
    return [(i, b.mixer) for i, b in enumerate(model.blocks)
            if isinstance(b.mixer, kimi_linear.KimiDeltaAttention) and b.mixer.rule.decay]


@torch.no_grad()
def zero_input_half_lives(model):
    """How long each gated layer of `model` remembers at zero input: per layer with a forget gate, the
    half-lives ln 2 / -g in tokens of its channels (KDA, [H·K]) or heads (gated DeltaNet, [H]), with g the
    gate at x = 0 (no projection has a bias, so x = 0 leaves A_log and dt_bias alone). A list of
    (layer index, tensor of half-lives)."""
    return [(i, (math.log(2) / -layer.log_decay(layer.o_proj.weight.new_zeros(1, 1, model.config.hidden_size))
                 ).flatten()) for i, layer in gated_layers(model)]


@torch.no_grad()
def task_decays(model, idx):
    """The forget gates on the task's tokens: for each gated layer, g [B, T, H] or [B, T, H, K] computed
    from what that layer reads when the model runs on idx [B, T]. A list of (layer index, g)."""
    layers, seen = dict(gated_layers(model)), {}
    hooks = [layer.register_forward_hook(lambda m, args, out, i=i: seen.__setitem__(i, m.log_decay(args[0])))
             for i, layer in layers.items()]
    try:
        model(idx)
    finally:
        for hook in hooks:
            hook.remove()
    return [(i, seen[i]) for i in layers]


def retention(g, inputs, targets, num_pairs):
    """What is left of a pair's write when its query reads the state: for every query, exp of the sum of g
    over the tokens after its pair's value up to the query (the state at t keeps exp(g_t) of the state at
    t - 1), per head or channel. g [B, T, H(, K)]; inputs, targets [B, T] as `mqar_layout` lays them out.
    Returns [B, P, H(, K)], in the order of the pairs."""
    distance = query_distances(inputs, targets, num_pairs)                   # [B, P]
    value_at = 2 * torch.arange(num_pairs) + 1                                 # [P]
    G = g.double().cumsum(1)                                                   # [B, T, ...]
    rows = torch.arange(len(g))[:, None]
    return (G[rows, value_at + distance] - G[rows, value_at.expand_as(distance)]).exp()


# ---------------------------------------------------------------------------------------------------
# Comparing points over seeds


MAX_SEEDS = 12        # C(24, 12) = 2.7 million splits: the most an exact test enumerates in memory here


def permutation_p(a, b):
    """One-sided exact permutation test over seeds: p = the share of the C(n_a + n_b, n_a) ways to split the
    pooled values into groups of n_a and n_b whose difference of means is at least mean(a) - mean(b).
    Small when a is above b for a reason other than which runs happened to land where; with 5 seeds a
    side the smallest p is 1/252. a, b: 1-D sequences of per-seed values, at most MAX_SEEDS each (every split
    is enumerated)."""
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    for name, x in (("a", a), ("b", b)):
        if x.dim() != 1 or not 1 <= len(x) <= MAX_SEEDS:
            raise ValueError(f"{name} must be 1-D, one value per seed, 1 to {MAX_SEEDS} of them (the test "
                             f"enumerates every split of the pooled runs), got shape {tuple(x.shape)}")
    pooled, n = torch.cat([a, b]), len(a)
    splits = torch.tensor(list(itertools.combinations(range(len(pooled)), n)))        # [splits, n_a]
    in_a = torch.zeros(len(splits), len(pooled), dtype=torch.bool).scatter_(1, splits, True)
    diffs = (pooled * in_a).sum(1) / n - (pooled * ~in_a).sum(1) / len(b)
    return (diffs >= a.mean() - b.mean() - 1e-12).double().mean().item()


def equivalence_p(a, b, margin):
    """Two one-sided permutation tests (TOST) for |mean(a) - mean(b)| < margin: the larger of the p-values
    of "a + margin above b" and "b + margin above a". Small only when the difference is shown to lie
    inside the margin on both sides."""
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    return max(permutation_p(a + margin, b), permutation_p(b + margin, a))


def holm(p_values, alpha=0.05):
    """Holm's step-down correction for a family of tests: [rejected?] in the given order. The k-th
    smallest p (from 0) must be at most alpha / (m - k), and every smaller one rejected before it."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for k, i in enumerate(order):
        if p_values[i] > alpha / (len(p_values) - k):
            break
        rejected[i] = True
    return rejected
