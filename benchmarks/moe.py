"""Lesson 09 benchmark: sparse vs dense MoE dispatch, and SiTU (eager ops, fused Triton) vs two SwiGLUs.

    .venv/bin/python benchmarks/moe.py [--repeat 9]

Sparse dispatch runs each expert on its own tokens (top_k of E experts per token); the dense reference
runs every expert on every token, so it does E / top_k times the expert FLOPs. The activations are timed
on one bfloat16 [tokens, width] pair against two baselines: `moe.swiglu` (float32 math, like `moe.situ`)
and `silu(g) * u` in bfloat16 (no casts). The fused kernel is timed on a GPU only (on a CPU it runs in
Triton's interpreter, which measures numpy, not the kernel). Every form is timed in turn, round after
round (`lab.time_in_turn`), so that a machine shared with other work slows them alike; --repeat rounds,
median.
Requires: sparse == dense (and, on a GPU, fused SiTU == eager SiTU); sparse dispatch faster than dense;
eager SiTU slower than bf16 SwiGLU; on a GPU, the fused kernel faster than eager SiTU. Otherwise it
prints `FAIL: <what>` and exits with status 1 (benchmarks/README.md).
"""

import sys

import torch

from kimik3_lessons import harness, lab, moe

# (label, slower form, faster form, the least ratio required, or None where it is only shown)
DISPATCH_RATIOS = [("dense/sparse", "dense", "sparse", 1.0)]
ACTIVATIONS = ["swiglu f32", "swiglu bf16", "situ eager", "situ fused"]
ACTIVATION_RATIOS = [("situ/swiglu f32", "situ eager", "swiglu f32", None),
                     ("situ/swiglu bf16", "situ eager", "swiglu bf16", 1.0),
                     ("situ eager/fused", "situ eager", "situ fused", 1.0)]


def time_dispatch(dev, repeat, failures):
    """Check that sparse and dense dispatch agree, time both in turn, print the table; {form: seconds}."""
    hidden, latent, experts, top_k, width, tokens = lab.sizes(cpu=(256, 128, 64, 4, 128, 2048),
                                                              gpu=(2048, 1024, 64, 4, 512, 16384))
    layer = moe.LatentMoE(moe.MoEConfig(hidden, latent, experts, top_k, 1, width)).to(dev)
    x = torch.randn(tokens, hidden, device=dev)
    with torch.no_grad():
        harness.require_close(failures, "sparse == dense", layer.dense_forward(x), layer(x), rtol=1e-4)
        seconds = lab.time_in_turn({"sparse": (layer, (x,)), "dense": (layer.dense_forward, (x,))},
                                   repeat=repeat)
    harness.print_times(f"MoE dispatch: hidden {hidden}, latent {latent}, {experts} experts, top {top_k}, "
                        f"expert width {width}; seconds: median of {repeat} rounds",
                        {tokens: seconds}, ["sparse", "dense"], DISPATCH_RATIOS, key="tokens")
    return seconds


def swiglu_bf16(gate, up):
    """SwiGLU as plain PyTorch runs it: silu(gate) * up in the inputs' dtype, no casts."""
    return torch.nn.functional.silu(gate) * up


def time_activations(dev, repeat, failures):
    """Time the two SwiGLU baselines and SiTU (its fused kernel on a GPU only) in turn, print the table
    and the bandwidth each reaches; {form: seconds}."""
    rows, cols = lab.sizes(cpu=(512, 1024), gpu=(16384, 6144))
    gate = (torch.randn(rows, cols, device=dev) * 4).bfloat16()
    up = (torch.randn(rows, cols, device=dev) * 4).bfloat16()
    forms = {"swiglu f32": moe.swiglu, "swiglu bf16": swiglu_bf16, "situ eager": moe.situ}
    if lab.on_gpu():
        harness.require_close(failures, "situ_triton == situ", moe.situ(gate, up), moe.situ_triton(gate, up))
        forms["situ fused"] = moe.situ_triton
    seconds = lab.time_in_turn({name: (fn, (gate, up)) for name, fn in forms.items()}, repeat=repeat)
    shape = f"{rows}x{cols}"
    harness.print_times(f"Activations, bfloat16 (swiglu f32: float32 math, like situ; swiglu bf16: no "
                        f"casts); seconds: median of {repeat} rounds", {shape: seconds}, ACTIVATIONS,
                        ACTIVATION_RATIOS, key="shape", notes={(shape, "situ fused"): "GPU only"})
    moved = 3 * gate.numel() * gate.element_size()  # the least any form can move: read gate, up; write out
    print("GB/s (3 passes): " + ", ".join(f"{name} {moved / t / 1e9:.1f}" for name, t in seconds.items()))
    return seconds


def main():
    args = harness.bench_arguments(__doc__.splitlines()[0], repeat=9).parse_args()
    dev = lab.setup()
    failures = []
    dispatch = time_dispatch(dev, args.repeat, failures)
    activations = time_activations(dev, args.repeat, failures)
    print("\neager SiTU / SwiGLU, reported by the article: 'almost 3x'\n")
    harness.require_ratios(failures, dispatch, DISPATCH_RATIOS)
    harness.require_ratios(failures, activations, ACTIVATION_RATIOS)
    return harness.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
