"""Lesson 13's exercises: the backward of one intra-chunk block, by hand, and the walk over the chunks run
backward. Neither may use autograd: the point of both is the hand-written backward."""

import random

import torch

from kimik3_lessons import contract, mixers
from kimik3_lessons.backward import chunked
from kimik3_lessons.exercises import (
    Watch,
    Wrong,
    attempt,
    exercise,
    expect_close,
    expect_pair,
    hint,
    known_mistake,
    part,
)

F64 = torch.float64
AUTOGRAD = (torch.autograd.grad, torch.autograd.backward, torch.func.vjp, torch.func.grad, torch.func.jacrev,
            torch.autograd.functional.vjp, torch.autograd.functional.jacobian)
BACKWARDS = ("backward.chunked.chunked_backward", "backward.chunked.outputs_backward",
             "backward.chunked.state_walk_backward", "backward.chunked.factors_gradient",
             "backward.chunked.linear_attention_factors_backward", "backward.kernels.triton_chunked_backward")


def without_autograd(watch, name):
    """Wrong if the student's function called autograd (any of AUTOGRAD): the exercise asks for the
    backward by hand."""
    used = [f.__name__ for f in AUTOGRAD if watch.calls[f]]
    if used:
        raise Wrong(f"{name} calls autograd ({', '.join(used)}): the exercise asks for the gradients by "
                    f"hand",
                    hint=hint("write each gradient as the products of section 2: no torch.autograd, no "
                              ".backward()."))


def intra_block_autograd(Q, K, V, dO):
    """dQ, dK, dV of sum(tril(Q K^T) V * dO), by autograd: the reference (the check's, not the student's)."""
    leaves = [t.clone().requires_grad_() for t in (Q, K, V)]
    O = torch.tril(leaves[0] @ leaves[1].mT) @ leaves[2]
    return torch.autograd.grad((O * dO).sum(), leaves)


@exercise("13.1", "intra_chunk_backward", "the backward of one intra-chunk block: O = tril(Q K^T) V",
          difficulty=2, parts=("dQ", "dK", "dV"), forbid=BACKWARDS)
def check_intra_chunk_backward(intra_chunk_backward):
    C, K, V = random.choice([(16, 8, 6), (32, 16, 12)])
    Q, Kk = (torch.randn(3, C, K, dtype=F64) for _ in range(2))
    Vv, dO = (torch.randn(3, C, V, dtype=F64) for _ in range(2))
    refs = intra_block_autograd(Q, Kk, Vv, dO)
    with Watch(count=AUTOGRAD) as watch:
        out = attempt(intra_chunk_backward, Q.clone(), Kk.clone(), Vv.clone(), dO.clone())
    without_autograd(watch, "`intra_chunk_backward`")
    dQ, dK, dV = expect_pair("three tensors (dQ, dK, dV)", out, 3)
    A, dA = torch.tril(Q @ Kk.mT), torch.tril(dO @ Vv.mT)
    unmasked = dO @ Vv.mT
    how = hint("with A = tril(Q K^T) and dA = tril(dO V^T): dQ = dA K, dK = dA^T Q, dV = A^T dO. The mask "
               "is on dA too: an entry A_ij that the forward set to 0 sends no gradient back.")
    with part("dQ"):
        known_mistake("dQ", refs[0], dQ, [(hint("the gradient dA must be masked like A: tril(dO V^T), "
                                                 "not dO V^T"), unmasked @ Kk)])
        err_q = expect_close("dQ", refs[0], dQ, row_dim=1, hint=how)
    with part("dK"):
        known_mistake("dK", refs[1], dK, [(hint("the gradient of K takes dA transposed: dA^T Q (a row of K "
                                                "is a column of A), not dA Q"), dA @ Q),
                                           (hint("the gradient dA must be masked like A: tril(dO V^T)"),
                                            unmasked.mT @ Q)])
        err_k = expect_close("dK", refs[1], dK, row_dim=1, hint=how)
    with part("dV"):
        known_mistake("dV", refs[2], dV, [(hint("the gradient of V takes A transposed: A^T dO, not A dO"),
                                            A @ dO)])
        err_v = expect_close("dV", refs[2], dV, row_dim=1, hint=how)
    return (f"C = {C}: dQ, dK, dV equal autograd's on three chunks (relative errors {err_q:.0e}, "
            f"{err_k:.0e}, {err_v:.0e}), without autograd")


def factors_for_the_walk(B, H, T, C, K, V, g_scale=0.5):
    """Gated DeltaNet's factors on random inputs (chunked.gated_deltanet_factors), their dO and dS_T."""
    x, S0, dO, dS_T = chunked.example("gated_deltanet", B, H, T, K, V, g_scale=g_scale)
    xc, S0 = chunked.chunks(mixers.get("gated_deltanet"), **x, chunk_size=C, initial_state=S0)
    F_, _ = chunked.gated_deltanet_factors(**xc)
    return F_, S0, contract.split_chunks(dO, C), dS_T


@exercise("13.2", "walk_backward", "the walk over the chunks, run backward",
          difficulty=2, parts=("dU'", "dS_next", "dS_0"), forbid=BACKWARDS)
def check_walk_backward(walk_backward):
    B, H, K, V = 2, 2, 8, 6
    C = random.choice([4, 8])
    T = random.randint(3 * C + 1, 5 * C - 1)                      # the last chunk is padded
    F_, S0, dO, dS_T = factors_for_the_walk(B, H, T, C, K, V)
    ref_dU, ref_next, ref_dS0 = chunked.state_walk_backward(F_, dO, dS_T)
    args = (F_.A_qk, F_.W, F_.Qd, F_.Kd, F_.decay, dO, dS_T)
    with Watch(count=AUTOGRAD) as watch:
        out = attempt(walk_backward, *(t.clone() for t in args))
    without_autograd(watch, "`walk_backward`")
    dU, dS_next, dS0 = expect_pair("three tensors (dU', dS_next, dS_0)", out, 3)
    # an independent reference for dS_0: autograd through the forward walk and the outputs
    S_leaf = S0.clone().requires_grad_()
    S_n, U_new, S_T = chunked.state_walk(F_, S_leaf)
    loss = (chunked.outputs(F_, S_n, U_new) * dO).sum() + (S_T * dS_T).sum()
    (dS0_autograd,) = torch.autograd.grad(loss, S_leaf)
    how = hint("for n = N-1 down to 0: record dS_next[n] = dS; dU'_n = A_qk,n^T dO_n + Kd_n dS; then "
               "dS = d_n * dS + Qd_n^T dO_n - W_n^T dU'_n. Stack over dim 2, in the chunks' order.")
    with part("dU'"):
        known_mistake("dU'", ref_dU, dU, [(hint("the chunk's dU'_n reads the gradient of the state *after* "
                                                "chunk n: use dS before updating it, not after"),
                                           _walk_updates_first(*args)[0])])
        err_u = expect_close("dU'", ref_dU, dU, row_dim=2, hint=how)
    with part("dS_next"):
        known_mistake("dS_next", ref_next, dS_next,
                      [(hint("the recorded dS_next[n] is the gradient of S_{n+1}, the state chunk n leaves: "
                             "record dS before the update"), _walk_updates_first(*args)[1])])
        err_n = expect_close("dS_next", ref_next, dS_next, row_dim=2, hint=how)
    with part("dS_0"):
        known_mistake("dS_0", ref_dS0, dS0,
                      [(hint("the decay multiplies the gradient arriving from the later chunks, before the "
                             "chunk adds its own terms: dS = d * dS + ..., not d * (dS + ...)"),
                        _walk_decay_after(*args)[2])])
        err_0 = expect_close("dS_0", dS0_autograd, dS0, hint=how)
    return (f"{dO.shape[2]} chunks of {C}: dU', every dS_n+1 and dS_0 equal the walk's (and dS_0 "
            f"autograd's: {err_0:.0e}); relative errors {err_u:.0e}, {err_n:.0e}")


def _walk_updates_first(A_qk, W, Qd, Kd, decay, dO, dS):
    """A mistake the check names: dS updated before it is recorded and read."""
    dU_new, dS_next = [], []
    for n in reversed(range(dO.shape[2])):
        dS = decay[:, :, n, :, None] * dS + Qd[:, :, n].mT @ dO[:, :, n]
        dU_new.append(A_qk[:, :, n].mT @ dO[:, :, n] + Kd[:, :, n] @ dS)
        dS = dS - W[:, :, n].mT @ dU_new[-1]
        dS_next.append(dS)
    return torch.stack(dU_new[::-1], dim=2), torch.stack(dS_next[::-1], dim=2), dS


def _walk_decay_after(A_qk, W, Qd, Kd, decay, dO, dS):
    """A mistake the check names: the decay applied to the chunk's own terms too."""
    dU_new, dS_next = [], []
    for n in reversed(range(dO.shape[2])):
        dS_next.append(dS)
        dU_new.append(A_qk[:, :, n].mT @ dO[:, :, n] + Kd[:, :, n] @ dS)
        dS = decay[:, :, n, :, None] * (dS + Qd[:, :, n].mT @ dO[:, :, n] - W[:, :, n].mT @ dU_new[-1])
    return torch.stack(dU_new[::-1], dim=2), torch.stack(dS_next[::-1], dim=2), dS

