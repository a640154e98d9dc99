"""DeltaNet (lesson 05), what is its own: the delta rule is a product of Householder factors, the WY
representation is that product, the three ways to invert I + A (row by row, by blocks of rows, and row
by row on a tile, as the kernels do) agree with LAPACK, and the FLOP counts count the products the
forms run. The contract every form keeps (the forms agree, carry their state, train, take half
precision, refuse bad input, match FLA) is tested in test_mixers.py."""

import pytest
import torch
import triton
import triton.language as tl
from torch.utils.flop_counter import FlopCounterMode

from kimik3_lessons import deltanet as dn
from kimik3_lessons import lab


def inputs(B=2, H=3, T=100, K=16, V=16, seed=0, state=False):
    """L2-normalized q, k (as DeltaNet layers make them), signed values, beta in (0, 1), a random state."""
    g = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(B, H, T, K, generator=g, dtype=torch.float64), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(B, H, T, K, generator=g, dtype=torch.float64), dim=-1)
    v = torch.randn(B, H, T, V, generator=g, dtype=torch.float64)
    beta = torch.rand(B, H, T, generator=g, dtype=torch.float64)
    S0 = torch.randn(B, H, K, V, generator=g, dtype=torch.float64) if state else None
    return q, k, v, beta, S0


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


def unit_lower(C, seed):
    """A strictly lower-triangular A [2, 3, C, C] (float64), the kind the WY form inverts as I + A."""
    g = torch.Generator().manual_seed(seed)
    return torch.tril(torch.randn(2, 3, C, C, generator=g, dtype=torch.float64), diagonal=-1) * 0.3


@pytest.mark.parametrize("C", [1, 7, 16, 17, 64, 100])
def test_forward_substitution_inverts_unit_lower_triangular(C):
    """Row by row and by blocks of 16 (17 and 100 are padded to whole blocks), against LAPACK's solver."""
    A = unit_lower(C, seed=C)
    I = torch.eye(C, dtype=torch.float64)
    reference = torch.linalg.solve_triangular(I + A, I.expand_as(A), upper=False)
    lab.check_close("forward_substitution vs solve_triangular", reference, dn.forward_substitution(A))
    L_inv = dn.blocked_forward_substitution(A)
    lab.check_close("blocked_forward_substitution vs solve_triangular", reference, L_inv)
    lab.check_close("(I + A) L_inv = I", I.expand_as(A), (I + A) @ L_inv)


@pytest.mark.parametrize("C", [7, 16, 17, 64, 100])
def test_forward_substitution_flops_count_the_products_it_runs(C):
    """torch's FlopCounterMode counts an [m, n] @ [n, p] product as 2 m n p, the convention of the count."""
    A = unit_lower(C, seed=C)[0, 0]
    with FlopCounterMode(display=False) as counter:
        dn.blocked_forward_substitution(A)
    assert counter.get_total_flops() == dn.blocked_forward_substitution_flops(C)


@triton.jit
def invert_tile_kernel(a, l_inv, C: tl.constexpr):
    """Read one [C, C] tile A; write (I + A)^{-1} as the kernels do (`dn.forward_substitution_tile`)."""
    r = tl.arange(0, C)
    tile = r[:, None] * C + r[None, :]
    tl.store(l_inv + tile, dn.forward_substitution_tile(tl.load(a + tile), C))


@pytest.mark.parametrize("C", [16, 32, 64])
def test_forward_substitution_on_a_tile_inverts_unit_lower_triangular(C, device):
    """The kernels' inverse (row by row on a tile, with masks: a tile cannot be indexed), in float32,
    against LAPACK's solver."""
    A = unit_lower(C, seed=C)[0, 0]
    I = torch.eye(C, dtype=torch.float64)
    a = A.to(device, torch.float32)
    L_inv = torch.empty_like(a)
    invert_tile_kernel[(1,)](a, L_inv, C=C)
    lab.check_close("forward_substitution_tile vs solve_triangular",
                    torch.linalg.solve_triangular(I + A, I, upper=False), L_inv.cpu())


def test_wy_representation_is_the_householder_product():
    """P = H_C ... H_1 with explicit K×K factors equals I - K^T W, and one chunk maps S to P S + K^T U."""
    _, k, v, beta, S0 = inputs(B=1, H=2, T=20, K=8, V=5, state=True)
    k_beta = beta[..., None] * k
    W, U = dn.wy_representation(torch.tril(k_beta @ k.mT, diagonal=-1), k_beta, beta[..., None] * v)
    I = torch.eye(8, dtype=torch.float64)
    P = I.expand(1, 2, 8, 8)
    for t in range(20):
        k_t = k[:, :, t]
        P = (I - beta[:, :, t, None, None] * k_t[..., :, None] * k_t[..., None, :]) @ P
    lab.check_close("householder_product", P, dn.householder_product(k, beta))
    lab.check_close("P = I - K^T W", P, I - k.transpose(-1, -2) @ W)
    _, S_ref = dn.recurrent(k, k, v, beta, initial_state=S0)
    lab.check_close("S_C = P S_0 + K^T U", S_ref, P @ S0 + k.transpose(-1, -2) @ U)


def test_chunked_flops_counts_every_matrix_product():
    """torch's FlopCounterMode counts an [m, n] @ [n, p] product as 2 m n p, the convention of the count."""
    q, k, v, beta, _ = inputs(B=1, H=2, T=100, K=16, V=16)
    for C in (1, 16, 64, 100):
        with FlopCounterMode(display=False) as counter:
            dn.chunked(q, k, v, beta, chunk_size=C)
        assert counter.get_total_flops() == 2 * dn.chunked_flops(100, 16, C)["total"], C
    assert dn.chunked_flops(100, 16, 1)["state"] == dn.recurrent_flops(100, 16)
