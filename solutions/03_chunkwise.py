"""Solutions to lesson 03's exercises (kept out of the lesson notebook and of the student edition)."""

import torch

from kimik3_lessons import contract


def chunked_loop(q, k, v, chunk_size, initial_state):
    """O_n = Q_n S + tril(Q_n K_n^T) V_n, then S <- S + K_n^T V_n, chunk after chunk."""
    T = q.shape[2]
    Q, K, V = (contract.split_chunks(x, chunk_size) for x in (q, k, v))      # [B, H, N, C, D]
    S, outputs = initial_state, []
    for n in range(Q.shape[2]):
        Q_n, K_n, V_n = Q[:, :, n], K[:, :, n], V[:, :, n]
        outputs.append(Q_n @ S + (Q_n @ K_n.transpose(-1, -2)).tril() @ V_n)
        S = S + K_n.transpose(-1, -2) @ V_n
    return contract.merge_chunks(torch.stack(outputs, dim=2), T), S


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _chunked_loop_state_after_update(q, k, v, chunk_size, initial_state):
    """Updates S before reading it: each chunk's own tokens are counted twice."""
    T = q.shape[2]
    Q, K, V = (contract.split_chunks(x, chunk_size) for x in (q, k, v))
    S, outputs = initial_state, []
    for n in range(Q.shape[2]):
        Q_n, K_n, V_n = Q[:, :, n], K[:, :, n], V[:, :, n]
        S = S + K_n.transpose(-1, -2) @ V_n
        outputs.append(Q_n @ S + (Q_n @ K_n.transpose(-1, -2)).tril() @ V_n)
    return contract.merge_chunks(torch.stack(outputs, dim=2), T), S


def _chunked_loop_strict_mask(q, k, v, chunk_size, initial_state):
    """tril(-1): a token does not see itself."""
    T = q.shape[2]
    Q, K, V = (contract.split_chunks(x, chunk_size) for x in (q, k, v))
    S, outputs = initial_state, []
    for n in range(Q.shape[2]):
        Q_n, K_n, V_n = Q[:, :, n], K[:, :, n], V[:, :, n]
        outputs.append(Q_n @ S + (Q_n @ K_n.transpose(-1, -2)).tril(-1) @ V_n)
        S = S + K_n.transpose(-1, -2) @ V_n
    return contract.merge_chunks(torch.stack(outputs, dim=2), T), S


WRONG_ANSWERS = {"03.1": [_chunked_loop_state_after_update, _chunked_loop_strict_mask]}
