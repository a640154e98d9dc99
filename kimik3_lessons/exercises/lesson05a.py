"""Lesson 05a's exercises: forward substitution as the article writes it (in place), and the WY form of a
chunk."""

import random

import torch
import torch.nn.functional as F

from kimik3_lessons import deltanet
from kimik3_lessons.exercises import (
    Watch,
    Wrong,
    attempt,
    exercise,
    expect_close,
    expect_pair,
    expect_tensor,
    hint,
    known_mistake,
    part,
)

F64 = torch.float64
SOLVERS = ("linalg_inv_ex", "linalg_inv", "inverse", "_linalg_solve_ex", "linalg_solve",
           "linalg_solve_triangular", "triangular_solve", "linalg_lu_factor_ex", "linalg_lu_solve",
           "cholesky_inverse", "linalg_pinv", "linalg_lstsq")


def _chunk(N, C, K, V):
    """N chunks of DeltaNet inputs: unit keys, values, betas in (0, 1)."""
    k = F.normalize(torch.randn(N, C, K, dtype=F64), dim=-1)
    return k, torch.randn(N, C, V, dtype=F64), torch.rand(N, C, dtype=F64)


def _strict_tril(k, beta):
    return torch.tril(beta[..., None] * (k @ k.mT), diagonal=-1)


@exercise("05a.1", "forward_substitution_in_place", "forward substitution as the article writes it, in place",
          difficulty=2, forbid=("deltanet.forward_substitution", "deltanet.blocked_forward_substitution"))
def check_forward_substitution_in_place(forward_substitution_in_place):
    N, C = 3, random.randint(9, 40)
    k, _, beta = _chunk(N, C, 16, 1)
    A_delta = _strict_tril(k, beta)                                          # what DeltaNet inverts
    A_random = torch.randn(N, C, C, dtype=F64).tril(-1) * (0.5 / C**0.5)    # any strictly lower-triangular A
    worst_rows, worst_inv = 0.0, 0.0
    for what, A in (("a DeltaNet chunk's A", A_delta), ("a random strictly lower-triangular A", A_random)):
        given = A.clone()
        with Watch(forbid_ops=SOLVERS) as watch:
            out = attempt(forward_substitution_in_place, given)
        watch.verdict(hint("no solver: copy -A into X, then for i = 1 ... C - 1 overwrite X[..., i, :i] with "
                           "-A_i - A_i X (the finished rows j < i only), and add I at the end."),
                      "`forward_substitution_in_place`")
        if not torch.equal(given, A):
            raise Wrong("your function changed the A it was given", hint=hint(
                "work in place on a copy (A.clone()), the caller still needs A (DeltaNet builds W and U from "
                "it, and checks compare with it)."))
        expect_tensor("(I + A)^{-1}", out, A.shape, dtype=F64)
        ref = deltanet.forward_substitution(A)
        I = torch.eye(C, dtype=F64)
        known = [(hint("the identity is missing: the loop leaves X = (I + A)^{-1} - I in the buffer; add I "
                       "at the end"), ref - I),
                 (hint("row i was updated with its whole row, diagonal included, after the identity was "
                       "added: the sum runs over the finished rows j < i only (use X[i, :i], not X[i, :])"),
                  _full_row(A)),
                 (hint("each row was computed from the original A, not from the rows already finished: in "
                       "place, row i must read the rows j < i as they are *after* their own update"),
                  _from_original(A))]
        known_mistake(f"(I + A)^{{-1}} for {what}", ref, out, known)
        how = hint("keep X = (I + A)^{-1} - I in a copy of -A. Row i of X is -A_i - A_i X, and A_i is zero "
                   "from column i on, so only the finished rows j < i count; add I at the end.")
        worst_rows = max(worst_rows, expect_close(f"(I + A)^{{-1}} for {what}", ref, out, hint=how))
        inverse = torch.linalg.inv(I + A)
        worst_inv = max(worst_inv, expect_close(f"(I + A)^{{-1}} against torch.linalg.inv, for {what}",
                                                inverse, out, rtol=1e-8, hint=how))
        joined = watch.ops["cat"] + watch.ops["stack"]
        if joined or watch.writes < C - 1:
            raise Wrong(f"`forward_substitution_in_place` is not the in-place loop: it wrote into a tensor "
                        f"in place {watch.writes} times for C = {C} (the loop writes its C - 1 = {C - 1} "
                        f"rows) and joined tensors {joined} times (the loop, never)",
                        hint=hint("one buffer, rows overwritten: X = -A.clone(), then X[..., i, :i] = ... "
                                  "for i = 1 ... C - 1; no torch.cat or torch.stack, no power series."))
    return (f"C = {C}: equals deltanet.forward_substitution (relative error {worst_rows:.0e}) and "
            f"torch.linalg.inv(I + A) ({worst_inv:.0e}), and A is left as it was")


def _full_row(A):
    """Identity first, then row i updated with its whole row (diagonal included)."""
    X = torch.eye(A.shape[-1], dtype=A.dtype) - A
    for i in range(1, A.shape[-1]):
        X[..., i, :i] = (X[..., i, None, :] @ X[..., :, :i])[..., 0, :]
    return X


def _from_original(A):
    """Every row from the original A, not from the finished rows."""
    X = -A.clone()
    for i in range(1, A.shape[-1]):
        X[..., i, :i] = -A[..., i, :i] + (-A[..., i, None, :i] @ -A[..., :i, :i])[..., 0, :]
    return X + torch.eye(A.shape[-1], dtype=A.dtype)


@exercise("05a.2", "wy_form", "the WY form of a chunk: W and U", difficulty=2, parts=("W", "U"),
          forbid=("deltanet.wy_representation", "deltanet.chunked", "deltanet.triton_chunked",
                  "deltanet.recurrent", "deltanet.deltanet_step", "deltanet.chunk_state_scan",
                  "deltanet.householder_product"))
def check_wy_form(wy_form):
    N, C, K, V = 4, random.randint(5, 24), 12, 7                # K != V catches a transposed product
    k, v, beta = _chunk(N, C, K, V)
    W_ref, U_ref = deltanet.wy_representation(_strict_tril(k, beta), beta[..., None] * k, beta[..., None] * v)
    out = attempt(wy_form, k.clone(), v.clone(), beta.clone())
    W, U = expect_pair("a pair (W, U)", out)
    L_inv = deltanet.forward_substitution(_strict_tril(k, beta))
    wrong_side = deltanet.forward_substitution(torch.tril(k @ k.mT * beta[..., None, :], -1))
    with_diagonal = torch.linalg.inv(torch.eye(C, dtype=F64)
                                     + torch.tril(beta[..., None] * (k @ k.mT)))
    bk = beta[..., None] * k
    known_W = [(hint("beta is on the wrong side of K K^T: A_ij = beta_i (k_i . k_j), row i scaled by its own "
                     "beta (diag(beta) K K^T), not column j"), wrong_side @ bk),
               (hint("A keeps its diagonal: A = strict_tril(diag(beta) K K^T), below the diagonal only "
                     "(tril(..., -1))"), with_diagonal @ bk),
               (hint("beta is missing on the right: W = L_inv diag(beta) K, not L_inv K"), L_inv @ k)]
    with part("W"):
        known_mistake("W", W_ref, W, known_W)
        err_W = expect_close("W", W_ref, W, hint=hint("A = tril(diag(beta) K K^T, -1), L_inv = (I + A)^{-1} "
                                                      "(deltanet.forward_substitution), W = L_inv (beta[..., "
                                                      "None] * K)."))
        P = deltanet.householder_product(k, beta)
        err_P = expect_close("I - K^T W against the product of the chunk's Householder factors", P,
                             torch.eye(K, dtype=F64) - k.mT @ W)
    with part("U"):
        known_mistake("U", U_ref, U, [(hint("beta is missing, U = L_inv diag(beta) V, not L_inv V"),
                                       L_inv @ v)])
        err_U = expect_close("U", U_ref, U,
                             hint=hint("U = L_inv (beta[..., None] * V), with the L_inv of W."))
    return (f"{N} chunks of C = {C}: W and U equal wy_representation's ({err_W:.0e}, {err_U:.0e}), and I - "
            f"K^T W = H_C ... H_1 ({err_P:.0e})")
