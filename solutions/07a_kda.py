"""Solutions to lesson 07a's exercises (kept out of the lesson notebook and of the student edition)."""

import torch


def per_channel_scores(Q, K, G):
    """P_ij = sum_d q_id k_jd exp(G_id - G_jd) for i >= j, else 0. Q, K, G [C, d] -> P [C, C].

    The [C, C, d] definition: per-channel differences first, masked to -inf above the diagonal, then the
    exponential (every exponent <= 0), then the sum over channels."""
    C = Q.shape[0]
    causal = torch.ones(C, C, dtype=torch.bool, device=Q.device).tril()
    differences = G[:, None, :] - G[None, :, :]                               # [C, C, d]: G_id - G_jd
    decay = torch.exp(differences.masked_fill(~causal[..., None], float("-inf")))
    return (Q[:, None, :] * K[None, :, :] * decay).sum(-1)


def predicted_retention(k, g, delta):
    """o = q S with q = k: row d of S holds k_d v, decayed by exp(g_d delta); the read sums k_d times it."""
    return (k**2 * torch.exp(g * delta)).sum()


def chunk_state_update_per_channel(S, K, U_new, G):
    """S_next = Diag(exp(G_C)) S + (exp(G_C - G) * K)^T U'. S [K, V]; K [C, K]; U_new [C, V]; G [C, K]."""
    G_C = G[-1]
    return torch.exp(G_C)[:, None] * S + (torch.exp(G_C - G) * K).T @ U_new


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _scores_scalar_decay(Q, K, G):
    """One decay per token: the channels' mean, lesson 06's scalar decay."""
    G_mean = G.mean(-1)
    return ((Q @ K.T) * torch.exp(G_mean[:, None] - G_mean[None, :])).tril()


def _scores_exp_of_sum(Q, K, G):
    """The exponents summed over channels and exponentiated once, times the plain dot product."""
    return ((Q @ K.T) * torch.exp((G[:, None, :] - G[None, :, :]).sum(-1))).tril()


def _scores_no_causal_mask(Q, K, G):
    """j > i included: every pair, later keys too."""
    return (Q[:, None, :] * K[None, :, :] * torch.exp(G[:, None, :] - G[None, :, :])).sum(-1)


def _scores_factored(Q, K, G):
    """exp(G_i) Q times exp(-G_j) K: one matmul, exact in mathematics, inf * 0 under strong decay."""
    return ((Q * torch.exp(G)) @ (K * torch.exp(-G)).T).tril()


def _scores_exp_before_mask(Q, K, G):
    """exp(G_id - G_jd) for every pair, then the mask (masked_fill with 0): the forward pass is finite, the
    gradient under strong decay is NaN (the derivative of an overflowed exp, times 0)."""
    C = Q.shape[0]
    causal = torch.ones(C, C, dtype=torch.bool).tril()
    decay = torch.exp(G[:, None, :] - G[None, :, :]).masked_fill(~causal[..., None], 0.0)
    return (Q[:, None, :] * K[None, :, :] * decay).sum(-1)


def _scores_by_module(Q, K, G):
    """kda.decayed_scores itself: the right numbers, the definition not written."""
    from kimik3_lessons import kda
    return kda.decayed_scores(Q, K, G)


def _scores_strict_mask(Q, K, G):
    """Masks j < i only: the diagonal q_i . k_i is lost."""
    C = Q.shape[0]
    strict = torch.ones(C, C, dtype=torch.bool).tril(-1)
    decay = torch.exp((G[:, None, :] - G[None, :, :]).masked_fill(~strict[..., None], float("-inf")))
    return (Q[:, None, :] * K[None, :, :] * decay).sum(-1)


def _retention_mean_decay(k, g, delta):
    """A bigger scalar decay: the mean of the channels' log decays."""
    return torch.exp(g.mean() * delta)


def _retention_exp_of_sum(k, g, delta):
    """exp of the k_d^2-weighted sum of log decays, instead of the weighted sum of exps."""
    return torch.exp((k**2 * g).sum() * delta)


def _retention_weights_k(k, g, delta):
    """Weights k_d instead of k_d^2 (the read's k_d forgotten)."""
    return (k * torch.exp(g * delta)).sum()


def _state_update_value_axis(S, K, U_new, G):
    """Decays the columns of S (values) instead of its rows (key channels)."""
    G_C = G[-1]
    return torch.exp(G_C)[None, :] * S + (torch.exp(G_C - G) * K).T @ U_new


def _state_update_decay_after_write(S, K, U_new, G):
    """Decays after the writes."""
    return torch.exp(G[-1])[:, None] * (S + K.T @ U_new)


def _state_update_undecayed_writes(S, K, U_new, G):
    """Decays S per channel but adds the writes undecayed."""
    return torch.exp(G[-1])[:, None] * S + K.T @ U_new


WRONG_ANSWERS = {
    "07a.1": [_scores_scalar_decay, _scores_exp_of_sum, _scores_no_causal_mask, _scores_factored,
              _scores_exp_before_mask, _scores_by_module, _scores_strict_mask],
    "07a.2": [_retention_mean_decay, _retention_exp_of_sum, _retention_weights_k],
    "07a.3": [_state_update_value_axis, _state_update_decay_after_write, _state_update_undecayed_writes],
}
