"""Solutions to lesson 05b's exercises (kept out of the lesson notebook and of the student edition)."""

import torch

from kimik3_lessons import deltanet
from kimik3_lessons.exercises import lesson05b


def state_pass(W, U, K, S):
    """Chunk after chunk: S_n = S (recorded), U'_n = U_n - W_n S, then S <- S + K_n^T U'_n."""
    S_n, U_new = [], []
    for n in range(U.shape[2]):
        S_n.append(S)
        U_new.append(U[:, :, n] - W[:, :, n] @ S)
        S = S + K[:, :, n].transpose(-1, -2) @ U_new[-1]
    return torch.stack(S_n, dim=2), torch.stack(U_new, dim=2), S


def prefill_then_decode(q, k, v, beta, n_prefill):
    """deltanet.chunked over the first n_prefill tokens, then deltanet_step from its final state."""
    p = n_prefill
    o_prefill, S = deltanet.chunked(q[:, :, :p], k[:, :, :p], v[:, :, :p], beta[:, :, :p], chunk_size=16)
    outputs = [o_prefill]
    for t in range(p, q.shape[2]):
        o_t, S = deltanet.deltanet_step(S, q[:, :, t], k[:, :, t], v[:, :, t], beta[:, :, t])
        outputs.append(o_t[:, :, None])
    return torch.cat(outputs, dim=2)


def forward_substitution_masked(A):
    """(I + A)^{-1} of a [C, C] tile as forward_substitution_tile computes it: no row indexing, only masks
    and sums. Step i picks row i of A, forms A_i L_inv, and writes e_i - A_i L_inv into row i."""
    C = A.shape[-1]
    r = torch.arange(C, device=A.device)
    L_inv = torch.eye(C, dtype=A.dtype, device=A.device)
    for i in range(1, C):
        A_i = torch.where(r[:, None] == i, A, 0).sum(0)                       # row i of A, [C]
        A_i_L_inv = (A_i[:, None] * L_inv).sum(0)                              # A_i L_inv, [C]
        L_inv = torch.where(r[:, None] == i, L_inv - A_i_L_inv[None, :], L_inv)
    return L_inv


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _state_pass_uncorrected_update(W, U, K, S):
    """Computes U' but adds K^T U (the uncorrected writes) to the state."""
    S_n, U_new = [], []
    for n in range(U.shape[2]):
        S_n.append(S)
        U_new.append(U[:, :, n] - W[:, :, n] @ S)
        S = S + K[:, :, n].transpose(-1, -2) @ U[:, :, n]
    return torch.stack(S_n, dim=2), torch.stack(U_new, dim=2), S


def _state_pass_records_after_update(W, U, K, S):
    """Records each chunk's state after its update instead of the state it starts from."""
    S_n, U_new = [], []
    for n in range(U.shape[2]):
        U_new.append(U[:, :, n] - W[:, :, n] @ S)
        S = S + K[:, :, n].transpose(-1, -2) @ U_new[-1]
        S_n.append(S)
    return torch.stack(S_n, dim=2), torch.stack(U_new, dim=2), S


def _state_pass_zero_start(W, U, K, S):
    """Ignores the incoming state and starts from zeros."""
    return state_pass(W, U, K, torch.zeros_like(S))


def _state_pass_by_module(W, U, K, S):
    """deltanet.chunk_state_scan itself: the right tensors, the walk not written."""
    return deltanet.chunk_state_scan(W, U, K, S)


def _state_pass_in_place(W, U, K, S):
    """S += K_n^T U'_n in place: every recorded S_n is the same tensor (the final state), and the caller's
    S is overwritten."""
    S_n, U_new = [], []
    for n in range(U.shape[2]):
        S_n.append(S)
        U_new.append(U[:, :, n] - W[:, :, n] @ S)
        S += K[:, :, n].transpose(-1, -2) @ U_new[-1]
    return torch.stack(S_n, dim=2), torch.stack(U_new, dim=2), S


def _prefill_then_decode_by_recurrent(q, k, v, beta, n_prefill):
    """deltanet.recurrent(...)[0]: the right outputs, with no prefill and no decode step."""
    return deltanet.recurrent(q, k, v, beta)[0]


def _prefill_then_decode_all_chunked(q, k, v, beta, n_prefill):
    """The chunked form over the whole sequence: the right outputs, no decode step."""
    return deltanet.chunked(q, k, v, beta)[0]


def _prefill_then_decode_one_more_prefilled(q, k, v, beta, n_prefill):
    """Off by one: prefills n_prefill + 1 tokens and decodes one step fewer (the outputs still match)."""
    return prefill_then_decode(q, k, v, beta, n_prefill + 1)


def _prefill_then_decode_zero_state(q, k, v, beta, n_prefill):
    """Decodes from an empty state, as if the prompt had not been read."""
    p = n_prefill
    o_prefill, S = deltanet.chunked(q[:, :, :p], k[:, :, :p], v[:, :, :p], beta[:, :, :p])
    S = torch.zeros_like(S)
    outputs = [o_prefill]
    for t in range(p, q.shape[2]):
        o_t, S = deltanet.deltanet_step(S, q[:, :, t], k[:, :, t], v[:, :, t], beta[:, :, t])
        outputs.append(o_t[:, :, None])
    return torch.cat(outputs, dim=2)


def _prefill_then_decode_state_not_carried(q, k, v, beta, n_prefill):
    """Every decode step starts from the prefill's state: the steps forget each other's writes."""
    p = n_prefill
    o_prefill, S = deltanet.chunked(q[:, :, :p], k[:, :, :p], v[:, :, :p], beta[:, :, :p])
    outputs = [o_prefill]
    for t in range(p, q.shape[2]):
        o_t, _ = deltanet.deltanet_step(S, q[:, :, t], k[:, :, t], v[:, :, t], beta[:, :, t])
        outputs.append(o_t[:, :, None])
    return torch.cat(outputs, dim=2)


def _forward_substitution_masked_no_identity(A):
    """Starts from zeros: L_inv = 0 stays 0 but for the rows it writes."""
    C = A.shape[-1]
    r = torch.arange(C)
    L_inv = torch.zeros(C, C, dtype=A.dtype)
    for i in range(1, C):
        A_i = torch.where(r[:, None] == i, A, 0).sum(0)
        L_inv = torch.where(r[:, None] == i, L_inv - (A_i[:, None] * L_inv).sum(0)[None, :], L_inv)
    return L_inv


def _forward_substitution_masked_row_indexing(A):
    """The right inverse, row by row with indexing (L_inv[i] = e_i - A[i] @ L_inv): what a tile cannot do."""
    C = A.shape[-1]
    L_inv = torch.eye(C, dtype=A.dtype)
    for i in range(1, C):
        L_inv[i] = L_inv[i] - A[i] @ L_inv
    return L_inv


def _forward_substitution_masked_by_module(A):
    """deltanet.forward_substitution itself."""
    return deltanet.forward_substitution(A)


def _forward_substitution_masked_skips_last_row(A):
    """range(1, C - 1): off by one, row C - 1 keeps e_{C-1}."""
    C = A.shape[-1]
    r = torch.arange(C)
    L_inv = torch.eye(C, dtype=A.dtype)
    for i in range(1, C - 1):
        A_i = torch.where(r[:, None] == i, A, 0).sum(0)
        L_inv = torch.where(r[:, None] == i, L_inv - (A_i[:, None] * L_inv).sum(0)[None, :], L_inv)
    return L_inv


WRONG_ANSWERS = {"05b.1": [_state_pass_uncorrected_update, _state_pass_records_after_update,
                           _state_pass_zero_start, _state_pass_by_module, _state_pass_in_place],
                 "05b.2": [_prefill_then_decode_zero_state, _prefill_then_decode_state_not_carried,
                           _prefill_then_decode_by_recurrent, _prefill_then_decode_all_chunked,
                           _prefill_then_decode_one_more_prefilled],
                 "05b.3": [_forward_substitution_masked_no_identity,
                           _forward_substitution_masked_row_indexing,
                           _forward_substitution_masked_by_module,
                           _forward_substitution_masked_skips_last_row,
                           # two mistakes the check names, written once in the check
                           lesson05b.every_row_updated, lesson05b.row_summed_over_columns]}
