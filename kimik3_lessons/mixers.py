"""The family of recurrent mixers, lessons 02-07: every mixer's declaration (`contract.Mixer`), in course
order. The launcher, the GPU-target compile (`gpu_targets`), the contract tests and the recall models read
the family from here, so a new mixer is its lesson module (with its `MIXER`) and one name below.

    from kimik3_lessons import mixers
    mixers.MIXERS["kda"].chunked(q, k, v, g, beta)        # or mixers.get("kda")
    [m.name for m in mixers.MIXERS.values() if m.delta]   # the delta rules
"""

from kimik3_lessons import deltanet, gated_deltanet, kda, linear_attention
from kimik3_lessons.contract import Mixer

__all__ = ["MIXERS", "Mixer", "get"]

MIXERS = {m.name: m for m in (linear_attention.MIXER, deltanet.MIXER, gated_deltanet.MIXER, kda.MIXER)}


def get(name):
    """The mixer called `name` ("linear_attention", "deltanet", "gated_deltanet", "kda")."""
    if name not in MIXERS:
        raise ValueError(f"no mixer {name!r}: the family is {', '.join(MIXERS)}")
    return MIXERS[name]
