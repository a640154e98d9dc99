"""DeltaNet, the recurrence against the chunked (WY/UT) form, timed side by side (forward, float32).

    .venv/bin/python benchmarks/deltanet.py [--batch 2] [--heads 8] [--seq-len 1024 4096 16384]
        [--head-dim 64] [--chunk-size 32 64] [--repeat 3]

Times `recurrent` (token by token), `chunked` and flash-linear-attention's pure-PyTorch chunk form
`delta_rule_chunkwise` (same [B, H, T, D] layout) at each --chunk-size and --seq-len, with L2-normalized
q, k and beta in (0, 1). The forms are timed in turn, round after round (`lab.time_in_turn`), so that a
load change on a shared machine hits them alike; the recurrence, one Python step per token, runs once per
length, the others report the median of --repeat rounds.
Requires, at T = 4096: chunked >= 5x faster than recurrent at the first --chunk-size (32, the better chunk
size on a CPU: the intra-chunk work grows as 10 C d FLOPs per token, lesson 05; the C = 64 column shows
the default), and chunked at least as fast as FLA's chunk form at each chunk size; at every size, the
two chunk forms agree. Otherwise it prints `FAIL: <what>` and exits with status 1 (benchmarks/README.md).
"""

import argparse
import sys
import warnings

import torch
import torch.nn.functional as F

from kimik3_lessons import deltanet, lab

CHECK_T = 4096


def fla_chunkwise(q, k, v, beta, chunk_size):
    """FLA's naive chunk form; it multiplies q by D^-0.5 itself, so q comes in pre-multiplied by sqrt(D)."""
    with warnings.catch_warnings():  # FLA warns, on import, that its Triton kernels need a GPU: we use none
        warnings.simplefilter("ignore")
        from fla.ops.delta_rule.naive import delta_rule_chunkwise
    return delta_rule_chunkwise(q, k, v, beta, chunk_size=chunk_size)


def ratio(seconds, slow, fast):
    """'3.21x', how many times `fast` is faster than `slow`; '-' where one of them was not timed."""
    return f"{seconds[slow] / seconds[fast]:.2f}x" if slow in seconds and fast in seconds else "-"


def check_ratios(results, ratios, failures):
    """Print each required ratio at T = CHECK_T; one below its minimum is a failure."""
    if CHECK_T not in results:
        print(f"the required ratios are checked at T={CHECK_T}, which --seq-len does not include")
        return
    s = results[CHECK_T]
    for label, slow, fast, minimum in ratios:
        if slow in s and fast in s:
            print(f"at T={CHECK_T}: {label} = {ratio(s, slow, fast)} (required >= {minimum:.2g}x)")
            if s[slow] / s[fast] < minimum:
                failures.append(f"at T={CHECK_T}, {fast} is {ratio(s, slow, fast)} as fast as {slow} "
                                f"({s[fast]:.3f} s vs {s[slow]:.3f} s), required >= {minimum:.2g}x")


def agree(failures, name, reference, form, rtol=1e-4):
    """Run two of the timed calls, (fn, args), and compare their outputs (`lab.check_close`, float32);
    a mismatch is recorded as a failure instead of raised."""
    ref, out = (fn(*args) for fn, args in (reference, form))
    try:
        lab.check_close(name, ref[0], out[0], rtol=rtol)
    except AssertionError as error:
        failures.append(str(error))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seq-len", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--chunk-size", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    dev = lab.setup()
    B, H, D, C0 = args.batch, args.heads, args.head_dim, args.chunk_size[0]
    print(f"\nB={B}, H={H}, D={D}, float32, forward; seconds: median of {args.repeat} rounds "
          f"(recurrent: one run)\n")

    forms = ["recurrent"] + [f"{form} C={C}" for C in args.chunk_size for form in ("chunked", "fla")]
    # (label, slower form, faster form, the least ratio required at T = CHECK_T)
    ratios = [(f"recurrent/chunked C={C0}", "recurrent", f"chunked C={C0}", 5.0)]
    ratios += [(f"fla/chunked C={C}", f"fla C={C}", f"chunked C={C}", 1.0) for C in args.chunk_size]
    rows, results, failures = [], {}, []
    for T in args.seq_len:
        q, k = (F.normalize(torch.randn(B, H, T, D, device=dev), dim=-1) for _ in range(2))
        v = torch.randn(B, H, T, D, device=dev)
        beta = torch.rand(B, H, T, device=dev)
        calls = {"recurrent": (deltanet.recurrent, (q, k, v, beta))}
        for C in args.chunk_size:
            calls[f"chunked C={C}"] = (deltanet.chunked, (q, k, v, beta, C))
            if T % C == 0:   # FLA's chunk form needs whole chunks
                calls[f"fla C={C}"] = (fla_chunkwise, (q * D**0.5, k, v, beta, C))
                agree(failures, f"T={T}: FLA's chunkwise form == chunked, C={C}", calls[f"fla C={C}"],
                      calls[f"chunked C={C}"])
        s = results[T] = lab.time_in_turn(calls, args.repeat, once=("recurrent",))
        cells = [f"{s[name]:.3f}" if name in s else "skip (T % C)" for name in forms]
        rows.append(f"{T:>6}" + "".join(f"{c:>14}" for c in cells)
                    + "".join(f"{ratio(s, slow, fast):>24}" for _, slow, fast, _ in ratios))

    print(f"\n{'T':>6}" + "".join(f"{name:>14}" for name in forms) + "".join(f"{r[0]:>24}" for r in ratios))
    print("\n".join(rows))
    print("\nskip (T % C): FLA's chunk form needs T to be a multiple of the chunk size")
    print("reproduce: .venv/bin/python benchmarks/deltanet.py " + " ".join(sys.argv[1:]))
    check_ratios(results, ratios, failures)
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
