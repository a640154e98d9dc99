"""Multi-query associative recall (MQAR, Zoology), the task: lesson 11 trains its tiny KimiK3 on it and
lesson 12 every mixer of the course (`mqar`).

    k_1 v_1 k_2 v_2 … k_P v_P  _ _ _ _ _ k_3 _ _ _ _ k_1 _ _ _ k_P _ _ …      (_ = a blank token)
                                          ↑ answer v_3   ↑ answer v_1

Keys from the lower half of the vocabulary, values from the upper half; only the answers count. Every
query sits at least `min_distance` tokens after its pair, beyond any stack of short convolutions: only a
memory of the past (a recurrent state, a KV cache) can answer.

- `MQARTask`, `mqar_layout`, `mqar_batch`: the task; `query_distances`, `check_batch` verify a batch
"""

from dataclasses import dataclass

import torch

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
