"""The notebook bench: checks that fail when they should, timing, the benchmarks' helpers, figures, the
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


# The benchmarks' helpers: a required ratio or an agreement that fails gives a FAIL line and status 1.

def test_a_required_ratio_not_met_fails_the_benchmark(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["benchmarks/x.py", "--repeat", "2"])
    failures = []
    lab.require_ratio(failures, "slow/fast", {"slow": 0.3, "fast": 0.2}, "slow", "fast", minimum=2.0)
    assert lab.finish(failures) == 1
    out = capsys.readouterr().out
    assert "slow/fast = 1.50x (required >= 2x)" in out
    assert "reproduce: .venv/bin/python benchmarks/x.py --repeat 2" in out
    assert [line for line in out.splitlines() if line.startswith("FAIL: ")] == [
        "FAIL: slow/fast = 1.50x: fast 0.2 s, slow 0.3 s; required >= 2x"]


def test_a_required_ratio_met_passes(capsys):
    failures = []
    lab.require_ratio(failures, "slow/fast", {"slow": 0.5, "fast": 0.2}, "slow", "fast", minimum=2.0)
    assert failures == [] and lab.finish(failures) == 0
    out = capsys.readouterr().out
    assert "slow/fast = 2.50x (required >= 2x)" in out and "FAIL" not in out


def test_a_ratio_not_timed_is_said_and_not_checked(capsys):
    failures = []
    lab.require_ratio(failures, "at T=4096: slow/fast", {}, "slow", "fast", minimum=2.0)
    assert failures == []
    assert "at T=4096: slow/fast: not checked" in capsys.readouterr().out
    assert lab.ratio({"slow": 1.0}, "slow", "fast") == "-"


def test_require_close_records_a_mismatch_instead_of_raising(capsys):
    ref = torch.randn(4, 5)
    failures = []
    lab.require_close(failures, "close", ref, ref + 1e-7)
    lab.require_close(failures, "far", ref, ref + 1e-2 * ref.abs().max())
    lab.require_close(failures, "shape", ref, ref[:3])
    assert len(failures) == 2
    assert failures[0].startswith("far: relative error") and failures[1].startswith("shape: shapes differ")
    assert lab.finish(failures) == 1
    out = capsys.readouterr().out
    assert "✓ close" in out and "FAIL: far: relative error" in out and "FAIL: shape: shapes differ" in out


def test_bench_arguments_one_vocabulary():
    parser = lab.bench_arguments("test", seq_len=[1024, 4096], head_dim=64, repeat=3)
    parser.add_argument("--new-tokens", type=int, default=100)
    args = parser.parse_args(["--seq-len", "256", "512", "--repeat", "5"])
    assert (args.seq_len, args.head_dim, args.repeat, args.new_tokens) == ([256, 512], 64, 5, 100)
    assert parser.parse_args([]).seq_len == [1024, 4096]
    with pytest.raises(SystemExit):
        parser.parse_args(["--batch", "2"])                # a flag this script did not take
    with pytest.raises(ValueError, match="unknown benchmark flags"):
        lab.bench_arguments("test", dim=64)                # not in the vocabulary (it is --head-dim)


def test_print_times_shows_seconds_ratios_and_notes(capsys):
    results = {1024: {"rec": 2.0, "chunked": 0.5}, 4096: {"rec": 8.0}}
    lab.print_times("seconds", results, ["rec", "chunked"], [("rec/chunked", "rec", "chunked", 5.0)],
                    notes={(4096, "chunked"): "skip (why)"})
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert rows == [["seconds"], ["T", "rec", "chunked", "rec/chunked"], ["1024", "2", "0.5", "4.00x"],
                    ["4096", "8", "skip", "(why)", "-"]]


def test_require_ratios_checks_those_with_a_minimum(capsys):
    seconds = {"rec": 2.0, "chunked": 0.5, "fla": 0.4}
    failures = []
    lab.require_ratios(failures, seconds, [("rec/chunked", "rec", "chunked", 3.0),
                                           ("fla/chunked", "fla", "chunked", 1.0),
                                           ("rec/fla", "rec", "fla", None)], where="at T=4096")
    out = capsys.readouterr().out
    assert "at T=4096: rec/chunked = 4.00x (required >= 3x)" in out and "rec/fla" not in out
    assert failures == ["at T=4096: fla/chunked = 0.80x: chunked 0.5 s, fla 0.4 s; required >= 1x"]
