"""Lesson 09b's exercises: fine-grained experts at the same cost; SiTU from exp alone, as the fused kernel
computes it."""

import dataclasses
import math
import random

import torch

from kimik3_lessons import moe
from kimik3_lessons.exercises import Watch, Wrong, attempt, exercise, hint, part


@exercise("09b.1", "finer_experts", "fine-grained experts at the same cost", difficulty=1,
          parts=("the experts split", "the same costs", "nothing else changed"))
def check_finer_experts(finer_experts):
    for m in (2, 4):
        said = _check_finer_experts(finer_experts, m)
    return said


def _check_finer_experts(finer_experts, m):
    F = m * random.randint(8, 64)
    config = moe.MoEConfig(hidden_size=random.choice((64, 96, 128)), latent_size=random.choice((None, 32)),
                           num_experts=random.randint(8, 40), top_k=random.randint(1, 6),
                           num_shared_experts=random.randint(1, 3), expert_hidden_size=F)
    out = attempt(finer_experts, config, m)
    if not isinstance(out, moe.MoEConfig):
        raise Wrong(f"return a moe.MoEConfig, got {type(out).__name__}",
                    hint=hint("dataclasses.replace(config, ...) makes one."))
    with part("the experts split"):
        if out.num_experts != m * config.num_experts or out.expert_hidden_size * m != F:
            raise Wrong(f"split each of the {config.num_experts} experts of width {F} into {m}: expected "
                        f"{m * config.num_experts} experts of width {F // m}, got {out.num_experts} of width "
                        f"{out.expert_hidden_size}")
    before, after = moe.moe_costs(config), moe.moe_costs(out)
    with part("the same costs", needs=("the experts split",)):
        for name in ("routed experts", "shared experts"):
            (p0, f0), (p1, f1) = before[name], after[name]
            if (p0, f0) != (p1, f1):
                raise Wrong(f"the {name} changed: {p0:,} → {p1:,} parameters, {f0:,} → {f1:,} FLOPs per "
                            "token",
                            hint=hint("narrower experts cost less each; how many must a token run to pay the "
                                      "same? (In LatentMoE the shared experts have the routed experts' width "
                                      "too.)"))
    with part("nothing else changed", needs=("the experts split",)):
        if dataclasses.replace(out, num_experts=config.num_experts, top_k=config.top_k,
                               num_shared_experts=config.num_shared_experts,
                               expert_hidden_size=config.expert_hidden_size) != config:
            raise Wrong("another field of the configuration changed", hint=hint(
                "change only the number of experts, top_k, the shared experts and the width."))
    return (f"m = 2 and 4; e.g. {config.num_experts} experts of width {F}, top {config.top_k} → "
            f"{out.num_experts} of width {out.expert_hidden_size}, top {out.top_k}: same routed and shared "
            f"costs; the router grows {after['router'][0] / before['router'][0]:.0f}×")



# What the course's kernel builds SiTU from (aten op names): exp (exp2 too, as `moe._exp` uses it),
# arithmetic, comparisons, abs, sign, where, clamp and rounding, and the ops that make, view or copy tensors.
# Any other op (tanh, sigmoid, sinh, log, expm1, softmax, elu, erf, ...) is one the exercise rules out.
IN_THE_KERNEL = frozenset((
    "exp", "exp2", "abs", "neg", "add", "sub", "rsub", "mul", "div", "reciprocal", "square", "pow", "sqrt",
    "sign", "sgn", "copysign", "where", "clamp", "clamp_min", "clamp_max", "minimum", "maximum", "floor",
    "ceil", "round", "trunc", "gt", "ge", "lt", "le", "eq", "ne", "logical_and", "logical_or", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_not", "masked_fill", "scalar_tensor", "full_like", "zeros_like",
    "ones_like", "empty_like", "full", "zeros", "ones", "empty", "fill", "arange", "clone", "copy", "detach",
    "alias", "lift_fresh", "lift_fresh_copy", "_to_copy", "view", "_unsafe_view", "reshape", "expand",
    "select", "slice", "unsqueeze", "squeeze", "t", "transpose", "permute", "stack", "cat", "sum"))
RTOL = 1e-5                                                             # per element; float32 rounds at 6e-8


@exercise("09b.2", "situ_from_exp", "SiTU from exp alone, as the fused kernel computes it", difficulty=2,
          parts=("SiTU's values", "exp alone, in float32"),
          forbid=("moe.situ", "moe.situ_triton", "moe.SiTUMLP.forward"))
def check_situ_from_exp(situ_from_exp):
    n = random.randint(600, 1200)
    sign = lambda: torch.where(torch.rand(n) < 0.5, -1.0, 1.0)  # noqa: E731
    ones = torch.ones(n)
    beta, linear_beta = round(random.uniform(2, 6), 2), round(random.uniform(10, 40), 1)
    # what, gate, up, keyword arguments; the first two sweep the magnitudes where the kernel's tricks matter
    cases = [
        ("gate from 1e-8 to 80 in size, up = 1", sign() * torch.logspace(-8, math.log10(80), n), ones, {}),
        ("up from 1e-8 to 1e6 in size, gate = 1", ones, sign() * torch.logspace(-8, 6, n), {}),
        ("random gate and up", torch.randn(n) * 8, torch.randn(n) * 60, {}),
        ("linear_beta=None (up not capped)", torch.randn(n) * 8, torch.randn(n) * 60, {"linear_beta": None}),
        (f"beta={beta}, linear_beta={linear_beta}", torch.randn(n) * 8, torch.randn(n) * 60,
         {"beta": beta, "linear_beta": linear_beta}),
    ]
    worst = 0.0
    for what, g, u, kwargs in cases:
        with Watch() as watch:
            out = attempt(situ_from_exp, g.clone(), u.clone(), **kwargs)
        if not isinstance(out, torch.Tensor) or out.shape != g.shape or out.dtype != torch.float32:
            got = f"{out.dtype} {list(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise Wrong(f"return a float32 tensor of shape {list(g.shape)}, got {got}")
        ref = moe.situ(g.double(), u.double(), **kwargs)
        with part("SiTU's values"):
            bad = ~torch.isfinite(out)
            if bad.any():
                i = int(bad.nonzero()[0])
                raise Wrong(f"{what}: NaN or inf at gate = {g[i]:.3g}, up = {u[i]:.3g}: an exponential "
                            "overflowed", hint=hint("exponentiate only -|x| (e^(-|x|) <= 1) and put the "
                                                     "sign back."))
            rel = (out.double() - ref).abs() / ref.abs()
            i = int(rel.argmax())
            if rel[i] > RTOL:
                b, lb = kwargs.get("beta", 4.0), kwargs.get("linear_beta", 25.0)
                # where 1 - e^(-2|x|) cancels: its relative error is about 6e-8 / (2|x|)
                tiny = abs(g[i] / b) < 3e-3 or (lb is not None and abs(u[i] / lb) < 3e-3)
                raise Wrong(f"{what}: at gate = {g[i]:.3g}, up = {u[i]:.3g} yours is {out[i]:.6g}, SiTU's "
                            f"{ref[i]:.6g} (relative error {rel[i]:.1e} > {RTOL:.0e})",
                            hint=hint("for small |x|, 1 - e^(-2|x|) has lost its digits in float32 "
                                      "(e^(-2|x|) rounds towards 1): use the series x - x^3/3 + 2x^5/15 for "
                                      "|x| < 1/8.")
                            if tiny else hint("beta tanh(g / beta) sigmoid(g) times linear_beta tanh(u / "
                                              "linear_beta) (or u when linear_beta is None), with the "
                                              "arguments you are given."))
            worst = max(worst, rel[i].item())
        with part("exp alone, in float32", needs=("SiTU's values",)):
            used = sorted(set(watch.ops) - IN_THE_KERNEL)
            if used:
                raise Wrong(f"your function calls {', '.join(used)}: the kernel builds SiTU from exp and "
                            f"arithmetic alone", hint=hint(
                    "tanh|x| = (1 - e^(-2|x|)) / (1 + e^(-2|x|)) and sigmoid from e^(-|x|), with the sign "
                    "put back afterwards."))
            if torch.float64 in watch.dtypes:
                raise Wrong("your function computes in float64: the kernel computes in float32 registers, "
                            "and float64 would hide the rounding this exercise is about. Keep every tensor "
                            "float32")
    return (f"every element within {worst:.1e} of SiTU in float64 ({len(cases)} × {n} elements, gates 1e-8 "
            "to 80, up to 1e6), exp the only transcendental, float32 throughout")
