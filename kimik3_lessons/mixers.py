"""The family of recurrent mixers, lessons 02-07, declared once: every mixer's declaration
(`contract.Mixer`, at the end of its lesson module) in course order, and flash-linear-attention's op for
each mixer it has (`contract.FLAOp`: its entry point and keywords, what it refuses, its pure-PyTorch
references with their tolerances). The launcher, the GPU-target compile (`gpu_targets`), the contract
tests, the GPU bench (`gpu_bench`), the rehearsal's stand-ins (`fla_stand_in`) and the recall models read
the family from here. A new mixer is its lesson module (with its `MIXER`), one name in `MIXERS`, and a row
in `FLA` if flash-linear-attention has the op; `tests/test_mixers.py` names any table it is missing from.

    from kimik3_lessons import mixers
    mixers.MIXERS["kda"].chunked(q, k, v, g, beta)        # or mixers.get("kda")
    [m.name for m in mixers.MIXERS.values() if m.delta]   # the delta rules
"""

from kimik3_lessons import deltanet, gated_deltanet, kda, linear_attention
from kimik3_lessons.contract import FLAOp, Mixer, Naive

__all__ = ["FLA", "MIXERS", "FLAOp", "Mixer", "Naive", "get"]

MIXERS = {m.name: m for m in (linear_attention.MIXER, deltanet.MIXER, gated_deltanet.MIXER, kda.MIXER)}

# flash-linear-attention's op for each mixer (fla-core 0.6.0). Its references compute in float32 whatever
# the input (1e-5 against float64), except the two that keep float64 inputs in float64 (1e-9). Its first
# call autotunes, compiling every config one after another: measured in CPU time for sm_75 in float16,
# about 45 s (linear attention), 140 s (the delta rules), 290 s (KDA) per head size.
_DELTA_NAIVE = "fla.ops.delta_rule.naive."
FLA = {
    "linear_attention": FLAOp(
        "fla.ops.linear_attn.chunk_linear_attn", kwargs=(("normalize", False),), max_key_dim=None,
        naive=(Naive("fla.ops.linear_attn.naive.naive_recurrent_linear_attn", (), 1e-5),
               Naive("fla.ops.linear_attn.naive.naive_chunk_linear_attn", (), 1e-9, state=False, chunk=64,
                     chunk_keyword=False))),
    "deltanet": FLAOp(
        "fla.ops.delta_rule.chunk_delta_rule", half_only=True, first_call_minutes=3,
        naive=(Naive(_DELTA_NAIVE + "delta_rule_recurrence", ("beta",), 1e-5, head_first=True, scale=False),
               Naive(_DELTA_NAIVE + "delta_rule_chunkwise", ("beta",), 1e-9, head_first=True, scale=False,
                     state=False, chunk=32))),
    "gated_deltanet": FLAOp(
        "fla.ops.gated_delta_rule.chunk_gated_delta_rule", first_call_minutes=3,
        naive=(Naive("fla.ops.gated_delta_rule.naive.naive_recurrent_gated_delta_rule", ("beta", "g"), 1e-5),
               Naive("fla.ops.gated_delta_rule.naive.naive_chunk_gated_delta_rule", ("g", "beta"), 1e-5,
                     chunk=32))),
    "kda": FLAOp(
        "fla.ops.kda.chunk_kda", float32_state=True, first_call_minutes=5,
        naive=(Naive("fla.ops.kda.naive.naive_recurrent_kda", ("g", "beta"), 1e-5),
               Naive("fla.ops.kda.naive.naive_chunk_kda", ("g", "beta"), 1e-5, chunk=32))),
}


def get(name):
    """The mixer called `name` (a key of `MIXERS`: "linear_attention", "deltanet", ...)."""
    if name not in MIXERS:
        raise ValueError(f"no mixer {name!r}: the family is {', '.join(MIXERS)}")
    return MIXERS[name]
