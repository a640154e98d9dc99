"""Fixtures shared by the tests that run a Triton kernel."""

import pytest

from kimik3_lessons import contract


@pytest.fixture
def device():
    """Where this machine's Triton kernels run, so that a kernel test runs on the machine's own device:
    "cpu" in the interpreter (no GPU), "cuda" when Triton compiles (a GPU). The kernels refuse tensors
    on the other one (`contract.check_triton_inputs`)."""
    return "cpu" if contract.interpreted() else "cuda"


@pytest.fixture
def gpu_arithmetic():
    """Inside a test that uses it, the interpreter's `tl.exp`, `tl.exp2` and "tf32" products compute as a
    compiled kernel's do on an NVIDIA GPU (`rehearsal.gpu_arithmetic`): a tolerance a GPU must meet is
    checked against that. On a GPU, the kernels are compiled: the GPU's own arithmetic."""
    from kimik3_lessons import rehearsal
    if not contract.interpreted():
        yield
        return
    with rehearsal.gpu_arithmetic():
        yield
