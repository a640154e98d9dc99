"""DeltaNet, the recurrence against the chunked (WY/UT) form, timed side by side (forward, float32).

    .venv/bin/python benchmarks/deltanet.py [--batch 2] [--heads 8] [--seq-len 1024 4096 16384]
        [--head-dim 64] [--chunk-size 32 64] [--repeat 3]

Times `recurrent` (token by token), `chunked` and flash-linear-attention's pure-PyTorch chunk form
`delta_rule_chunkwise` (same [B, H, T, D] layout) at each --chunk-size and --seq-len, with L2-normalized
q, k and beta in (0, 1). The forms are timed in turn, round after round (`lab.time_in_turn`), so that a
load change on a shared machine hits them alike; the recurrence, one Python step per token, runs once per
length, the others report the median of --repeat rounds.
Requires, at T = 4096: chunked >= 2x faster than recurrent at the first --chunk-size (32, the better chunk
size on a CPU: the intra-chunk work grows as 10 C d FLOPs per token, lesson 05; the C = 64 column shows
the default; about 3x on an idle 2-core CPU, more on a busy one, where the recurrence's thousands of small
operations suffer most); FLA's chunk form is timed beside it, not required; at every size, the two chunk
forms agree. Otherwise it prints `FAIL: <what>` and exits with status 1 (benchmarks/README.md).
"""

import sys
import warnings

import torch
import torch.nn.functional as F

from kimik3_lessons import deltanet, harness, lab

CHECK_T = 4096


def fla_chunkwise(q, k, v, beta, chunk_size):
    """FLA's naive chunk form; it multiplies q by D^-0.5 itself, so q comes in pre-multiplied by sqrt(D)."""
    with warnings.catch_warnings():  # FLA warns, on import, that its Triton kernels need a GPU: we use none
        warnings.simplefilter("ignore")
        from fla.ops.delta_rule.naive import delta_rule_chunkwise
    return delta_rule_chunkwise(q, k, v, beta, chunk_size=chunk_size)


def main():
    args = harness.bench_arguments(__doc__.splitlines()[0], batch=2, heads=8, seq_len=[1024, 4096, 16384],
                                   head_dim=64, chunk_size=[32, 64], repeat=3).parse_args()
    dev = lab.setup()
    B, H, D, C0 = args.batch, args.heads, args.head_dim, args.chunk_size[0]

    forms = ["recurrent"] + [f"{form} C={C}" for C in args.chunk_size for form in ("chunked", "fla")]
    # (label, slower form, faster form, the least ratio required at T = CHECK_T)
    ratios = [(f"recurrent/chunked C={C0}", "recurrent", f"chunked C={C0}", 2.0)]
    ratios += [(f"fla/chunked C={C}", f"fla C={C}", f"chunked C={C}", None) for C in args.chunk_size]
    results, failures = {}, []
    for T in args.seq_len:
        q, k = (F.normalize(torch.randn(B, H, T, D, device=dev), dim=-1) for _ in range(2))
        v = torch.randn(B, H, T, D, device=dev)
        beta = torch.rand(B, H, T, device=dev)
        calls = {"recurrent": (deltanet.recurrent, (q, k, v, beta))}
        for C in args.chunk_size:
            calls[f"chunked C={C}"] = (deltanet.chunked, (q, k, v, beta, C))
            if T % C == 0:   # FLA's chunk form needs whole chunks
                calls[f"fla C={C}"] = (fla_chunkwise, (q * D**0.5, k, v, beta, C))
                harness.require_close(failures, f"T={T}: FLA's chunkwise form == chunked, C={C}",
                                      fla_chunkwise(q * D**0.5, k, v, beta, C)[0],
                                      deltanet.chunked(q, k, v, beta, C)[0])
        results[T] = lab.time_in_turn(calls, args.repeat, once=("recurrent",))

    harness.print_times(f"DeltaNet, B={B}, H={H}, D={D}, float32, forward; "
                        f"seconds: median of {args.repeat} rounds (recurrent: one run)", results, forms,
                        ratios)
    print("\n-: not timed (FLA's delta_rule_chunkwise needs T to be a multiple of the chunk size)")
    harness.require_ratios(failures, results.get(CHECK_T, {}), ratios, where=f"at T={CHECK_T}")
    return harness.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
