"""Gated DeltaNet and KDA, the recurrence against the chunked form, timed side by side (forward, float32).

    .venv/bin/python benchmarks/gated.py [--batch 2] [--heads 8] [--seq-len 1024 4096 16384]
        [--head-dim 64] [--chunk-size 64] [--repeat 3]

Times `recurrent` (token by token) and `chunked` (at each --chunk-size) of gated DeltaNet and of KDA, and
flash-linear-attention's pure-PyTorch chunked KDA `naive_chunk_kda` at the same chunk sizes ([B, T, H, D],
transposed outside the timed call, unscaled), at each --seq-len, on the same inputs: random q, unit keys
k, v, per-channel log decays g in [-0.1, 0] (gated DeltaNet gets their mean over the channels) and beta
in (0, 1). The forms are timed in turn, round after round (`lab.time_in_turn`), so that a load change on
a shared machine hits them alike; the recurrences run once per length, the others report the median of
--repeat rounds.
Requires, at T = 4096: chunked faster than recurrent, >= 1.8x for gated DeltaNet and >= 1.2x for KDA (about
2.5x and 1.5x on an idle 2-core CPU, more on a busy one), at the first --chunk-size, and
KDA's chunked >= 5x faster than FLA's naive_chunk_kda at each chunk size; at every size, the two chunked
KDA forms agree. Otherwise it prints `FAIL: <what>` and exits with status 1 (benchmarks/README.md).
"""

import sys
import warnings

import torch
import torch.nn.functional as F

from kimik3_lessons import gated_deltanet, harness, kda, lab

CHECK_T = 4096


def fla_naive_chunk_kda(q, k, v, g, beta, chunk_size):
    """FLA's pure-PyTorch chunked KDA, unscaled, on [B, T, H, ...] tensors; o [B, H, T, D] back (a view)."""
    with warnings.catch_warnings():  # FLA warns, on import, that its Triton kernels need a GPU: we use none
        warnings.simplefilter("ignore")
        from fla.ops.kda.naive import naive_chunk_kda
    o, S = naive_chunk_kda(q, k, v, g, beta, scale=1.0, chunk_size=chunk_size, output_final_state=True)
    return o.transpose(1, 2), S


def main():
    args = harness.bench_arguments(__doc__.splitlines()[0], batch=2, heads=8, seq_len=[1024, 4096, 16384],
                                   head_dim=64, chunk_size=[64], repeat=3).parse_args()
    dev = lab.setup()
    B, H, D, C0 = args.batch, args.heads, args.head_dim, args.chunk_size[0]

    forms = ["GDN rec", *(f"GDN C={C}" for C in args.chunk_size), "KDA rec",
             *(f"{form} C={C}" for C in args.chunk_size for form in ("KDA", "FLA"))]
    # (label, slower form, faster form, the least ratio required at T = CHECK_T)
    ratios = [(f"{m} rec/C={C0}", f"{m} rec", f"{m} C={C0}", least)
              for m, least in (("GDN", 1.8), ("KDA", 1.2))]
    ratios += [(f"FLA/KDA C={C}", f"FLA C={C}", f"KDA C={C}", 5.0) for C in args.chunk_size]
    results, failures = {}, []
    for T in args.seq_len:
        q, k, v = (torch.randn(B, H, T, D, device=dev) for _ in range(3))
        k = F.normalize(k, dim=-1)
        g = -0.1 * torch.rand(B, H, T, D, device=dev)
        beta = torch.rand(B, H, T, device=dev)
        g_head = g.mean(-1)
        calls = {"GDN rec": (gated_deltanet.recurrent, (q, k, v, g_head, beta)),
                 "KDA rec": (kda.recurrent, (q, k, v, g, beta))}
        for C in args.chunk_size:
            calls[f"GDN C={C}"] = (gated_deltanet.chunked, (q, k, v, g_head, beta, C))
            calls[f"KDA C={C}"] = (kda.chunked, (q, k, v, g, beta, C))
            if T % C == 0:   # FLA's chunk form needs whole chunks
                bthd = [x.transpose(1, 2).contiguous() for x in (q, k, v, g, beta)]
                calls[f"FLA C={C}"] = (fla_naive_chunk_kda, (*bthd, C))
                harness.require_close(failures, f"T={T}: FLA's naive_chunk_kda == KDA chunked, C={C}",
                                      fla_naive_chunk_kda(*bthd, C)[0], kda.chunked(q, k, v, g, beta, C)[0])
        results[T] = lab.time_in_turn(calls, args.repeat, once=("GDN rec", "KDA rec"))

    harness.print_times(f"Gated DeltaNet (GDN) and KDA, B={B}, H={H}, D={D}, float32, forward; "
                        f"seconds: median of {args.repeat} rounds (recurrent: one run)", results, forms,
                        ratios)
    print("\n-: not timed (FLA's naive_chunk_kda needs T to be a multiple of the chunk size)")
    harness.require_ratios(failures, results.get(CHECK_T, {}), ratios, where=f"at T={CHECK_T}")
    return harness.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
