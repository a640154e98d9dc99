"""Lesson 09 benchmark: sparse vs dense MoE dispatch, and SiTU (eager ops, fused Triton) vs SwiGLU.

    .venv/bin/python benchmarks/moe.py

Sparse dispatch runs each expert on its own tokens (top_k of E experts per token); the dense reference
runs every expert on every token, so it does E / top_k times the expert FLOPs. The activations are
timed on one large [tokens, width] pair; the fused kernel is timed on a GPU only (on a CPU it runs in
Triton's interpreter, which measures numpy, not the kernel).
Asserts: sparse dispatch is faster than dense; eager SiTU is slower than eager SwiGLU; on a GPU the
fused kernel is faster than eager SiTU.
"""

import sys

import torch

from kimik3_lessons import lab, moe


def time_dispatch(dev):
    hidden, latent, experts, top_k, width, tokens = lab.sizes(cpu=(256, 128, 64, 4, 128, 2048),
                                                              gpu=(2048, 1024, 64, 4, 512, 16384))
    layer = moe.LatentMoE(hidden, latent, experts, top_k, 1, width).to(dev)
    x = torch.randn(tokens, hidden, device=dev)
    with torch.no_grad():
        lab.check_close("sparse == dense", layer.dense_forward(x), layer(x), rtol=1e-4)
        sparse = lab.timeit(layer, x, repeat=5)
        dense = lab.timeit(layer.dense_forward, x, repeat=3)
    print(f"\nMoE dispatch: {tokens} tokens, hidden {hidden}, latent {latent}, {experts} experts, "
          f"top {top_k}, expert width {width}")
    print(f"{'form':<10}{'ms':>10}{'× sparse':>10}")
    print(f"{'sparse':<10}{sparse * 1e3:>10.2f}{1.0:>10.2f}")
    print(f"{'dense':<10}{dense * 1e3:>10.2f}{dense / sparse:>10.2f}")
    return dense / sparse


def time_activations(dev):
    rows, cols = lab.sizes(cpu=(1024, 2048), gpu=(16384, 6144))
    dtype = torch.bfloat16 if lab.on_gpu() else torch.float32
    gate = torch.randn(rows, cols, device=dev).to(dtype) * 4
    up = torch.randn(rows, cols, device=dev).to(dtype) * 4
    forms = {"swiglu (eager)": moe.swiglu, "situ (eager ops)": moe.situ}
    if lab.on_gpu():
        lab.check_close("situ_triton == situ", moe.situ(gate, up), moe.situ_triton(gate, up))
        forms["situ (fused Triton)"] = moe.situ_triton
    times = {name: lab.timeit(fn, gate, up, warmup=2, repeat=10) for name, fn in forms.items()}
    moved = 3 * gate.numel() * gate.element_size()  # the least any form can move: read gate, up; write out
    print(f"\nActivations on [{rows}, {cols}] {str(dtype).removeprefix('torch.')}")
    print(f"{'form':<22}{'ms':>10}{'GB/s (3 passes)':>18}{'× swiglu':>10}")
    for name, t in times.items():
        print(f"{name:<22}{t * 1e3:>10.3f}{moved / t / 1e9:>18.1f}{t / times['swiglu (eager)']:>10.2f}")
    return times


def main():
    dev = lab.setup()
    speedup = time_dispatch(dev)
    times = time_activations(dev)
    situ_ratio = times["situ (eager ops)"] / times["swiglu (eager)"]
    print(f"\neager SiTU / SwiGLU = {situ_ratio:.2f}× (the article: 'almost 3×'); "
          f"dense / sparse dispatch = {speedup:.1f}×")
    print("reproduce: .venv/bin/python benchmarks/moe.py")
    failures = []
    if speedup <= 1:
        failures.append(f"sparse dispatch is not faster than dense ({speedup:.2f}×)")
    if situ_ratio <= 1:
        failures.append(f"eager SiTU is not slower than SwiGLU ({situ_ratio:.2f}×)")
    if "situ (fused Triton)" in times and times["situ (fused Triton)"] >= times["situ (eager ops)"]:
        failures.append("the fused SiTU kernel is not faster than the eager ops")
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
