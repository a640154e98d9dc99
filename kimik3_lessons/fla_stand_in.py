"""flash-linear-attention's chunked entry points, or, in the rehearsal, stand-ins that keep their contract.

`entry_point(name)` is what a `%%needs gpu` cell calls FLA through. On a GPU it is FLA's own Triton entry
point (`fla.ops.linear_attn.chunk_linear_attn`, `fla.ops.delta_rule.chunk_delta_rule`,
`fla.ops.gated_delta_rule.chunk_gated_delta_rule`, `fla.ops.kda.chunk_kda`). In the rehearsal
(`lab.rehearsing()`: no GPU, KIMIK3_REHEARSE=1) FLA's kernels cannot run (its autotuner asks Triton's GPU
driver for a timer), so a stand-in takes its place. The stand-in refuses what the entry point refuses
(fla-core 0.6.0), before any device work:

- dtype: `chunk_delta_rule` asserts q, k, v share one dtype that is not float32 ("does not support
  float32. Please use bfloat16"); `chunk_kda` asserts a float32 initial state. Every entry point's kernels
  multiply q, k, v tiles with `tl.dot`, which needs one dtype for both operands: checked for all four.
- layout: q, k [B, T, H, K], v [B, T, H, V] (time before heads); beta [B, T, H]; g [B, T, H] (gated
  DeltaNet, one log decay per head) or [B, T, H, K] (KDA, asserted there); the kernels index by these
  shapes without checking them, so a wrong one is garbage on a GPU and an AssertionError here;
- scale: None means K^-1/2 (the entry points' default), as FLA applies it.

It then returns what FLA returns, (o [B, T, H, V] in v's dtype, final state [B, H, K, V] float32 or None),
computed by FLA's own pure-PyTorch reference of the same recurrence (`fla.ops.*.naive`, in float32). Each
call is appended to `calls` (entry point and input dtypes), so a test can see what a cell passed.
"""

import importlib
import warnings

import torch

from kimik3_lessons import lab

MODULES = {"chunk_linear_attn": "fla.ops.linear_attn", "chunk_delta_rule": "fla.ops.delta_rule",
           "chunk_gated_delta_rule": "fla.ops.gated_delta_rule", "chunk_kda": "fla.ops.kda"}

calls = []   # one (entry point, {argument: dtype}) per stand-in call


def _fla(module):
    with warnings.catch_warnings():   # FLA's import warns about platforms this machine is not
        warnings.simplefilter("ignore")
        return importlib.import_module(module)


def entry_point(name):
    """FLA's entry point `name` (a key of MODULES): FLA's own on a GPU, its stand-in in the rehearsal."""
    if name not in MODULES:
        raise ValueError(f"unknown FLA entry point {name!r}; known: {list(MODULES)}")
    if lab.rehearsing():
        return STAND_INS[name]
    return getattr(_fla(MODULES[name]), name)


def check_contract(name, q, k, v, g=None, beta=None, g_per_channel=False, initial_state=None):
    """Assert FLA's input contract for entry point `name` (see the module docstring); return B, T, H, K."""
    assert q.dim() == 4, f"{name}: q must be [B, T, H, K], got {list(q.shape)}"
    B, T, H, K = q.shape
    assert k.shape == q.shape, f"{name}: k must be [B, T, H, K] like q, {list(q.shape)}, got {list(k.shape)}"
    assert v.dim() == 4 and v.shape[:3] == q.shape[:3], \
        f"{name}: v must be [B, T, H, V] = {[B, T, H]} + [V], got {list(v.shape)}"
    assert q.dtype == k.dtype == v.dtype, \
        f"{name}: q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}"
    if beta is not None:
        assert beta.shape == (B, T, H), \
            f"{name}: beta must be [B, T, H] = {[B, T, H]}, got {list(beta.shape)}"
    if g is not None:
        shape = (B, T, H, K) if g_per_channel else (B, T, H)
        what = "[B, T, H, K]" if g_per_channel else "[B, T, H]"
        assert g.shape == shape, f"{name}: g must be {what} = {list(shape)}, got {list(g.shape)}"
    if initial_state is not None:
        assert initial_state.shape == (B, H, K, v.shape[-1]), \
            f"{name}: initial_state must be [B, H, K, V], got {list(initial_state.shape)}"
    given = dict(q=q, k=k, v=v, g=g, beta=beta)
    calls.append((name, {n: x.dtype for n, x in given.items() if x is not None}))
    return B, T, H, K


def _scale(scale, K):
    return K ** -0.5 if scale is None else scale


def chunk_linear_attn(q, k, v, scale=None, initial_state=None, output_final_state=False, normalize=True):
    """Stand-in for `fla.ops.linear_attn.chunk_linear_attn` (FLA's default normalize=True kept)."""
    *_, K = check_contract("chunk_linear_attn", q, k, v, initial_state=initial_state)
    naive = _fla("fla.ops.linear_attn.naive")
    return naive.naive_recurrent_linear_attn(q, k, v, _scale(scale, K), initial_state, output_final_state,
                                             normalize)


def chunk_delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False):
    """Stand-in for `fla.ops.delta_rule.chunk_delta_rule`; FLA's reference works head-first, [B, H, T, K],
    and always scales q by K^-1/2, so q is handed to it pre-scaled by scale * K^1/2."""
    B, T, H, K = check_contract("chunk_delta_rule", q, k, v, beta=beta, initial_state=initial_state)
    assert q.dtype != torch.float32, "ChunkDeltaRuleFunction does not support float32. Please use bfloat16."
    naive = _fla("fla.ops.delta_rule.naive")
    q = q.float() * (_scale(scale, K) * K ** 0.5)
    o, S = naive.delta_rule_recurrence(*(x.transpose(1, 2) for x in (q, k, v, beta)),
                                       initial_state=initial_state, output_final_state=output_final_state)
    return o.transpose(1, 2).to(v.dtype), S


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False):
    """Stand-in for `fla.ops.gated_delta_rule.chunk_gated_delta_rule` (g [B, T, H]: a log decay per head)."""
    *_, K = check_contract("chunk_gated_delta_rule", q, k, v, g=g, beta=beta, initial_state=initial_state)
    naive = _fla("fla.ops.gated_delta_rule.naive")
    o, S = naive.naive_recurrent_gated_delta_rule(q, k, v, beta, g, _scale(scale, K), initial_state,
                                                  output_final_state)
    return o.to(v.dtype), S


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False):
    """Stand-in for `fla.ops.kda.chunk_kda` (g [B, T, H, K]: one log decay per key channel)."""
    *_, K = check_contract("chunk_kda", q, k, v, g=g, beta=beta, g_per_channel=True,
                           initial_state=initial_state)
    if initial_state is not None:
        assert initial_state.dtype == torch.float32, "initial_state must be in float32."
    naive = _fla("fla.ops.kda.naive")
    return naive.naive_recurrent_kda(q, k, v, g, beta, _scale(scale, K), initial_state, output_final_state)


STAND_INS = {"chunk_linear_attn": chunk_linear_attn, "chunk_delta_rule": chunk_delta_rule,
             "chunk_gated_delta_rule": chunk_gated_delta_rule, "chunk_kda": chunk_kda}
