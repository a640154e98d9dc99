"""The notebook bench: checks that fail when they should, timing, figures, the
%%needs guard."""

import pytest
import torch

from kimik3_lessons import lab


def test_check_close_passes_and_fails():
    ref = torch.randn(5, 7, dtype=torch.float64)
    assert lab.check_close("same up to 1e-12", ref, ref + 1e-12) is None   # one printed line, no stray value
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


def test_a_timing_claim_is_asserted_on_a_cpu_and_reported_on_a_gpu(monkeypatch, capsys):
    """Defect 8: timing asserts sized for a CPU stopped Run All on a fast GPU; there they report."""
    with pytest.raises(AssertionError, match="cached step is > 2x faster"):
        lab.check_timing(False, "the cached step is > 2x faster")
    monkeypatch.setattr(lab, "on_gpu", lambda: True)
    lab.check_timing(False, "the cached step is > 2x faster")
    lab.check_timing(True, "the uncached step grows faster")
    assert capsys.readouterr().out.splitlines() == ["⚠ not on this GPU: the cached step is > 2x faster",
                                                    "✓ the uncached step grows faster"]
