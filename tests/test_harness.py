"""The benchmark harness: a required ratio or an agreement that fails gives a FAIL line and status 1."""

import pytest
import torch

from kimik3_lessons import harness


def test_a_required_ratio_not_met_fails_the_benchmark(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["benchmarks/x.py", "--repeat", "2"])
    failures = []
    harness.require_ratio(failures, "slow/fast", {"slow": 0.3, "fast": 0.2}, "slow", "fast", minimum=2.0)
    assert harness.finish(failures) == 1
    out = capsys.readouterr().out
    assert "slow/fast = 1.50x (required >= 2x)" in out
    assert "reproduce: .venv/bin/python benchmarks/x.py --repeat 2" in out
    assert [line for line in out.splitlines() if line.startswith("FAIL: ")] == [
        "FAIL: slow/fast = 1.50x: fast 0.2 s, slow 0.3 s; required >= 2x"]


def test_a_required_ratio_met_passes(capsys):
    failures = []
    harness.require_ratio(failures, "slow/fast", {"slow": 0.5, "fast": 0.2}, "slow", "fast", minimum=2.0)
    assert failures == [] and harness.finish(failures) == 0
    out = capsys.readouterr().out
    assert "slow/fast = 2.50x (required >= 2x)" in out and "FAIL" not in out


def test_a_ratio_not_timed_is_said_and_not_checked(capsys):
    failures = []
    harness.require_ratio(failures, "at T=4096: slow/fast", {}, "slow", "fast", minimum=2.0)
    assert failures == []
    assert "at T=4096: slow/fast: not checked" in capsys.readouterr().out
    assert harness.ratio({"slow": 1.0}, "slow", "fast") == "-"


def test_require_close_records_a_mismatch_instead_of_raising(capsys):
    ref = torch.randn(4, 5)
    failures = []
    harness.require_close(failures, "close", ref, ref + 1e-7)
    harness.require_close(failures, "far", ref, ref + 1e-2 * ref.abs().max())
    harness.require_close(failures, "shape", ref, ref[:3])
    assert len(failures) == 2
    assert failures[0].startswith("far: relative error") and failures[1].startswith("shape: shapes differ")
    assert harness.finish(failures) == 1
    out = capsys.readouterr().out
    assert "✓ close" in out and "FAIL: far: relative error" in out and "FAIL: shape: shapes differ" in out


def test_bench_arguments_one_vocabulary():
    parser = harness.bench_arguments("test", seq_len=[1024, 4096], head_dim=64, repeat=3)
    parser.add_argument("--new-tokens", type=int, default=100)
    args = parser.parse_args(["--seq-len", "256", "512", "--repeat", "5"])
    assert (args.seq_len, args.head_dim, args.repeat, args.new_tokens) == ([256, 512], 64, 5, 100)
    assert parser.parse_args([]).seq_len == [1024, 4096]
    with pytest.raises(SystemExit):
        parser.parse_args(["--batch", "2"])                # a flag this script did not take
    with pytest.raises(ValueError, match="unknown benchmark flags"):
        harness.bench_arguments("test", dim=64)                # not in the vocabulary (it is --head-dim)


def test_print_times_shows_seconds_ratios_and_notes(capsys):
    results = {1024: {"rec": 2.0, "chunked": 0.5}, 4096: {"rec": 8.0}}
    harness.print_times("seconds", results, ["rec", "chunked"], [("rec/chunked", "rec", "chunked", 5.0)],
                    notes={(4096, "chunked"): "skip (why)"})
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert rows == [["seconds"], ["T", "rec", "chunked", "rec/chunked"], ["1024", "2", "0.5", "4.00x"],
                    ["4096", "8", "skip", "(why)", "-"]]


def test_require_ratios_checks_those_with_a_minimum(capsys):
    seconds = {"rec": 2.0, "chunked": 0.5, "fla": 0.4}
    failures = []
    harness.require_ratios(failures, seconds, [("rec/chunked", "rec", "chunked", 3.0),
                                           ("fla/chunked", "fla", "chunked", 1.0),
                                           ("rec/fla", "rec", "fla", None)], where="at T=4096")
    out = capsys.readouterr().out
    assert "at T=4096: rec/chunked = 4.00x (required >= 3x)" in out and "rec/fla" not in out
    assert failures == ["at T=4096: fla/chunked = 0.80x: chunked 0.5 s, fla 0.4 s; required >= 1x"]
