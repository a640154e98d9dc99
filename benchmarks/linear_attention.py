"""Linear attention, four ways of computing the same thing, timed side by side (forward, float32).

    .venv/bin/python benchmarks/linear_attention.py [--batch 2] [--heads 8] [--seq-len 1024 4096 16384]
        [--head-dim 64] [--chunk-size 64] [--repeat 3]

Times `recurrent` (token by token), `chunked` (at each --chunk-size), `parallel` (masked T x T) and
flash-linear-attention's pure-PyTorch chunk form `naive_chunk_linear_attn` (its chunk is fixed at 64;
[B, T, H, D], transposed outside the timed call) at each --seq-len, in turn, round after round
(`lab.time_in_turn`), so that a load change on a shared machine hits them alike. The recurrence has
nothing to warm up and runs once per length; the others report the median of --repeat rounds. Forms out
of reach are skipped, and the table says why.
Requires, at T = 4096: chunked (the first --chunk-size) >= 3x faster than recurrent and not slower than
FLA's chunk form (10% allowed for timing noise); at every T, the two chunk forms agree. Otherwise it
prints `FAIL: <what>` and exits with status 1 (benchmarks/README.md).
"""

import sys
import warnings

import torch

from kimik3_lessons import harness, lab
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


def main():
    args = harness.bench_arguments(__doc__.splitlines()[0], batch=2, heads=8, seq_len=[1024, 4096, 16384],
                                   head_dim=64, chunk_size=[64], repeat=3).parse_args()
    dev = lab.setup()
    B, H, D, C0 = args.batch, args.heads, args.head_dim, args.chunk_size[0]

    forms = ["recurrent", *(f"chunked C={C}" for C in args.chunk_size), "parallel", "fla"]
    # (label, slower form, faster form, the least ratio required at T = CHECK_T)
    ratios = [(f"recurrent/chunked C={C0}", "recurrent", f"chunked C={C0}", 3.0),
              (f"fla/chunked C={C0}", "fla", f"chunked C={C0}", 1 / 1.1)]
    results, notes, failures = {}, {}, []
    for T in args.seq_len:
        q, k = (la.elu_feature_map(torch.randn(B, H, T, D, device=dev)) for _ in range(2))
        v = torch.randn(B, H, T, D, device=dev)
        q_t, k_t, v_t = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        calls = {"recurrent": (la.recurrent, (q, k, v)), "parallel": (la.parallel, (q, k, v)),
                 "fla": (fla_chunk, (q_t, k_t, v_t))}
        for C in args.chunk_size:
            calls[f"chunked C={C}"] = (la.chunked, (q, k, v, C))
        skipped = {name: why for name in forms if (why := skip_reason(name, B, H, T))}
        notes.update({(T, name): why for name, why in skipped.items()})
        if "fla" not in skipped:
            harness.require_close(failures, f"T={T}: FLA's naive chunk form == chunked, C={C0}",
                                  fla_chunk(q_t, k_t, v_t)[0], la.chunked(q, k, v, C0)[0])
        results[T] = lab.time_in_turn({n: calls[n] for n in forms if n not in skipped}, args.repeat,
                                      once=("recurrent",))

    harness.print_times(f"Linear attention, B={B}, H={H}, D={D}, float32, forward; "
                        f"seconds: median of {args.repeat} rounds (recurrent: one run)", results, forms,
                        ratios, notes=notes)
    print(f"\nskip (N GB): parallel would hold N GB of [T, T] scores (limit {MAX_SCORE_BYTES / 1e9:.0f} GB); "
          f"skip (T % {FLA_CHUNK}): FLA's chunk form needs T to be a multiple of {FLA_CHUNK}")
    harness.require_ratios(failures, results.get(CHECK_T, {}), ratios, where=f"at T={CHECK_T}")
    return harness.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
