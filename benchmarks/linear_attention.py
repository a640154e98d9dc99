"""Linear attention, four ways of computing the same thing, timed side by side (forward, float32).

    .venv/bin/python benchmarks/linear_attention.py [--batch 2] [--heads 8] [--seq-len 1024 4096 16384]
        [--head-dim 64] [--chunk-size 64] [--repeat 3]

Times `recurrent` (token by token), `chunked` (at each --chunk-size), `parallel` (masked T x T) and
flash-linear-attention's pure-PyTorch chunk form `naive_chunk_linear_attn` (its chunk is fixed at 64;
[B, T, H, D], transposed outside the timed call) at each --seq-len, in turn, round after round
(`lab.time_in_turn`), so that a load change on a shared machine hits them alike. The recurrence has
nothing to warm up and runs once per length; the others report the median of --repeat rounds. Forms out
of reach are skipped, and the table says why.
Requires, at T = 4096: chunked (the first --chunk-size) >= 5x faster than recurrent and not slower than
FLA's chunk form (10% allowed for timing noise); at every T, the two chunk forms agree. Otherwise it
prints `FAIL: <what>` and exits with status 1 (benchmarks/README.md).
"""

import argparse
import sys
import warnings

import torch

from kimik3_lessons import lab
from kimik3_lessons import linear_attention as la

CHECK_T = 4096
FLA_CHUNK = 64         # naive_chunk_linear_attn's own chunk size: it needs T to be a multiple of it
MAX_SCORE_BYTES = 8e9  # parallel holds two [B, H, T, T] float32 matrices (scores, masked scores)


def fla_chunk(q, k, v):
    """FLA's naive chunk form, unscaled, on [B, T, H, D] tensors; o [B, H, T, D] back (a free view)."""
    with warnings.catch_warnings():  # FLA warns, on import, that its Triton kernels need a GPU: we use none
        warnings.simplefilter("ignore")
        from fla.ops.linear_attn.naive import naive_chunk_linear_attn
    return naive_chunk_linear_attn(q, k, v, scale=1.0).transpose(1, 2), None


def skip_reason(form, B, H, T):
    """Why a form is not timed at this size (printed in its table cell), or None."""
    if form == "parallel" and 2 * B * H * T * T * 4 > MAX_SCORE_BYTES:
        return f"skip ({2 * B * H * T * T * 4 / 1e9:.0f} GB)"
    if form == "fla" and T % FLA_CHUNK:
        return f"skip (T % {FLA_CHUNK})"
    return None


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
    parser.add_argument("--chunk-size", type=int, nargs="+", default=[64])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    dev = lab.setup()
    B, H, D, C0 = args.batch, args.heads, args.head_dim, args.chunk_size[0]
    print(f"\nB={B}, H={H}, D={D}, float32, forward; seconds: median of {args.repeat} rounds "
          f"(recurrent: one run)\n")

    forms = ["recurrent", *(f"chunked C={C}" for C in args.chunk_size), "parallel", "fla"]
    # (label, slower form, faster form, the least ratio required at T = CHECK_T)
    ratios = [(f"recurrent/chunked C={C0}", "recurrent", f"chunked C={C0}", 5.0),
              (f"fla/chunked C={C0}", "fla", f"chunked C={C0}", 1 / 1.1)]
    rows, results, failures = [], {}, []
    for T in args.seq_len:
        q, k = (la.elu_feature_map(torch.randn(B, H, T, D, device=dev)) for _ in range(2))
        v = torch.randn(B, H, T, D, device=dev)
        q_t, k_t, v_t = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        calls = {"recurrent": (la.recurrent, (q, k, v)), "parallel": (la.parallel, (q, k, v)),
                 "fla": (fla_chunk, (q_t, k_t, v_t))}
        for C in args.chunk_size:
            calls[f"chunked C={C}"] = (la.chunked, (q, k, v, C))
        skipped = {name: skip_reason(name, B, H, T) for name in forms}
        if not skipped["fla"]:
            agree(failures, f"T={T}: FLA's naive chunk form == chunked, C={C0}", calls["fla"],
                  calls[f"chunked C={C0}"])
        s = results[T] = lab.time_in_turn({n: calls[n] for n in forms if not skipped[n]}, args.repeat,
                                          once=("recurrent",))
        cells = [skipped[name] or f"{s[name]:.3f}" for name in forms]
        rows.append(f"{T:>6}" + "".join(f"{c:>16}" for c in cells)
                    + "".join(f"{ratio(s, slow, fast):>24}" for _, slow, fast, _ in ratios))

    print(f"\n{'T':>6}" + "".join(f"{name:>16}" for name in forms) + "".join(f"{r[0]:>24}" for r in ratios))
    print("\n".join(rows))
    print(f"\nskip (N GB): parallel would hold N GB of [T, T] scores (limit {MAX_SCORE_BYTES / 1e9:.0f} GB); "
          f"skip (T % {FLA_CHUNK}): FLA's chunk form needs T to be a multiple of {FLA_CHUNK}")
    print("reproduce: .venv/bin/python benchmarks/linear_attention.py " + " ".join(sys.argv[1:]))
    check_ratios(results, ratios, failures)
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
