"""Cached vs uncached greedy decoding with GPT-2 small (random weights: speed does not depend on them).

    .venv/bin/python benchmarks/gpt2_decode.py [--new-tokens 100] [--prompt 16] [--repeat 1]

Prints the time per generated token of each mode, the ratio, and checks that both modes produce the
same tokens and that the cache is at least 2x faster at ~100 generated tokens.
"""

import argparse

import torch

from kimik3_lessons import gpt2, lab


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=100)
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=1, help="rounds of timed generations (median)")
    parser.add_argument("--min-speedup", type=float, default=2.0)
    args = parser.parse_args()

    dev = lab.setup()
    model = gpt2.GPT(gpt2.GPTConfig()).to(dev).eval()
    prompt = torch.randint(0, model.config.vocab_size, (1, args.prompt), device=dev)
    print(f"GPT-2 small, {model.num_parameters():,} parameters; prompt {args.prompt} tokens, "
          f"{args.new_tokens} new tokens, greedy\n")

    def generate(use_cache):
        return model.generate(prompt, args.new_tokens, use_cache=use_cache)

    tokens = {"cached": generate(True), "uncached": generate(False)}       # the untimed first runs warm up
    # Both modes timed in turn, round after round: a change of load on a shared machine slows both alike.
    seconds = lab.time_in_turn({"cached": (generate, (True,)), "uncached": (generate, (False,))},
                               repeat=args.repeat, warmup=False)
    print(f"{'mode':<10}{'total s':>10}{'ms / token':>12}")
    for label, s in seconds.items():
        print(f"{label:<10}{s:>10.2f}{1e3 * s / args.new_tokens:>12.1f}")
    ratio = seconds["uncached"] / seconds["cached"]
    print(f"\nuncached / cached = {ratio:.1f}x")
    assert torch.equal(tokens["cached"], tokens["uncached"]), "cached and uncached decoding disagree"
    assert ratio >= args.min_speedup, f"the cache should be >= {args.min_speedup}x faster, got {ratio:.1f}x"
    print(f"✓ identical tokens; cached decoding is {ratio:.1f}x faster (required >= {args.min_speedup}x)")


if __name__ == "__main__":
    main()
