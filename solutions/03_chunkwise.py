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


def _chunked_loop_by_recurrence(q, k, v, chunk_size, initial_state):
    """The module's recurrence: the right numbers, no chunks at all."""
    from kimik3_lessons import linear_attention
    return linear_attention.recurrent(q, k, v, initial_state=initial_state)


def _chunked_loop_by_chunked(q, k, v, chunk_size, initial_state):
    """The module's chunked form: the right numbers, the loop not written."""
    from kimik3_lessons import linear_attention
    return linear_attention.chunked(q, k, v, chunk_size=chunk_size, initial_state=initial_state)


def _chunked_loop_no_initial_state(q, k, v, chunk_size, initial_state):
    """Starts the state from zeros: the initial state is dropped."""
    return chunked_loop(q, k, v, chunk_size, torch.zeros_like(initial_state))


def _chunked_loop_unpadded(q, k, v, chunk_size, initial_state):
    """Reshapes [T] into [N, C] without padding: fails when T is not a multiple of C."""
    B, H, T, _ = q.shape
    Q, K, V = (x.reshape(B, H, T // chunk_size, chunk_size, x.shape[-1]) for x in (q, k, v))
    S, outputs = initial_state, []
    for n in range(Q.shape[2]):
        outputs.append(Q[:, :, n] @ S + (Q[:, :, n] @ K[:, :, n].transpose(-1, -2)).tril() @ V[:, :, n])
        S = S + K[:, :, n].transpose(-1, -2) @ V[:, :, n]
    return torch.cat(outputs, dim=2), S


def _chunk_states_with_loop(k, v, chunk_size, initial_state):
    """The right states, by a loop over the chunks (the exercise asks for none)."""
    K, V = contract.split_chunks(k, chunk_size), contract.split_chunks(v, chunk_size)
    S, states = initial_state, []
    for n in range(K.shape[2]):
        states.append(S)
        S = S + K[:, :, n].transpose(-1, -2) @ V[:, :, n]
    return torch.stack(states, dim=2)


def _chunk_states_chunks_of_16(k, v, chunk_size, initial_state):
    """Ignores chunk_size and cuts chunks of 16 (right at that size only)."""
    return chunk_states(k, v, 16, initial_state)


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


def _intra_chunk_scores_transposed(q, k, chunk_size):
    """tril(K_n Q_n^T): rows and columns swapped, row t holds k_t . q_j."""
    Q, K = contract.split_chunks(q, chunk_size), contract.split_chunks(k, chunk_size)
    return contract.merge_chunks((K @ Q.transpose(-1, -2)).tril(), q.shape[2])


def _intra_chunk_scores_global_mask(q, k, chunk_size):
    """Masks each chunk's scores with the causal mask of the whole sequence, cut into chunk-wide columns:
    row t then holds q_t . k_j for the keys j = 0 ... C - 1 of the sequence, not of its own chunk."""
    A = (q @ k.transpose(-1, -2)).tril()
    return A[..., :chunk_size]


WRONG_ANSWERS = {"03.1": [_chunked_loop_state_after_update, _chunked_loop_strict_mask,
                          _chunked_loop_by_recurrence, _chunked_loop_by_chunked,
                          _chunked_loop_no_initial_state, _chunked_loop_unpadded],
                 "03.2": [_chunk_states_inclusive, _chunk_states_no_initial_state, _chunk_states_with_loop,
                          _chunk_states_chunks_of_16],
                 "03.3": [_intra_chunk_scores_strict, _intra_chunk_scores_unmasked,
                          _intra_chunk_scores_global_mask, _intra_chunk_scores_transposed]}
