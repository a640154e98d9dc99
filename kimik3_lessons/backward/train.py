"""Trainable forms: a mixer's chunked form as a `torch.autograd.Function` whose backward is the course's own.

    o, S_T = trainable("kda")(q, k, v, g, beta, chunk_size=64, initial_state=None)   # the Triton kernels
    o, S_T = trainable("kda", engine="pytorch", keep="states")(q, k, v, g, beta)     # PyTorch, S_n kept

has the signature of `kda.chunked` (the contract's), and autograd calls the hand-written backward
instead of walking back through every operation of the forward. What the forward keeps for it is the
choice this lesson measures (`backward.cost.saved_bytes`):

    keep="inputs"   q, k, v, [g,] [beta,] S_0: the backward recomputes the factors and the states S_n
                    (flash-linear-attention's chunk_* also keep each chunk's L_inv; reported, fla-core 0.6.0)
    keep="states"   the inputs and the states S_n [B, H, N, K, V]: the backward recomputes the factors only

engine="pytorch" runs `chunked.chunked_forward` / `chunked.chunked_backward`; engine="triton" runs the
forward's kernels (`mixer.triton_chunked`) and the backward's (`kernels.triton_chunked_backward`), which
recompute the states (keep="inputs").
"""

import torch

from kimik3_lessons import mixers
from kimik3_lessons.backward import chunked, kernels

ENGINES = ("pytorch", "triton")
KEEPS = ("inputs", "states")


class ChunkedFunction(torch.autograd.Function):
    """(o, S_T) of a mixer's chunked form, with the course's backward. Positional arguments (autograd's
    rule): engine, mixer (a `contract.Mixer`), keep, chunk_size, input_precision, then the tensors
    q, k, v, g, beta, initial_state (g, beta, initial_state may be None)."""

    @staticmethod
    def forward(ctx, engine, mixer, keep, chunk_size, input_precision, q, k, v, g, beta, initial_state):
        x = dict(q=q, k=k, v=v, g=g, beta=beta)
        if engine == "pytorch":
            o, S_T, S_n = chunked.chunked_forward(mixer, **x, chunk_size=chunk_size,
                                                  initial_state=initial_state)
        else:
            o, S_T = mixer.triton_chunked(**{n: x[n] for n in ("q", "k", "v", *mixer.args)},
                                          chunk_size=chunk_size, initial_state=initial_state,
                                          input_precision=input_precision)
            S_n = None
        ctx.set_materialize_grads(False)     # an output the loss does not use sends None, not zeros
        ctx.setup = (engine, mixer, chunk_size, input_precision)
        kept = (q, k, v, g, beta, initial_state, S_n if keep == "states" else None)
        ctx.has = [t is not None for t in kept]
        ctx.save_for_backward(*(t for t in kept if t is not None))
        return o, S_T

    @staticmethod
    def backward(ctx, do, dS_T):
        engine, mixer, chunk_size, input_precision = ctx.setup
        kept = iter(ctx.saved_tensors)
        q, k, v, g, beta, S0, S_n = (next(kept) if has else None for has in ctx.has)
        x = dict(q=q, k=k, v=v, g=g, beta=beta)
        if do is None:                       # the loss uses the final state only
            do = v.new_zeros(v.shape)
        if engine == "pytorch":
            grads = chunked.chunked_backward(mixer, do, dS_T, **x, chunk_size=chunk_size, initial_state=S0,
                                             states=S_n)
        else:
            grads = kernels.triton_chunked_backward(mixer, do, dS_T, **x, chunk_size=chunk_size,
                                                    initial_state=S0, input_precision=input_precision)
        out = [grads.get(name) for name in ("q", "k", "v", "g", "beta", "initial_state")]
        inputs = (q, k, v, g, beta, S0)
        out = [None if t is None or grad is None else grad.to(t.dtype) for t, grad in zip(inputs, out,
                                                                                          strict=True)]
        return (None, None, None, None, None, *out)


def trainable(mixer, engine="triton", keep="inputs", input_precision="ieee"):
    """The chunked form of `mixer` (a name or a `contract.Mixer`) with the course's backward: a function
    f(q, k, v, [g,] [beta,] chunk_size=64, initial_state=None) -> (o, S_T), the contract's signature, that
    autograd differentiates with `chunked.chunked_backward` (engine="pytorch") or the backward kernels
    (engine="triton", which recompute the states: keep="inputs" only). input_precision is the kernels'
    ("ieee", "tf32"; for bf16 or fp16 inputs the products run in that dtype)."""
    mixer = mixers.get(mixer) if isinstance(mixer, str) else mixer
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if keep not in KEEPS:
        raise ValueError(f"keep must be one of {KEEPS}, got {keep!r}")
    if engine == "triton" and keep != "inputs":
        raise ValueError("the backward kernels recompute the states: engine='triton' takes keep='inputs'")

    def form(q, k, v, *args, chunk_size=64, initial_state=None):
        if len(args) != len(mixer.args):
            raise ValueError(f"{mixer.name} takes q, k, v{''.join(', ' + a for a in mixer.args)}, "
                             f"got {3 + len(args)} tensors")
        x = dict(zip(mixer.args, args, strict=True))
        return ChunkedFunction.apply(engine, mixer, keep, chunk_size, input_precision, q, k, v, x.get("g"),
                                     x.get("beta"), initial_state)

    form.__name__ = f"{mixer.name}_trainable"
    return form
