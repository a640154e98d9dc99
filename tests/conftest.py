"""Fixtures shared by the tests that run a Triton kernel."""

import pytest

from kimik3_lessons import contract


@pytest.fixture
def device():
    """Where this machine's Triton kernels run, so that a kernel test runs on the machine's own device:
    "cpu" in the interpreter (no GPU), "cuda" when Triton compiles (a GPU). The kernels refuse tensors
    on the other one (`contract.check_triton_inputs`)."""
    return "cpu" if contract.interpreted() else "cuda"
