"""Training a model on MQAR (`recall_task`): the loop lesson 11 trains its tiny KimiK3 with and lesson 12
every mixer (benchmarks/mqar_sweep.py).

- `answer_loss`, `accuracy`: cross-entropy and argmax accuracy at the answer positions only;
  `answer_kinds`: what the answers were (the right value, another value of the same sequence, a value the
  sequence does not hold, not a value at all): a value of the sequence given to the wrong key, or not
- `parameter_groups`: AdamW's groups as flash-linear-attention trains its layers: no weight decay on the
  gate parameters (`A_log`, `dt_bias`), the norms' scales, the biases and AttnRes's tables of vectors
- `TrainConfig`, `train`: AdamW on fresh batches, warm-up and cosine decay, a fixed budget of steps (or an
  early stop at a target held-out accuracy), the final accuracy on other sequences
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


ANSWER_KINDS = ("right", "other value", "absent value", "not a value")


@torch.no_grad()
def answer_kinds(model, inputs, targets, task, batch_size=256):
    """The share of answers (argmax at the query positions) of each of `ANSWER_KINDS`: the right value,
    another value of the sequence's own pairs (held, bound to the wrong key), a value token the sequence
    does not hold, a token that is no value at all. Values are the upper half of the task's vocabulary, the
    sequence's own ones at 1, 3, …, 2P - 1 (`recall_task.mqar_layout`). Returns {kind: share}."""
    counts = torch.zeros(len(ANSWER_KINDS), device=inputs.device)
    for i in range(0, len(inputs), batch_size):
        x, y = inputs[i:i + batch_size], targets[i:i + batch_size]
        asked = y != IGNORE
        answer = model(x).argmax(-1)
        own = (answer[:, :, None] == x[:, None, 1:2 * task.num_pairs:2]).any(-1)       # [B, T]
        value = answer >= task.vocab_size // 2
        right = answer == y
        kinds = torch.stack([right, own & ~right, value & ~own, ~value])[:, asked]    # [4, answers]
        counts += kinds.sum(-1)
    return dict(zip(ANSWER_KINDS, (counts / counts.sum()).tolist(), strict=True))


def parameter_groups(model, weight_decay):
    """AdamW's two groups: `weight_decay` on the matrices (projections, embeddings, convolution filters),
    none on the vectors: the gate parameters `A_log` and `dt_bias`, the norms' scales and the biases, as
    flash-linear-attention trains its layers (a no-weight-decay flag on A_log and dt_bias; biases and
    norms by name), and none on the tables of vectors a module names in `no_weight_decay_tables` (AttnRes's
    pseudo-queries and key-norm weights, one row per mix point). Weight decay would pull a gate parameter
    toward 0 all through training. Frozen parameters are left out."""
    tables = {id(getattr(m, name)) for m in model.modules()
              for name in getattr(m, "no_weight_decay_tables", ())}
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 and id(p) not in tables else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


@dataclass(frozen=True)
class TrainConfig:
    """AdamW (`parameter_groups`), linear warm-up and cosine decay over `steps`, a fresh batch per step; the
    accuracy on `eval_size` held-out sequences per task every `eval_every` steps (and, with a `target`, a
    stop once every task reaches it; None: the whole budget); at the end the accuracy on `test_size` other
    sequences per task."""
    steps: int = 800
    batch_size: int = 32
    lr: float = 1e-2
    weight_decay: float = 0.1
    warmup: int = 50
    eval_every: int = 50
    eval_size: int = 128
    test_size: int = 1024
    target: float | None = None


def held_out(tasks, size, seed, device):
    """One fixed set of `size` sequences per task, from its own generator (never a training batch)."""
    return [[t.to(device) for t in mqar_batch(task, size, torch.Generator().manual_seed(seed + i))]
            for i, task in enumerate(tasks)]


def train(model, tasks, train_config=TrainConfig(), seed=0, log=print):
    """Train `model` on one MQARTask or a list, taken in turn (a mix of pair counts, so that the easier ones
    can teach the lookup). Returns {"accuracy": per task on its test set, "curve": [(step,
    mean loss, [held-out accuracy per task])], "steps", "seconds", "answers": per task `answer_kinds` on its
    test set}. Seeds: `seed` for the training batches,
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
            if tc.target is not None and min(accs) >= tc.target:
                break
    model.eval()
    tests = held_out(tasks, tc.test_size, 2 * 10**6 + 1000 * seed, device)
    return {"accuracy": [accuracy(model, *t) for t in tests], "curve": curve, "steps": step,
            "seconds": time.perf_counter() - start,
            "answers": [answer_kinds(model, *t, task) for t, task in zip(tests, tasks, strict=True)]}
