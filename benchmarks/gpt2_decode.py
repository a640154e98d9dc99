"""Cached vs uncached greedy decoding with GPT-2 small (random weights: speed does not depend on them).

    .venv/bin/python benchmarks/gpt2_decode.py [--batch 1] [--seq-len 16] [--new-tokens 100] [--repeat 1]

Generates --new-tokens tokens after a random prompt of --seq-len tokens, with the KV cache (each step feeds
only the newest token) and without it (each step re-runs the whole sequence). Each mode runs once untimed
(a warm-up, whose tokens are compared), then both are timed in turn, round after round
(`lab.time_in_turn`), so that a load change on a shared machine slows them alike; --repeat rounds, median.
Requires: both modes produce the same tokens, and the cached mode is >= 1.5x faster. Otherwise it prints
`FAIL: <what>` and exits with status 1 (benchmarks/README.md).
"""

import sys

import torch

from kimik3_lessons import gpt2, harness, lab

REQUIRED = 1.5   # the least uncached / cached ratio (about 2 on an idle 2-core CPU at the defaults)


def first_difference(a, b):
    """The first position (batch row, token) where two token tensors differ, as a string."""
    row, position = (a != b).nonzero()[0].tolist()
    return f"row {row}, token {position}"


def main():
    parser = harness.bench_arguments(__doc__.splitlines()[0], batch=1, seq_len=16, repeat=1)
    parser.add_argument("--new-tokens", type=int, default=100, help="tokens generated (default: 100)")
    args = parser.parse_args()
    dev = lab.setup()
    model = gpt2.GPT(gpt2.GPTConfig()).to(dev).eval()
    prompt = torch.randint(0, model.config.vocab_size, (args.batch, args.seq_len), device=dev)
    print(f"\nGPT-2 small, {model.num_parameters():,} parameters; batch {args.batch}, prompt {args.seq_len} "
          f"tokens, {args.new_tokens} new tokens, greedy")

    def generate(use_cache):
        return model.generate(prompt, args.new_tokens, use_cache=use_cache)

    failures = []
    cached, uncached = generate(True), generate(False)          # the untimed first runs warm up
    if torch.equal(cached, uncached):
        print(f"✓ cached and uncached decoding produce the same {args.new_tokens} tokens")
    else:
        failures.append(f"cached and uncached decoding produce different tokens (first at "
                        f"{first_difference(cached, uncached)})")
    seconds = lab.time_in_turn({"cached": (generate, (True,)), "uncached": (generate, (False,))},
                               repeat=args.repeat, warmup=False)
    ratios = [("uncached/cached", "uncached", "cached", REQUIRED)]
    harness.print_times(f"seconds per generation: median of {args.repeat} rounds", {args.new_tokens: seconds},
                        ["cached", "uncached"], ratios, key="new tokens")
    per_token = (f"{mode} {1e3 * s / args.new_tokens:.1f}" for mode, s in seconds.items())
    print("\nms per token: " + ", ".join(per_token))
    harness.require_ratios(failures, seconds, ratios)
    return harness.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
