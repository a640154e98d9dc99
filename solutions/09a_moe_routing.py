"""Solutions to lesson 09a's exercises (kept out of the lesson notebook and of the student edition)."""

import torch


def _route(x, router_weight, score_bias, top_k):
    """s = sigmoid(W_r x); chosen = top_k(s + b); p = s[chosen] / sum s[chosen]."""
    s = torch.sigmoid(x @ router_weight.T)                          # [N, E]
    idx = torch.topk(s + score_bias, top_k, dim=-1).indices         # [N, k]: the bias only picks
    chosen = s.gather(-1, idx)
    return chosen / chosen.sum(-1, keepdim=True), idx


def _dispatch(x, p, idx, expert):
    """Group the N·k (token, expert) pairs by expert, run each expert once on its tokens, scale, add back."""
    top_k = idx.shape[1]
    pairs = idx.reshape(-1)                                         # [N k] expert of each pair
    order = torch.argsort(pairs, stable=True)                       # pairs grouped by expert
    token, weight = order // top_k, p.reshape(-1)[order]            # token and weight of each sorted pair
    counts = torch.bincount(pairs, minlength=int(pairs.max()) + 1).tolist()
    y = torch.zeros_like(x)
    start = 0
    for e, n in enumerate(counts):
        if n:
            rows = token[start:start + n]
            y.index_add_(0, rows, weight[start:start + n, None] * expert(e, x[rows]))
        start += n
    return y


def sparse_moe(x, router_weight, score_bias, top_k, expert):
    p, idx = _route(x, router_weight, score_bias, top_k)
    return _dispatch(x, p, idx, expert)


def update_bias_proportional(score_bias, load, rate):
    """b_e + rate (mean - n_e) / mean."""
    load = load.to(score_bias.dtype)
    mean = load.mean()
    return score_bias + rate * (mean - load) / mean


# Plausible wrong answers, for the tests of the exercise checks (tests/test_exercises.py): each must fail.

def _sparse_moe_not_renormalized(x, router_weight, score_bias, top_k, expert):
    """Weights are the chosen raw scores, not divided by their sum."""
    s = torch.sigmoid(x @ router_weight.T)
    idx = torch.topk(s + score_bias, top_k, dim=-1).indices
    return _dispatch(x, s.gather(-1, idx), idx, expert)


def _sparse_moe_topk_on_raw_scores(x, router_weight, score_bias, top_k, expert):
    """Chooses the experts on s, ignoring the balancing bias."""
    return sparse_moe(x, router_weight, torch.zeros_like(score_bias), top_k, expert)


def _sparse_moe_unweighted(x, router_weight, score_bias, top_k, expert):
    """Adds the chosen experts' outputs without scaling them by p."""
    p, idx = _route(x, router_weight, score_bias, top_k)
    return _dispatch(x, torch.ones_like(p), idx, expert)


def _sparse_moe_token_by_token(x, router_weight, score_bias, top_k, expert):
    """Right numbers, but one expert call per (token, expert) pair: no grouping."""
    p, idx = _route(x, router_weight, score_bias, top_k)
    y = torch.zeros_like(x)
    for n in range(len(x)):
        for j in range(top_k):
            y[n] += p[n, j] * expert(int(idx[n, j]), x[n:n + 1])[0]
    return y


def _sparse_moe_dense(x, router_weight, score_bias, top_k, expert):
    """Right numbers, but every expert runs on every token (the dense reference)."""
    p, idx = _route(x, router_weight, score_bias, top_k)
    P = torch.zeros(len(x), router_weight.shape[0], dtype=x.dtype).scatter_(1, idx, p)
    return sum(P[:, e, None] * expert(e, x) for e in range(router_weight.shape[0]))


def _sparse_moe_softmax_weights(x, router_weight, score_bias, top_k, expert):
    """Weights from a softmax over the chosen scores instead of s / sum s."""
    s = torch.sigmoid(x @ router_weight.T)
    idx = torch.topk(s + score_bias, top_k, dim=-1).indices
    return _dispatch(x, s.gather(-1, idx).softmax(-1), idx, expert)


def _sparse_moe_weights_with_bias(x, router_weight, score_bias, top_k, expert):
    """Weights from s + b: the bias, meant only to pick, leaks into the mix."""
    s = torch.sigmoid(x @ router_weight.T)
    idx = torch.topk(s + score_bias, top_k, dim=-1).indices
    chosen = (s + score_bias).gather(-1, idx)
    return _dispatch(x, chosen / chosen.sum(-1, keepdim=True), idx, expert)


def _update_bias_sign_flipped(score_bias, load, rate):
    """Pushes busy experts up: the imbalance grows."""
    load = load.to(score_bias.dtype)
    return score_bias + rate * (load - load.mean()) / load.mean()


def _update_bias_not_relative(score_bias, load, rate):
    """Moves by the raw token difference, not the relative one: steps of hundreds."""
    load = load.to(score_bias.dtype)
    return score_bias + rate * (load.mean() - load)


def _update_bias_in_place(score_bias, load, rate):
    """The right update, made in the caller's tensor (score_bias += ...)."""
    load = load.to(score_bias.dtype)
    score_bias += rate * (load.mean() - load) / load.mean()
    return score_bias


WRONG_ANSWERS = {
    "09a.1": [_sparse_moe_not_renormalized, _sparse_moe_topk_on_raw_scores, _sparse_moe_unweighted,
              _sparse_moe_token_by_token, _sparse_moe_dense, _sparse_moe_softmax_weights,
              _sparse_moe_weights_with_bias],
    "09a.2": [_update_bias_sign_flipped, _update_bias_not_relative, _update_bias_in_place],
}
