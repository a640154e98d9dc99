"""Gated DeltaNet (lesson 06): the recurrence, the chunked form and the Triton kernel agree with each
other, with flash-linear-attention's reference, and under strong decay; bad input is refused."""

import pytest
import torch
import torch.nn.functional as F

from kimik3_lessons import gated_deltanet as gdn
from kimik3_lessons import lab


def make_inputs(B=2, H=2, T=100, K=16, V=12, dtype=torch.float64, g_scale=0.3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, K, generator=gen, dtype=dtype)
    k = F.normalize(torch.randn(B, H, T, K, generator=gen, dtype=dtype), dim=-1)
    v = torch.randn(B, H, T, V, generator=gen, dtype=dtype)
    g = -g_scale * torch.rand(B, H, T, generator=gen, dtype=dtype)
    beta = torch.rand(B, H, T, generator=gen, dtype=dtype)
    S0 = torch.randn(B, H, K, V, generator=gen, dtype=dtype)
    return q, k, v, g, beta, S0


def in_two_calls(form, q, k, v, g, beta, S0, split=37, **kwargs):
    """Run `form` over [0, split) then [split, T), carrying the state; return (o, S)."""
    first = [x[:, :, :split] for x in (q, k, v, g, beta)]
    rest = [x[:, :, split:] for x in (q, k, v, g, beta)]
    o1, S1 = form(*first, initial_state=S0, **kwargs)
    o2, S2 = form(*rest, initial_state=S1, **kwargs)
    return torch.cat([o1, o2], dim=2), S2


@pytest.mark.parametrize("chunk_size", [1, 16, 24, 32, 64, 128])
def test_chunked_matches_recurrent_float64(chunk_size):
    q, k, v, g, beta, S0 = make_inputs()
    o_ref, S_ref = gdn.recurrent(q, k, v, g, beta, initial_state=S0)
    o, S = in_two_calls(gdn.chunked, q, k, v, g, beta, S0, chunk_size=chunk_size)
    lab.check_close(f"chunked C={chunk_size} o", o_ref, o, rtol=1e-9)
    lab.check_close(f"chunked C={chunk_size} S", S_ref, S, rtol=1e-9)


def test_recurrent_matches_fla():
    from fla.ops.gated_delta_rule.naive import naive_recurrent_gated_delta_rule
    q, k, v, g, beta, S0 = make_inputs()
    o, S = gdn.recurrent(q, k, v, g, beta, initial_state=S0)
    bthd = lambda x: x.transpose(1, 2)
    o_fla, S_fla = naive_recurrent_gated_delta_rule(bthd(q), bthd(k), bthd(v), bthd(beta), bthd(g), scale=1.0,
                                                    initial_state=S0, output_final_state=True)
    lab.check_close("recurrent vs FLA o", bthd(o_fla), o, rtol=1e-5)  # FLA computes in float32
    lab.check_close("recurrent vs FLA S", S_fla, S, rtol=1e-5)


def test_decay_step_then_delta_step():
    """One step by hand: S_1 = alpha (I - beta k^T k) S_0 + beta k^T v, read by q."""
    q, k, v, g, beta, S0 = make_inputs(B=1, H=1, T=1)
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
    G = torch.full((64,), -5.0).cumsum(0)
    assert torch.isinf(torch.exp(-G)).any(), "the test needs a decay strong enough for exp(-G) to overflow"
    assert torch.isfinite(gdn.decay_mask(G)).all()


def test_mamba2_gate_matches_fla():
    from fla.ops.gated_delta_rule.gate import naive_gdn_gate
    x, A_log, dt_bias = torch.randn(2, 7, 4) * 3, torch.randn(4), torch.randn(4)
    g = gdn.mamba2_gate(x, A_log, dt_bias)
    lab.check_close("mamba2 gate vs FLA", naive_gdn_gate(x, A_log, dt_bias), g)
    assert (g <= 0).all()


@pytest.mark.parametrize("chunk_size", [16, 64])
def test_triton_matches_recurrent_float32(chunk_size):
    q, k, v, g, beta, S0 = make_inputs(B=1, H=2, T=100, K=16, V=24)
    o_ref, S_ref = gdn.recurrent(q, k, v, g, beta, initial_state=S0)
    o, S = gdn.triton_chunked(*(x.float() for x in (q, k, v, g, beta)), chunk_size=chunk_size,
                              initial_state=S0.float())
    lab.check_close(f"triton C={chunk_size} o", o_ref, o, rtol=1e-4)
    lab.check_close(f"triton C={chunk_size} S", S_ref, S, rtol=1e-4)


def test_triton_splits_wide_values_over_programs():
    """V = 80 > 64: the value columns are split over two programs per head, each with the full K side."""
    q, k, v, g, beta, S0 = make_inputs(B=1, H=1, T=40, K=16, V=80)
    o_ref, S_ref = gdn.recurrent(q, k, v, g, beta, initial_state=S0)
    o, S = gdn.triton_chunked(*(x.float() for x in (q, k, v, g, beta)), chunk_size=16,
                              initial_state=S0.float())
    lab.check_close("triton, two value blocks, o", o_ref, o, rtol=1e-4)
    lab.check_close("triton, two value blocks, S", S_ref, S, rtol=1e-4)


def test_strong_decay_float32():
    """g ~ -5 per token: over a 64-token chunk G reaches -320 and exp(-G) overflows float32."""
    q, k, v, g, beta, S0 = make_inputs(B=1, H=2, T=100, K=16, V=16)
    g = -5.0 + 0.1 * torch.rand_like(g)
    assert torch.isinf(torch.exp(-g[..., :64].float().cumsum(-1))).any()
    o_ref, S_ref = gdn.recurrent(q, k, v, g, beta, initial_state=S0)
    inputs32 = [x.float() for x in (q, k, v, g, beta)]
    for name, form in (("chunked", gdn.chunked), ("triton", gdn.triton_chunked)):
        o, S = form(*inputs32, chunk_size=64, initial_state=S0.float())
        lab.check_close(f"strong decay {name} o", o_ref, o, rtol=1e-4)
        lab.check_close(f"strong decay {name} S", S_ref, S, rtol=1e-4)


def test_half_precision_returns_input_dtype():
    q, k, v, g, beta, S0 = make_inputs(dtype=torch.float32)
    o_ref, _ = gdn.recurrent(q, k, v, g, beta)
    for form in (gdn.recurrent, gdn.chunked):
        o, S = form(*(x.bfloat16() for x in (q, k, v, g, beta)))
        assert o.dtype == torch.bfloat16 and S.dtype == torch.float32
        lab.check_close(f"{form.__name__} bfloat16", o_ref, o, rtol=3e-2)


@pytest.mark.parametrize("form", [gdn.recurrent, gdn.chunked, gdn.triton_chunked])
def test_bad_input(form):
    q, k, v, g, beta, S0 = (x.float() for x in make_inputs(B=1, H=2, T=20))
    bad = [
        (r"g is a log decay and must be <= 0", dict(g=g.abs())),
        (r"g must be \[B, H, T\] \(log decay, one per head\) = \[1, 2, 20\]", dict(g=g[..., None].expand(-1, -1, -1, 16))),
        (r"beta must be \[B, H, T\]", dict(beta=beta[..., :5])),
        (r"q must be a 4-dimensional tensor \[B, H, T, D\]", dict(q=q[0])),
        (r"initial_state must be \[B, H, K, V\]", dict(initial_state=S0[..., :3])),
    ]
    for message, change in bad:
        args = dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=S0) | change
        with pytest.raises(ValueError, match=message):
            form(**args)


def test_triton_chunk_size_must_be_a_power_of_two_of_at_least_16():
    q, k, v, g, beta, _ = (x.float() for x in make_inputs(B=1, H=1, T=20))
    for chunk_size in (24, 8):
        with pytest.raises(ValueError, match="chunk_size"):
            gdn.triton_chunked(q, k, v, g, beta, chunk_size=chunk_size)
