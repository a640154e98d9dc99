"""Linear attention (lessons 02-03), what is its own: the recurrence is the sum it stands for,
normalized linear attention is attention with kernel weights (and agrees with flash-linear-attention's),
and `chunked_flops` counts the products `chunked` runs. The contract every form keeps (the forms agree,
carry their state, take half precision, refuse bad input, match FLA) is tested in test_mixers.py."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from kimik3_lessons import lab
from kimik3_lessons import linear_attention as la


def inputs(B=2, H=3, T=100, K=16, V=16, seed=0):
    """Positive features (as the lessons use them) for q, k and signed values, float64."""
    g = torch.Generator().manual_seed(seed)
    q = la.elu_feature_map(torch.randn(B, H, T, K, generator=g, dtype=torch.float64))
    k = la.elu_feature_map(torch.randn(B, H, T, K, generator=g, dtype=torch.float64))
    v = torch.randn(B, H, T, V, generator=g, dtype=torch.float64)
    return q, k, v


def test_recurrence_matches_its_definition_written_as_sums():
    """o_t = sum_{i<=t} (q_t · k_i) v_i and S_T = sum_i k_i^T v_i, summed term by term."""
    q, k, v = inputs(B=1, H=1, T=9, K=3, V=4)
    o, S = la.recurrent(q, k, v)
    for t in range(9):
        o_t = sum((q[0, 0, t] @ k[0, 0, i]) * v[0, 0, i] for i in range(t + 1))
        lab.check_close(f"o_{t}", o_t, o[0, 0, t])
    lab.check_close("S_T", sum(torch.outer(k[0, 0, i], v[0, 0, i]) for i in range(9)), S[0, 0])


def test_normalized_agrees_with_flash_linear_attention():
    from fla.ops.linear_attn.naive import naive_recurrent_linear_attn

    q, k, v = inputs(T=100)
    o_ref, _ = naive_recurrent_linear_attn(*(x.transpose(1, 2) for x in (q, k, v)), scale=1.0, normalize=True)
    o, _ = la.normalized(la.chunked, q, k, v, chunk_size=16)
    lab.check_close("fla normalized o", o_ref.transpose(1, 2), o, rtol=1e-5)


@pytest.mark.parametrize("form, kwargs",
                         [(la.recurrent, {}), (la.parallel, {}), (la.chunked, {"chunk_size": 32})])
def test_normalized_is_attention_with_kernel_weights(form, kwargs):
    """o_t = sum_i w_ti v_i with w_ti = (q_t · k_i) / sum_{j<=t} (q_t · k_j), built as a [T, T] matrix."""
    q, k, v = inputs(T=100)
    w = (q @ k.transpose(-1, -2)).tril()
    o_ref = (w / w.sum(-1, keepdim=True)) @ v
    o, state = la.normalized(form, q, k, v, **kwargs)
    lab.check_close("normalized o", o_ref, o)
    lab.check_close("z = sum of keys", k.sum(2), state[..., -1])


def test_normalized_carries_z_across_calls():
    q, k, v = inputs(T=100)
    o_ref, _ = la.normalized(la.recurrent, q, k, v)
    o1, state = la.normalized(la.chunked, q[:, :, :61], k[:, :, :61], v[:, :, :61], chunk_size=16)
    o2, _ = la.normalized(la.chunked, q[:, :, 61:], k[:, :, 61:], v[:, :, 61:], chunk_size=16,
                          initial_state=state)
    lab.check_close("normalized two calls", o_ref, torch.cat([o1, o2], dim=2))


@pytest.mark.parametrize("T, d, C", [(128, 16, 1), (128, 16, 32), (100, 16, 64), (100, 8, 128)])
def test_chunked_flops_counts_the_matmuls_chunked_runs(T, d, C):
    q, k, v = inputs(B=1, H=1, T=T, K=d, V=d)
    with FlopCounterMode(display=False) as counter:
        la.chunked(q, k, v, chunk_size=C)
    assert la.chunked_flops(T, d, C)["total"] == counter.get_total_flops()


def test_chunked_flops_terms():
    """The state term does not move with C; the intra term doubles when C doubles (L a multiple of C)."""
    flops = {C: la.chunked_flops(4096, 64, C) for C in (16, 32, 64)}
    assert flops[16]["state"] == flops[64]["state"] == 4 * 4096 * 64**2
    assert flops[32]["intra"] == 2 * flops[16]["intra"]
    assert la.chunked_flops(4096, 64, 4096)["intra"] == 4 * 4096**2 * 64
