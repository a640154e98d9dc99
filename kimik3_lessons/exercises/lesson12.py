"""Lesson 12's exercises: lay out MQAR sequences, measure how far each query sits from its pair, count what
each mixer holds."""

import random

import torch

from kimik3_lessons import mqar
from kimik3_lessons.exercises import Wrong, attempt, exercise, expect_pair, hint, part


def random_pairs(B, P, seq_len, vocab_size=64, first_query=None):
    """Fresh keys, values [B, P] (distinct per sequence, disjoint halves) and query positions [B, P]."""
    half = vocab_size // 2
    first_query = 2 * P if first_query is None else first_query
    pick = lambda n, offset: torch.rand(B, n).argsort(-1)[:, :P] + offset
    return pick(half - 1, 1), pick(vocab_size - half, half), pick(seq_len - first_query, first_query)


@exercise("12.1", "mqar_layout", "lay out MQAR sequences: inputs and answer targets", difficulty=1,
          parts=("inputs", "targets"), forbid=("recall_task.mqar_layout", "recall_task.mqar_batch"))
def check_mqar_layout(mqar_layout):
    B, P, T = random.randint(2, 5), random.randint(2, 8), random.randint(40, 70)
    keys, values, queries = random_pairs(B, P, T)
    ref_in, ref_tg = mqar.mqar_layout(keys, values, queries, T)
    out = attempt(mqar_layout, keys.clone(), values.clone(), queries.clone(), T)
    out = expect_pair("a pair (inputs, targets)", out)
    for what, ref, got, how in (
            ("inputs", ref_in, out[0], hint("pair i at positions 2i, 2i + 1; key i again at queries[:, i]; "
                                            "BLANK everywhere else, and never the value after the pairs.")),
            ("targets", ref_tg, out[1], hint("the value of key i at the position of its query, IGNORE "
                                             "elsewhere (the target sits at the query itself, not one "
                                             "position later)."))):
        with part(what):
            if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(ref.shape):
                shape = list(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
                raise Wrong(f"{what} should be a tensor [B, seq_len] = {list(ref.shape)}, got {shape}")
            if not torch.equal(got.long(), ref):
                b, t = (got.long() != ref).nonzero()[0].tolist()
                raise Wrong(f"{what}[{b}, {t}] is {got[b, t].item()}, expected {ref[b, t].item()}", hint=how)
    return f"{B} sequences of {T} tokens with {P} pairs laid out exactly"


@exercise("12.2", "query_distances", "how far each query sits after its pair", difficulty=2,
          forbid=("recall_task.query_distances",))
def check_query_distances(query_distances):
    P = random.randint(3, 8)
    task = mqar.MQARTask(seq_len=random.randint(3 * P + 20, 80), num_pairs=P, vocab_size=64,
                         min_distance=random.randint(4, 20))
    in_order = True
    while in_order:                          # until some queries come in another order than their pairs
        inputs, targets = mqar.mqar_batch(task, random.randint(3, 6))
        ref = mqar.query_distances(inputs, targets, P)
        in_order = bool(((ref + 2 * torch.arange(P) + 1).diff(dim=-1) > 0).all())
    out = attempt(query_distances, inputs.clone(), targets.clone(), P)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(ref.shape):
        shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise Wrong(f"return a tensor [B, num_pairs] = {list(ref.shape)}, got {shape}")
    if not torch.equal(out.long(), ref):
        b, i = (out.long() != ref).nonzero()[0].tolist()
        raise Wrong(f"sequence {b}, pair {i}: got {out[b, i].item()}, expected {ref[b, i].item()}", hint=hint(
            "entry i belongs to pair i (key inputs[:, 2i]), not to the i-th query in order, and the distance "
            "runs from the pair's value, at 2i + 1, to the query."))
    return f"distances from {ref.min().item()} to {ref.max().item()} tokens, right for {ref.numel()} queries"


@exercise("12.3", "state_numbers", "what each mixer holds per sequence", difficulty=1,
          forbid=("mqar.state_numbers",))
def check_state_numbers(state_numbers):
    checked = []
    for mixer in mqar.MIXERS:
        H = random.choice((2, 4))
        config = mqar.RecallConfig(mixer, hidden_size=H * random.choice((8, 16, 32)), num_heads=H,
                                   conv_size=random.randint(2, 5))
        seq_len = random.randint(10, 300)
        ref = mqar.state_numbers(config, seq_len)
        out = attempt(state_numbers, config, seq_len)
        if not isinstance(out, (list, tuple)) or len(out) != len(ref):
            raise Wrong(f"return a list with one number per layer ({len(ref)} for {mixer}), got "
                        f"{str(out)[:60]}")
        for l, (kind, a, b) in enumerate(zip(config.layers, out, ref, strict=True)):
            if a != b:
                raise Wrong(f"{mixer} (hidden {config.hidden_size}, {H} heads, conv {config.conv_size}, "
                            f"{seq_len} tokens): layer {l + 1} ({kind}) holds {b:,} numbers, you counted "
                            f"{a:,}", hint=hint("attention caches a key and a value per head and token, MLA "
                                                "d_c + d_r per token, a recurrent mixer one K × K state per "
                                                "head; add the convolutions' tails."))
        checked.append(mixer)
    return f"every layer of {len(checked)} mixers counted right"
