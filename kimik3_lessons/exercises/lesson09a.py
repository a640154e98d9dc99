"""Lesson 09a's exercises: sparse MoE dispatch, a proportional balancing rule."""

import random

import torch

from kimik3_lessons import moe
from kimik3_lessons.exercises import Wrong, attempt, exercise, expect_close, expect_tensor, hint, part


def _mix(layer, x, idx, weights):
    """Reference mix: every expert on every token, y_n = sum_j weights[n, j] E_{idx[n, j]}(x_n)."""
    P = torch.zeros(len(x), layer.num_experts, dtype=x.dtype).scatter_(1, idx, weights)
    Y = torch.stack([layer.expert(e, x) for e in range(layer.num_experts)])     # [E, N, H]
    return torch.einsum("ne,enh->nh", P, Y)


@exercise("09a.1", "sparse_moe", "sparse MoE dispatch: route, group by expert, scatter back", difficulty=2,
          parts=("y", "each expert run once, on its own tokens"),
          forbid=("moe.LatentMoE.forward", "moe.LatentMoE.dense_forward", "moe.LatentMoE.route"))
def check_sparse_moe(sparse_moe):
    N, H, E, k, F = random.randint(30, 60), 24, 12, 3, 16
    layer = moe.LatentMoE(moe.MoEConfig(H, None, E, k, 0, F)).double().requires_grad_(False)
    x = torch.randn(N, H, dtype=torch.float64)
    s = torch.sigmoid(x @ layer.router.weight.T)
    while True:  # a bias that changes the choice of some tokens, so "top-k on s" differs from "on s + b"
        layer.score_bias.normal_(0, 0.3)
        raw_choice, choice = (t.topk(k).indices.sort().values for t in (s, s + layer.score_bias))
        if not torch.equal(raw_choice, choice):
            break
    ref = layer.dense_forward(x)

    calls = []

    def expert(e, x_e):
        calls.append((int(e), x_e.shape[0]))
        return layer.expert(int(e), x_e)

    out = attempt(sparse_moe, x.clone(), layer.router.weight, layer.score_bias, k, expert)
    expect_tensor("y", out, ref.shape, dtype=torch.float64)
    # The classic mistakes, computed here so the verdict can name the one that was made.
    raw_idx = s.topk(k).indices
    raw_p = s.gather(-1, raw_idx)
    idx = (s + layer.score_bias).topk(k).indices
    chosen = s.gather(-1, idx)
    mistakes = [
        (hint("y is what you get when the weights are the chosen scores without renormalizing: divide them "
              "by their sum."), _mix(layer, x, idx, chosen)),
        (hint("y is what you get when the experts were chosen on the raw scores s: choose top-k on s + b "
              "(the bias only picks)."), _mix(layer, x, raw_idx, raw_p / raw_p.sum(-1, keepdim=True))),
        (hint("y is what you get when the expert outputs were added without their weights: scale each by its "
              "p."), _mix(layer, x, idx, torch.ones_like(chosen))),
    ]
    with part("y"):
        for explanation, y_wrong in mistakes:
            if (out - y_wrong).abs().max() <= 1e-9 * y_wrong.abs().max():
                raise Wrong("y differs from dense_forward", hint=explanation)
        err = expect_close("y", ref, out, rtol=1e-10, row_dim=0,
                           hint=hint("s = sigmoid(x W_r^T); chosen = top_k(s + b); p = s[chosen] / sum "
                                     "s[chosen]; y_n = sum_j p_nj E_j(x_n)."))
    times = {}
    for e, _ in calls:
        times[e] = times.get(e, 0) + 1
    again = {e: c for e, c in times.items() if c > 1}
    rows = sum(n for _, n in calls)
    with part("each expert run once, on its own tokens", needs=("y",)):
        if again:
            e, c = next(iter(again.items()))
            raise Wrong(f"expert {e} was called {c} times", hint=hint(
                "group its tokens and run it once on all of them (one matrix multiply per expert)."))
        if rows != N * k:
            raise Wrong(f"the experts ran on {rows} token rows in all, not the N·k = {N * k} (token, expert) "
                        "pairs", hint=hint(f"sparse dispatch runs each pair once; running every expert on "
                                            f"every token ({N * E} rows) is the dense reference."))
    used = sum(1 for _, n in calls if n)
    return (f"equals dense_forward (relative error {err:.0e}); {used} experts ran once each, on {rows} token "
            "rows in all")


@exercise("09a.2", "update_bias_proportional", "a proportional balancing rule", difficulty=1,
          parts=("the rule", "it balances held-out tokens"))
def check_update_bias_proportional(update_bias_proportional):
    E, rate = random.randint(6, 20), 0.05
    bias = torch.randn(E) * 0.1
    load = torch.randint(0, 500, (E,))
    mean = load.float().mean()
    given = bias.clone()
    out = attempt(update_bias_proportional, given, load.clone(), rate)
    if not torch.equal(given, bias):
        raise Wrong("your function changed the bias it was given (an in-place update such as b += ...)",
                    hint=hint("return a new tensor; the caller decides when to copy it in."))
    expect_tensor("the new bias", out, (E,))
    with part("the rule"):
        # The rule's defining property, checked as a relation: the step of each expert's bias, in units of
        # `rate`, is its load's shortfall from the mean, relative to the mean (1 for an idle expert, 0 at the
        # mean, below 0 for a busy one).
        expect_close("each expert's step (new - old) / rate, against 1 - load / mean load", 1 - load / mean,
                     (out - bias) / rate, rtol=1e-5, row_dim=0,
                     hint=hint("up for idle experts, down for busy ones, in proportion to the relative "
                               "imbalance."))
    # And it balances: tokens that lean towards 4 of 32 experts, 40 updates, then a held-out batch.
    layer = moe.LatentMoE(moe.MoEConfig(64, 32, num_experts=32, top_k=4, num_shared_experts=0,
                                        expert_hidden_size=16))
    favourite = layer.router.weight[:4].sum(0).detach()
    skewed = lambda: torch.randn(2048, 64) + 4 * favourite / favourite.norm()  # noqa: E731
    held_out, share = skewed(), 2048 * 4 / 32
    before = layer.expert_load(held_out).max() / share
    for _ in range(40):
        with torch.no_grad():
            layer.score_bias.copy_(attempt(update_bias_proportional, layer.score_bias.clone(),
                                           layer.expert_load(skewed()), rate))
    after = layer.expert_load(held_out).max() / share
    with part("it balances held-out tokens"):
        if not after < 1.5:
            raise Wrong(f"the busiest expert still has {after:.2f}× its share after 40 updates (before: "
                        f"{before:.2f}×)")
    return f"busiest expert {before:.1f}× its share before, {after:.2f}× after 40 updates (held-out tokens)"
