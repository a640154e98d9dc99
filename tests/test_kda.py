"""KDA (lesson 07a), what is its own: `decayed_scores` equals the explicit per-channel sum, KDA with equal
channels is gated DeltaNet, the gates are flash-linear-attention's. The contract every form keeps (the
forms agree, carry their state, train, survive strong decay, take half precision, refuse bad input, match
FLA's references) is tested in test_mixers.py; the Kimi Linear layer in test_kimi_linear.py."""

import torch
import torch.nn.functional as F

from kimik3_lessons import gated_deltanet, kda, lab


def make_inputs(B=2, H=2, T=100, K=16, V=12, seed=0):
    """q, unit-norm k, v, per-channel g in [-0.3, 0], beta in (0, 1) and a random state, float64."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, K, generator=gen, dtype=torch.float64)
    k = F.normalize(torch.randn(B, H, T, K, generator=gen, dtype=torch.float64), dim=-1)
    v = torch.randn(B, H, T, V, generator=gen, dtype=torch.float64)
    g = -0.3 * torch.rand(B, H, T, K, generator=gen, dtype=torch.float64)
    beta = torch.rand(B, H, T, generator=gen, dtype=torch.float64)
    S0 = torch.randn(B, H, K, V, generator=gen, dtype=torch.float64)
    return q, k, v, g, beta, S0


def test_decayed_scores_match_the_pairwise_tensor():
    """The secondary-chunking scores equal the explicit [C, C, K] sum, also for C not a power of two
    and for several X sharing one Y and G (as k and q do in `chunked`)."""
    for C in (16, 24):
        X, Y = torch.randn(4, 3, C, 8, dtype=torch.float64), torch.randn(3, C, 8, dtype=torch.float64)
        G = (-0.5 * torch.rand(3, C, 8, dtype=torch.float64)).cumsum(-2)
        decay = torch.exp(G[..., :, None, :] - G[..., None, :, :])             # [.., C, C, K]
        full = (X[..., :, None, :] * Y[..., None, :, :] * decay).sum(-1)
        lab.check_close(f"decayed scores C={C}", full.tril(), kda.decayed_scores(X, Y, G))


def test_equal_channels_is_gated_deltanet():
    q, k, v, g, beta, S0 = make_inputs()
    g_head = g[..., 0]
    o_ref, S_ref = gated_deltanet.recurrent(q, k, v, g_head, beta, initial_state=S0)
    o, S = kda.chunked(q, k, v, g_head[..., None].expand_as(g), beta, chunk_size=32, initial_state=S0)
    lab.check_close("KDA with equal channels = gated DeltaNet o", o_ref, o)
    lab.check_close("KDA with equal channels = gated DeltaNet S", S_ref, S)


def test_gates_match_fla():
    from fla.ops.kda.gate import naive_kda_gate, naive_kda_lowerbound_gate
    x, A_log, dt_bias = 3 * torch.randn(2, 7, 4, 8), torch.randn(4), torch.randn(32)
    lab.check_close("mamba2 gate vs FLA", naive_kda_gate(x, A_log, dt_bias),
                    kda.mamba2_gate(x, A_log.view(4, 1), dt_bias.view(4, 8)))
    g = kda.bounded_gate(x, A_log.view(4, 1), dt_bias.view(4, 8))
    lab.check_close("bounded gate vs FLA", naive_kda_lowerbound_gate(x, A_log, dt_bias), g)
    assert (g >= -5).all() and (g <= 0).all()
