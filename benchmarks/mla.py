"""One MLA decode step, explicit vs absorbed, at growing context (lesson 08).

The explicit step up-projects every cached latent into per-head keys and values (S d_c H (d_n + d_v)
multiply-adds); the absorbed step attends over the latents directly (about S H (2 d_c + d_r)). The
issue asks for absorbed >= 1.5x faster at 4096 cached tokens with hidden 1024 and 16 heads on a CPU.
On a busy shared CPU, time on one thread (--threads 1): small ops otherwise wait for the second thread.

    .venv/bin/python benchmarks/mla.py [--threads N]
"""

import argparse
import sys

import torch

from kimik3_lessons import lab, mla

CONTEXTS = [512, 1024, 2048, 4096, 8192]
REQUIRED = {4096: 1.5}   # cached tokens -> minimum speed-up of the absorbed step


def decode_inputs(layer, S):
    """A cache of S tokens, built by the layer's own `latents` as a prefill would, and one new token."""
    hidden = layer.config.hidden_size
    cache = mla.LatentCache(*layer.latents(torch.randn(1, S, hidden), torch.arange(S)))
    return torch.randn(1, 1, hidden), cache


def decode_step_times(layer, S, repeat=7):
    """Median seconds of one decode step (explicit, absorbed) after S cached tokens, timed in turn
    (`lab.time_in_turn`) so that a change of load on the machine slows both alike."""
    x, cache = decode_inputs(layer, S)
    times = lab.time_in_turn({"explicit": (lambda x, c: layer(x, c, absorb=False), (x, cache)),
                              "absorbed": (lambda x, c: layer(x, c, absorb=True), (x, cache))}, repeat=repeat)
    return times["explicit"], times["absorbed"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    lab.setup(seed=0)
    config = mla.MLAConfig(hidden_size=1024, num_heads=16, q_lora_rank=None, kv_lora_rank=512,
                           qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)
    print(f"\n{config}\ntorch threads: {torch.get_num_threads()}\n")
    layer = mla.MultiHeadLatentAttention(config)
    failures = []
    with torch.inference_mode():
        x, cache = decode_inputs(layer, 1024)   # first: the two paths compute the same step
        lab.check_close("absorbed vs explicit decode step", layer(x, cache, absorb=False)[0],
                        layer(x, cache, absorb=True)[0])
        print(f"\n{'cached tokens':>14} {'explicit ms':>12} {'absorbed ms':>12} {'speed-up':>9}")
        for S in CONTEXTS:
            explicit, absorbed = decode_step_times(layer, S)
            ratio = explicit / absorbed
            print(f"{S:>14} {explicit * 1e3:>12.2f} {absorbed * 1e3:>12.2f} {ratio:>8.1f}x")
            if S in REQUIRED and ratio < REQUIRED[S]:
                failures.append(f"at {S} cached tokens the absorbed step is {ratio:.2f}x faster, "
                                f"required {REQUIRED[S]}x")
    threads = f" --threads {args.threads}" if args.threads else ""
    print(f"\nreproduce: .venv/bin/python benchmarks/mla.py{threads}")
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
