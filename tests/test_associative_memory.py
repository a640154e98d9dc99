"""The associative memory of lesson 04: writes match their closed forms, orthogonal keys recall exactly
up to D of them, additive crosstalk follows its (N - 1) / D law, the delta rule overwrites, and the
memory is what the layer forms of lessons 02 and 05 compute."""

import pytest
import torch

from kimik3_lessons import associative_memory as am
from kimik3_lessons import deltanet, lab, linear_attention


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_unit_and_orthogonal_keys():
    keys = am.random_unit_vectors(3, 10, 8, gen())
    lab.check_close("unit norms", torch.ones(3, 10), keys.norm(dim=-1))
    keys = am.orthogonal_keys(3, 20, 8, gen())  # two full bases and a partial third
    assert keys.shape == (3, 20, 8)
    for block in (keys[:, :8], keys[:, 8:16]):
        lab.check_close("orthonormal block", torch.eye(8).expand(3, 8, 8), block @ block.transpose(-1, -2))
    assert (keys[:, :8] @ keys[:, 8:16].transpose(-1, -2)).abs().max() > 0.1  # a new basis overlaps the old


def test_additive_store_is_the_sum_of_outer_products():
    keys, values = (torch.randn(4, 9, D, generator=gen(D), dtype=torch.float64) for D in (6, 5))
    lab.check_close("S = K^T V", keys.transpose(-1, -2) @ values, am.store(keys, values, "additive"))


def test_delta_write_is_a_householder_step():
    """S + beta k^T (v - k S) = (I - beta k^T k) S + beta k^T v, for any S and a key of any norm."""
    S, k, v = (torch.randn(*shape, generator=gen(), dtype=torch.float64) for shape in [(6, 4), (6,), (4,)])
    expected = (torch.eye(6, dtype=torch.float64) - 0.7 * torch.outer(k, k)) @ S + 0.7 * torch.outer(k, v)
    lab.check_close("delta write", expected, am.delta_write(S, k, v, beta=0.7))


@pytest.mark.parametrize("rule", am.RULES)
def test_orthogonal_keys_recall_exactly_up_to_capacity(rule):
    keys, values = am.orthogonal_keys(5, 16, 16, gen()), am.random_unit_vectors(5, 16, 16, gen(1))
    S = am.store(keys, values, rule)
    assert am.recall_error(S, keys, values).max() < 1e-12


def test_additive_crosstalk_follows_its_law():
    """k_j S - v_j = sum_{i != j} (k_j · k_i) v_i: for random unit keys E (k_j · k_i)^2 = 1/D, so the mean
    squared relative error is (N - 1) / D. 200 memories of D = 32 estimate it to a few percent."""
    D = 32
    for N in (8, 32, 96):
        keys = am.random_unit_vectors(200, N, D, gen(N))
        values = am.random_unit_vectors(200, N, D, gen(N + 1))
        err2 = (am.recall_error(am.store(keys, values, "additive"), keys, values) ** 2).mean().item()
        assert abs(err2 / ((N - 1) / D) - 1) < 0.1, (N, err2)


def test_delta_rule_over_capacity_keeps_the_last_basis():
    """Orthogonal keys, N = 2D: the second basis overwrites every direction, so the last D pairs read back
    exactly and the first D are gone (what they read is someone else's value)."""
    D = 8
    keys, values = am.orthogonal_keys(4, 2 * D, D, gen()), am.random_unit_vectors(4, 2 * D, D, gen(1))
    err = am.recall_error(am.store(keys, values, "delta"), keys, values)
    assert err[:, D:].max() < 1e-12
    assert err[:, :D].mean() > 0.5


def test_overwrite():
    """(k, v1) then (k, v2), unit key: additive reads v1 + v2; delta reads beta v2 + beta (1 - beta) v1."""
    k = torch.tensor([0.6, 0.8, 0.0], dtype=torch.float64)
    v1, v2 = torch.tensor([1.0, 0, 0], dtype=torch.float64), torch.tensor([0, 2.0, 1.0], dtype=torch.float64)
    S = am.store(torch.stack([k, k]), torch.stack([v1, v2]), "additive")
    lab.check_close("additive", v1 + v2, am.read(S, k))
    for beta in (1.0, 0.5):
        S = am.store(torch.stack([k, k]), torch.stack([v1, v2]), "delta", beta=beta)
        lab.check_close(f"delta beta={beta}", beta * v2 + beta * (1 - beta) * v1, am.read(S, k))


def test_key_norm_scales_the_read_back():
    """n writes of one pair with ||k|| = r: additive reads n r^2 v; delta reads (1 - (1 - beta r^2)^n) v."""
    v = torch.tensor([1.0, -2.0], dtype=torch.float64)
    for r in (0.5, 1.0, 1.3, 1.6):
        k = r * torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
        keys, values = k.expand(5, 3), v.expand(5, 2)
        lab.check_close(f"additive r={r}", 5 * r**2 * v, am.read(am.store(keys, values, "additive"), k))
        delta = am.read(am.store(keys, values, "delta", beta=0.9), k)
        lab.check_close(f"delta r={r}", (1 - (1 - 0.9 * r**2) ** 5) * v, delta)


def test_capacity_curve_equals_fresh_memories():
    keys, values = am.random_unit_vectors(3, 24, 8, gen()), am.random_unit_vectors(3, 24, 8, gen(1))
    curve = am.capacity_curve(keys, values, "delta", [4, 8, 24], beta=0.8)
    for i, N in enumerate([4, 8, 24]):
        S = am.store(keys[:, :N], values[:, :N], "delta", beta=0.8)
        lab.check_close(f"N={N}", am.recall_error(S, keys[:, :N], values[:, :N]).mean(), curve[i])


def test_the_memory_is_what_the_layer_forms_compute():
    """recall_sequence through linear attention (lesson 02) and DeltaNet (lesson 05) answers k S."""
    keys, values = am.random_unit_vectors(2, 12, 8, gen()), am.random_unit_vectors(2, 12, 8, gen(1))
    q, k, v = am.recall_sequence(keys, values)
    o, _ = linear_attention.recurrent(q, k, v)
    lab.check_close("linear attention", keys @ am.store(keys, values, "additive"), o[:, 0, 12:])
    o, _ = deltanet.chunked(q, k, v, 0.6 * torch.ones(q.shape[:3], dtype=q.dtype), chunk_size=8)
    lab.check_close("deltanet", keys @ am.store(keys, values, "delta", beta=0.6), o[:, 0, 12:])


def test_bad_input_raises():
    keys, values = torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    with pytest.raises(ValueError, match="rule must be one of"):
        am.store(keys, values, "hebbian")
    with pytest.raises(ValueError, match=r"values must be \[\.\.\., N, D_v\]"):
        am.store(keys, values[:, :4], "delta")
    with pytest.raises(ValueError, match="keys and values must be"):
        am.store(keys[0, 0], values[0, 0], "delta")
    with pytest.raises(ValueError, match="Ns must lie in"):
        am.capacity_curve(keys, values, "delta", [3, 6])
    with pytest.raises(ValueError, match=r"keys must be \[B, N, D\]"):
        am.recall_sequence(keys[0], values[0])


@pytest.mark.parametrize("x", [0.5, 0.99, 1.01, 1.5, 1.99, 2.01, 2.5])
def test_delta_write_overshoots_past_one_and_diverges_past_two(x):
    """Only beta ||k||^2 = x matters: one write reads x v (more than v once x > 1); the error left is
    multiplied by 1 - x per write, so repeated writes move away from v once x > 2."""
    v = torch.tensor([0.6, -0.8], dtype=torch.float64)

    def gain(k, beta, n):
        return am.read(am.store(k.expand(n, 3), v.expand(n, 2), "delta", beta=beta), k) @ v

    for beta in (1.0, 0.5):
        k = (x / beta) ** 0.5 * torch.tensor([0.0, 0.6, 0.8], dtype=torch.float64)
        assert (gain(k, beta, 1) > 1) == (x > 1)
        assert ((1 - gain(k, beta, 40)).abs() > (1 - gain(k, beta, 1)).abs()) == (x > 2)
