"""Solutions to lesson 04's exercises (kept out of the lesson notebook and of the student edition)."""

import torch

from kimik3_lessons import associative_memory as am


def delta_recall(keys, values, beta):
    """S <- S + beta k_i^T (v_i - k_i S) for each pair in turn, from S = 0; then every key reads k_i S."""
    S = keys.new_zeros(keys.shape[-1], values.shape[-1])
    for k, v in zip(keys, values, strict=True):
        S = S + beta * torch.outer(k, v - k @ S)
    return keys @ S


def householder_write(S, k, v, beta):
    """(I - beta k^T k) S + beta k^T v, with the D x D matrix built explicitly."""
    I = torch.eye(k.shape[-1], dtype=S.dtype)
    return (I - beta * torch.outer(k, k)) @ S + beta * torch.outer(k, v)


def error_after_passes(keys, values, rule, passes):
    """`passes` rounds of all writes, the memory carried from round to round; the mean read-back error."""
    S = None
    for _ in range(passes):
        S = am.store(keys, values, rule, S=S)
    return am.recall_error(S, keys, values).mean().item()


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _delta_recall_writes_v(keys, values, beta):
    """Writes beta v instead of beta (v - k S): additive memory, scaled."""
    S = keys.new_zeros(keys.shape[-1], values.shape[-1])
    for k, v in zip(keys, values, strict=True):
        S = S + beta * torch.outer(k, v)
    return keys @ S


def _delta_recall_no_beta(keys, values, beta):
    """Forgets beta: every write is a full replacement."""
    S = keys.new_zeros(keys.shape[-1], values.shape[-1])
    for k, v in zip(keys, values, strict=True):
        S = S + torch.outer(k, v - k @ S)
    return keys @ S


def _delta_recall_reads_at_write_time(keys, values, beta):
    """Reads each key right after its own write, not from the final memory."""
    S, reads = keys.new_zeros(keys.shape[-1], values.shape[-1]), []
    for k, v in zip(keys, values, strict=True):
        S = S + beta * torch.outer(k, v - k @ S)
        reads.append(k @ S)
    return torch.stack(reads)


def _delta_recall_by_store(keys, values, beta):
    """The right read-backs, from the module's am.store: nothing written by hand."""
    return keys @ am.store(keys, values, "delta", beta=beta)


def _delta_recall_transposed_memory(keys, values, beta):
    """Keeps the memory as [D_v, D] (value rows): v^T k instead of k^T v."""
    S = keys.new_zeros(values.shape[-1], keys.shape[-1])
    for k, v in zip(keys, values, strict=True):
        S = S + beta * torch.outer(v - k @ S, k)
    return keys @ S


def _householder_write_beta_missing_on_write(S, k, v, beta):
    """Erases a fraction beta but writes k^T v in full."""
    I = torch.eye(k.shape[-1], dtype=S.dtype)
    return (I - beta * torch.outer(k, k)) @ S + torch.outer(k, v)


def _householder_write_erase_after_write(S, k, v, beta):
    """Writes first, then erases: (I - beta k^T k)(S + beta k^T v)."""
    I = torch.eye(k.shape[-1], dtype=S.dtype)
    return (I - beta * torch.outer(k, k)) @ (S + beta * torch.outer(k, v))


def _householder_write_by_delta_write(S, k, v, beta):
    """The module's delta write: the right memory, the Householder matrix never built."""
    return am.delta_write(S, k, v, beta)


def _householder_write_erase_without_beta(S, k, v, beta):
    """Erases all of k's old value, (I - k^T k) S, whatever beta: right only for beta = 1."""
    I = torch.eye(k.shape[-1], dtype=S.dtype)
    return (I - torch.outer(k, k)) @ S + beta * torch.outer(k, v)


def _error_after_passes_fresh_memory(keys, values, rule, passes):
    """Starts every round from an empty memory: the result is always the one-round error."""
    for _ in range(passes):
        S = am.store(keys, values, rule)
    return am.recall_error(S, keys, values).mean().item()


def _error_after_passes_one_short(keys, values, rule, passes):
    """Off by one: passes - 1 rounds after the first."""
    S = am.store(keys, values, rule)
    for _ in range(passes - 2):
        S = am.store(keys, values, rule, S=S)
    return am.recall_error(S, keys, values).mean().item()


def _error_after_passes_worst_pair(keys, values, rule, passes):
    """The largest read-back error instead of the mean."""
    S = None
    for _ in range(passes):
        S = am.store(keys, values, rule, S=S)
    return am.recall_error(S, keys, values).max().item()


def _householder_write_without_the_matrix(S, k, v, beta):
    """S + beta k^T (v - kS): the right memory, the D x D matrix never built."""
    return S + beta * torch.outer(k, v - k @ S)


WRONG_ANSWERS = {
    "04.1": [_delta_recall_writes_v, _delta_recall_no_beta, _delta_recall_reads_at_write_time,
             _delta_recall_by_store, _delta_recall_transposed_memory],
    "04.2": [_householder_write_beta_missing_on_write, _householder_write_erase_after_write,
             _householder_write_by_delta_write, _householder_write_erase_without_beta,
             _householder_write_without_the_matrix],
    "04.3": [_error_after_passes_fresh_memory, _error_after_passes_one_short, _error_after_passes_worst_pair],
}
