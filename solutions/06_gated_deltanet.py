"""Solutions to lesson 06's exercises (kept out of the lesson notebook and of the student edition)."""

import math

import torch


def decay_mask(G):
    """Gamma_ij = exp(G_i - G_j) for i >= j, else 0. G [..., C] -> [..., C, C].

    Pairwise differences first, the upper triangle set to -inf, then the exponential: every exponent is
    <= 0, so nothing overflows however strong the decay."""
    C = G.shape[-1]
    causal = torch.ones(C, C, dtype=torch.bool, device=G.device).tril()
    differences = G[..., :, None] - G[..., None, :]
    return torch.exp(differences.masked_fill(~causal, float("-inf")))


def chunk_state_update(S, K, U_new, G):
    """The state after one chunk: S_next = exp(G_C) S + (exp(G_C - G) * K)^T U'.

    S [K, V] the state before the chunk; K [C, K] its keys; U_new [C, V] the corrected values U' = U - W S;
    G [C] the cumulative log decay inside the chunk (G_C = G[-1])."""
    G_C = G[-1]
    return torch.exp(G_C) * S + (torch.exp(G_C - G)[:, None] * K).T @ U_new


def gate_input(h):
    """x with exp(-softplus(x) * h) = 1/2: the log decay per token is g = -ln 2 / h, and softplus(x) = -g."""
    g = -math.log(2) / h
    return math.log(math.expm1(-g))


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _decay_mask_transposed(G):
    """exp(G_j - G_i): the decay counted backwards (every entry >= 1)."""
    C = G.shape[-1]
    causal = torch.ones(C, C, dtype=torch.bool).tril()
    return torch.exp((G[..., None, :] - G[..., :, None]).masked_fill(~causal, float("-inf")))


def _decay_mask_not_causal(G):
    """No causal mask: later writes leak into earlier tokens."""
    return torch.exp(G[..., :, None] - G[..., None, :])


def _decay_mask_factored(G):
    """exp(G_i) * exp(-G_j), masked: exact in mathematics, inf * 0 = NaN once exp(-G_j) overflows."""
    return (torch.exp(G)[..., :, None] * torch.exp(-G)[..., None, :]).tril()


def _decay_mask_exp_before_mask(G):
    """exp(G_i - G_j).tril(): exponentiates before masking. The forward pass is finite (the overflowed
    entries are zeroed), the gradient is NaN (inf * 0)."""
    return torch.exp(G[..., :, None] - G[..., None, :]).tril()


def _decay_mask_exp_then_masked_fill(G):
    """exp first, then masked_fill(..., 0) above the diagonal: the same NaN gradient."""
    C = G.shape[-1]
    causal = torch.ones(C, C, dtype=torch.bool).tril()
    return torch.exp(G[..., :, None] - G[..., None, :]).masked_fill(~causal, 0.0)


def _decay_mask_without_diagonal(G):
    """Masks i > j instead of i >= j: the diagonal (a token's own write) is 0 instead of 1."""
    C = G.shape[-1]
    strict = torch.ones(C, C, dtype=torch.bool).tril(-1)
    return torch.exp((G[..., :, None] - G[..., None, :]).masked_fill(~strict, float("-inf")))


def _chunk_state_update_decay_after_write(S, K, U_new, G):
    """Decays after the writes: the chunk's own writes shrink by the whole chunk's decay."""
    return torch.exp(G[-1]) * (S + K.T @ U_new)


def _chunk_state_update_undecayed_keys(S, K, U_new, G):
    """Decays the state but not the writes."""
    return torch.exp(G[-1]) * S + K.T @ U_new


def _chunk_state_update_first_token(S, K, U_new, G):
    """G_C = G[0]: the decay up to the chunk's first token instead of its last."""
    G_C = G[0]
    return torch.exp(G_C) * S + (torch.exp(G_C - G)[:, None] * K).T @ U_new


def _gate_input_no_softplus_inverse(h):
    """Returns -g itself: forgets that the gate passes x through softplus."""
    return math.log(2) / h


def _gate_input_half_life_without_ln2(h):
    """Takes the half-life to be 1 / |g| (forgets ln 2)."""
    return math.log(math.expm1(1.0 / h))


def _gate_input_inverse_sign(h):
    """ln(e^y + 1) for the inverse of softplus (the sign inside flipped)."""
    return math.log(math.exp(math.log(2) / h) + 1)


WRONG_ANSWERS = {
    "06.1": [_decay_mask_transposed, _decay_mask_not_causal, _decay_mask_factored,
             _decay_mask_exp_before_mask, _decay_mask_exp_then_masked_fill, _decay_mask_without_diagonal],
    "06.2": [_chunk_state_update_decay_after_write, _chunk_state_update_undecayed_keys,
             _chunk_state_update_first_token],
    "06.3": [_gate_input_no_softplus_inverse, _gate_input_half_life_without_ln2, _gate_input_inverse_sign],
}
