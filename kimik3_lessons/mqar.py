"""Lesson 12: multi-query associative recall (MQAR, Zoology) — what each memory can recall.

    k_1 v_1 k_2 v_2 … k_P v_P  _ _ _ _ _ k_3 _ _ _ _ k_1 _ _ _ k_P _ _ …      (_ = a blank token)
                                          ↑ answer v_3   ↑ answer v_1

Keys from the lower half of the vocabulary, values from the upper half; only the answers count. Every
query sits at least `min_distance` tokens after its pair, beyond any stack of short convolutions: only a
memory of the past (a recurrent state, a KV cache) can answer.

- `MQARTask`, `mqar_layout`, `mqar_batch`: the task; `query_distances`, `check_batch` verify a batch
- `RecallModel(RecallConfig)`: embedding, mixer layers and MLPs, head; the mixer chosen by name (`MIXERS`)
  and built from the lesson modules; `state_numbers`: what each layer holds per sequence
- `train`: AdamW on fresh batches, early stop at a target held-out accuracy (benchmarks/mqar_sweep.py
  trains every mixer with it)
"""

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from kimik3_lessons import deltanet, gated_deltanet, gpt2, kda, linear_attention, mla

IGNORE = -100          # the target of every position that is not an answer (cross_entropy ignores it)
BLANK = 0              # the filler token between the pairs and the queries


@dataclass(frozen=True)
class MQARTask:
    """MQAR sequences: `num_pairs` pairs, then one query per key, each at least `min_distance` tokens after
    its pair's value. Keys come from 1 … V/2 - 1 (0 is the blank), values from V/2 … V - 1."""
    seq_len: int = 64
    num_pairs: int = 4
    vocab_size: int = 128
    min_distance: int = 16

    def __post_init__(self):
        for name, value in self.__dict__.items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.num_pairs > self.vocab_size // 2 - 1:
            raise ValueError(f"num_pairs must be at most vocab_size / 2 - 1 = {self.vocab_size // 2 - 1}")
        if self.num_slots < self.num_pairs:
            raise ValueError(f"seq_len must be at least 3 num_pairs - 1 + min_distance = "
                             f"{3 * self.num_pairs - 1 + self.min_distance}, got {self.seq_len}")

    @property
    def first_query(self):
        """The first position a query may take: min_distance after the last pair's value (at 2P - 1)."""
        return 2 * self.num_pairs - 1 + self.min_distance

    @property
    def num_slots(self):
        return self.seq_len - self.first_query


def mqar_layout(keys, values, queries, seq_len):
    """keys, values, queries [B, P] -> (inputs, targets) [B, seq_len]: pair i at 2i (key) and 2i + 1 (value),
    key i again at queries[:, i], where the target is value i. All else BLANK in the input, IGNORE in the
    targets: only answers are asked for, and no answer appears after its pair."""
    B, P = keys.shape
    inputs = torch.full((B, seq_len), BLANK, dtype=torch.long)
    targets = torch.full((B, seq_len), IGNORE, dtype=torch.long)
    inputs[:, 0:2 * P:2], inputs[:, 1:2 * P:2] = keys, values
    inputs.scatter_(1, queries, keys)
    targets.scatter_(1, queries, values)
    return inputs, targets


def mqar_batch(task, batch_size, generator=None):
    """A batch (inputs [B, T], targets [B, T]) laid out by `mqar_layout`: per sequence P distinct keys and
    P distinct values at random, pair i asked at a random position of its own in first_query … T - 1
    (the queries come in a random order, each >= min_distance after its pair)."""
    B, P, V, half = batch_size, task.num_pairs, task.vocab_size, task.vocab_size // 2

    def distinct(n, size, offset):                   # [B, size]: distinct integers in offset … offset + n - 1
        return torch.rand(B, n, generator=generator).argsort(-1)[:, :size] + offset

    keys, values = distinct(half - 1, P, 1), distinct(V - half, P, half)
    queries = distinct(task.num_slots, P, task.first_query)
    return mqar_layout(keys, values, queries, task.seq_len)


def query_distances(inputs, targets, num_pairs):
    """How far each query sits after its pair: [B, P], entry i = (position of key i's query) - (position of
    value i, 2i + 1). Finds the queries from the targets and which pair each asks from the inputs."""
    keys = inputs[:, 0:2 * num_pairs:2]
    asked = targets != IGNORE
    distances = torch.full(keys.shape, -1, dtype=torch.long)
    for b in range(len(inputs)):
        where = asked[b].nonzero()[:, 0]                                 # the query positions, in order
        pair = (inputs[b, where, None] == keys[b]).long().argmax(-1)     # which pair each one asks for
        distances[b, pair] = where - (2 * pair + 1)
    return distances


def check_batch(task, inputs, targets):
    """AssertionError unless every sequence has P distinct keys (lower half) and values (upper half) in its
    pairs; every key asked once, after the pairs, its value the target; no value outside its pair (no
    leaked answer); every query >= min_distance after its pair. Returns the distances [B, P]."""
    P, half = task.num_pairs, task.vocab_size // 2
    keys, values = inputs[:, 0:2 * P:2], inputs[:, 1:2 * P:2]
    assert ((1 <= keys) & (keys < half)).all() and ((half <= values) & (values < task.vocab_size)).all()
    for row in (keys, values):
        assert (row.sort(-1).values.diff(dim=-1) > 0).all(), "keys and values must be distinct in a sequence"
    asked = targets != IGNORE
    assert (asked.sum(-1) == P).all() and not asked[:, :2 * P].any(), "P queries, all after the pairs"
    assert ((inputs >= half).sum(-1) == P).all(), "a value appears outside its pair: the answer leaks"
    matches = (inputs[:, :, None] == keys[:, None, :]) & asked[:, :, None]     # [B, T, P]: query t asks key i
    assert (matches.sum(-1) == asked.long()).all(), "every query must ask one stored key"
    assert (matches.sum(1) == 1).all(), "every key must be asked exactly once"
    answers = (matches * values[:, None, :]).sum(-1)
    assert (targets[asked] == answers[asked]).all(), "a target is not the value of its key"
    distances = query_distances(inputs, targets, P)
    assert (distances >= task.min_distance).all(), "a query is closer to its pair than min_distance"
    return distances


MIXERS = {   # name: (the mixer of each layer, where it comes from)
    "attention": (("attention",) * 2, "lesson 01: gpt2.CausalSelfAttention (softmax, KV cache)"),
    "linear_attention": (("linear",) * 2, "lessons 02-03: linear_attention.chunked"),
    "deltanet": (("delta",) * 2, "lesson 05: deltanet.chunked"),
    "gated_deltanet": (("gated",) * 2, "lesson 06: gated_deltanet.chunked + mamba2_gate"),
    "kda": (("kda",) * 2, "lesson 07: kda.KimiDeltaAttention, KimiK3's bounded gate"),
    "mla": (("mla",) * 2, "lesson 08: mla.MultiHeadLatentAttention, NoPE, output gate"),
    "hybrid": (("kda", "kda", "kda", "mla"), "lesson 11's 3:1: three KDA layers, then one MLA layer"),
}


@dataclass(frozen=True)
class RecallConfig:
    """A recall model: `mixer` names the stack (`MIXERS`), `num_heads` heads of hidden_size / num_heads.
    The ablations: `conv=False` (short convolutions fixed to the identity), `decay=False` (g = 0)."""
    mixer: str
    vocab_size: int = 128
    hidden_size: int = 64
    num_heads: int = 2
    conv_size: int = 4
    conv: bool = True
    decay: bool = True
    chunk_size: int = 64

    def __post_init__(self):
        if self.mixer not in MIXERS:
            raise ValueError(f"mixer must be one of {', '.join(MIXERS)}, got {self.mixer!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be a multiple of num_heads "
                             f"({self.num_heads})")

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
        return kda.KDAConfig(self.hidden_size, self.num_heads, self.head_dim, gate="bounded",
                             conv_size=self.conv_size, chunk_size=self.chunk_size)


class KDAWithoutDecay(kda.KimiDeltaAttention):
    """The "no decay" ablation of KDA: the same layer with its forget gate removed, g = 0."""

    def log_decay(self, x):
        return x.new_zeros(*x.shape[:2], self.num_heads, self.head_dim)


class DeltaRuleMixer(nn.Module):
    """Linear attention, DeltaNet or gated DeltaNet in KDA's layer (lesson 07): only the write rule differs.

        q, k = L2Norm(SiLU(ShortConv(W x))),  v = SiLU(ShortConv(W_v x)),  beta = sigmoid(W_b x)
        g = mamba2_gate(W_a x)  (one per head, "gated" only; decay=False sets g = 0)
        o = chunked(q / sqrt(K), k, v, [g,] [beta]),   y = W_o( sigmoid(W_g x) * RMSNorm(o) )
    rule: "linear" (lessons 02-03), "delta" (lesson 05), "gated" (lesson 06), each module's `chunked`."""

    def __init__(self, config, rule):
        super().__init__()
        D, H, K, W = config.hidden_size, config.num_heads, config.head_dim, config.conv_size
        self.rule, self.decay, self.chunk_size, self.num_heads, self.head_dim = (
            rule, config.decay, config.chunk_size, H, K)
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(D, H * K, bias=False) for _ in range(3))
        self.q_conv1d, self.k_conv1d, self.v_conv1d = (
            nn.Conv1d(H * K, H * K, W, groups=H * K, bias=False) for _ in range(3))
        self.b_proj = nn.Linear(D, H, bias=False) if rule != "linear" else None
        if rule == "gated":      # Mamba-2 init, as lesson 07: rates in [1, 16], steps in [1e-3, 0.1]
            self.a_proj = nn.Linear(D, H, bias=False)
            self.A_log = nn.Parameter(torch.empty(H).uniform_(1, 16).log())
            dt = torch.empty(H).uniform_(math.log(1e-3), math.log(1e-1)).exp()
            self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))
        self.o_norm = nn.RMSNorm(K)
        self.g_proj = nn.Linear(D, H * K, bias=False)
        self.o_proj = nn.Linear(H * K, D, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        H, K = self.num_heads, self.head_dim
        heads = lambda t: t.view(B, T, H, -1).transpose(1, 2)                   # [B, H, T, K]
        q = heads(kda.short_conv(self.q_proj(x), self.q_conv1d.weight)[0])
        k = heads(kda.short_conv(self.k_proj(x), self.k_conv1d.weight)[0])
        v = heads(F.silu(kda.short_conv(self.v_proj(x), self.v_conv1d.weight)[0]))
        q, k = F.normalize(F.silu(q), dim=-1) * K ** -0.5, F.normalize(F.silu(k), dim=-1)
        if self.rule == "linear":
            o, _ = linear_attention.chunked(q, k, v, chunk_size=self.chunk_size)
        else:
            beta = torch.sigmoid(self.b_proj(x)).transpose(1, 2)                 # [B, H, T]
            if self.rule == "delta":
                o, _ = deltanet.chunked(q, k, v, beta, chunk_size=self.chunk_size)
            else:
                g = gated_deltanet.mamba2_gate(self.a_proj(x), self.A_log, self.dt_bias).transpose(1, 2)
                g = g if self.decay else torch.zeros_like(g)
                o, _ = gated_deltanet.chunked(q, k, v, g, beta, chunk_size=self.chunk_size)
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
        return self.attention(kda.short_conv(x, self.conv1d.weight)[0])[0]


def build_mixer(config, kind):
    """One mixer layer of `kind` (see MIXERS), forward(x [B, T, D]) -> y [B, T, D]."""
    if kind == "attention":
        gpt = gpt2.GPTConfig(num_heads=config.num_heads, hidden_size=config.hidden_size)
        return ConvThen(config, gpt2.CausalSelfAttention(gpt))
    if kind == "mla":
        return ConvThen(config, mla.MultiHeadLatentAttention(config.mla_config()))
    if kind == "kda":
        return (kda.KimiDeltaAttention if config.decay else KDAWithoutDecay)(config.kda_config())
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



def answer_loss(logits, targets):
    """Cross-entropy at the answer positions only (targets IGNORE elsewhere)."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


@torch.no_grad()
def accuracy(model, inputs, targets, batch_size=256):
    """Fraction of answers whose argmax is the right value."""
    right = total = 0
    for i in range(0, len(inputs), batch_size):
        x, y = inputs[i:i + batch_size], targets[i:i + batch_size]
        asked = y != IGNORE
        right += (model(x).argmax(-1)[asked] == y[asked]).sum().item()
        total += asked.sum().item()
    return right / total


@dataclass(frozen=True)
class TrainConfig:
    """AdamW, linear warm-up and cosine decay, a fresh batch per step; the accuracy on `eval_size` held-out
    sequences per task every `eval_every` steps, a stop once every task reaches `target`; at the end the
    accuracy on `test_size` other sequences per task."""
    steps: int = 800
    batch_size: int = 32
    lr: float = 1e-2
    weight_decay: float = 0.1
    warmup: int = 50
    eval_every: int = 50
    eval_size: int = 128
    test_size: int = 1024
    target: float = 0.99


def held_out(tasks, size, seed, device):
    """One fixed set of `size` sequences per task, from its own generator (never a training batch)."""
    return [[t.to(device) for t in mqar_batch(task, size, torch.Generator().manual_seed(seed + i))]
            for i, task in enumerate(tasks)]


def train(model, tasks, train_config=TrainConfig(), seed=0, log=print):
    """Train `model` on one MQARTask or a list, taken in turn (a mix of pair counts, so that the easier ones
    can teach the lookup). Returns {"accuracy": per task on its test set, "curve": [(step,
    mean loss, [held-out accuracy per task])], "steps", "seconds"}. Seeds: `seed` for the training batches,
    10**6 + 1000 seed + i for task i's held-out set, 2·10**6 + 1000 seed + i for its test set; all drawn on
    the CPU, moved to the model's device. `log` gets one line per evaluation (None: silent)."""
    tc, tasks = train_config, [tasks] if isinstance(tasks, MQARTask) else list(tasks)
    device = next(model.parameters()).device
    data = torch.Generator().manual_seed(seed)
    evals = held_out(tasks, tc.eval_size, 10**6 + 1000 * seed, device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=tc.lr, weight_decay=tc.weight_decay)
    schedule = lambda s: min(1.0, (s + 1) / tc.warmup) * 0.5 * (1 + math.cos(math.pi * s / tc.steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    curve, losses, start = [], [], time.perf_counter()
    for step in range(1, tc.steps + 1):
        model.train()
        x, y = (t.to(device) for t in mqar_batch(tasks[step % len(tasks)], tc.batch_size, data))
        loss = answer_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % tc.eval_every == 0 or step == tc.steps:
            model.eval()
            accs = [accuracy(model, *h) for h in evals]
            curve.append((step, sum(losses) / len(losses), accs))
            losses = []
            if log:
                log(f"step {step:>5}: loss {curve[-1][1]:.3f}, held-out accuracy "
                    + " ".join(f"{a:6.1%}" for a in accs))
            if min(accs) >= tc.target:
                break
    model.eval()
    tests = held_out(tasks, tc.test_size, 2 * 10**6 + 1000 * seed, device)
    return {"accuracy": [accuracy(model, *t) for t in tests], "curve": curve, "steps": step,
            "seconds": time.perf_counter() - start}
