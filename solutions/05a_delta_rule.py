"""Solutions to lesson 05a's exercises (kept out of the lesson notebook and of the student edition)."""

import torch

from kimik3_lessons import deltanet


def forward_substitution_in_place(A):
    """(I + A)^{-1} as the article computes it: X = -A, then row after row X_i <- -A_i - A_i X (only the
    finished rows j < i count, and row i still holds -A_i), overwriting one buffer; finally add I."""
    X = -A.clone()
    for i in range(1, A.shape[-1]):
        X[..., i, :i] += (X[..., i, None, :i] @ X[..., :i, :i])[..., 0, :]
    return X + torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)


def wy_form(k, v, beta):
    """W = L_inv diag(beta) K and U = L_inv diag(beta) V, with
    L_inv = (I + strict_tril(diag(beta) K K^T))^{-1}."""
    A = torch.tril(beta[..., None] * (k @ k.transpose(-1, -2)), diagonal=-1)
    L_inv = deltanet.forward_substitution(A)
    return L_inv @ (beta[..., None] * k), L_inv @ (beta[..., None] * v)


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _forward_substitution_no_identity(A):
    """Forgets to add I at the end: returns (I + A)^{-1} - I."""
    X = -A.clone()
    for i in range(1, A.shape[-1]):
        X[..., i, :i] += (X[..., i, None, :i] @ X[..., :i, :i])[..., 0, :]
    return X


def _forward_substitution_full_row(A):
    """Adds the identity first, then updates row i with its whole row X[i, :] (the diagonal 1 included)."""
    X = torch.eye(A.shape[-1], dtype=A.dtype) - A
    for i in range(1, A.shape[-1]):
        X[..., i, :i] = (X[..., i, None, :] @ X[..., :, :i])[..., 0, :]
    return X


def _forward_substitution_from_original(A):
    """Computes each row from the original A instead of from the rows already finished."""
    X = -A.clone()
    for i in range(1, A.shape[-1]):
        X[..., i, :i] += (-A[..., i, None, :i] @ -A[..., :i, :i])[..., 0, :]
    return X + torch.eye(A.shape[-1], dtype=A.dtype)


def _forward_substitution_overwrites_A(A):
    """The right numbers, but computed in the caller's A itself (no copy): A is destroyed."""
    X = A.neg_()
    for i in range(1, A.shape[-1]):
        X[..., i, :i] += (X[..., i, None, :i] @ X[..., :i, :i])[..., 0, :]
    return X + torch.eye(A.shape[-1], dtype=A.dtype)


def _forward_substitution_by_inverse(A):
    """torch.linalg.inv(I + A): the right matrix, neither in place nor the article's loop."""
    return torch.linalg.inv(torch.eye(A.shape[-1], dtype=A.dtype) + A)


def _forward_substitution_by_module(A):
    """The module's forward substitution: the right matrix, the loop not written."""
    return deltanet.forward_substitution(A)


def _forward_substitution_appending_rows(A):
    """The module's way, rows appended by torch.cat: the right matrix, not the in-place loop asked for."""
    C = A.shape[-1]
    I = torch.eye(C, dtype=A.dtype).expand(A.shape)
    L_inv = I[..., :1, :]
    for i in range(1, C):
        row = torch.cat([-(A[..., i:i + 1, :i] @ L_inv[..., :, :i]), I[..., i:i + 1, i:]], dim=-1)
        L_inv = torch.cat([L_inv, row], dim=-2)
    return L_inv


def _forward_substitution_neumann(A):
    """(I + A)^{-1} = sum over n < C of (-A)^n (A is nilpotent): the right matrix, no substitution at all."""
    term = torch.eye(A.shape[-1], dtype=A.dtype).expand(A.shape)
    total = term
    for _ in range(1, A.shape[-1]):
        term = -(term @ A)
        total = total + term
    return total


def _forward_substitution_skips_last_row(A):
    """range(1, C - 1): off by one, the last row is never finished."""
    X = -A.clone()
    for i in range(1, A.shape[-1] - 1):
        X[..., i, :i] += (X[..., i, None, :i] @ X[..., :i, :i])[..., 0, :]
    return X + torch.eye(A.shape[-1], dtype=A.dtype)


def _wy_form_beta_on_columns(k, v, beta):
    """A = strict_tril(K K^T diag(beta)): beta_j of the column instead of beta_i of the row."""
    A = torch.tril(k @ k.transpose(-1, -2) * beta[..., None, :], diagonal=-1)
    L_inv = deltanet.forward_substitution(A)
    return L_inv @ (beta[..., None] * k), L_inv @ (beta[..., None] * v)


def _wy_form_with_diagonal(k, v, beta):
    """A = tril(diag(beta) K K^T) with its diagonal: I + A is no longer unit lower-triangular."""
    A = torch.tril(beta[..., None] * (k @ k.transpose(-1, -2)))
    L_inv = torch.linalg.inv(torch.eye(k.shape[-2], dtype=k.dtype) + A)
    return L_inv @ (beta[..., None] * k), L_inv @ (beta[..., None] * v)


def _wy_form_u_without_beta(k, v, beta):
    """U = L_inv V: the betas on the values are missing."""
    A = torch.tril(beta[..., None] * (k @ k.transpose(-1, -2)), diagonal=-1)
    L_inv = deltanet.forward_substitution(A)
    return L_inv @ (beta[..., None] * k), L_inv @ v


def _wy_form_by_module(k, v, beta):
    """deltanet.wy_representation given A: the text allows forward_substitution and nothing else."""
    A = torch.tril(beta[..., None] * (k @ k.mT), diagonal=-1)
    return deltanet.wy_representation(A, beta[..., None] * k, beta[..., None] * v)


def _wy_form_without_beta_in_A(k, v, beta):
    """A = strict_tril(K K^T): beta forgotten inside A (kept on K and V)."""
    L_inv = deltanet.forward_substitution(torch.tril(k @ k.transpose(-1, -2), diagonal=-1))
    return L_inv @ (beta[..., None] * k), L_inv @ (beta[..., None] * v)


WRONG_ANSWERS = {"05a.1": [_forward_substitution_no_identity, _forward_substitution_full_row,
                           _forward_substitution_from_original, _forward_substitution_overwrites_A,
                           _forward_substitution_by_inverse, _forward_substitution_by_module,
                           _forward_substitution_skips_last_row, _forward_substitution_appending_rows,
                           _forward_substitution_neumann],
                 "05a.2": [_wy_form_beta_on_columns, _wy_form_with_diagonal, _wy_form_u_without_beta,
                           _wy_form_by_module, _wy_form_without_beta_in_A]}
