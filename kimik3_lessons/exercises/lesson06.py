"""Lesson 06's exercises: the decay mask Gamma, the state carried across a chunk, a gate set by half-life."""

import math

import torch
import torch.nn.functional as F

from kimik3_lessons import deltanet, gated_deltanet
from kimik3_lessons.exercises import (
    Wrong,
    attempt,
    exercise,
    expect_close,
    expect_tensor,
    hint,
    known_mistake,
    part,
)

F64 = torch.float64


def gradient_check(what, fn, G, reference, how):
    """The backward pass of `fn` at G: the gradient of sum(w * fn(G)) for random weights w must be finite
    and equal the reference's (computed in float64). Exponentiating before masking passes the forward
    pass (the masked entries are multiplied by 0) and fails here: the gradient of exp(big) * 0 is NaN."""
    G_in = G.clone().requires_grad_(True)
    out = attempt(fn, G_in)
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        raise Wrong(f"{what} carries no gradient back to G (computed outside autograd, or detached); a layer "
                    "trains through it", hint=how)
    G_ref = G.double().requires_grad_(True)
    ref = reference(G_ref)
    w = torch.randn(ref.shape, dtype=F64)
    (grad_ref,) = torch.autograd.grad((ref * w).sum(), G_ref)
    (grad,) = torch.autograd.grad((out.double() * w).sum(), G_in, allow_unused=True)
    if grad is None:
        raise Wrong(f"{what} does not depend on G in autograd", hint=how)
    if not torch.isfinite(grad).all():
        raise Wrong(f"the gradient of {what} holds NaN or inf (the forward pass was finite): an exponential "
                    "of a positive difference overflowed above the diagonal, and its derivative times the "
                    "mask's 0 is NaN", hint=how)
    rtol = 1e-4 if G.dtype == torch.float32 else 1e-9
    return expect_close(f"the gradient of {what}", grad_ref, grad, rtol=rtol, hint=how, row_dim=-1)


def cumulative_log_decay(*shape, low, high, dtype=F64):
    """G = cumsum(g) over the last dim, with g uniform in [low, high] (<= 0): a chunk's cumulative decay."""
    return torch.empty(*shape, dtype=dtype).uniform_(low, high).cumsum(-1)


# ---------------------------------------------------------------------------------------------------


@exercise("06.1", "decay_mask", "the decay mask Γ, safe under strong decay", difficulty=2,
          parts=("Γ", "Γ under strong decay", "its gradient under strong decay"),
          forbid=("gated_deltanet.decay_mask", "kda.decayed_scores"))
def check_decay_mask(decay_mask):
    mask_hint = hint("Gamma_ij = exp(G_i - G_j) for i >= j (token j's write, seen from token i), 0 above the "
                     "diagonal. Form the differences G_i - G_j [C, C], set the upper triangle to -inf (or to "
                     "0 before exponentiating and to 0 after), then exponentiate: no exponent is ever "
                     "positive.")
    # 1. Mild decay, float64, several heads and chunks, a chunk length that is not a power of two.
    C = int(torch.randint(9, 24, ()))
    G = cumulative_log_decay(2, 3, C, low=-0.3, high=0.0)
    ref = gated_deltanet.decay_mask(G)
    out = attempt(decay_mask, G.clone())
    expect_tensor("Γ", out, ref.shape)
    pairwise = G[..., :, None] - G[..., None, :]
    lower = torch.ones(C, C, dtype=torch.bool).tril()
    known = [(hint("the exponent is G_j - G_i; token j's write, read at token i >= j, has been through the "
                   "decays g_{j+1} ... g_i, whose sum is G_i - G_j (<= 0), so every entry is at most 1"),
              torch.exp(-pairwise) * lower),
             (hint("the entries above the diagonal (j > i) must be 0: a token cannot read a write that comes "
                   "after it (the causal mask)"), torch.exp(pairwise)),
             (hint("the diagonal must be exp(0) = 1: token i reads its own write at full strength (mask i >= "
                   "j, not i > j)"), torch.exp(pairwise) * lower.tril(-1)),
             (hint("that is the binary causal mask (the paper's typo): the entries must be the decays "
                   "exp(G_i - G_j), not 1"), lower.to(F64).expand_as(ref))]
    with part("Γ"):
        known_mistake("Γ", ref, out, known)
        err = expect_close("Γ", ref, out, hint=mask_hint)
    # 2. KimiK3's strongest decay, g about -5 per token, in float32 over a 64-token chunk (G down to -320),
    # then a decay stronger still in float64 (G near -1000): exp(-G) overflows in both.
    worst = 0.0
    for dtype, low, high in ((torch.float32, -5.5, -4.5), (F64, -17.0, -14.0)):
        G = cumulative_log_decay(2, 64, low=low, high=high, dtype=dtype)
        ref = gated_deltanet.decay_mask(G.double())
        out = attempt(decay_mask, G.clone())
        with part("Γ under strong decay"):
            expect_tensor(f"Γ under strong decay ({dtype})", out, ref.shape)
            if not torch.isfinite(out).all():
                raise Wrong(f"under strong decay (g ≈ {(low + high) / 2:.0f} per token, G down to "
                            f"{G.min().item():.0f}, {dtype}) Γ holds NaN or inf: exp(G_i) exp(-G_j) (or P_i "
                            "/ P_j) overflows where exp(-G_j) passes the largest float", hint=mask_hint)
            worst = max(worst, expect_close(f"Γ under strong decay ({dtype})", ref, out,
                                            rtol=1e-5 if dtype == torch.float32 else 1e-9, hint=mask_hint))
    # 3. The backward pass under the same strong decay, in float32: the gradients the layer trains with.
    G = cumulative_log_decay(2, 64, low=-5.5, high=-4.5, dtype=torch.float32)
    with part("its gradient under strong decay"):
        err_grad = gradient_check("Γ under strong decay (float32)", decay_mask, G, gated_deltanet.decay_mask,
                                  mask_hint)
    return (f"equals decay_mask on a {C}-token chunk (relative error {err:.0e}), stays finite and exact with "
            f"G down to -1000 (relative error {worst:.0e}), and so does its gradient at g ≈ -5 "
            f"({err_grad:.0e})")


@exercise("06.2", "chunk_state_update", "the state across one chunk, decayed", difficulty=2,
          forbid=("gated_deltanet.recurrent", "gated_deltanet.chunked", "gated_deltanet.triton_chunked",
                  "gated_deltanet.gated_deltanet_step", "kda.recurrent", "kda.chunked", "kda.triton_chunked",
                  "kda.kda_step", "chunk_kernels.launch_chunked", "chunk_kernels.launch"))
def check_chunk_state_update(chunk_state_update):
    C, K, V = int(torch.randint(5, 20, ())), 6, 5            # K != V: a transposed product fails by shape
    S0 = torch.randn(K, V, dtype=F64)
    k = F.normalize(torch.randn(C, K, dtype=F64), dim=-1)
    v = torch.randn(C, V, dtype=F64)
    g = torch.empty(C, dtype=F64).uniform_(-0.6, -0.05)
    beta = torch.rand(C, dtype=F64)
    # The reference: the recurrence, one token at a time, from S0 through the whole chunk.
    one = lambda x: x[None, None]
    _, S_ref = gated_deltanet.recurrent(one(k), one(k), one(v), one(g), one(beta), initial_state=one(S0))
    S_ref = S_ref[0, 0]
    # What the chunk form has before the update: G, and U' = U - W S0 (section 4).
    G = g.cumsum(0)
    Gamma = gated_deltanet.decay_mask(G)
    A = (beta[:, None] * (k @ k.T) * Gamma).tril(-1)
    W, U = deltanet.wy_representation(A, beta[:, None] * torch.exp(G)[:, None] * k, beta[:, None] * v)
    U_new = U - W @ S0
    out = attempt(chunk_state_update, S0.clone(), k.clone(), U_new.clone(), G.clone())
    expect_tensor("the state after the chunk", out, (K, V), dtype=F64)
    G_C = G[-1]
    known = [(hint("you decayed after the writes: exp(G_C) (S + K^T U') shrinks the chunk's own writes by "
                   "the whole chunk's decay. Only S decays by exp(G_C); the write of token i decays from "
                   "token i on, by exp(G_C - G_i)"), torch.exp(G_C) * (S0 + k.T @ U_new)),
             (hint("the writes are not decayed: the write of token i still goes through the decays of tokens "
                   "i+1 ... C, a factor exp(G_C - G_i) on row i of K"), torch.exp(G_C) * S0 + k.T @ U_new),
             (hint("the writes are decayed from the start of the chunk, exp(G_i); they decay from their own "
                   "token to the end of the chunk, exp(G_C - G_i)"),
              torch.exp(G_C) * S0 + (torch.exp(G)[:, None] * k).T @ U_new),
             (hint("the state S is not decayed: across the chunk it keeps exp(G_C) of itself"),
              S0 + (torch.exp(G_C - G)[:, None] * k).T @ U_new)]
    known_mistake("the state after the chunk", S_ref, out, known)
    err = expect_close("the state after the chunk", S_ref, out, row_dim=0,
                       hint=hint("S_next = exp(G_C) S + (exp(G_C - G) * K)^T U', with G_C = G[-1] and "
                                 "exp(G_C - G) one factor per row of K."))
    return f"equals the recurrence's state after a {C}-token chunk (relative error {err:.0e})"


@exercise("06.3", "gate_input", "the gate input for a given half-life", difficulty=1)
def check_gate_input(gate_input):
    half_lives = torch.exp(torch.empty(4, dtype=F64).uniform_(math.log(2.0), math.log(5000.0))).tolist()
    for h in half_lives:
        x = attempt(gate_input, h)
        try:
            x = torch.as_tensor(float(x), dtype=F64)
        except (TypeError, ValueError, RuntimeError) as err:
            raise Wrong(f"gate_input({h:.1f}) should return one number, got {type(x).__name__}") from err
        g = gated_deltanet.mamba2_gate(x, torch.tensor(0.0, dtype=F64), torch.tensor(0.0, dtype=F64))
        if not torch.isfinite(g) or g.item() >= 0:
            raise Wrong(f"gate_input({h:.1f}) = {x.item():.4g} gives g = {g.item():.3g}: a finite log decay "
                        "below 0 is needed (a half-life is finite)")
        strength = torch.exp(g * h).item()                 # what a fact keeps after h tokens: alpha^h
        if abs(strength - 0.5) > 1e-9:
            measured_half_life = math.log(2) / -g.item()
            named = abs(measured_half_life / math.log(2) - h) < 1e-6 * h
            raise Wrong(f"with gate_input({h:.1f}) = {x.item():.4g} the gate keeps alpha = exp(g) = "
                        f"{math.exp(g.item()):.6f} per token, so a fact keeps {strength:.4f} of itself after "
                        f"{h:.1f} tokens (its half-life is {measured_half_life:.1f}), not 0.5",
                        hint=hint("your half-life is off by a factor ln 2: it is ln 2 / |g| tokens, not 1 / "
                                  "|g|.")
                        if named else hint("the log decay you need is g = -ln 2 / h, and the gate computes g "
                                           "= -softplus(x) here: invert softplus, x = ln(e^(-g) - 1)."))
    return f"half-lives of {', '.join(f'{h:.0f}' for h in half_lives)} tokens hit exactly"
