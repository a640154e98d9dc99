"""Lesson 13's backward pass (`kimik3_lessons.backward`), for every mixer of the family.

The PyTorch backward equals autograd through the float64 recurrence (the definition: an independent
reference) at random shapes, chunk sizes and head sizes, with and without an initial state and a gradient
into the final state; keeping the states equals recomputing them; strong decay stays exact; the Triton
kernels equal the PyTorch backward in the interpreter (float32, float64, and the half precisions within
their rounding); `trainable` passes `torch.autograd.gradcheck` through the kernels in float64; the bytes
kept and the FLOPs counted agree with what the shapes say. Each test draws its own inputs.
"""

import zlib

import pytest
import torch

from kimik3_lessons import contract, lab, mixers
from kimik3_lessons.backward import chunked, cost, kernels, trainable
from kimik3_lessons.backward.chunked import chunked_backward, chunked_forward
from kimik3_lessons.backward.kernels import triton_chunked_backward

MIXERS = list(mixers.MIXERS.values())
IDS = [m.name for m in MIXERS]


@pytest.fixture
def gen(request):
    """A generator seeded from the test's id: every test draws its own inputs, reproducibly."""
    return torch.Generator().manual_seed(zlib.crc32(request.node.nodeid.encode()))


def inputs(mixer, gen, B=1, H=2, T=45, K=16, V=12, g_scale=0.5, dtype=torch.float64):
    """`chunked.example`: ({q, k, v, [g], [beta]}, S_0, dO, dS_T), drawn from the test's generator."""
    return chunked.example(mixer, B, H, T, K, V, g_scale=g_scale, dtype=dtype, generator=gen)


def autograd_of_the_recurrence(mixer, x, S0, do, dS):
    """The gradients of sum(o * do) + sum(S_T * dS) through `mixer.recurrent`, by autograd, in float64."""
    leaves = {name: t.double().requires_grad_() for name, t in x.items()}
    S0 = None if S0 is None else S0.double().requires_grad_()
    o, S = mixer.recurrent(**leaves, initial_state=S0)
    loss = (o * do.double()).sum() + (0 if dS is None else (S * dS.double()).sum())
    grads = torch.autograd.grad(loss, [*leaves.values(), *([S0] if S0 is not None else [])])
    return dict(zip([*leaves, *(["initial_state"] if S0 is not None else [])], grads, strict=True))


def check_grads(what, ref, got, rtol):
    for name, r in ref.items():
        lab.check_close(f"{what} d{name}", r, got[name], rtol=rtol)


@pytest.mark.parametrize("mixer", MIXERS, ids=IDS)
@pytest.mark.parametrize("T, C, K, V, state, final", [
    (45, 16, 16, 12, True, True), (70, 64, 32, 40, False, True), (33, 7, 24, 16, True, False),
    (20, 1, 16, 8, False, False), (50, 64, 128, 64, True, True)])
def test_pytorch_backward_equals_autograd_of_the_recurrence(mixer, T, C, K, V, state, final, gen):
    """T not a multiple of C, C = 1 (the recurrence) and C >= T (one chunk), head sizes 8 to 128, with and
    without an initial state (its gradient too) and a gradient into the final state."""
    x, S0, do, dS = inputs(mixer, gen, T=T, K=K, V=V)
    S0, dS = (S0 if state else None), (dS if final else None)
    ref = autograd_of_the_recurrence(mixer, x, S0, do, dS)
    got = chunked_backward(mixer, do, dS, **x, chunk_size=C, initial_state=S0)
    assert set(got) == {*x, "initial_state"} and (got["initial_state"] is None) == (S0 is None)
    check_grads(f"{mixer.name} C={C}", ref, got, rtol=1e-10)


@pytest.mark.parametrize("mixer", MIXERS, ids=IDS)
def test_kept_states_give_the_recomputed_gradients(mixer, gen):
    """keep='states' (S_n from the forward) and keep='inputs' (S_n recomputed) give the same numbers, and
    `chunked_forward` gives `mixer.chunked`'s outputs with them."""
    x, S0, do, dS = inputs(mixer, gen, T=50)
    o, S_T, S_n = chunked_forward(mixer, **x, chunk_size=16, initial_state=S0)
    o_ref, S_ref = mixer.chunked(**x, chunk_size=16, initial_state=S0)
    lab.check_close(f"{mixer.name} chunked_forward o", o_ref, o, rtol=1e-12)
    lab.check_close(f"{mixer.name} chunked_forward S", S_ref, S_T, rtol=1e-12)
    assert S_n.shape == (1, 2, 4, 16, 12)
    recomputed = chunked_backward(mixer, do, dS, **x, chunk_size=16, initial_state=S0)
    kept = chunked_backward(mixer, do, dS, **x, chunk_size=16, initial_state=S0, states=S_n)
    check_grads(f"{mixer.name} kept states", recomputed, kept, rtol=1e-12)


@pytest.mark.parametrize("mixer", [m for m in MIXERS if m.decay], ids=lambda m: m.name)
def test_strong_decay_stays_finite_and_exact_in_float32(mixer, gen):
    """g in [-5, -4.5] per token: across a chunk of 64, exp(-G) overflows float32 (checked), and the
    backward, which forms only differences of G, stays within float32's rounding of float64."""
    x, S0, do, _ = inputs(mixer, gen, T=100)
    x["g"] = -5 + 0.5 * torch.rand(x["g"].shape, generator=gen, dtype=torch.float64)
    assert torch.isinf(torch.exp(-x["g"].float()[:, :, :64].cumsum(2))).any()
    ref = autograd_of_the_recurrence(mixer, x, S0, do, None)
    got = chunked_backward(mixer, do.float(), None, **{n: t.float() for n, t in x.items()}, chunk_size=64,
                           initial_state=S0.float())
    check_grads(f"{mixer.name} strong decay", ref, got, rtol=1e-4)


def test_decayed_product_is_the_sum_it_names(gen):
    """`decayed_product` and `decayed_scores_backward` against the [C, C, K] factors written out, at a
    chunk that is not a power of two (padded inside) and a strong decay."""
    C, K = 13, 5
    P = torch.randn(3, C, C, generator=gen, dtype=torch.float64).tril()
    X, Y = (torch.randn(3, C, K, generator=gen, dtype=torch.float64) for _ in range(2))
    G = (-3 * torch.rand(3, C, K, generator=gen, dtype=torch.float64)).cumsum(-2)
    factors = torch.exp(G[:, :, None, :] - G[:, None, :, :]) * torch.ones(C, C, 1, dtype=torch.float64).tril()
    lab.check_close("decayed_product", torch.einsum("bij,bijk,bjk->bik", P, factors, Y),
                    chunked.decayed_product(P, Y, G), rtol=1e-12)
    leaves = [t.clone().requires_grad_() for t in (X, Y, G)]
    from kimik3_lessons import kda
    torch.autograd.backward(kda.decayed_scores(*leaves), P)
    for name, leaf, got in zip("XYG", leaves, chunked.decayed_scores_backward(P, X, Y, G), strict=True):
        lab.check_close(f"decayed_scores_backward d{name}", leaf.grad, got, rtol=1e-12)


@pytest.mark.parametrize("mixer", MIXERS, ids=IDS)
@pytest.mark.parametrize("T, K, V, state, final", [(45, 16, 12, True, True), (40, 128, 20, False, False)])
def test_kernels_equal_the_pytorch_backward(mixer, T, K, V, state, final, gen):
    """The backward kernels in float32 (the interpreter) against the float64 PyTorch backward: T not a
    multiple of the chunk (16), K = 128 (the state in two tiles), V not a multiple of 16."""
    x, S0, do, dS = inputs(mixer, gen, T=T, K=K, V=V)
    S0, dS = (S0 if state else None), (dS if final else None)
    ref = chunked_backward(mixer, do, dS, **x, chunk_size=16, initial_state=S0)
    f32 = {n: t.float() for n, t in x.items()}
    got = triton_chunked_backward(mixer, do.float(), None if dS is None else dS.float(), **f32, chunk_size=16,
                                  initial_state=None if S0 is None else S0.float())
    assert all(got[n].dtype == torch.float32 for n in x)
    check_grads(f"{mixer.name} kernels", {n: r for n, r in ref.items() if r is not None}, got, rtol=2e-5)


@pytest.mark.parametrize("mixer", MIXERS, ids=IDS)
def test_kernels_compute_in_float64_for_float64_inputs(mixer, gen):
    """Every tile and sum in float64 (ACC) for float64 inputs: the kernels equal the recurrence's autograd
    to float64's rounding, forward and backward."""
    x, S0, do, dS = inputs(mixer, gen, T=36)
    o, S = mixer.triton_chunked(**x, chunk_size=16, initial_state=S0)
    o_ref, S_ref = mixer.recurrent(**x, initial_state=S0)
    assert o.dtype == S.dtype == torch.float64
    lab.check_close(f"{mixer.name} float64 kernels o", o_ref, o, rtol=1e-12)
    got = triton_chunked_backward(mixer, do, dS, **x, chunk_size=16, initial_state=S0)
    check_grads(f"{mixer.name} float64 kernels", autograd_of_the_recurrence(mixer, x, S0, do, dS), got,
                rtol=1e-12)


# Half-precision products (input_precision "bf16", "fp16"): the operands of every product are rounded to
# 8 (bf16) or 11 (fp16) bits of mantissa, relative 2^-8 = 3.9e-3 and 2^-11 = 4.9e-4 each, and the
# rounding of intermediate tiles (L_inv, W, U, dA) compounds through the chunk's products: the bounds
# below, against float64 on the same rounded inputs, are about 6 (fp16) and 8 (bf16) units of that
# rounding.
HALF = {"bf16": (torch.bfloat16, 3e-2), "fp16": (torch.float16, 3e-3)}


@pytest.mark.parametrize("mixer", MIXERS, ids=IDS)
@pytest.mark.parametrize("precision", list(HALF))
def test_half_precision_products_within_their_rounding(mixer, precision, gen):
    """bf16 (sm_80 and newer) or fp16 (a T4) inputs and products, float32 sums and stored tiles: the
    gradients against float64 of the same rounded inputs."""
    dtype, rtol = HALF[precision]
    x, S0, do, dS = inputs(mixer, gen, T=40, K=32, V=32)
    half = {n: t.to(dtype) if n in "qkv" else t.float() for n, t in x.items()}
    rounded = {n: t.double() for n, t in half.items()}
    ref = chunked_backward(mixer, do.to(dtype).double(), dS, **rounded, chunk_size=16, initial_state=S0)
    got = triton_chunked_backward(mixer, do.to(dtype), dS.float(), **half, chunk_size=16,
                                  initial_state=S0.float(), input_precision=precision)
    assert got["q"].dtype == dtype and got["initial_state"].dtype == torch.float32
    check_grads(f"{mixer.name} {precision}", ref, got, rtol=rtol)
    exact = triton_chunked_backward(mixer, do.to(dtype), dS.float(), **half, chunk_size=16,
                                    initial_state=S0.float())
    stored = ref["k"].to(dtype).double()                  # dk as a half tensor can hold it at best
    exact_error, half_error = (lab.relative_error(stored, run["k"].double()) for run in (exact, got))
    print(f"dk against float64 rounded to {precision}: ieee products {exact_error:.1e}, {precision} products "
          f"{half_error:.1e}")
    assert 4 * exact_error < half_error, "half-precision products should add rounding of their own"


@pytest.mark.parametrize("mixer", MIXERS, ids=IDS)
@pytest.mark.parametrize("engine", ["pytorch", "triton"])
def test_trainable_passes_gradcheck_in_float64(mixer, engine, gen):
    """`torch.autograd.gradcheck`: the hand-written backward against finite differences of the forward,
    both run by the engine (the Triton kernels interpreted, in float64), every input and the initial
    state. Tiny sizes: T = 20 across two chunks of 16, K = 6, V = 5 (the kernels pad them to a tile).
    fast_mode: the Jacobian projected on random vectors (a few forwards per input, not one per number)."""
    x, S0, _, _ = inputs(mixer, gen, B=1, H=1, T=20, K=6, V=5)
    leaves = [t.requires_grad_() for t in (*x.values(), S0)]
    form = trainable(mixer, engine=engine)

    def f(*tensors):
        *args, S = tensors
        return form(*args, chunk_size=16, initial_state=S)

    assert torch.autograd.gradcheck(f, leaves, eps=1e-6, atol=1e-8, rtol=1e-6, fast_mode=True)


def test_the_triton_engine_recomputes_the_states():
    with pytest.raises(ValueError, match="recompute the states"):
        trainable("kda", engine="triton", keep="states")
    with pytest.raises(ValueError, match="engine must be one of"):
        trainable("kda", engine="numpy")


def test_bad_gradients_raise_a_value_error_naming_them(gen):
    mixer = mixers.get("deltanet")
    x, S0, do, dS = inputs(mixer, gen, T=20, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"^do must be \[B, H, T, V\] = \[1, 2, 20, 12\] like o, "
                                         r"got \[1, 2, 19, 12\]"):
        triton_chunked_backward(mixer, do[:, :, 1:], dS, **x, chunk_size=16)
    with pytest.raises(ValueError, match=r"^dS_T must be \[B, H, K, V\] = \[1, 2, 16, 12\]"):
        triton_chunked_backward(mixer, do, dS[..., 1:], **x, chunk_size=16)
    with pytest.raises(ValueError, match="^beta must be"):
        chunked_backward(mixer, do, dS, x["q"], x["k"], x["v"], beta=x["beta"][:, :1], chunk_size=16)


@pytest.mark.parametrize("mixer", MIXERS, ids=IDS)
def test_the_bytes_kept_for_the_backward(mixer, gen):
    """Measured from the tensors autograd keeps (saved-tensor hooks): the hand-written backward keeps
    exactly what the shapes say (the inputs, and the states S_n with keep="states"), and autograd through
    the chunked form keeps more than both."""
    B, H, T, K, V, C = 1, 2, 256, 32, 32, 64
    x, S0, _, _ = inputs(mixer, gen, B=B, H=H, T=T, K=K, V=V, dtype=torch.float32)
    leaves = {n: t.requires_grad_() for n, t in x.items()}
    kept = {}
    for keep in ("inputs", "states"):
        _, kept[keep] = cost.saved_bytes(trainable(mixer, engine="pytorch", keep=keep), *leaves.values(),
                                         chunk_size=C, initial_state=S0)
        assert kept[keep] == cost.kept_bytes(mixer, B, H, T, K, V, C, keep)
    _, kept["autograd"] = cost.saved_bytes(mixer.chunked, *leaves.values(), chunk_size=C, initial_state=S0)
    assert kept["autograd"] > kept["states"] > kept["inputs"]


def test_flops_counted_match_the_course_formula(gen):
    """`cost.matmul_flops` (torch's FLOP counter) on lesson 03's chunked linear attention against its
    formula, `linear_attention.chunked_flops`: the counter counts what the formula says."""
    from kimik3_lessons import linear_attention
    mixer = mixers.get("linear_attention")
    x, _, _, _ = inputs(mixer, gen, B=1, H=1, T=256, K=32, V=32, dtype=torch.float32)
    assert cost.matmul_flops(mixer.chunked, **x, chunk_size=64) == \
        linear_attention.chunked_flops(256, 32, 64)["total"]


def test_every_mixer_has_its_backward():
    """Adding the backward to a mixer is one entry in each table (the PyTorch factors, the kernel)."""
    assert set(chunked.FACTORS) == set(mixers.MIXERS) == set(kernels.BACKWARD_KERNELS)


def test_the_gpu_model_is_a_roofline():
    seconds, bound = cost.gpu_time_model(1e12, 1e6, "A100")
    assert bound == "compute" and seconds == pytest.approx(1e12 / cost.GPUS["A100"][0])
    assert cost.gpu_time_model(1e6, 1e12, "T4")[1] == "memory"
    assert contract.PRECISIONS == ("ieee", "tf32", "bf16", "fp16")
