"""Recurrent vs chunked gated DeltaNet and KDA on the CPU, and flash-linear-attention's naive_chunk_kda.

    .venv/bin/python benchmarks/gated.py [--lengths 1024 4096 16384] [--batch 2 --heads 8 --dim 64]

Prints, for each sequence length, the median time of each form side by side and the ratios, and checks
at the reference size (B=2, H=8, T=4096, D=64): chunked >= 3x faster than recurrent for both ops, and
KDA chunked >= 5x faster than FLA's naive_chunk_kda. All forms run in float32 with the same inputs.
"""

import argparse

import torch
import torch.nn.functional as F

from kimik3_lessons import gated_deltanet, kda, lab


def inputs(B, H, T, D, seed=0):
    """Random q, unit keys k, v, per-channel log decays g in [-0.1, 0] and beta in (0, 1), [B, H, T, D]."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, T, D, generator=gen) for _ in range(3))
    g = -0.1 * torch.rand(B, H, T, D, generator=gen)
    beta = torch.rand(B, H, T, generator=gen)
    return q, F.normalize(k, dim=-1), v, g, beta


def fla_naive_chunk_kda(q, k, v, g, beta):
    """FLA's pure-PyTorch chunked KDA reference, in its [B, T, H, D] layout, unscaled; T % 64 == 0."""
    from fla.ops.kda.naive import naive_chunk_kda
    o, _ = naive_chunk_kda(*(x.transpose(1, 2) for x in (q, k, v, g, beta)), scale=1.0, chunk_size=64)
    return o.transpose(1, 2)


def time_forms(q, k, v, g, beta, repeat):
    """Median seconds of each form on the same inputs (gated DeltaNet gets the channel mean of g).

    The forms take turns, one call each per round, so that a machine shared with other work slows
    them alike and the ratios stay meaningful.
    """
    g_head = g.mean(-1)
    forms = {
        "gdn_rec": (gated_deltanet.recurrent, g_head), "gdn_chunk": (gated_deltanet.chunked, g_head),
        "kda_rec": (kda.recurrent, g), "kda_chunk": (kda.chunked, g), "fla": (fla_naive_chunk_kda, g),
    }
    calls = {name: (fn, (q, k, v, gate, beta)) for name, (fn, gate) in forms.items()}
    return lab.time_in_turn(calls, repeat, warmup=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    lab.setup()
    torch.set_grad_enabled(False)
    B, H, D = args.batch, args.heads, args.dim
    print(f"B={B}, H={H}, D={D}, chunk 64, float32, {torch.get_num_threads()} torch threads; seconds, "
          f"median of {args.repeat} runs (1 run above T=4096)\n")

    header = (f"{'T':>6} | {'GDN rec':>8} {'GDN chunk':>9} {'ratio':>6} | {'KDA rec':>8} {'KDA chunk':>9} "
              f"{'ratio':>6} | {'FLA naive':>9} {'FLA/ours':>8}")
    rows, ratios = [], {}
    for T in args.lengths:
        q, k, v, g, beta = inputs(B, H, T, D)
        lab.check_close(f"T={T}: KDA chunked vs FLA naive_chunk_kda", fla_naive_chunk_kda(q, k, v, g, beta),
                        kda.chunked(q, k, v, g, beta)[0])
        s = time_forms(q, k, v, g, beta, repeat=args.repeat if T <= 4096 else 1)
        r = ratios[T] = {"gdn": s["gdn_rec"] / s["gdn_chunk"], "kda": s["kda_rec"] / s["kda_chunk"],
                         "fla": s["fla"] / s["kda_chunk"]}
        rows.append(f"{T:>6} | {s['gdn_rec']:>8.3f} {s['gdn_chunk']:>9.3f} {r['gdn']:>5.1f}x | "
                    f"{s['kda_rec']:>8.3f} {s['kda_chunk']:>9.3f} {r['kda']:>5.1f}x | "
                    f"{s['fla']:>9.3f} {r['fla']:>7.1f}x")
    print("\n" + header + "\n" + "-" * len(header) + "\n" + "\n".join(rows))

    print("\nreproduce: .venv/bin/python benchmarks/gated.py " + " ".join(
        f"--{n} {' '.join(map(str, v)) if isinstance(v, list) else v}" for n, v in vars(args).items()))
    if (B, H, D) == (2, 8, 64) and 4096 in ratios:
        r = ratios[4096]
        assert r["gdn"] >= 3, f"gated DeltaNet: chunked should be >= 3x recurrent, got {r['gdn']:.1f}x"
        assert r["kda"] >= 3, f"KDA: chunked should be >= 3x recurrent, got {r['kda']:.1f}x"
        assert r["fla"] >= 5, f"KDA chunked should be >= 5x FLA's naive_chunk_kda, got {r['fla']:.1f}x"
        print(f"✓ T=4096: chunked/recurrent {r['gdn']:.1f}x (GDN), {r['kda']:.1f}x (KDA) >= 3x; "
              f"KDA chunked {r['fla']:.1f}x faster than FLA's naive_chunk_kda (>= 5x)")


if __name__ == "__main__":
    main()
