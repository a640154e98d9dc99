"""Linear attention, four ways of computing the same thing, timed side by side (forward, one head size).

    .venv/bin/python benchmarks/linear_attention.py [--batch 2] [--heads 8] [--head-dim 64] [--repeat 3]

Times `recurrent` (token by token), `chunked` (C = 64), `parallel` (masked T x T) and
flash-linear-attention's pure-PyTorch chunk form (`naive_chunk_linear_attn`, C = 64, [B, T, H, D]) at
T = 1k, 4k, 16k. Forms are timed in alternation, round after round, so that a load change on a shared
machine hits them alike. Forms whose cost would be out of reach are skipped, and the table says why.
Checks, at T = 4096: chunked >= 5x faster than recurrent, and not slower than the FLA chunk form
(10% allowed for timing noise).
"""

import argparse

import torch

from kimik3_lessons import lab
from kimik3_lessons import linear_attention as la

LENGTHS = (1024, 4096, 16384)
CHUNK = 64
MAX_SCORE_BYTES = 8e9  # parallel holds two [B, H, T, T] float32 matrices (scores, masked scores)
MAX_RECURRENT_STEPS = 8192  # one token per step: 16k steps take minutes on a loaded 2-core CPU


def fla_chunk(q, k, v):
    """FLA's naive chunk form on our [B, H, T, D] tensors, transposed outside the timed call."""
    from fla.ops.linear_attn.naive import naive_chunk_linear_attn
    return naive_chunk_linear_attn(q, k, v, scale=1.0)


def skip_reason(form, B, H, T):
    """Why a form is not timed at this size (printed in its table cell), or None."""
    if form == "parallel" and 2 * B * H * T * T * 4 > MAX_SCORE_BYTES:
        return f"skip ({2 * B * H * T * T * 4 / 1e9:.0f} GB)"
    if form == "recurrent" and T > MAX_RECURRENT_STEPS:
        return f"skip ({T // 1024}k steps)"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    dev = lab.setup()
    B, H, D = args.batch, args.heads, args.head_dim
    print(f"\nB={B}, H={H}, D={D}, chunk size {CHUNK}, float32, forward; median of {args.repeat} rounds\n")

    forms = ("recurrent", "chunked", "parallel", "fla naive chunk")
    print(f"{'T':>6}" + "".join(f"{name + ' s':>22}" for name in forms) + f"{'recurrent/chunked':>20}"
          f"{'fla/chunked':>14}")
    results = {}
    for T in LENGTHS:
        q, k = (la.elu_feature_map(torch.randn(B, H, T, D, device=dev)) for _ in range(2))
        v = torch.randn(B, H, T, D, device=dev)
        q_t, k_t, v_t = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        calls = {"recurrent": (la.recurrent, (q, k, v)),
                 "chunked": (lambda q, k, v: la.chunked(q, k, v, chunk_size=CHUNK), (q, k, v)),
                 "parallel": (la.parallel, (q, k, v)),
                 "fla naive chunk": (fla_chunk, (q_t, k_t, v_t))}
        skipped = {name: skip_reason(name, B, H, T) for name in forms}
        seconds = lab.time_in_turn({n: c for n, c in calls.items() if not skipped[n]}, args.repeat)
        results[T] = seconds
        cells = [skipped[name] or f"{seconds[name]:.3f}" for name in forms]
        ratios = [f"{seconds[a] / seconds['chunked']:.1f}x" if a in seconds else "-"
                  for a in ("recurrent", "fla naive chunk")]
        print(f"{T:>6}" + "".join(f"{c:>22}" for c in cells) + f"{ratios[0]:>20}{ratios[1]:>14}", flush=True)

    print(f"\nskip (N GB): parallel would hold N GB of [T, T] scores (limit {MAX_SCORE_BYTES / 1e9:.0f} GB); "
          f"skip (Nk steps): recurrent walks one token per step (limit {MAX_RECURRENT_STEPS} steps)")
    print(f"reproduce: .venv/bin/python benchmarks/linear_attention.py --batch {B} --heads {H} "
          f"--head-dim {D} --repeat {args.repeat}")
    at = results[4096]
    speedup, vs_fla = at["recurrent"] / at["chunked"], at["fla naive chunk"] / at["chunked"]
    assert speedup >= 5, f"chunked should be >= 5x faster than recurrent at T=4096, got {speedup:.1f}x"
    assert vs_fla >= 1 / 1.1, f"chunked should not be slower than FLA's naive chunk form, got {vs_fla:.2f}x"
    print(f"✓ at T=4096 chunked is {speedup:.1f}x faster than recurrent (required >= 5x) and "
          f"{vs_fla:.2f}x the speed of FLA's naive chunk form (required >= 1, 10% noise allowed)")


if __name__ == "__main__":
    main()
