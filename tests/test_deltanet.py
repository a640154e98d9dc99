"""DeltaNet: the recurrence, the WY/UT chunked form and the Triton kernel agree with each other (float64,
float32 for Triton), with the delta rule written as a product of Householder factors, with
torch.linalg.solve_triangular, and with flash-linear-attention's naive references."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from kimik3_lessons import deltanet as dn
from kimik3_lessons import lab


def inputs(B=2, H=3, T=100, K=16, V=16, dtype=torch.float64, seed=0, state=False):
    """L2-normalized q, k (as DeltaNet layers make them), signed values, beta in (0, 1), a random state."""
    g = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(B, H, T, K, generator=g, dtype=dtype), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(B, H, T, K, generator=g, dtype=dtype), dim=-1)
    v = torch.randn(B, H, T, V, generator=g, dtype=dtype)
    beta = torch.rand(B, H, T, generator=g, dtype=dtype)
    S0 = torch.randn(B, H, K, V, generator=g, dtype=dtype) if state else None
    return q, k, v, beta, S0


@pytest.mark.parametrize("chunk_size", [1, 16, 32, 64, 128])
def test_chunked_matches_recurrent_in_float64(chunk_size):
    """T = 100 is a multiple of none of the chunk sizes but 1; 128 > T is a single padded chunk."""
    q, k, v, beta, S0 = inputs(K=12, V=20, state=True)
    o_ref, S_ref = dn.recurrent(q, k, v, beta, initial_state=S0)
    o, S = dn.chunked(q, k, v, beta, chunk_size=chunk_size, initial_state=S0)
    lab.check_close("chunked o", o_ref, o, rtol=1e-9)
    lab.check_close("chunked S", S_ref, S, rtol=1e-9)


def test_recurrence_is_a_product_of_householder_steps():
    """S_t = (I - beta_t k_t^T k_t) S_{t-1} + beta_t k_t^T v_t, o_t = q_t S_t, with explicit K×K matrices."""
    q, k, v, beta, S0 = inputs(B=1, H=1, T=9, K=5, V=3, state=True)
    o, S = dn.recurrent(q, k, v, beta, initial_state=S0)
    S_ref = S0[0, 0]
    for t in range(9):
        k_t, b_t = k[0, 0, t], beta[0, 0, t]
        S_ref = (torch.eye(5, dtype=torch.float64) - b_t * torch.outer(k_t, k_t)) @ S_ref \
            + b_t * torch.outer(k_t, v[0, 0, t])
        lab.check_close(f"o_{t}", q[0, 0, t] @ S_ref, o[0, 0, t])
    lab.check_close("S_T", S_ref, S[0, 0])


@pytest.mark.parametrize("form", [dn.recurrent, dn.chunked])
def test_state_carries_across_two_calls(form):
    q, k, v, beta, S0 = inputs(state=True)
    o_ref, S_ref = dn.recurrent(q, k, v, beta, initial_state=S0)
    split = 37  # not a multiple of the chunk size
    first = [x[:, :, :split] for x in (q, k, v, beta)]
    second = [x[:, :, split:] for x in (q, k, v, beta)]
    o1, S1 = form(*first, initial_state=S0)
    o2, S2 = form(*second, initial_state=S1)
    lab.check_close("two calls o", o_ref, torch.cat([o1, o2], dim=2))
    lab.check_close("two calls S", S_ref, S2)


def test_recurrent_matches_fla_delta_rule_recurrence():
    """FLA's reference takes [B, H, T, D], multiplies q by D^-0.5 itself and computes in float32."""
    from fla.ops.delta_rule.naive import delta_rule_recurrence
    q, k, v, beta, S0 = inputs(K=16, V=24, state=True)
    o_ref, S_ref = delta_rule_recurrence(q, k, v, beta, initial_state=S0)
    o, S = dn.recurrent(q * 16**-0.5, k, v, beta, initial_state=S0)
    lab.check_close("recurrent o vs FLA", o_ref, o, rtol=1e-5)
    lab.check_close("recurrent S vs FLA", S_ref, S, rtol=1e-5)


def test_chunked_matches_fla_delta_rule_chunkwise():
    """FLA's naive chunkwise form keeps float64 inputs in float64 (it needs T to be a multiple of C)."""
    from fla.ops.delta_rule.naive import delta_rule_chunkwise
    q, k, v, beta, _ = inputs(T=128, K=16, V=24)
    o_ref, S_ref = delta_rule_chunkwise(q, k, v, beta, chunk_size=32)
    o, S = dn.chunked(q * 16**-0.5, k, v, beta, chunk_size=32)
    lab.check_close("chunked o vs FLA chunkwise", o_ref, o, rtol=1e-9)
    lab.check_close("chunked S vs FLA chunkwise", S_ref, S, rtol=1e-9)


@pytest.mark.parametrize("C", [1, 7, 16, 17, 64, 100])
def test_ut_transform_inverts_unit_lower_triangular(C):
    """Row by row and by blocks of 16 (17 and 100 are padded to whole blocks), against LAPACK's solver."""
    g = torch.Generator().manual_seed(C)
    A = torch.tril(torch.randn(2, 3, C, C, generator=g, dtype=torch.float64), diagonal=-1) * 0.3
    I = torch.eye(C, dtype=torch.float64)
    reference = torch.linalg.solve_triangular(I + A, I.expand_as(A), upper=False)
    lab.check_close("forward_substitution vs solve_triangular", reference, dn.forward_substitution(A))
    T = dn.ut_transform(A)
    lab.check_close("ut_transform vs solve_triangular", reference, T)
    lab.check_close("(I + A) T = I", I.expand_as(A), (I + A) @ T)


def test_wy_representation_is_the_householder_product():
    """P = H_C ... H_1 with explicit K×K factors equals I - K^T W, and one chunk maps S to P S + K^T U."""
    _, k, v, beta, S0 = inputs(B=1, H=2, T=20, K=8, V=5, state=True)
    W, U = dn.wy_representation(k, v, beta)
    I = torch.eye(8, dtype=torch.float64)
    P = I.expand(1, 2, 8, 8)
    for t in range(20):
        k_t = k[:, :, t]
        P = (I - beta[:, :, t, None, None] * k_t[..., :, None] * k_t[..., None, :]) @ P
    lab.check_close("householder_product", P, dn.householder_product(k, beta))
    lab.check_close("P = I - K^T W", P, I - k.transpose(-1, -2) @ W)
    _, S_ref = dn.recurrent(k, k, v, beta, initial_state=S0)
    lab.check_close("S_C = P S_0 + K^T U", S_ref, P @ S0 + k.transpose(-1, -2) @ U)


@pytest.mark.parametrize("chunk_size, K, V", [(16, 16, 16), (32, 24, 40), (64, 16, 8)])
def test_triton_matches_recurrent_in_float32(chunk_size, K, V):
    """T = 100 leaves a masked tail; head dims 24, 40 and 8 are padded inside the kernel."""
    q, k, v, beta, S0 = inputs(B=1, H=2, T=100, K=K, V=V, state=True)
    o_ref, S_ref = dn.recurrent(q, k, v, beta, initial_state=S0)
    o, S = dn.triton_chunked(q.float(), k.float(), v.float(), beta.float(), chunk_size=chunk_size,
                             initial_state=S0.float())
    assert o.dtype == torch.float32 and S.dtype == torch.float32
    lab.check_close("triton o", o_ref, o, rtol=1e-4)
    lab.check_close("triton S", S_ref, S, rtol=1e-4)


def test_triton_without_initial_state_and_two_calls():
    q, k, v, beta, _ = inputs(B=1, H=2, T=70, dtype=torch.float32)
    o_ref, S_ref = dn.recurrent(q.double(), k.double(), v.double(), beta.double())
    o1, S1 = dn.triton_chunked(q[:, :, :50], k[:, :, :50], v[:, :, :50], beta[:, :, :50], chunk_size=16)
    o2, S2 = dn.triton_chunked(q[:, :, 50:], k[:, :, 50:], v[:, :, 50:], beta[:, :, 50:], chunk_size=16,
                               initial_state=S1)
    lab.check_close("triton two calls o", o_ref, torch.cat([o1, o2], dim=2), rtol=1e-4)
    lab.check_close("triton two calls S", S_ref, S2, rtol=1e-4)


@pytest.mark.parametrize("form", [dn.recurrent, dn.chunked])
def test_bfloat16_in_bfloat16_out_with_float32_state(form):
    q, k, v, beta, _ = inputs(T=40)
    o_ref, S_ref = dn.recurrent(q, k, v, beta)
    o, S = form(*(x.bfloat16() for x in (q, k, v, beta)))
    assert o.dtype == torch.bfloat16 and S.dtype == torch.float32
    lab.check_close("bf16 o", o_ref, o, rtol=3e-2)
    lab.check_close("bf16 S", S_ref, S, rtol=3e-2)


def test_chunked_flops_counts_every_matrix_product():
    """torch's FlopCounterMode counts an [m, n] @ [n, p] product as 2 m n p, the convention of the count."""
    q, k, v, beta, _ = inputs(B=1, H=2, T=100, K=16, V=16)
    for C in (1, 16, 64, 100):
        with FlopCounterMode(display=False) as counter:
            dn.chunked(q, k, v, beta, chunk_size=C)
        assert counter.get_total_flops() == 2 * dn.chunked_flops(100, 16, C)["total"], C
    assert dn.chunked_flops(100, 16, 1)["state"] == dn.recurrent_flops(100, 16)


def _bad_inputs():
    q, k, v, beta, S0 = inputs(B=1, H=2, T=10, K=4, V=4, state=True)
    return [
        ("q", dict(q=q[0])),
        ("k", dict(k=k[..., :3])),
        ("v", dict(v=v[:, :, :9])),
        ("beta", dict(beta=beta[..., None])),
        ("beta", dict(beta=None)),
        ("initial_state", dict(initial_state=S0[:, :1])),
    ], dict(q=q, k=k, v=v, beta=beta)


@pytest.mark.parametrize("form", [dn.recurrent, dn.chunked, dn.triton_chunked])
def test_bad_input_raises_value_error_naming_the_argument(form):
    cases, good = _bad_inputs()
    for name, change in cases:
        with pytest.raises(ValueError, match=name):
            form(**{**good, **change})


@pytest.mark.parametrize("form, chunk_size",
                         [(dn.chunked, 0), (dn.triton_chunked, 24), (dn.triton_chunked, 8)])
def test_bad_chunk_size_raises(form, chunk_size):
    _, good = _bad_inputs()
    with pytest.raises(ValueError, match="chunk_size"):
        form(**good, chunk_size=chunk_size)


def test_chunked_is_differentiable_with_the_recurrences_gradients():
    """Layers train through `chunked`: no in-place write may break autograd, and the gradients must
    equal those of the recurrence (a different computation of the same function)."""
    q, k, v, beta, S0 = inputs(B=1, H=2, T=40, K=8, V=8, state=True)
    grads = []
    for form, kwargs in ((dn.recurrent, {}), (dn.chunked, {"chunk_size": 16})):
        leaves = [x.clone().requires_grad_() for x in (q, k, v, beta, S0)]
        o, S = form(*leaves[:4], initial_state=leaves[4], **kwargs)
        (o.square().sum() + S.square().sum()).backward()
        grads.append([x.grad for x in leaves])
    for name, ref, out in zip(("q", "k", "v", "beta", "S0"), *grads, strict=True):
        lab.check_close(f"d/d{name}", ref, out)
