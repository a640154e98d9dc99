"""Linear attention: the recurrence, the quadratic form, the chunked form and the Triton kernel agree
with each other (float64), with explicit normalized attention weights, and with flash-linear-attention."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from kimik3_lessons import lab
from kimik3_lessons import linear_attention as la


def inputs(B=2, H=3, T=100, K=16, V=16, dtype=torch.float64, seed=0, state=False):
    """Positive features (as the lessons use them) for q, k; signed values; optionally a random state."""
    g = torch.Generator().manual_seed(seed)
    q = la.elu_feature_map(torch.randn(B, H, T, K, generator=g, dtype=dtype))
    k = la.elu_feature_map(torch.randn(B, H, T, K, generator=g, dtype=dtype))
    v = torch.randn(B, H, T, V, generator=g, dtype=dtype)
    S0 = torch.randn(B, H, K, V, generator=g, dtype=dtype) if state else None
    return q, k, v, S0


@pytest.mark.parametrize("chunk_size", [1, 16, 32, 64, 128])
def test_forms_agree_in_float64(chunk_size):
    q, k, v, _ = inputs(T=100, K=12, V=20)
    o_ref, S_ref = la.recurrent(q, k, v)
    for name, (o, S) in {"parallel": la.parallel(q, k, v),
                         "chunked": la.chunked(q, k, v, chunk_size=chunk_size)}.items():
        lab.check_close(f"{name} o", o_ref, o, rtol=1e-9)
        lab.check_close(f"{name} S", S_ref, S, rtol=1e-9)


def test_recurrence_matches_its_definition_written_as_sums():
    """o_t = sum_{i<=t} (q_t · k_i) v_i and S_T = sum_i k_i^T v_i, summed term by term."""
    q, k, v, _ = inputs(B=1, H=1, T=9, K=3, V=4)
    o, S = la.recurrent(q, k, v)
    for t in range(9):
        o_t = sum((q[0, 0, t] @ k[0, 0, i]) * v[0, 0, i] for i in range(t + 1))
        lab.check_close(f"o_{t}", o_t, o[0, 0, t])
    lab.check_close("S_T", sum(torch.outer(k[0, 0, i], v[0, 0, i]) for i in range(9)), S[0, 0])


@pytest.mark.parametrize("form", [la.recurrent, la.parallel, la.chunked])
def test_initial_state_carries_across_two_calls(form):
    q, k, v, S0 = inputs(T=100, state=True)
    o_ref, S_ref = la.recurrent(q, k, v, initial_state=S0)
    split = 37  # not a multiple of any chunk size
    o1, S1 = form(q[:, :, :split], k[:, :, :split], v[:, :, :split], initial_state=S0)
    o2, S2 = form(q[:, :, split:], k[:, :, split:], v[:, :, split:], initial_state=S1)
    lab.check_close("two calls o", o_ref, torch.cat([o1, o2], dim=2))
    lab.check_close("two calls S", S_ref, S2)


def test_decode_step_by_step_equals_one_call():
    q, k, v, _ = inputs(T=20)
    o_ref, S_ref = la.chunked(q, k, v, chunk_size=16)
    S = torch.zeros(2, 3, 16, 16, dtype=torch.float64)
    for t in range(20):
        o_t, S = la.linear_attention_step(S, q[:, :, t], k[:, :, t], v[:, :, t])
        lab.check_close(f"decode o_{t}", o_ref[:, :, t], o_t)
    lab.check_close("decode S", S_ref, S)


@pytest.mark.parametrize("chunk_size, K, V", [(16, 16, 16), (32, 24, 40), (64, 16, 8)])
def test_triton_matches_chunked_in_float32(chunk_size, K, V):
    """T = 100 leaves a masked tail; K, V of 24, 40, 8 are padded inside the kernel."""
    q, k, v, S0 = inputs(B=1, H=2, T=100, K=K, V=V, state=True)
    o_ref, S_ref = la.chunked(q, k, v, chunk_size=chunk_size, initial_state=S0)
    o, S = la.triton_chunked(q.float(), k.float(), v.float(), chunk_size=chunk_size, initial_state=S0.float())
    assert o.dtype == torch.float32 and S.dtype == torch.float32
    lab.check_close("triton o", o_ref, o, rtol=1e-4)
    lab.check_close("triton S", S_ref, S, rtol=1e-4)


def test_triton_without_initial_state_and_two_calls():
    q, k, v, _ = inputs(B=1, H=2, T=70, dtype=torch.float32)
    o_ref, S_ref = la.recurrent(q.double(), k.double(), v.double())
    o1, S1 = la.triton_chunked(q[:, :, :50], k[:, :, :50], v[:, :, :50], chunk_size=16)
    o2, S2 = la.triton_chunked(q[:, :, 50:], k[:, :, 50:], v[:, :, 50:], chunk_size=16, initial_state=S1)
    lab.check_close("triton two calls o", o_ref, torch.cat([o1, o2], dim=2), rtol=1e-4)
    lab.check_close("triton two calls S", S_ref, S2, rtol=1e-4)


def test_agrees_with_flash_linear_attention():
    from fla.ops.linear_attn.naive import naive_recurrent_linear_attn

    q, k, v, S0 = inputs(T=100, state=True)
    o_ref, S_ref = naive_recurrent_linear_attn(*(x.transpose(1, 2) for x in (q, k, v)), scale=1.0,
                                               initial_state=S0.float(), output_final_state=True)
    o, S = la.chunked(q, k, v, chunk_size=32, initial_state=S0)
    lab.check_close("fla o", o_ref.transpose(1, 2), o, rtol=1e-5)  # fla computes in float32
    lab.check_close("fla S", S_ref, S, rtol=1e-5)


def test_normalized_agrees_with_flash_linear_attention():
    from fla.ops.linear_attn.naive import naive_recurrent_linear_attn

    q, k, v, _ = inputs(T=100)
    o_ref, _ = naive_recurrent_linear_attn(*(x.transpose(1, 2) for x in (q, k, v)), scale=1.0, normalize=True)
    o, _ = la.normalized(la.chunked, q, k, v, chunk_size=16)
    lab.check_close("fla normalized o", o_ref.transpose(1, 2), o, rtol=1e-5)


@pytest.mark.parametrize("form, kwargs",
                         [(la.recurrent, {}), (la.parallel, {}), (la.chunked, {"chunk_size": 32})])
def test_normalized_is_attention_with_kernel_weights(form, kwargs):
    """o_t = sum_i w_ti v_i with w_ti = (q_t · k_i) / sum_{j<=t} (q_t · k_j), built as a [T, T] matrix."""
    q, k, v, _ = inputs(T=100)
    w = (q @ k.transpose(-1, -2)).tril()
    o_ref = (w / w.sum(-1, keepdim=True)) @ v
    o, state = la.normalized(form, q, k, v, **kwargs)
    lab.check_close("normalized o", o_ref, o)
    lab.check_close("z = sum of keys", k.sum(2), state[..., -1])


def test_normalized_carries_z_across_calls():
    q, k, v, _ = inputs(T=100)
    o_ref, _ = la.normalized(la.recurrent, q, k, v)
    o1, state = la.normalized(la.chunked, q[:, :, :61], k[:, :, :61], v[:, :, :61], chunk_size=16)
    o2, _ = la.normalized(la.chunked, q[:, :, 61:], k[:, :, 61:], v[:, :, 61:], chunk_size=16,
                          initial_state=state)
    lab.check_close("normalized two calls", o_ref, torch.cat([o1, o2], dim=2))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_computes_in_float32(dtype):
    q, k, v, _ = inputs(T=100, dtype=torch.float32)
    o_ref, S_ref = la.recurrent(q.to(dtype).double(), k.to(dtype).double(), v.to(dtype).double())
    for form in (la.recurrent, la.parallel, la.chunked, la.triton_chunked):
        o, S = form(q.to(dtype), k.to(dtype), v.to(dtype))
        assert o.dtype == dtype and S.dtype == torch.float32, form.__name__
        lab.check_close(f"{form.__name__} {dtype} S", S_ref, S, rtol=1e-5)
        lab.check_close(f"{form.__name__} {dtype} o", o_ref, o)


@pytest.mark.parametrize("T, d, C", [(128, 16, 1), (128, 16, 32), (100, 16, 64), (100, 8, 128)])
def test_chunked_flops_counts_the_matmuls_chunked_runs(T, d, C):
    q, k, v, _ = inputs(B=1, H=1, T=T, K=d, V=d)
    with FlopCounterMode(display=False) as counter:
        la.chunked(q, k, v, chunk_size=C)
    assert la.chunked_flops(T, d, C)["total"] == counter.get_total_flops()


def test_chunked_flops_terms():
    """The state term does not move with C; the intra term doubles when C doubles (L a multiple of C)."""
    flops = {C: la.chunked_flops(4096, 64, C) for C in (16, 32, 64)}
    assert flops[16]["state"] == flops[64]["state"] == 4 * 4096 * 64**2
    assert flops[32]["intra"] == 2 * flops[16]["intra"]
    assert la.chunked_flops(4096, 64, 4096)["intra"] == 4 * 4096**2 * 64


FORMS = {"recurrent": la.recurrent, "parallel": la.parallel,
         "chunked": lambda q, k, v, **kw: la.chunked(q, k, v, chunk_size=16, **kw),
         "triton_chunked": lambda q, k, v, **kw: la.triton_chunked(q, k, v, chunk_size=16, **kw)}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("case, match", [
    ("rank", r"q must be a 4-dimensional tensor \[B, H, T, D\]"),
    ("batch", "v must be"),
    ("heads", "k must have the shape of q"),
    ("time", "v must be"),
    ("head_dim", "k must have the shape of q"),
    ("state", "initial_state must be"),
])
def test_bad_input_raises_value_error(form, case, match):
    q, k, v, S0 = inputs(B=2, H=3, T=10, K=4, V=5, dtype=torch.float32, state=True)
    q, k, v, S0 = {
        "rank": (q[0], k[0], v[0], None),
        "batch": (q, k, v[:1], None),
        "heads": (q, k[:, :2], v, None),
        "time": (q, k, v[:, :, :7], None),
        "head_dim": (q, k[..., :3], v, None),
        "state": (q, k, v, S0[..., :4]),
    }[case]
    with pytest.raises(ValueError, match=match):
        FORMS[form](q, k, v, initial_state=S0)


@pytest.mark.parametrize("form, chunk_size, match", [
    (la.chunked, 0, "chunk_size must be a positive integer"),
    (la.chunked, 2.0, "chunk_size must be a positive integer"),
    (la.triton_chunked, 24, "power of two"),
    (la.triton_chunked, 8, ">= 16"),
])
def test_bad_chunk_size_raises_value_error(form, chunk_size, match):
    q, k, v, _ = inputs(T=10, dtype=torch.float32)
    with pytest.raises(ValueError, match=match):
        form(q, k, v, chunk_size=chunk_size)


def test_bad_triton_precision_raises_value_error():
    q, k, v, _ = inputs(T=10, dtype=torch.float32)
    with pytest.raises(ValueError, match="input_precision"):
        la.triton_chunked(q, k, v, input_precision="bf16")
