"""Lesson 05b's exercises: the state pass across chunks, prefill then decode, and forward substitution on a
tile (rows picked by masks, as the Triton kernel must)."""

import random

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kimik3_lessons import contract, deltanet
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
FORMS = ("deltanet.recurrent", "deltanet.chunked", "deltanet.triton_chunked")
ROW_PICKING = ("select", "slice", "index", "index_put", "index_select", "gather", "take", "narrow", "unbind",
               "split", "split_with_sizes", "masked_select", "scatter", "masked_scatter")
SOLVERS = ("linalg_inv_ex", "linalg_inv", "inverse", "_linalg_solve_ex", "linalg_solve",
           "linalg_solve_triangular", "triangular_solve", "linalg_lu_factor_ex", "linalg_lu_solve",
           "cholesky_inverse", "linalg_pinv")


def _inputs(B, H, T, K, V):
    q, k = (F.normalize(torch.randn(B, H, T, K, dtype=F64), dim=-1) for _ in range(2))
    return q, k, torch.randn(B, H, T, V, dtype=F64), torch.rand(B, H, T, dtype=F64)


@exercise("05b.1", "state_pass", "the state pass across chunks: U' = U - W S, S <- S + K^T U'", difficulty=2,
          parts=("S_n", "U'", "the final state"),
          forbid=FORMS + ("deltanet.chunk_state_scan", "chunk_kernels.launch_chunked",
                          "chunk_kernels.launch"))
def check_state_pass(state_pass):
    B, H, K, V = 2, 2, 8, 5
    C = random.choice([4, 8])
    T = random.randint(3 * C + 1, 5 * C - 1)                       # the last chunk is padded
    _, k, v, beta = _inputs(B, H, T, K, V)
    k, v, beta = (contract.split_chunks(x, C) for x in (k, v, beta))
    k_beta = beta[..., None] * k
    W, U = deltanet.wy_representation(torch.tril(k_beta @ k.mT, diagonal=-1), k_beta, beta[..., None] * v)
    S0 = torch.randn(B, H, K, V, dtype=F64)
    S_n_ref, U_new_ref, S_ref = deltanet.chunk_state_scan(W, U, k, S0)
    given = S0.clone()
    out = attempt(state_pass, W.clone(), U.clone(), k.clone(), given)
    S_n, U_new, S = expect_pair("three tensors (S_n, U', S_final)", out, 3)
    if not torch.equal(given, S0):
        raise Wrong("your function changed the S it was given (an in-place update such as S += ...): every "
                    "S_n you recorded is then the same tensor, and the caller's state is gone",
                    hint=hint("S = S + K_n^T U'_n makes a new tensor; the recorded S_n stay as they were."))
    writes = k.mT @ U                             # K_n^T U_n: the uncorrected writes
    before = torch.cat([torch.zeros_like(writes[:, :, :1]), writes.cumsum(2)[:, :, :-1]], dim=2)
    uncorrected = S0[:, :, None] + before
    known = [(hint("the state was updated with U, not with the corrected U' = U - W S: S <- S + K^T U'"),
              uncorrected),
             (hint("S_n is the state *after* chunk n: record the state the chunk starts from, before its "
                   "update"), torch.cat([S_n_ref[:, :, 1:], S_ref[:, :, None]], dim=2)),
             (hint("the initial state is missing: the first chunk starts from S (the argument), not from "
                   "zeros"), deltanet.chunk_state_scan(W, U, k, torch.zeros_like(S0))[0])]
    how = hint("for n = 0, 1, ...: record S_n = S; U'_n = U_n - W_n S; S = S + K_n^T U'_n. Stack the S_n and "
               "U'_n over the chunk dimension (dim 2).")
    with part("S_n"):
        known_mistake("S_n", S_n_ref, S_n, known)
        err_S_n = expect_close("S_n", S_n_ref, S_n, row_dim=2, hint=how)
    with part("U'"):
        err_U = expect_close("U'", U_new_ref, U_new, row_dim=2, hint=how)
    with part("the final state"):
        err_S = expect_close("the final state", S_ref, S, hint=how)
    return (f"{U.shape[2]} chunks of {C}: S_n, U' and the final state equal chunk_state_scan's (relative "
            f"errors {err_S_n:.0e}, {err_U:.0e}, {err_S:.0e})")


@exercise("05b.2", "prefill_then_decode", "prefill with the chunked form, then decode token by token",
          difficulty=1, parts=("o", "the method (one prefill, one step per token)"),
          forbid=("deltanet.recurrent", "deltanet.triton_chunked"))
def check_prefill_then_decode(prefill_then_decode):
    B, H, T, D = 2, 3, random.randint(40, 70), 8
    n_prefill = random.randint(T // 2, T - 5)
    q, k, v, beta = _inputs(B, H, T, D, D)
    o_ref, _ = deltanet.recurrent(q, k, v, beta)
    with Watch(count=[deltanet.chunked, deltanet.deltanet_step]) as watch:
        out = attempt(prefill_then_decode, q.clone(), k.clone(), v.clone(), beta.clone(), n_prefill)
    expect_tensor("o", out, o_ref.shape, dtype=F64)
    rows = slice(None, n_prefill)
    with part("o"):
        expect_close(f"o for the {n_prefill} prefilled tokens", o_ref[:, :, rows], out[:, :, rows],
                     hint=hint("the first n_prefill outputs are deltanet.chunked's, on the first n_prefill "
                               "tokens."))
        err = expect_close(f"o for the decoded tokens {n_prefill} ... {T - 1}", o_ref, out,
                           hint=hint("start the decode from the prefill's final state, and carry the state "
                                     "returned by each deltanet_step into the next one."))
    with part("the method (one prefill, one step per token)", needs=("o",)):
        prefilled = [a["q"].shape[2] for a in watch.arguments[deltanet.chunked]]
        if prefilled != [n_prefill]:
            raise Wrong(f"deltanet.chunked ran on {prefilled or 'no'} tokens; the prefill is one call on the "
                        f"first n_prefill = {n_prefill}", hint=hint(
                            "the prompt goes through the chunked form once, deltanet.chunked(q[:, :, "
                            ":n_prefill], ...), and its final state starts the decode."))
        steps = watch.calls[deltanet.deltanet_step]
        if steps != T - n_prefill:
            raise Wrong(f"deltanet.deltanet_step ran {steps} times; the {T - n_prefill} tokens after the "
                        "prefill need one decode step each", hint=hint("loop t over n_prefill ... T - 1, "
                                                                        "carrying S."))
    return (f"{n_prefill} tokens prefilled, {T - n_prefill} decoded: equals the recurrence (relative error "
            f"{err:.0e})")


@triton.jit
def _invert_tile_kernel(a, out, C: tl.constexpr):
    """out = forward_substitution_tile(a) for one [C, C] tile: the kernel's inverse, on its own."""
    r = tl.arange(0, C)
    tile = r[:, None] * C + r[None, :]
    tl.store(out + tile, deltanet.forward_substitution_tile(tl.load(a + tile), C))


def kernel_inverse(A):
    """(I + A)^{-1} as `deltanet.forward_substitution_tile` computes it on chip (float32)."""
    device = "cpu" if contract.interpreted() else "cuda"
    a = A.to(device, torch.float32).contiguous()
    out = torch.empty_like(a)
    _invert_tile_kernel[(1,)](a, out, C=A.shape[-1])
    return out.cpu()


@exercise("05b.3", "forward_substitution_masked", "forward substitution on a tile: rows picked by masks",
          difficulty=3, forbid=("deltanet.forward_substitution", "deltanet.blocked_forward_substitution"))
def check_forward_substitution_masked(forward_substitution_masked):
    C = random.choice([16, 32])
    k = F.normalize(torch.randn(C, 16, dtype=F64), dim=-1)
    A = torch.tril(torch.rand(C, dtype=F64)[:, None] * (k @ k.T), diagonal=-1)
    ref = deltanet.forward_substitution(A)
    with Watch(forbid_ops=ROW_PICKING + SOLVERS) as watch:
        out = attempt(forward_substitution_masked, A.clone())
    watch.verdict(hint("no row indexing (A[i], L[i] = ...) and no solver: pick row i with torch.where(r[:, "
                       "None] == i, A, 0).sum(0), and write it back with torch.where on the same mask."),
                  "`forward_substitution_masked`")
    expect_tensor("L_inv", out, (C, C), dtype=F64)
    known = [(hint("the identity is missing: L_inv starts as I (row 0 of the inverse is e_0; started from "
                   "zeros, every A_i L_inv is zero and nothing is ever written)"), torch.zeros_like(A)),
             (hint("every row was changed at every step: only row i may become e_i - A_i L_inv at step i "
                   "(mask the update with r == i)"), every_row_updated(A)),
             (hint("the row of A was picked with a sum over the wrong axis: where(r[:, None] == i, A, 0) "
                   "keeps row i of A, and summing it over the rows (axis 0) gives that row as a vector"),
              row_summed_over_columns(A))]
    known_mistake("L_inv", ref, out, known)
    err = expect_close("L_inv", ref, out, row_dim=0,
                       hint=hint("start from L_inv = I; at step i pick row i of A with a mask and a sum over "
                                 "the rows, form A_i L_inv the same way (a broadcast product and a sum), and "
                                 "write e_i - A_i L_inv into row i only (torch.where with the row mask)."))
    err_kernel = expect_close("L_inv against the kernel's forward_substitution_tile",
                              kernel_inverse(A).double(), out, rtol=1e-5)
    return (f"C = {C}: equals forward_substitution ({err:.0e}) and the kernel's forward_substitution_tile "
            f"({err_kernel:.0e}, float32)")


def every_row_updated(A):
    C = A.shape[-1]
    r = torch.arange(C)
    L_inv = torch.eye(C, dtype=A.dtype)
    for i in range(1, C):
        A_i = torch.where(r[:, None] == i, A, 0).sum(0)
        L_inv = L_inv - (A_i[:, None] * L_inv).sum(0)[None, :]
    return L_inv


def row_summed_over_columns(A):
    C = A.shape[-1]
    r = torch.arange(C)
    L_inv = torch.eye(C, dtype=A.dtype)
    for i in range(1, C):
        A_i = torch.where(r[:, None] == i, A, 0).sum(1)
        L_inv = torch.where(r[:, None] == i, L_inv - (A_i[:, None] * L_inv).sum(0), L_inv)
    return L_inv
