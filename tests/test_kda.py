"""KDA (lesson 07): the recurrence, the chunked form and the Triton kernel agree with each other, with
flash-linear-attention's references and with gated DeltaNet; under strong decay; the Kimi Linear
layer decodes token by token exactly as in one pass; bad input is refused."""

import pytest
import torch
import torch.nn.functional as F

from kimik3_lessons import gated_deltanet, kda, lab


def make_inputs(B=2, H=2, T=100, K=16, V=12, dtype=torch.float64, g_scale=0.3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, K, generator=gen, dtype=dtype)
    k = F.normalize(torch.randn(B, H, T, K, generator=gen, dtype=dtype), dim=-1)
    v = torch.randn(B, H, T, V, generator=gen, dtype=dtype)
    g = -g_scale * torch.rand(B, H, T, K, generator=gen, dtype=dtype)
    beta = torch.rand(B, H, T, generator=gen, dtype=dtype)
    S0 = torch.randn(B, H, K, V, generator=gen, dtype=dtype)
    return q, k, v, g, beta, S0


def in_two_calls(form, q, k, v, g, beta, S0, split=37, **kwargs):
    """Run `form` over [0, split) then [split, T), carrying the state; return (o, S)."""
    o1, S1 = form(*(x[:, :, :split] for x in (q, k, v, g, beta)), initial_state=S0, **kwargs)
    o2, S2 = form(*(x[:, :, split:] for x in (q, k, v, g, beta)), initial_state=S1, **kwargs)
    return torch.cat([o1, o2], dim=2), S2


@pytest.mark.parametrize("chunk_size", [1, 16, 24, 32, 64, 128])
def test_chunked_matches_recurrent_float64(chunk_size):
    q, k, v, g, beta, S0 = make_inputs()
    o_ref, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    o, S = in_two_calls(kda.chunked, q, k, v, g, beta, S0, chunk_size=chunk_size)
    lab.check_close(f"chunked C={chunk_size} o", o_ref, o, rtol=1e-9)
    lab.check_close(f"chunked C={chunk_size} S", S_ref, S, rtol=1e-9)


def test_decayed_scores_match_the_pairwise_tensor():
    """The secondary-chunking scores equal the explicit [C, C, K] sum, also for C not a power of two
    and for several X sharing one Y and G (as k and q do in `chunked`)."""
    for C in (16, 24):
        X, Y = torch.randn(4, 3, C, 8, dtype=torch.float64), torch.randn(3, C, 8, dtype=torch.float64)
        G = (-0.5 * torch.rand(3, C, 8, dtype=torch.float64)).cumsum(-2)
        decay = torch.exp(G[..., :, None, :] - G[..., None, :, :])             # [.., C, C, K]
        full = (X[..., :, None, :] * Y[..., None, :, :] * decay).sum(-1)
        lab.check_close(f"decayed scores C={C}", full.tril(), kda.decayed_scores(X, Y, G))


def test_recurrent_matches_fla():
    from fla.ops.kda.naive import naive_recurrent_kda
    q, k, v, g, beta, S0 = make_inputs()
    o, S = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    bthd = lambda x: x.transpose(1, 2)
    o_fla, S_fla = naive_recurrent_kda(bthd(q), bthd(k), bthd(v), bthd(g), bthd(beta), scale=1.0,
                                       initial_state=S0, output_final_state=True)
    lab.check_close("recurrent vs FLA o", bthd(o_fla), o, rtol=1e-5)  # FLA computes in float32
    lab.check_close("recurrent vs FLA S", S_fla, S, rtol=1e-5)


def test_chunked_matches_fla_naive_chunk():
    from fla.ops.kda.naive import naive_chunk_kda
    q, k, v, g, beta, S0 = make_inputs(B=1, T=128)
    o, S = kda.chunked(q, k, v, g, beta, initial_state=S0)
    bthd = lambda x: x.transpose(1, 2)
    o_fla, S_fla = naive_chunk_kda(bthd(q), bthd(k), bthd(v), bthd(g), bthd(beta), scale=1.0,
                                   initial_state=S0, output_final_state=True)
    lab.check_close("chunked vs FLA naive_chunk_kda o", bthd(o_fla), o, rtol=1e-5)
    lab.check_close("chunked vs FLA naive_chunk_kda S", S_fla, S, rtol=1e-5)


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


@pytest.mark.parametrize("chunk_size", [16, 64])
def test_triton_matches_recurrent_float32(chunk_size):
    q, k, v, g, beta, S0 = make_inputs(B=1, H=2, T=100, K=16, V=24)
    o_ref, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    o, S = kda.triton_chunked(*(x.float() for x in (q, k, v, g, beta)), chunk_size=chunk_size,
                              initial_state=S0.float())
    lab.check_close(f"triton C={chunk_size} o", o_ref, o, rtol=1e-4)
    lab.check_close(f"triton C={chunk_size} S", S_ref, S, rtol=1e-4)


def test_triton_splits_wide_values_over_programs():
    """V = 80 > 64: the value columns are split over two programs per head, each with the full K side."""
    q, k, v, g, beta, S0 = make_inputs(B=1, H=1, T=40, K=16, V=80)
    o_ref, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    o, S = kda.triton_chunked(*(x.float() for x in (q, k, v, g, beta)), chunk_size=16,
                              initial_state=S0.float())
    lab.check_close("triton, two value blocks, o", o_ref, o, rtol=1e-4)
    lab.check_close("triton, two value blocks, S", S_ref, S, rtol=1e-4)


def test_strong_decay_float32():
    """g ~ -5 per token and channel: over a 64-token chunk G reaches -320, exp(-G) overflows float32."""
    q, k, v, g, beta, S0 = make_inputs(B=1, H=2, T=100, K=16, V=16)
    g = -5.0 + 0.5 * torch.rand_like(g)
    assert torch.isinf(torch.exp(-g[:, :, :64].float().cumsum(2))).any()
    o_ref, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    inputs32 = [x.float() for x in (q, k, v, g, beta)]
    for name, form in (("chunked", kda.chunked), ("triton", kda.triton_chunked)):
        o, S = form(*inputs32, chunk_size=64, initial_state=S0.float())
        lab.check_close(f"strong decay {name} o", o_ref, o, rtol=1e-4)
        lab.check_close(f"strong decay {name} S", S_ref, S, rtol=1e-4)


def test_half_precision_returns_input_dtype():
    q, k, v, g, beta, S0 = make_inputs(dtype=torch.float32)
    o_ref, _ = kda.recurrent(q, k, v, g, beta)
    for form in (kda.recurrent, kda.chunked):
        o, S = form(*(x.bfloat16() for x in (q, k, v, g, beta)))
        assert o.dtype == torch.bfloat16 and S.dtype == torch.float32
        lab.check_close(f"{form.__name__} bfloat16", o_ref, o, rtol=3e-2)


@pytest.mark.parametrize("form", [kda.recurrent, kda.chunked, kda.triton_chunked])
def test_bad_input(form):
    q, k, v, g, beta, S0 = (x.float() for x in make_inputs(B=1, H=2, T=20))
    bad = [
        (r"g is a log decay and must be <= 0", dict(g=g.abs())),
        (r"g must be \[B, H, T, K\] \(log decay, one per key channel\) = \[1, 2, 20, 16\]", dict(g=g[..., 0])),  # a scalar g
        (r"beta must be \[B, H, T\]", dict(beta=beta[..., None])),
        (r"k must be a 4-dimensional tensor \[B, H, T, D\]", dict(k=k[0])),
        (r"initial_state must be \[B, H, K, V\]", dict(initial_state=S0.mT)),
    ]
    for message, change in bad:
        args = dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=S0) | change
        with pytest.raises(ValueError, match=message):
            form(**args)


def test_short_conv_matches_padded_conv1d():
    x, w = torch.randn(2, 9, 6, dtype=torch.float64), torch.randn(6, 1, 4, dtype=torch.float64)
    y, tail = kda.short_conv(x, w)
    ref = F.conv1d(x.transpose(1, 2), w, padding=3, groups=6)[..., :9].transpose(1, 2)
    lab.check_close("short conv", ref, y)
    lab.check_close("tail = last inputs", x[:, -3:].transpose(1, 2), tail)


@pytest.mark.parametrize("gate", ["mamba2", "bounded"])
def test_layer_decodes_token_by_token_as_one_pass(gate):
    torch.manual_seed(0)
    layer = kda.KimiDeltaAttention(kda.KDAConfig(hidden_size=32, num_heads=2, head_dim=16, gate=gate, chunk_size=16))
    layer = layer.double()
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
    per_sequence = 2 * 16 * 16 + 3 * 2 * 16 * 3                  # S [H, K, V] and three tails [H*K, 3]
    assert layer.config.state_numbers == per_sequence
    assert state.nbytes == 2 * per_sequence * 8                  # the whole batch of 2, float64


def test_layer_parameters_map_to_kimik3_weights():
    """KimiK3's KDA weight list (REFERENCE.md): hidden 7168, 96 heads x 128, the bounded gate."""
    with torch.device("meta"):
        layer = kda.KimiDeltaAttention(kda.KDAConfig(hidden_size=7168, num_heads=96, head_dim=128, gate="bounded"))
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


def test_chunked_is_differentiable_with_the_recurrences_gradients():
    """The Kimi Linear layer trains through `chunked`: its gradients (q, k, v, g, beta, initial state)
    must equal those of the recurrence."""
    inputs = make_inputs(B=1, H=2, T=40, K=8, V=8)
    grads = []
    for form, kwargs in ((kda.recurrent, {}), (kda.chunked, {"chunk_size": 16})):
        leaves = [x.clone().requires_grad_() for x in inputs]
        o, S = form(*leaves[:5], initial_state=leaves[5], **kwargs)
        (o.square().sum() + S.square().sum()).backward()
        grads.append([x.grad for x in leaves])
    for name, ref, out in zip(("q", "k", "v", "g", "beta", "S0"), *grads, strict=True):
        lab.check_close(f"d/d{name}", ref, out)
