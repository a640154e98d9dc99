"""The mixing-op contract: input checks that name the argument, chunk padding, where Triton runs."""

import os

import pytest
import torch

from kimik3_lessons import contract


def test_split_and_merge_chunks_pad_with_zeros():
    x = torch.randn(2, 3, 10, 4)
    chunks = contract.split_chunks(x, 4)
    assert chunks.shape == (2, 3, 3, 4, 4)
    assert torch.equal(chunks[:, :, 2, 2:], torch.zeros(2, 3, 2, 4))   # the 2 padded positions
    assert torch.equal(contract.merge_chunks(chunks, 10), x)
    assert contract.split_chunks(torch.randn(1, 1, 8), 8).shape == (1, 1, 1, 8)


def test_check_mixing_inputs_names_the_bad_argument():
    q, v = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 3)
    assert contract.check_inputs(q, q, v) == (1, 2, 5, 4, 3)
    cases = [
        (dict(q=q[0], k=q, v=v), r"q must be a 4-dimensional tensor \[B, H, T, D\]"),
        (dict(q=q, k=q[..., :3], v=v), "k must have the shape of q"),
        (dict(q=q, k=q, v=v[:, :, :4]), "v must be"),
        (dict(q=q, k=q, v=v, beta=torch.rand(1, 2, 4), delta=True), "beta must be"),
        (dict(q=q, k=q, v=v, beta=None, delta=True), "beta must be"),
        (dict(q=q, k=q, v=v, g=torch.zeros(1, 2, 5, 4), beta=torch.rand(1, 2, 5), gate="scalar", delta=True),
         "g must be .*one per head"),
        (dict(q=q, k=q, v=v, g=torch.full((1, 2, 5), 0.1), beta=torch.rand(1, 2, 5), gate="scalar", delta=True), "<= 0"),
        (dict(q=q, k=q, v=v, g=torch.zeros(1, 2, 5), beta=torch.rand(1, 2, 5), gate="channel", delta=True), "channel"),
        (dict(q=q, k=q, v=v, initial_state=torch.zeros(1, 2, 3, 4)), "initial_state must be"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            contract.check_inputs(**kwargs)


def test_check_chunk_size_and_triton_options():
    contract.check_triton_options(16, "tf32")
    with pytest.raises(ValueError, match=">= 16"):
        contract.check_triton_options(8)
    with pytest.raises(ValueError, match="input_precision"):
        contract.check_triton_options(64, "bf16")
    contract.check_chunk_size(48)
    with pytest.raises(ValueError, match="power of two"):
        contract.check_chunk_size(48, power_of_two=True)
    with pytest.raises(ValueError, match="positive integer"):
        contract.check_chunk_size(0)


class _CudaLike:
    """Stands in for a CUDA tensor on a machine without one."""
    is_cuda = True
    device = "cuda:0"


def test_triton_inputs_must_live_where_triton_runs():
    if torch.cuda.is_available():                 # compiled kernels: CPU tensors are refused
        with pytest.raises(ValueError, match="needs CUDA tensors"):
            contract.check_triton_inputs(q=torch.zeros(1))
    else:                                         # interpreter: CUDA tensors are refused
        assert os.environ.get("TRITON_INTERPRET") == "1"
        with pytest.raises(ValueError, match="interpreter mode"):
            contract.check_triton_inputs(q=_CudaLike())
        contract.check_triton_inputs(q=torch.zeros(1), k=None)
