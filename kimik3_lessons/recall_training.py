"""Training a model on MQAR (`recall_task`): the loop lesson 11 trains its tiny KimiK3 with and lesson 12
every mixer (benchmarks/mqar_sweep.py).

- `answer_loss`, `accuracy`: cross-entropy and argmax accuracy at the answer positions only
The recipe is each mixer's reference, flash-linear-attention's layers (fla/layers/kda.py,
gated_deltanet.py, delta_net.py, linear_attn.py):
- `kimi_linear_gate_init_`, `gated_deltanet_gate_parameters`: the gates initialised as those layers
  initialise them (linear attention and DeltaNet have no gate; their beta, where there is one, is a
  sigmoid of a bias-free projection in both)
- `parameter_groups`: AdamW's groups as those layers are trained: no weight decay on the gate parameters
  (`A_log`, `dt_bias`), the norms' scales and the biases
- `TrainConfig`, `train`: AdamW on fresh batches, warm-up and cosine decay, early stop at a target
  held-out accuracy, the final accuracy on other sequences
"""

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kimik3_lessons.recall_task import IGNORE, MQARTask, mqar_batch


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


@torch.no_grad()
def kimi_linear_gate_init_(layer):
    """fla/layers/kda.py's gate init on a `kda.KimiDeltaAttention`: dt_bias = 0, rates exp(A_log) uniform
    in [1, 16]. There A_log is one rate per head (Kimi Linear's Mamba-2 gate); KimiK3's bounded gate has one
    per key channel [K], drawn the same way. At zero input the bounded gate then starts every channel at
    g = -5 sigmoid(0) = -2.5 (lesson 07's own init spreads dt_bias instead). Returns the layer."""
    layer.A_log.copy_(torch.empty_like(layer.A_log).uniform_(1, 16).log())
    layer.dt_bias.zero_()
    return layer


def gated_deltanet_gate_parameters(num_heads):
    """fla/layers/gated_deltanet.py's gate init, one per head: rates A = exp(A_log) uniform in [0, 16],
    step sizes dt = softplus(dt_bias) log-uniform in [0.001, 0.1] (floored at 1e-4). Returns (A_log,
    dt_bias), each [num_heads]."""
    A = torch.empty(num_heads).uniform_(0, 16)
    dt = torch.empty(num_heads).uniform_(math.log(1e-3), math.log(1e-1)).exp().clamp(min=1e-4)
    return A.log(), dt + torch.log(-torch.expm1(-dt))                        # dt_bias = softplus^{-1}(dt)


def parameter_groups(model, weight_decay):
    """AdamW's two groups: `weight_decay` on the matrices (projections, embeddings, convolution filters),
    none on the vectors: the gate parameters `A_log` and `dt_bias`, the norms' scales and the biases, as
    flash-linear-attention trains its layers (a no-weight-decay flag on A_log and dt_bias; biases and
    norms by name). Weight decay would pull a gate parameter toward 0 all through training. Frozen
    parameters are left out."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


@dataclass(frozen=True)
class TrainConfig:
    """AdamW (`parameter_groups`), linear warm-up and cosine decay, a fresh batch per step; the accuracy on
    `eval_size` held-out sequences per task every `eval_every` steps, a stop once every task reaches
    `target`; at the end the accuracy on `test_size` other sequences per task."""
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
    groups = parameter_groups(model, tc.weight_decay)
    params = [p for group in groups for p in group["params"]]
    opt = torch.optim.AdamW(groups, lr=tc.lr)
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
