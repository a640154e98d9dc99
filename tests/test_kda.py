"""KDA (lesson 07), what is its own: `decayed_scores` equals the explicit per-channel sum, KDA with equal
channels is gated DeltaNet, the gates are flash-linear-attention's, and the Kimi Linear layer (short
convolutions, KimiK3's weight shapes) decodes token by token exactly as in one pass. The contract every
form keeps (the forms agree, carry their state, train, survive strong decay, take half precision, refuse
bad input, match FLA's references) is tested in test_mixers.py."""

import pytest
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


def test_short_conv_matches_padded_conv1d():
    x, w = torch.randn(2, 9, 6, dtype=torch.float64), torch.randn(6, 1, 4, dtype=torch.float64)
    y, tail = kda.short_conv(x, w)
    ref = F.conv1d(x.transpose(1, 2), w, padding=3, groups=6)[..., :9].transpose(1, 2)
    lab.check_close("short conv", ref, y)
    lab.check_close("tail = last inputs", x[:, -3:].transpose(1, 2), tail)


@pytest.mark.parametrize("gate", ["mamba2", "bounded"])
def test_layer_decodes_token_by_token_as_one_pass(gate):
    torch.manual_seed(0)
    config = kda.KDAConfig(hidden_size=32, num_heads=2, head_dim=16, gate=gate, chunk_size=16)
    layer = kda.KimiDeltaAttention(config).double()
    x = torch.randn(2, 40, 32, dtype=torch.float64)
    y_ref, state_ref = layer(x)
    y, state = layer(x[:, :23])                      # a prompt (chunked), then one token at a time
    ys = [y]
    for t in range(23, 40):
        y_t, state = layer(x[:, t:t + 1], state)
        ys.append(y_t)
    lab.check_close(f"{gate}: decode = one pass", y_ref, torch.cat(ys, dim=1))
    for name in ("S", "q_tail", "k_tail", "v_tail"):
        lab.check_close(f"{gate}: state {name}", getattr(state_ref, name), getattr(state, name))
    assert state_ref.length == state.length == 40          # tokens seen, as the KV and latent caches count
    per_sequence = 2 * 16 * 16 + 3 * 2 * 16 * 3                  # S [H, K, V] and three tails [H*K, 3]
    assert layer.config.state_numbers == per_sequence
    assert state.nbytes == 2 * per_sequence * 8                  # the whole batch of 2, float64


def test_layer_parameters_map_to_kimik3_weights():
    """KimiK3's KDA weight list (docs/facts.md): hidden 7168, 96 heads x 128, the bounded gate."""
    with torch.device("meta"):
        config = kda.KDAConfig(hidden_size=7168, num_heads=96, head_dim=128, gate="bounded")
        layer = kda.KimiDeltaAttention(config)
    expected = {
        "q_proj.weight": (12288, 7168), "k_proj.weight": (12288, 7168), "v_proj.weight": (12288, 7168),
        "q_conv1d.weight": (12288, 1, 4), "k_conv1d.weight": (12288, 1, 4), "v_conv1d.weight": (12288, 1, 4),
        "f_a_proj.weight": (128, 7168), "f_b_proj.weight": (12288, 128), "b_proj.weight": (96, 7168),
        "A_log": (128,), "dt_bias": (12288,), "o_norm.weight": (128,), "g_proj.weight": (12288, 7168),
        "o_proj.weight": (7168, 12288),
    }
    assert {n: tuple(p.shape) for n, p in layer.named_parameters()} == expected


def test_layer_rejects_unknown_gate():
    with pytest.raises(ValueError, match="gate"):
        kda.KDAConfig(32, 2, 16, gate="softmax")
