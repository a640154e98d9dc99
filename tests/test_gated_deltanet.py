"""Gated DeltaNet (lesson 06), what is its own: one step is the decay, then the delta rule; the decay
mask is a ratio of cumulative products that stays finite where that ratio overflows; the Mamba-2 gate
is flash-linear-attention's. The contract every form keeps (the forms agree, carry their state, train,
survive strong decay, take half precision, refuse bad input, match FLA) is tested in test_mixers.py."""

import torch
import torch.nn.functional as F

from kimik3_lessons import gated_deltanet as gdn
from kimik3_lessons import lab


def one_token(K=16, V=12, seed=0):
    """q, unit-norm k, v, g <= 0, beta of one token and a random state, float64, [1, 1, ...]."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, 1, K, generator=gen, dtype=torch.float64)
    k = F.normalize(torch.randn(1, 1, 1, K, generator=gen, dtype=torch.float64), dim=-1)
    v = torch.randn(1, 1, 1, V, generator=gen, dtype=torch.float64)
    g = -0.3 * torch.rand(1, 1, 1, generator=gen, dtype=torch.float64)
    beta = torch.rand(1, 1, 1, generator=gen, dtype=torch.float64)
    S0 = torch.randn(1, 1, K, V, generator=gen, dtype=torch.float64)
    return q, k, v, g, beta, S0


def test_decay_step_then_delta_step():
    """One step by hand: S_1 = alpha (I - beta k^T k) S_0 + beta k^T v, read by q."""
    q, k, v, g, beta, S0 = one_token()
    o, S = gdn.recurrent(q, k, v, g, beta, initial_state=S0)
    kt, alpha, b = k[0, 0, 0], torch.exp(g[0, 0, 0]), beta[0, 0, 0]
    householder = torch.eye(16, dtype=torch.float64) - b * torch.outer(kt, kt)
    S_hand = alpha * householder @ S0[0, 0] + b * torch.outer(kt, v[0, 0, 0])
    lab.check_close("step S", S_hand, S[0, 0])
    lab.check_close("step o", q[0, 0, 0] @ S_hand, o[0, 0, 0])


def test_decay_mask_is_a_ratio_of_cumulative_products():
    g = -0.2 * torch.rand(3, 20, dtype=torch.float64)
    P = torch.cumprod(torch.exp(g), dim=-1)
    ratio = (P[..., :, None] / P[..., None, :]).tril()
    lab.check_close("Gamma = P_i / P_j", ratio, gdn.decay_mask(g.cumsum(-1)))
    G = torch.full((64,), -5.0).cumsum(0)                    # g = -5 per token: G reaches -320
    assert torch.isinf(torch.exp(-G)).any(), "the test needs a decay strong enough for exp(-G) to overflow"
    i, j = torch.arange(64)[:, None], torch.arange(64)[None, :]
    exact = torch.where(i >= j, torch.exp(-5.0 * (i - j).double()), 0.0)     # exp(g (i - j)), from i, j alone
    lab.check_close("Gamma under strong decay (finite)", exact, gdn.decay_mask(G))


def test_mamba2_gate_matches_fla():
    from fla.ops.gated_delta_rule.gate import naive_gdn_gate
    x, A_log, dt_bias = torch.randn(2, 7, 4) * 3, torch.randn(4), torch.randn(4)
    g = gdn.mamba2_gate(x, A_log, dt_bias)
    lab.check_close("mamba2 gate vs FLA", naive_gdn_gate(x, A_log, dt_bias), g)
    assert (g <= 0).all()
