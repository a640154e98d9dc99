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


def chunk_states(k, v, chunk_size, initial_state):
    """S_n = S_0 + sum_{m < n} K_m^T V_m for every chunk n: an exclusive prefix sum of the chunk writes."""
    writes = contract.split_chunks(k, chunk_size).transpose(-1, -2) @ contract.split_chunks(v, chunk_size)
    return torch.cat([initial_state[:, :, None], writes], dim=2).cumsum(dim=2)[:, :, :-1]


def intra_chunk_scores(q, k, chunk_size):
    """A_qk [B, H, T, C]: row t holds tril(Q_n K_n^T) of its chunk n, row t - nC of it."""
    T = q.shape[2]
    Q, K = contract.split_chunks(q, chunk_size), contract.split_chunks(k, chunk_size)
    return contract.merge_chunks((Q @ K.transpose(-1, -2)).tril(), T)


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


def _chunk_states_inclusive(k, v, chunk_size, initial_state):
    """An inclusive prefix sum: chunk n's entry already holds chunk n's own write (the state after it)."""
    writes = contract.split_chunks(k, chunk_size).transpose(-1, -2) @ contract.split_chunks(v, chunk_size)
    return initial_state[:, :, None] + writes.cumsum(dim=2)


def _chunk_states_no_initial_state(k, v, chunk_size, initial_state):
    """Starts from zeros: the initial state is dropped."""
    writes = contract.split_chunks(k, chunk_size).transpose(-1, -2) @ contract.split_chunks(v, chunk_size)
    return torch.cat([torch.zeros_like(initial_state[:, :, None]), writes], dim=2).cumsum(dim=2)[:, :, :-1]


def _intra_chunk_scores_strict(q, k, chunk_size):
    """tril(-1): a token does not see itself."""
    Q, K = contract.split_chunks(q, chunk_size), contract.split_chunks(k, chunk_size)
    return contract.merge_chunks((Q @ K.transpose(-1, -2)).tril(-1), q.shape[2])


def _intra_chunk_scores_unmasked(q, k, chunk_size):
    """No mask: a token sees the later tokens of its chunk."""
    Q, K = contract.split_chunks(q, chunk_size), contract.split_chunks(k, chunk_size)
    return contract.merge_chunks(Q @ K.transpose(-1, -2), q.shape[2])


def _intra_chunk_scores_global_mask(q, k, chunk_size):
    """Masks each chunk's scores with the causal mask of the whole sequence, cut into chunk-wide columns:
    row t then holds q_t . k_j for the keys j = 0 ... C - 1 of the sequence, not of its own chunk."""
    A = (q @ k.transpose(-1, -2)).tril()
    return A[..., :chunk_size]


WRONG_ANSWERS = {"03.1": [_chunked_loop_state_after_update, _chunked_loop_strict_mask],
                 "03.2": [_chunk_states_inclusive, _chunk_states_no_initial_state],
                 "03.3": [_intra_chunk_scores_strict, _intra_chunk_scores_unmasked,
                          _intra_chunk_scores_global_mask]}
