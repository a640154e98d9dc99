"""Lesson 09: SiTU against its formula, the fused kernel against SiTU, the sparse MoE against a dense and
a token-by-token reference, routing, bias balancing, and the cost formula against the module."""

import math

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from torch.utils.flop_counter import FlopCounterMode

from kimik3_lessons import lab, moe


def situ_numpy(gate, up, beta=4.0, lb=25.0):
    """SiTU written out in numpy float64, independently of the module."""
    g, u = np.asarray(gate, np.float64), np.asarray(up, np.float64)
    gate_act = beta * np.tanh(g / beta) / (1.0 + np.exp(-g))
    return gate_act * (u if lb is None else lb * np.tanh(u / lb))


# ---------------------------------------------------------------------------------------------------
# Activations


@pytest.mark.parametrize("lb", [25.0, None])
def test_situ_matches_formula_in_float64(lb):
    torch.manual_seed(0)
    g, u = torch.randn(2, 3, 257, dtype=torch.float64) * 6, torch.randn(2, 3, 257, dtype=torch.float64) * 40
    out = moe.situ(g, u, beta=4.0, linear_beta=lb)
    assert out.dtype == torch.float64
    expected = situ_numpy(g.numpy(), u.numpy(), 4.0, lb)
    lab.check_close("situ vs the numpy formula", torch.from_numpy(expected), out, rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_situ_low_precision_returns_input_dtype(dtype):
    torch.manual_seed(1)
    g, u = (torch.randn(4, 300) * 5).to(dtype), (torch.randn(4, 300) * 30).to(dtype)
    out = moe.situ(g, u)
    assert out.dtype == dtype
    ref = situ_numpy(g.float().numpy(), u.float().numpy())  # the same (rounded) inputs, in float64
    tol = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
    lab.check_close(f"situ in {dtype}", torch.from_numpy(ref), out, rtol=tol)


def test_situ_is_bounded_and_swiglu_is_not():
    big = torch.tensor([-1e4, -30.0, 30.0, 1e4])
    out = moe.situ(big[:, None].expand(4, 4), big[None, :].expand(4, 4))
    assert torch.isfinite(out).all() and out.abs().max() <= 4.0 * 25.0
    assert out.abs().max() > 0.99 * 4.0 * 25.0  # the bound is reached at +inf gate and ±inf up
    assert moe.swiglu(big, big).abs().max() > 1e7


def test_swiglu_matches_formula():
    torch.manual_seed(2)
    g, u = torch.randn(1000, dtype=torch.float64) * 4, torch.randn(1000, dtype=torch.float64)
    expected = g.numpy() / (1 + np.exp(-g.numpy())) * u.numpy()
    lab.check_close("swiglu vs the numpy formula", torch.from_numpy(expected), moe.swiglu(g, u), rtol=1e-12)


@pytest.mark.parametrize("shape", [(7,), (3, 1031), (2, 3, 5, 129)])
@pytest.mark.parametrize("lb", [25.0, None])
def test_situ_triton_matches_situ(shape, lb, device):
    torch.manual_seed(3)
    g, u = (torch.randn(shape) * 8).to(device), (torch.randn(shape) * 60).to(device)
    out = moe.situ_triton(g, u, linear_beta=lb, block_size=256)  # masked last block for every shape
    assert out.shape == g.shape and out.dtype == g.dtype
    lab.check_close("situ_triton", moe.situ(g.double(), u.double(), linear_beta=lb), out, rtol=1e-6)


def test_situ_triton_is_accurate_per_element_over_all_magnitudes(device, gpu_arithmetic):
    """|gate| from 1e-8 to 80 (outputs stay normal float32 numbers): small inputs need tanh's series,
    large ones a tanh and sigmoid that do not overflow. With the GPU's exp (`gpu_arithmetic`: ex2.approx of
    a rounded product, its 2 ulp in full), 2e-6 allows for float32's rounding and ex2.approx's error
    amplified up to 3.5 times by tanh's (1 - e) / (1 + e) just above |x| = 1/8, where the series stops:
    the kernel's worst is about 1.3e-6. (A plain tl.exp, whose rounded product costs |x| 6e-8, gave
    3.5e-6 here.)"""
    t = torch.logspace(-8, math.log10(80.0), 3001)
    t = torch.cat([-t, t])
    for up in (torch.ones_like(t), t.flip(0) * 0.7):
        out = moe.situ_triton(t.to(device), up.to(device)).double().cpu()
        ref = torch.from_numpy(situ_numpy(t.numpy(), up.numpy()))
        normal = ref.abs() >= torch.finfo(torch.float32).tiny  # subnormal outputs carry fewer digits
        assert ((out - ref).abs() / ref.abs())[normal].max().item() < 2e-6


def test_situ_triton_half_precision_and_noncontiguous(device):
    torch.manual_seed(4)
    g, u = (torch.randn(64, 48) * 6).to(device), (torch.randn(48, 64) * 30).to(device).T  # u: a view
    out = moe.situ_triton(g.half(), u.half())
    assert out.dtype == torch.float16
    lab.check_close("situ_triton in float16", moe.situ(g.half().double(), u.half().double()), out, rtol=1e-3)
    lab.check_close("situ_triton on a transposed view", moe.situ(g, u), moe.situ_triton(g, u), rtol=1e-6)


def test_situ_triton_in_bfloat16_rounds_as_torch_does(device):
    """bfloat16 reaches the kernel as its bits (no bf16 instruction: a T4 with triton 3.2 has none). The
    result is the float32 one rounded to the nearest bfloat16, as torch rounds it: equal to situ's
    float32 result rounded, wherever the two float32 results round alike (all but a few ties)."""
    torch.manual_seed(5)
    g, u = (torch.randn(3, 1000) * 6).bfloat16().to(device), (torch.randn(3, 1000) * 30).bfloat16().to(device)
    out = moe.situ_triton(g, u, block_size=256)
    assert out.dtype == torch.bfloat16
    exact = moe.situ(g.float(), u.float())              # float32 on the same bfloat16 inputs
    same = (exact.bfloat16() == out).float().mean().item()
    assert same > 0.99, f"only {same:.1%} of the outputs are float32's result rounded to bfloat16"
    lab.check_close("situ_triton in bfloat16", moe.situ(g.double(), u.double()), out, rtol=1e-2)


@triton.jit
def round_to_bf16_kernel(x, bits, n, BLOCK: tl.constexpr):
    """bits = the bfloat16 nearest to x (float32), as moe's kernel rounds it."""
    i = tl.arange(0, BLOCK)
    tl.store(bits + i, moe.float32_to_bf16_bits(tl.load(x + i, mask=i < n)), mask=i < n)


def test_the_kernel_rounds_float32_to_bfloat16_like_torch(device):
    """Ties to even included: x = 1 + 2^-8 (half way between two bfloat16) rounds down to 1, 1 + 3 2^-8
    up; and random numbers of every magnitude."""
    x = torch.cat([torch.tensor([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 0.0, -0.0, 3e38]),
                   torch.randn(500) * torch.logspace(-30, 30, 500)]).float().to(device)
    bits = torch.empty(x.shape, dtype=torch.int16, device=device)
    round_to_bf16_kernel[(1,)](x, bits, x.numel(), BLOCK=1024)
    assert torch.equal(bits.view(torch.bfloat16).cpu(), x.bfloat16().cpu())


def test_activation_bad_input(device):
    g = torch.randn(4, 5, device=device)
    with pytest.raises(ValueError, match=r"^up must match gate in shape and dtype"):
        moe.situ(g, torch.randn(4, 6))
    with pytest.raises(ValueError, match=r"^up must match gate in shape and dtype"):
        moe.situ_triton(g, g.double())
    with pytest.raises(ValueError, match=r"^gate/up must be float16, bfloat16 or float32"):
        moe.situ_triton(g.double(), g.double())


# ---------------------------------------------------------------------------------------------------
# The MoE layer


def make_moe(latent=16, experts=8, top_k=2, shared=1, hidden=32, width=24, seed=0):
    torch.manual_seed(seed)
    layer = moe.LatentMoE(moe.MoEConfig(hidden, latent, experts, top_k, shared, width)).double()
    with torch.no_grad():
        layer.score_bias.normal_(0, 0.05)  # a bias that changes some choices
        if latent is not None:
            layer.latent_norm.weight.uniform_(0.5, 1.5)
    return layer


def reference_route(layer, x):
    """Sigmoid scores, top-k of score + bias by a full sort, raw scores renormalized."""
    s = 1 / (1 + torch.exp(-(x @ layer.router.weight.T)))
    idx = torch.argsort(s + layer.score_bias, dim=-1, descending=True)[:, :layer.top_k]
    chosen = s.gather(-1, idx)
    return chosen / chosen.sum(-1, keepdim=True), idx, s


def reference_forward(layer, x):
    """One token at a time, one chosen expert at a time, norm and MLPs written out."""
    p, idx, _ = reference_route(layer, x)
    out = []
    for n in range(len(x)):
        z = layer.latent_down.weight @ x[n] if layer.latent_size else x[n]
        r = torch.zeros_like(z)
        for j in range(layer.top_k):
            e = idx[n, j]
            h = torch.from_numpy(situ_numpy(layer.w1[e] @ z, layer.w3[e] @ z))
            r = r + p[n, j] * (layer.w2[e] @ h)
        if layer.latent_size:
            r = r / torch.sqrt((r * r).mean() + 1e-5) * layer.latent_norm.weight
            r = layer.latent_up.weight @ r
        if layer.shared is not None:
            sh = layer.shared
            r = r + sh.down_proj.weight @ torch.from_numpy(
                situ_numpy(sh.gate_proj.weight @ x[n], sh.up_proj.weight @ x[n]))
        out.append(r)
    return torch.stack(out)


@torch.no_grad()
def test_route_matches_reference():
    layer = make_moe()
    x = torch.randn(50, 32, dtype=torch.float64)
    p, idx, s = layer.route(x)
    p_ref, idx_ref, s_ref = reference_route(layer, x)
    assert torch.equal(idx, idx_ref)
    lab.check_close("scores", s_ref, s, rtol=1e-12)
    lab.check_close("weights", p_ref, p, rtol=1e-12)
    lab.check_close("weights sum to 1", torch.ones(50, dtype=torch.float64), p.sum(-1), rtol=1e-12)


@torch.no_grad()
def test_bias_only_picks_experts():
    layer = make_moe(experts=8, top_k=3)
    layer.score_bias.zero_()
    layer.score_bias[5] = 10.0  # expert 5 is now chosen by every token...
    x = torch.randn(40, 32, dtype=torch.float64)
    p, idx, s = layer.route(x)
    assert (idx == 5).any(-1).all()
    w5 = p[idx == 5]  # ...but weighed by its raw score, like the others
    lab.check_close("expert 5's weight", s[:, 5] / s.gather(-1, idx).sum(-1), w5, rtol=1e-12)


@pytest.mark.parametrize("latent,experts,top_k,shared", [
    (16, 8, 2, 1), (None, 8, 2, 1), (16, 8, 8, 0), (8, 16, 1, 2), (None, 5, 3, 0)])
@torch.no_grad()
def test_sparse_equals_dense_and_token_loop(latent, experts, top_k, shared):
    layer = make_moe(latent=latent, experts=experts, top_k=top_k, shared=shared)
    x = torch.randn(3, 7, 32, dtype=torch.float64)  # 21 tokens: some experts get none
    y = layer(x)
    assert y.shape == x.shape and y.dtype == x.dtype
    lab.check_close("sparse vs dense", layer.dense_forward(x), y, rtol=1e-10)
    by_token = reference_forward(layer, x.reshape(-1, 32))
    lab.check_close("sparse vs a loop over tokens", by_token, y.reshape(-1, 32), rtol=1e-10)


def test_sparse_and_dense_gradients_agree():
    layer = make_moe()
    x = torch.randn(30, 32, dtype=torch.float64)
    grads = []
    for forward in (layer.forward, layer.dense_forward):
        layer.zero_grad()
        (forward(x) ** 2).sum().backward()
        grads.append({n: t.grad.clone() for n, t in layer.named_parameters() if t.requires_grad})
    assert grads[0].keys() == grads[1].keys() and grads[0]["w1"].abs().max() > 0
    for name in grads[0]:
        lab.check_close(f"grad of {name}", grads[1][name], grads[0][name], rtol=1e-9)
    assert layer.score_bias.grad is None


@torch.no_grad()
def test_bfloat16_layer():
    torch.manual_seed(5)
    layer = moe.LatentMoE(moe.MoEConfig(64, 32, 8, 2, 1, 48)).bfloat16()
    x = torch.randn(2, 9, 64).bfloat16()
    y = layer(x)
    assert y.dtype == torch.bfloat16 and torch.isfinite(y).all()
    lab.check_close("sparse vs dense in bfloat16", layer.dense_forward(x), y, rtol=3e-2)


@torch.no_grad()
def test_update_bias_follows_the_sign_rule():
    layer = make_moe(experts=4)
    layer.score_bias.zero_()
    layer.update_bias(torch.tensor([10, 0, 5, 5]), rate=0.1)  # mean 5
    lab.check_close("bias after one step", torch.tensor([-0.1, 0.1, 0.0, 0.0], dtype=torch.float64),
                    layer.score_bias, rtol=1e-12)
    with pytest.raises(ValueError, match=r"^load must be \[num_experts\]"):
        layer.update_bias(torch.ones(3))


@torch.no_grad()
def test_bias_balancing_evens_out_skewed_load():
    torch.manual_seed(6)
    layer = moe.LatentMoE(moe.MoEConfig(32, 16, 16, 2, 0, 8))
    favourite = layer.router.weight[:3].sum(0)
    x = torch.randn(1024, 32) + 3 * favourite / favourite.norm()  # every token leans towards experts 0-2
    before = layer.expert_load(x)
    assert before.sum() == 1024 * 2 and before.max() > 3 * before.float().mean()
    for _ in range(60):
        layer.update_bias(layer.expert_load(x), rate=0.01)
    after = layer.expert_load(x)
    assert after.sum() == 1024 * 2 and after.max() < 1.3 * after.float().mean()


def test_costs_match_parameters_and_counted_flops():
    for latent, shared in ((16, 2), (None, 1)):
        layer = make_moe(latent=latent, shared=shared, experts=8, top_k=3)
        costs = moe.moe_costs(moe.MoEConfig(32, latent, 8, 3, shared, 24))
        assert sum(c[0] for c in costs.values()) == sum(p.numel() for p in layer.parameters())
        x = torch.randn(40, 32, dtype=torch.float64)
        with FlopCounterMode(display=False) as counter:
            layer(x)
        assert counter.get_total_flops() == 40 * sum(c[1] for c in costs.values())


def test_kimik3_layer_parameters_from_the_reference_shapes():
    costs = moe.moe_costs(moe.MoEConfig(7168, 3584, 896, 16, 2, 3072))
    from_shapes = (896 * 7168 + 896                                  # router, score bias
                   + 6144 * 7168 * 2 + 7168 * 6144                   # shared gate, up, down
                   + 3584 * 7168 + 3584 + 7168 * 3584                # latent down, norm, up
                   + 896 * (3072 * 3584 * 2 + 3584 * 3072))          # experts w1, w3, w2
    assert sum(c[0] for c in costs.values()) == from_shapes


def test_layer_bad_input():
    with pytest.raises(ValueError, match=r"^top_k must be an integer in \[1, num_experts = 4\]"):
        moe.MoEConfig(32, 16, 4, 5, 1, 8)
    with pytest.raises(ValueError, match=r"^top_k must be an integer in \[1, num_experts = 4\]"):
        moe.MoEConfig(32, 16, 4, 0, 1, 8)
    with pytest.raises(ValueError, match=r"^latent_size must be a positive integer or None"):
        moe.MoEConfig(32, 0, 4, 2, 1, 8)
    with pytest.raises(ValueError, match=r"^num_shared_experts must be an integer >= 0"):
        moe.MoEConfig(32, 16, 4, 2, -1, 8)
    layer = moe.LatentMoE(moe.MoEConfig(32, 16, 4, 2, 1, 8))
    with pytest.raises(ValueError, match=r"^x must be \[\.\.\., hidden_size\] = \[\.\.\., 32\]"):
        layer(torch.randn(5, 31))
    with pytest.raises(ValueError, match=r"^x must be \[\.\.\., hidden_size\]"):
        layer.dense_forward(torch.randn(5, 33))
