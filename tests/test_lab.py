"""The shared bench: checks that fail when they should, the contract's input checks, chunk padding."""

import pytest
import torch

from kimik3_lessons import lab


def test_check_close_passes_and_fails():
    ref = torch.randn(5, 7, dtype=torch.float64)
    assert lab.check_close("same up to 1e-12", ref, ref + 1e-12) < 1e-9
    with pytest.raises(AssertionError, match="relative error"):
        lab.check_close("off by 1e-6", ref, ref + 1e-6 * ref.abs().max())
    with pytest.raises(AssertionError, match="shapes differ"):
        lab.check_close("shape", ref, ref[:4])
    with pytest.raises(AssertionError, match="NaN or inf"):
        lab.check_close("nan", ref, torch.full_like(ref, float("nan")))


def test_check_close_tolerance_follows_the_dtype():
    ref = torch.ones(3)
    lab.check_close("float32 at 5e-5", ref, ref + 5e-5)              # default float32 tolerance 1e-4
    with pytest.raises(AssertionError):
        lab.check_close("float64 at 5e-5", ref.double(), ref.double() + 5e-5)


def test_split_and_merge_chunks_pad_with_zeros():
    x = torch.randn(2, 3, 10, 4)
    chunks = lab.split_chunks(x, 4)
    assert chunks.shape == (2, 3, 3, 4, 4)
    assert torch.equal(chunks[:, :, 2, 2:], torch.zeros(2, 3, 2, 4))   # the 2 padded positions
    assert torch.equal(lab.merge_chunks(chunks, 10), x)
    assert lab.split_chunks(torch.randn(1, 1, 8), 8).shape == (1, 1, 1, 8)


def test_check_mixing_inputs_names_the_bad_argument():
    q, v = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 3)
    assert lab.check_mixing_inputs(q, q, v) == (1, 2, 5, 4, 3)
    cases = [
        (dict(q=q[0], k=q, v=v), "q must have 4 dimensions"),
        (dict(q=q, k=q[..., :3], v=v), "k must have the shape of q"),
        (dict(q=q, k=q, v=v[:, :, :4]), "v must be"),
        (dict(q=q, k=q, v=v, beta=torch.rand(1, 2, 4)), "beta must be"),
        (dict(q=q, k=q, v=v, beta=None, needs_beta=True), "beta must be"),
        (dict(q=q, k=q, v=v, g=torch.zeros(1, 2, 5, 4), beta=torch.rand(1, 2, 5), gate="scalar"),
         "g .*scalar"),
        (dict(q=q, k=q, v=v, g=torch.full((1, 2, 5), 0.1), beta=torch.rand(1, 2, 5), gate="scalar"), "<= 0"),
        (dict(q=q, k=q, v=v, g=torch.zeros(1, 2, 5), beta=torch.rand(1, 2, 5), gate="channel"), "channel"),
        (dict(q=q, k=q, v=v, initial_state=torch.zeros(1, 2, 3, 4)), "initial_state must be"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            lab.check_mixing_inputs(**kwargs)


def test_check_chunk_size_and_triton_options():
    lab.check_triton_options(16, "tf32")
    with pytest.raises(ValueError, match=">= 16"):
        lab.check_triton_options(8)
    with pytest.raises(ValueError, match="input_precision"):
        lab.check_triton_options(64, "bf16")
    lab.check_chunk_size(48)
    with pytest.raises(ValueError, match="power of two"):
        lab.check_chunk_size(48, power_of_two=True)
    with pytest.raises(ValueError, match="positive integer"):
        lab.check_chunk_size(0)


def test_timeit_returns_the_median():
    calls = []
    seconds = lab.timeit(lambda: calls.append(1), warmup=2, repeat=3)
    assert len(calls) == 5 and 0 <= seconds < 0.1


def test_time_in_turn_times_every_call_each_round():
    calls = {"a": [], "b": [], "slow": []}
    seconds = lab.time_in_turn({name: (log.append, (1,)) for name, log in calls.items()}, repeat=3,
                               once=("slow",))
    assert [len(calls[n]) for n in ("a", "b", "slow")] == [4, 4, 1]   # warm-up + 3 rounds; "slow" once
    assert set(seconds) == {"a", "b", "slow"} and all(0 <= t < 0.1 for t in seconds.values())


def test_save_figure_writes_a_png(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    monkeypatch.setenv("KIMIK3_FIGURES", str(tmp_path))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    lab.save_figure(fig, "00_test_line")
    plt.close(fig)
    assert (tmp_path / "00_test_line.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="figure name"):
        lab.save_figure(fig, "Bad Name")


class _CudaLike:
    """Stands in for a CUDA tensor on a machine without one."""
    is_cuda = True
    device = "cuda:0"


def test_triton_inputs_must_live_where_triton_runs():
    import os
    if torch.cuda.is_available():                 # compiled kernels: CPU tensors are refused
        with pytest.raises(ValueError, match="needs CUDA tensors"):
            lab.check_triton_inputs(q=torch.zeros(1))
    else:                                         # interpreter: CUDA tensors are refused
        assert os.environ.get("TRITON_INTERPRET") == "1"
        with pytest.raises(ValueError, match="interpreter mode"):
            lab.check_triton_inputs(q=_CudaLike())
        lab.check_triton_inputs(q=torch.zeros(1), k=None)
