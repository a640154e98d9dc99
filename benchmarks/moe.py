"""Lesson 09 benchmark: sparse vs dense MoE dispatch, and SiTU (eager ops, fused Triton) vs two SwiGLUs.

    .venv/bin/python benchmarks/moe.py [--repeat 9]

Sparse dispatch runs each expert on its own tokens (top_k of E experts per token); the dense reference
runs every expert on every token, so it does E / top_k times the expert FLOPs. The activations are timed
on one bfloat16 [tokens, width] pair against two baselines: `moe.swiglu` (float32 math, like `moe.situ`)
and `silu(g) * u` in bfloat16 (no casts). The fused kernel is timed on a GPU only (on a CPU it runs in
Triton's interpreter, which measures numpy, not the kernel). Every form is timed round after round
(`lab.time_in_turn`), so that a machine shared with other work slows them alike.
Asserts: sparse dispatch is faster than dense; eager SiTU is slower than bf16 SwiGLU; on a GPU the fused
kernel is faster than eager SiTU.
"""

import argparse
import sys

import torch

from kimik3_lessons import lab, moe


def time_dispatch(dev, repeat):
    hidden, latent, experts, top_k, width, tokens = lab.sizes(cpu=(256, 128, 64, 4, 128, 2048),
                                                              gpu=(2048, 1024, 64, 4, 512, 16384))
    layer = moe.LatentMoE(moe.MoEConfig(hidden, latent, experts, top_k, 1, width)).to(dev)
    x = torch.randn(tokens, hidden, device=dev)
    with torch.no_grad():
        lab.check_close("sparse == dense", layer.dense_forward(x), layer(x), rtol=1e-4)
        calls = {"sparse": (layer, (x,)), "dense": (layer.dense_forward, (x,))}
        times = lab.time_in_turn(calls, repeat=repeat)
    print(f"\nMoE dispatch: {tokens} tokens, hidden {hidden}, latent {latent}, {experts} experts, "
          f"top {top_k}, expert width {width}")
    print(f"{'form':<10}{'ms':>10}{'× sparse':>10}")
    for name, t in times.items():
        print(f"{name:<10}{t * 1e3:>10.2f}{t / times['sparse']:>10.2f}")
    return times["dense"] / times["sparse"]


def swiglu_bf16(gate, up):
    """SwiGLU as plain PyTorch runs it: silu(gate) * up in the inputs' dtype, no casts."""
    return torch.nn.functional.silu(gate) * up


def time_activations(dev, repeat):
    rows, cols = lab.sizes(cpu=(512, 1024), gpu=(16384, 6144))
    gate = (torch.randn(rows, cols, device=dev) * 4).bfloat16()
    up = (torch.randn(rows, cols, device=dev) * 4).bfloat16()
    forms = {"swiglu, float32 math": moe.swiglu, "swiglu, bf16 math": swiglu_bf16,
             "situ, eager ops": moe.situ}
    if lab.on_gpu():
        lab.check_close("situ_triton == situ", moe.situ(gate, up), moe.situ_triton(gate, up))
        forms["situ, fused Triton"] = moe.situ_triton
    times = lab.time_in_turn({name: (fn, (gate, up)) for name, fn in forms.items()}, repeat=repeat)
    moved = 3 * gate.numel() * gate.element_size()  # the least any form can move: read gate, up; write out
    print(f"\nActivations on [{rows}, {cols}] bfloat16")
    print(f"{'form':<22}{'ms':>10}{'GB/s (3 passes)':>18}{'× swiglu f32':>14}{'× swiglu bf16':>15}")
    for name, t in times.items():
        print(f"{name:<22}{t * 1e3:>10.3f}{moved / t / 1e9:>18.1f}{t / times['swiglu, float32 math']:>14.2f}"
              f"{t / times['swiglu, bf16 math']:>15.2f}")
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=9, help="rounds of time_in_turn (median reported)")
    args = parser.parse_args()
    dev = lab.setup()
    speedup = time_dispatch(dev, args.repeat)
    times = time_activations(dev, args.repeat)
    situ = times["situ, eager ops"]
    print(f"\neager SiTU / SwiGLU: {situ / times['swiglu, float32 math']:.2f}× (float32 math), "
          f"{situ / times['swiglu, bf16 math']:.2f}× (bf16 math); the article: 'almost 3×'. "
          f"dense / sparse dispatch = {speedup:.1f}×")
    print("reproduce: .venv/bin/python benchmarks/moe.py")
    failures = []
    if speedup <= 1:
        failures.append(f"sparse dispatch is not faster than dense ({speedup:.2f}×)")
    if situ <= times["swiglu, bf16 math"]:
        failures.append("eager SiTU is not slower than bf16 SwiGLU")
    if "situ, fused Triton" in times and times["situ, fused Triton"] >= situ:
        failures.append("the fused SiTU kernel is not faster than the eager ops")
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
