"""Solutions to lesson 13's exercises (kept out of the lesson notebook and of the student edition)."""

import torch

from kimik3_lessons.backward import chunked
from kimik3_lessons.exercises import lesson13


def intra_chunk_backward(Q, K, V, dO):
    """O = A V with A = tril(Q K^T): dA = tril(dO V^T), then dQ = dA K, dK = dA^T Q, dV = A^T dO."""
    A, dA = torch.tril(Q @ K.mT), torch.tril(dO @ V.mT)
    return dA @ K, dA.mT @ Q, A.mT @ dO


def walk_backward(A_qk, W, Qd, Kd, decay, dO, dS):
    """Chunk N-1 first: record dS (the gradient of the state the chunk leaves), dU'_n = A_qk,n^T dO_n +
    Kd_n dS, then dS <- d_n * dS + Qd_n^T dO_n - W_n^T dU'_n."""
    dU_new, dS_next = [], []
    for n in reversed(range(dO.shape[2])):
        dS_next.append(dS)
        dU_new.append(A_qk[:, :, n].mT @ dO[:, :, n] + Kd[:, :, n] @ dS)
        dS = decay[:, :, n, :, None] * dS + Qd[:, :, n].mT @ dO[:, :, n] - W[:, :, n].mT @ dU_new[-1]
    return torch.stack(dU_new[::-1], dim=2), torch.stack(dS_next[::-1], dim=2), dS


def _intra_chunk_backward_unmasked(Q, K, V, dO):
    """dA = dO V^T without the mask."""
    A, dA = torch.tril(Q @ K.mT), dO @ V.mT
    return dA @ K, dA.mT @ Q, A.mT @ dO


def _intra_chunk_backward_untransposed(Q, K, V, dO):
    """dK = dA Q and dV = A dO: the transposes forgotten."""
    A, dA = torch.tril(Q @ K.mT), torch.tril(dO @ V.mT)
    return dA @ K, dA @ Q, A @ dO


def _intra_chunk_backward_by_autograd(Q, K, V, dO):
    """Right numbers, by autograd: what the exercise rules out."""
    leaves = [t.clone().requires_grad_() for t in (Q, K, V)]
    O = torch.tril(leaves[0] @ leaves[1].mT) @ leaves[2]
    return torch.autograd.grad((O * dO).sum(), leaves)


def _walk_backward_by_module(A_qk, W, Qd, Kd, decay, dO, dS):
    """The package's own walk: refused by name."""
    F = chunked.Factors(A_qk=A_qk, W=W, U=A_qk.new_zeros(1), Qd=Qd, Kd=Kd, decay=decay)
    return chunked.state_walk_backward(F, dO, dS)


def _walk_backward_without_w(A_qk, W, Qd, Kd, decay, dO, dS):
    """The delta rule's term -W^T dU' forgotten: linear attention's walk."""
    return walk_backward(A_qk, torch.zeros_like(W), Qd, Kd, decay, dO, dS)


WRONG_ANSWERS = {"13.1": [_intra_chunk_backward_unmasked, _intra_chunk_backward_untransposed,
                          _intra_chunk_backward_by_autograd],
                 "13.2": [_walk_backward_without_w, _walk_backward_by_module,
                          # two mistakes the check names, written once in the check
                          lesson13._walk_updates_first, lesson13._walk_decay_after]}
