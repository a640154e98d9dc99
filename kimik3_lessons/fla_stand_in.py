"""flash-linear-attention's side of every comparison, read from the family's one table (`mixers.FLA`):
its Triton entry points, their stand-ins in the rehearsal, and its pure-PyTorch references.

- `entry_point(mixer)`: what a `%%needs gpu` cell calls FLA through. On a GPU it is FLA's own Triton entry
  point (`mixers.FLA[mixer].entry`, e.g. `fla.ops.kda.chunk_kda`). In the rehearsal (`lab.rehearsing()`: no
  GPU, KIMIK3_REHEARSE=1) FLA's kernels cannot run (its autotuner asks Triton's GPU driver for a timer), so
  a stand-in takes its place.
- `naive(reference, x)`: one of FLA's references (`contract.Naive`) on the contract's inputs, in the
  contract's layout: what the contract tests compare every form with, and what a stand-in computes.

A stand-in takes the arguments FLA's entry point takes (bound to its real signature, so an unknown keyword
is a TypeError, and its defaults are FLA's: `scale=None` is K^-1/2, chunk_linear_attn normalizes) and
refuses what the entry point refuses (fla-core 0.6.0), before any device work:

- dtype: q, k, v share one dtype (`tl.dot` needs one dtype for both operands); chunk_delta_rule refuses
  float32 ("does not support float32. Please use bfloat16"); chunk_kda asserts a float32 initial state;
- sizes: the delta rules' kernels assert a key head size K <= 256;
- layout: q, k [B, T, H, K], v [B, T, H, V] (time before heads); beta [B, T, H]; g [B, T, H] (one log decay
  per head) or [B, T, H, K] (per key channel): the kernels index by these shapes without checking them, so
  a wrong one is garbage on a GPU and an AssertionError here.

It then returns what FLA returns: o [B, T, H, V] in v's dtype (FLA stores it there: in float16 a value
above 65,504 becomes inf, as on a T4), and the final state [B, H, K, V] in float32 or None
(chunk_linear_attn with normalize=True: (state or None, z), its running key sum), computed by FLA's
first reference of the op in float32. Each call is appended to `calls` (entry point and input dtypes), so
a test can see what a cell passed.
"""

import functools
import importlib
import inspect
import warnings

import torch

from kimik3_lessons import lab

calls = []   # one (entry point, {argument: dtype}) per stand-in call


def _fla(module):
    with warnings.catch_warnings():   # FLA's import warns about platforms this machine is not
        warnings.simplefilter("ignore")
        return importlib.import_module(module)


def _resolve(path):
    """The object a dotted path names: "fla.ops.kda.chunk_kda" -> the function."""
    module, _, name = path.rpartition(".")
    return getattr(_fla(module), name)


def _op(mixer):
    from kimik3_lessons import mixers
    if mixer not in mixers.FLA:
        raise ValueError(f"flash-linear-attention has no op declared for {mixer!r} (mixers.FLA); "
                         f"declared: {', '.join(mixers.FLA)}")
    return mixers.get(mixer), mixers.FLA[mixer]


def entry_point(mixer):
    """FLA's entry point for `mixer` (a key of `mixers.FLA`): FLA's own on a GPU, its stand-in in the
    rehearsal."""
    _, op = _op(mixer)
    return stand_in(mixer) if lab.rehearsing() else _resolve(op.entry)


def naive(reference, x, **options):
    """FLA's reference `reference` (a `contract.Naive`) on the inputs x = {q, k, v, [g], [beta],
    [initial_state]} in the contract's layout [B, H, T, ·] (q unscaled): returns (o [B, H, T, V], its final
    state or None). `options` go to the reference as they are (normalize=...)."""
    layout = (lambda t: t) if reference.head_first else (lambda t: t.transpose(1, 2))
    q = x["q"]
    if not reference.scale:                      # it scales q by K^-1/2 itself: undone here
        q = q * q.shape[-1] ** 0.5
    tensors = [layout(t) for t in (q, x["k"], x["v"], *(x[name] for name in reference.args))]
    if reference.scale:
        options["scale"] = 1.0
    if reference.state:                          # a state is float32 in FLA (its references add to one)
        S0 = x.get("initial_state")
        options.update(initial_state=S0.float() if isinstance(S0, torch.Tensor) else S0,
                       output_final_state=True)
    if reference.chunk and reference.chunk_keyword:
        options["chunk_size"] = reference.chunk
    out = _resolve(reference.function)(*tensors, **options)
    o, S = (out, None) if isinstance(out, torch.Tensor) else out
    return layout(o), S


def check_contract(op, mixer, q, k, v, tensors, initial_state):
    """Assert FLA's input contract for `op` (a `contract.FLAOp`) on `mixer`'s inputs (see the module
    docstring); tensors: {"g": ..., "beta": ...} as the mixer takes them. Returns B, T, H, K."""
    name = op.name
    assert q.dim() == 4, f"{name}: q must be [B, T, H, K], got {list(q.shape)}"
    B, T, H, K = q.shape
    assert k.shape == q.shape, f"{name}: k must be [B, T, H, K] like q, {list(q.shape)}, got {list(k.shape)}"
    assert v.dim() == 4 and v.shape[:3] == q.shape[:3], \
        f"{name}: v must be [B, T, H, V] = {[B, T, H]} + [V], got {list(v.shape)}"
    assert q.dtype == k.dtype == v.dtype, \
        f"{name}: q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}"
    if op.half_only:
        assert q.dtype != torch.float32, \
            "ChunkDeltaRuleFunction does not support float32. Please use bfloat16."
    if op.max_key_dim is not None:
        assert K <= op.max_key_dim, f"current kernel does not support head dimension larger than " \
                                    f"{op.max_key_dim}, got K = {K}"
    shapes = {"beta": ((B, T, H), "[B, T, H]"),
              "g": ((B, T, H, K), "[B, T, H, K]") if mixer.decay == "channel" else ((B, T, H), "[B, T, H]")}
    for arg, x in tensors.items():
        shape, what = shapes[arg]
        assert x.shape == shape, f"{name}: {arg} must be {what} = {list(shape)}, got {list(x.shape)}"
    if initial_state is not None:
        assert initial_state.shape == (B, H, K, v.shape[-1]), \
            f"{name}: initial_state must be [B, H, K, V], got {list(initial_state.shape)}"
        if op.float32_state:
            assert initial_state.dtype == torch.float32, "initial_state must be in float32."
    calls.append((name, {n: x.dtype for n, x in dict(q=q, k=k, v=v, **tensors).items()}))
    return B, T, H, K


@functools.cache
def stand_in(mixer):
    """The stand-in for FLA's entry point of `mixer` (see the module docstring)."""
    family, op = _op(mixer)
    signature = inspect.signature(_resolve(op.entry))
    reference = op.naive[0]
    takes = set(inspect.signature(_resolve(reference.function)).parameters)

    def fla_entry(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = dict(bound.arguments)
        q, k, v = (given.pop(name) for name in ("q", "k", "v"))
        tensors = {name: given.pop(name) for name in family.args}
        scale, S0, final = (given.pop(name) for name in ("scale", "initial_state", "output_final_state"))
        extra = [name for name, p in signature.parameters.items()
                 if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        unsupported = [str(key) for name in extra for key in given.pop(name, ())]   # FLA's deprecated ones
        defaults = {name: p.default for name, p in signature.parameters.items()}
        options = {name: value for name, value in given.items() if name in takes}
        unsupported += [name for name, value in given.items()
                        if name not in takes and value is not defaults[name] and value != defaults[name]]
        if unsupported:
            raise NotImplementedError(f"the stand-in of {op.name} does not emulate {', '.join(unsupported)}")
        *_, K = check_contract(op, family, q, k, v, tensors, S0 if not isinstance(S0, tuple) else S0[0])
        scale = K ** -0.5 if scale is None else scale
        x = {name: t.transpose(1, 2).float() for name, t in dict(q=q, k=k, v=v, **tensors).items()}
        x["q"] = x["q"] * scale
        x["initial_state"] = S0
        o, S = naive(reference, x, **options)
        if not final:
            S = (None, *S[1:]) if isinstance(S, tuple) else None
        return o.transpose(1, 2).to(v.dtype), S

    fla_entry.__name__ = fla_entry.__qualname__ = op.name
    fla_entry.__doc__ = f"Stand-in for `{op.entry}` (see `kimik3_lessons.fla_stand_in`)."
    return fla_entry
