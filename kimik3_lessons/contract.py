"""The mixing-op contract, written once for the four recurrent mixers of lessons 02-07 (PyTorch only).

Every mixer — linear attention, DeltaNet, gated DeltaNet, KDA — computes o_t = q_t S_t from a state S that
its writes update, with the same tensors in the same layout:

    q, k  [B, H, T, K]      v  [B, H, T, V]      state S  [B, H, K, V]
    g     [B, H, T] (one log decay per head) or [B, H, T, K] (one per key channel), g <= 0
    beta  [B, H, T]         the delta rule's write strength

and three forms with one signature, each returning (o [B, H, T, V] in v's dtype, final state):

    recurrent(q, k, v, [g,] [beta,] initial_state=None)
    chunked(q, k, v, [g,] [beta,] chunk_size=64, initial_state=None)
    triton_chunked(q, k, v, [g,] [beta,] chunk_size=64, initial_state=None, input_precision="ieee")

This module holds what the forms share, so that a lesson module shows only its own mechanism:
- `Mixer`: a mixer's declaration (its switches, its forms, its decode step, its kernel), one per lesson
  module (`MIXER`), collected in `mixers.MIXERS`; `FLAOp` and `Naive`: flash-linear-attention's op for a
  mixer and its pure-PyTorch references (`mixers.FLA`);
- `prepare`: check every argument's shape, dtype and device (a ValueError that names the argument and the
  shape it expected) and cast to the compute dtype;
- `compute_dtype`: float64 stays float64 (exact checks), everything else computes in float32;
- `split_chunks` / `merge_chunks`: [B, H, T, ...] <-> [B, H, N, C, ...], zero-padding T;
- the Triton path's checks, which need no Triton: `check_triton_options`, `check_triton_inputs`,
  `interpreted`, `fast_input_precision`. The kernels and their launcher are `chunk_kernels`.
"""

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

DECAYS = (None, "head", "channel")   # a mixer's decay: none, one log decay per head, one per key channel


@dataclass(frozen=True)
class Mixer:
    """One mixer of the family, declared once (at the end of its lesson module, as `MIXER`).

    The switches say which tensors its forms take: `delta` beta [B, H, T] (the delta rule), `decay` g:
    None, "head" (g [B, H, T]) or "channel" (g [B, H, T, K]). The forms keep the contract's signature;
    `step` is the decode step (S, q_t, k_t, v_t, [g_t,] [beta_t]) -> (o_t, S_t); `intra_chunk_kernel` is
    the Triton kernel `chunk_kernels.launch_chunked` runs before the shared scan and output kernels.
    What a mixer carries while decoding is its state S (the forms' initial_state and final state); a layer
    built around one (lesson 07b's `kimi_linear.KimiDeltaAttention`) adds its own cache.
    """
    name: str                     # the lesson module's name, e.g. "gated_deltanet"
    title: str                    # for tables: "gated DeltaNet"
    lesson: str                   # the lesson that builds the module: "06", "07a"
    delta: bool
    decay: str | None
    recurrent: Callable
    chunked: Callable
    triton_chunked: Callable
    step: Callable
    intra_chunk_kernel: Any

    def __post_init__(self):
        if self.decay not in DECAYS:
            raise ValueError(f"decay must be None, 'head' or 'channel', got {self.decay!r}")

    @property
    def args(self):
        """The mixer's own inputs after q, k, v, in the contract's order: (), ("beta",) or ("g", "beta")."""
        return ("g",) * (self.decay is not None) + ("beta",) * self.delta

    @property
    def switches(self):
        """The keywords `check_inputs` and `prepare` take: dict(decay=..., delta=...)."""
        return dict(decay=self.decay, delta=self.delta)

    @property
    def forms(self):
        """{"recurrent": ..., "chunked": ..., "triton_chunked": ...}."""
        return dict(recurrent=self.recurrent, chunked=self.chunked, triton_chunked=self.triton_chunked)


@dataclass(frozen=True)
class Naive:
    """One of flash-linear-attention's pure-PyTorch references of a mixer (`fla.ops.<op>.naive`), and how
    it is called: `fla_stand_in.naive` calls it on the contract's inputs and returns (o, S or None) in the
    contract's layout. `rtol` is its relative error against the float64 recurrence on the same inputs:
    1e-5 for a reference that computes in float32 whatever the input, 1e-9 for one that keeps float64."""
    function: str                 # "fla.ops.kda.naive.naive_chunk_kda"
    args: tuple[str, ...]         # its tensors after q, k, v, in its order: ("beta", "g") or ("g", "beta")
    rtol: float
    head_first: bool = False      # takes [B, H, T, D] (the delta rule's) instead of FLA's [B, T, H, D]
    scale: bool = True            # takes scale=; False: it always scales q by K^-1/2 (undone by the caller)
    state: bool = True            # takes initial_state= (and output_final_state=)
    chunk: int | None = None      # its chunk size, for a chunk reference (T must be a multiple of it)
    chunk_keyword: bool = True    # takes chunk_size= (False: the chunk is fixed inside it)


@dataclass(frozen=True)
class FLAOp:
    """flash-linear-attention's op for one mixer: its Triton entry point, the keywords that make it compute
    what the contract's forms compute, what it refuses (fla-core 0.6.0), and its pure-PyTorch references.
    Declared in `mixers.FLA`; read by the contract tests, the GPU bench and the rehearsal's stand-ins."""
    entry: str                    # "fla.ops.kda.chunk_kda", called (q, k, v, [g,] [beta,] scale=, ...)
    naive: tuple[Naive, ...]      # the first one takes a state: the stand-in computes with it
    kwargs: tuple[tuple[str, Any], ...] = ()   # e.g. (("normalize", False),)
    max_key_dim: int | None = 256  # asserts K <= 256 (the delta rules' kernels)
    half_only: bool = False       # refuses float32 q, k, v (chunk_delta_rule)
    float32_state: bool = False   # asserts a float32 initial state (chunk_kda)
    first_call_minutes: int = 1   # its autotuner's first call on a T4, per head size (compiles every config)

    @property
    def name(self):
        """The entry point's own name: "chunk_kda"."""
        return self.entry.rpartition(".")[2]


# ---------------------------------------------------------------------------------------------------
# Checking the inputs


def shape_str(x):
    """'[2, 4, 100, 16]' for a tensor, the type name for anything else (for error messages)."""
    if isinstance(x, torch.Tensor):
        return "[" + ", ".join(str(n) for n in x.shape) + "]"
    return type(x).__name__


def _check_tensor(name, x, shape, device, what):
    """x must be a floating-point tensor of `shape` on `device`; `what` names the dims for the message."""
    expected = "[" + ", ".join(map(str, shape)) + "]"
    if not isinstance(x, torch.Tensor) or tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} must be {what} = {expected}, got {shape_str(x)}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if x.device != device:
        raise ValueError(f"{name} must be on {device} like q, got {x.device}")


def check_inputs(q, k, v, g=None, beta=None, initial_state=None, *, decay=None, delta=False):
    """Validate the inputs of a mixing op; return (B, H, T, K, V).

    decay: None (g must be None), "head" (g [B, H, T]) or "channel" (g [B, H, T, K]).
    delta: True for the delta rule (beta [B, H, T] required), False for linear attention (beta must be None).
    Raises ValueError naming the argument and the shape it expected.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            raise ValueError(f"{name} must be a 4-dimensional tensor [B, H, T, D], got {shape_str(x)}")
        if not x.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {x.dtype}")
    B, H, T, K = q.shape
    V = v.shape[-1]
    if k.shape != q.shape:
        raise ValueError(f"k must have the shape of q [B, H, T, K] = {shape_str(q)}, got {shape_str(k)}")
    if v.shape[:3] != q.shape[:3]:
        raise ValueError(f"v must be [B, H, T, V] = [{B}, {H}, {T}, V] like q, got {shape_str(v)}")
    for name, x in (("k", k), ("v", v)):
        if x.device != q.device:
            raise ValueError(f"{name} must be on {q.device} like q, got {x.device}")
    if decay not in DECAYS:
        raise ValueError(f"decay must be None, 'head' or 'channel', got {decay!r}")
    if decay is None and g is not None:
        raise ValueError(f"g must be None: this mixer has no decay, got {shape_str(g)}")
    if decay == "head":
        _check_tensor("g", g, (B, H, T), q.device, "[B, H, T] (log decay, one per head)")
    if decay == "channel":
        _check_tensor("g", g, (B, H, T, K), q.device, "[B, H, T, K] (log decay, one per key channel)")
    if decay is not None and (g > 0).any():
        raise ValueError(f"g is a log decay and must be <= 0, got a maximum of {g.max().item():.3g}")
    if delta:
        _check_tensor("beta", beta, (B, H, T), q.device, "[B, H, T]")
    elif beta is not None:
        raise ValueError(f"beta must be None: linear attention has no write strength, got {shape_str(beta)}")
    if initial_state is not None:
        _check_tensor("initial_state", initial_state, (B, H, K, V), q.device, "[B, H, K, V]")
    return B, H, T, K, V


def compute_dtype(x):
    """Accumulate in float64 for float64 inputs (exact checks), float32 for everything else
    (half-precision inputs are computed with float32 accumulators and returned in their dtype)."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def prepare(q, k, v, g=None, beta=None, initial_state=None, *, decay=None, delta=False):
    """`check_inputs`, then cast to the compute dtype and start the state.

    Returns (q, k, v, g, beta, S0): every tensor in the compute dtype of q (g and beta stay None when not
    given) and S0 [B, H, K, V], the initial state or zeros.
    """
    B, H, T, K, V = check_inputs(q, k, v, g, beta, initial_state, decay=decay, delta=delta)
    dtype = compute_dtype(q)
    q, k, v, g, beta = (None if x is None else x.to(dtype) for x in (q, k, v, g, beta))
    S0 = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(dtype)
    return q, k, v, g, beta, S0


# ---------------------------------------------------------------------------------------------------
# Chunks


def check_chunk_size(chunk_size, power_of_two=False):
    """A chunk size is a positive integer (a power of two where a Triton kernel tiles by it)."""
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        got = shape_str(chunk_size) if isinstance(chunk_size, torch.Tensor) else repr(chunk_size)
        raise ValueError(f"chunk_size must be a positive integer, got {got}")
    if power_of_two and chunk_size & (chunk_size - 1):
        raise ValueError(f"chunk_size must be a power of two for the Triton kernel, got {chunk_size}")


def split_chunks(x, chunk_size):
    """[B, H, T, ...] -> [B, H, N, C, ...], zero-padding T up to N*C.

    Zero padding is neutral for every op here: a zero key writes nothing, beta = 0 writes nothing,
    g = 0 decays nothing, and the padded outputs are cut off by `merge_chunks`.
    """
    T = x.shape[2]
    n = -(-T // chunk_size)
    pad = n * chunk_size - T
    if pad:
        x = torch.cat([x, x.new_zeros(*x.shape[:2], pad, *x.shape[3:])], dim=2)
    return x.reshape(*x.shape[:2], n, chunk_size, *x.shape[3:])


def merge_chunks(x, T):
    """[B, H, N, C, ...] -> [B, H, T, ...]: undo `split_chunks` and drop the padding."""
    return x.reshape(*x.shape[:2], -1, *x.shape[4:])[:, :, :T]


# ---------------------------------------------------------------------------------------------------
# The Triton side


def interpreted():
    """True when Triton runs kernels in its interpreter (no GPU: numpy on the CPU)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


PRECISIONS = ("ieee", "tf32", "bf16", "fp16")    # how the kernels' products multiply (`check_triton_options`)


def check_triton_options(chunk_size, input_precision="ieee"):
    """The kernels tile by the chunk: a power of two >= 16 (the smallest `tl.dot` tile). Products run in
    full float32 ("ieee"); or, on a GPU with TF32 tensor cores (sm_80 and newer), in TF32 ("tf32": inputs
    rounded to a 10-bit mantissa, relative errors near 1e-3, several times faster); or with their inputs
    rounded to a half precision as a training run's are, on tensor cores, summed in float32 ("bf16",
    sm_80 and newer, 8-bit mantissa; "fp16", any GPU, 11-bit mantissa and a range up to 65,504)."""
    check_chunk_size(chunk_size, power_of_two=True)
    if chunk_size < 16:
        raise ValueError(f"chunk_size must be >= 16 for the Triton kernel (tl.dot tiles), got {chunk_size}")
    if input_precision not in PRECISIONS:
        raise ValueError(f"input_precision must be 'ieee' (exact float32), 'tf32' (tensor cores), 'bf16' or "
                         f"'fp16' (half-precision products, tensor cores), got {input_precision!r}")


def check_triton_inputs(**tensors):
    """The Triton path computes where Triton runs: CUDA tensors when compiled, CPU tensors in the
    interpreter. Anything else is a ValueError naming the argument, never a silent copy. In the rehearsal
    (`rehearsal.active()`) the interpreter plays the compiled kernel: a host tensor is refused as there."""
    from kimik3_lessons import rehearsal
    for name, x in tensors.items():
        if x is None:
            continue
        if rehearsal.active() and not rehearsal.on_device(x):
            raise ValueError(f"{name} is on cpu, but the compiled Triton kernel needs CUDA tensors "
                             f"(the rehearsal plays a GPU: make it with device=lab.device())")
        if interpreted() and x.is_cuda:
            raise ValueError(f"{name} is a CUDA tensor, but Triton runs in interpreter mode here "
                             f"(TRITON_INTERPRET=1): pass CPU tensors")
        if not interpreted() and not x.is_cuda:
            raise ValueError(f"{name} is on {x.device}, but the compiled Triton kernel needs CUDA tensors")


def fast_input_precision():
    """The fastest exact-enough choice on this machine: "tf32" on GPUs with TF32 tensor cores (Ampere,
    sm_80, and newer), "ieee" on a T4 (sm_75, no TF32) and in the interpreter (numpy float32 either way)."""
    if interpreted() or not torch.cuda.is_available():
        return "ieee"
    return "tf32" if torch.cuda.get_device_capability()[0] >= 8 else "ieee"
