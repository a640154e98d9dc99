"""The shared bench every lesson stands on.

- machine:     `setup`, `device`, `on_gpu`, `triton_mode`, `sizes`
- checking:    `check_close` (one line per claim, an AssertionError with the numbers when it fails)
- measuring:   `timeit` (warm-up, repeats, median, CUDA-synchronized), `time_in_turn` (several
               forms, round after round), `progress`
- drawing:     `save_figure` (figures/NN_name.png, or a scratch folder under `make test`)
- the contract of the mixing ops (DESIGN.md): `check_mixing_inputs`, `check_chunk_size`,
  `compute_dtype`, `split_chunks` / `merge_chunks` (zero-padding T up to a multiple of the chunk size),
  and for the Triton paths `check_triton_options`, `check_triton_inputs`
"""

import os
import platform
import random
import re
import statistics
import sys
import time
from pathlib import Path

import matplotlib
import numpy as np
import torch

# ---------------------------------------------------------------------------------------------------
# The machine


def on_gpu():
    """True when a CUDA GPU is present: Triton kernels compile, sizes grow, `gpu` cells run."""
    return torch.cuda.is_available()


def device():
    """The device the lessons compute on: the GPU when there is one, else the CPU."""
    return torch.device("cuda" if on_gpu() else "cpu")


def triton_mode():
    """How Triton kernels run here: compiled for the GPU, or in the interpreter on the CPU."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "interpreter (CPU, numpy; same kernel source as on a GPU)"
    return f"compiled for {torch.cuda.get_device_name()}" if on_gpu() else "not available"


def sizes(cpu, gpu):
    """Pick the problem size for this machine: small on a CPU, larger on a GPU."""
    return gpu if on_gpu() else cpu


def seed_everything(seed=0):
    """Seed Python, numpy and torch (every device) so a notebook prints the same numbers each run."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def setup(seed=0):
    """Seed everything, set the figure style, print the machine and versions; return the device."""
    seed_everything(seed)
    matplotlib.rcParams.update({
        "figure.facecolor": "white", "axes.facecolor": "white", "savefig.facecolor": "white",
        "figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
        "axes.spines.right": False,
    })
    dev = device()
    cpu = f"CPU ({platform.machine()}, {os.cpu_count()} cores)"
    where = torch.cuda.get_device_name() if on_gpu() else cpu
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    print(f"device : {dev} — {where}")
    print(f"triton : {triton_version}, {triton_mode()}")
    print(f"python {platform.python_version()} · torch {torch.__version__} · numpy {np.__version__} "
          f"· matplotlib {matplotlib.__version__} · seed {seed}")
    return dev


# ---------------------------------------------------------------------------------------------------
# Checking

# Default relative tolerances, by the least precise dtype of the two tensors compared.
_RTOL = {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 2e-2}


def _as_tensor(x):
    if isinstance(x, torch.Tensor):
        return x.detach()
    return torch.as_tensor(np.asarray(x))


def relative_error(ref, out):
    """max |out - ref| / max |ref|, computed in float64 on the CPU."""
    ref = _as_tensor(ref).to("cpu", torch.float64)
    out = _as_tensor(out).to("cpu", torch.float64)
    scale = ref.abs().max().item() if ref.numel() else 0.0
    err = (out - ref).abs().max().item() if ref.numel() else 0.0
    return err / scale if scale > 0 else err


def check_close(name, ref, out, rtol=None):
    """Check that `out` equals the reference `ref` up to `rtol` relative error; print one line.

    The error is max|out - ref| / max|ref| (float64). `rtol` defaults by the less precise dtype:
    1e-9 for float64, 1e-4 for float32, 1e-2 for float16, 2e-2 for bfloat16.
    Raises AssertionError, with the measured figures, on a shape mismatch, a NaN/inf, or a too-large error.
    """
    ref_t, out_t = _as_tensor(ref), _as_tensor(out)
    if ref_t.shape != out_t.shape:
        raise AssertionError(f"{name}: shapes differ, reference {tuple(ref_t.shape)} vs {tuple(out_t.shape)}")
    if rtol is None:
        dtypes = [t.dtype for t in (ref_t, out_t) if t.is_floating_point()]
        rtol = max((_RTOL.get(d, 1e-4) for d in dtypes), default=0.0)
    if not torch.isfinite(out_t).all():
        bad = (~torch.isfinite(out_t)).sum().item()
        raise AssertionError(f"{name}: {bad} of {out_t.numel()} values are NaN or inf")
    err = relative_error(ref_t, out_t)
    abs_err = (out_t.double().cpu() - ref_t.double().cpu()).abs().max().item() if ref_t.numel() else 0.0
    if not err <= rtol:
        raise AssertionError(f"{name}: relative error {err:.3e} exceeds {rtol:.0e} (max |Δ| = {abs_err:.3e})")
    print(f"✓ {name}: relative error {err:.1e} (≤ {rtol:.0e})")
    return err


# ---------------------------------------------------------------------------------------------------
# Measuring


def _synchronize():
    if on_gpu():
        torch.cuda.synchronize()


def timeit(fn, *args, warmup=1, repeat=5, **kwargs):
    """Median wall time of `fn(*args, **kwargs)` in seconds: `warmup` untimed calls, then `repeat`
    timed ones, each bracketed by a CUDA synchronize so GPU work is counted, not just launched."""
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    for _ in range(warmup):
        fn(*args, **kwargs)
    times = []
    for _ in range(repeat):
        _synchronize()
        start = time.perf_counter()
        fn(*args, **kwargs)
        _synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_in_turn(calls, repeat=3, warmup=True, once=()):
    """Median seconds of several calls timed in turn: round after round, each call timed once per round,
    so that a change of load on a shared machine slows them alike and their ratios stay meaningful.

    calls: {name: (fn, args)}. Each call is warmed up once first (unless `warmup=False`); names in `once`
    are neither warmed up nor repeated (slow forms, such as a token-by-token recurrence, with nothing
    to warm). Returns {name: seconds}.
    """
    times = {name: [] for name in calls}
    for name, (fn, args) in calls.items():
        if warmup and name not in once:
            fn(*args)
    for round_ in range(repeat):
        for name, (fn, args) in calls.items():
            if name not in once or round_ == 0:
                times[name].append(timeit(fn, *args, warmup=0, repeat=1))
    return {name: statistics.median(t) for name, t in times.items()}


def progress(items, label):
    """Iterate over `items`, printing `label: i/n` on one line as it goes (for sweeps that take a while)."""
    items = list(items)
    for i, item in enumerate(items, 1):
        print(f"\r{label}: {i}/{len(items)}", end="", file=sys.stderr, flush=True)
        yield item
    print(file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------
# Drawing

_REPO = Path(__file__).resolve().parent.parent


def figure_dir():
    """Where figures go: $KIMIK3_FIGURES (set by `make test`), else the checkout's figures/ folder."""
    if os.environ.get("KIMIK3_FIGURES"):
        return Path(os.environ["KIMIK3_FIGURES"])
    if (_REPO / "pyproject.toml").exists():
        return _REPO / "figures"
    return Path.cwd() / "figures"


def save_figure(fig, name):
    """Save `fig` as `<figure_dir>/<name>.png` on a white background; `name` is `NN_what` (NN = lesson).

    Returns nothing, so a notebook cell ending with it shows the figure and one "saved" line.
    """
    if not re.fullmatch(r"\d\d_[a-z0-9_]+", name):
        raise ValueError(f"figure name must look like '01_cache_bytes' (lesson number, underscore, "
                         f"lower-case words), got {name!r}")
    folder = figure_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=110, facecolor="white", bbox_inches="tight")
    print(f"saved figures/{name}.png")


# ---------------------------------------------------------------------------------------------------
# The mixing-op contract (DESIGN.md): q, k [B, H, T, K]; v [B, H, T, V]; state [B, H, K, V];
# g [B, H, T] (scalar decay) or [B, H, T, K] (per channel), g <= 0; beta [B, H, T].


def _shape(x):
    return "[" + ", ".join(str(n) for n in x.shape) + "]"


def check_mixing_inputs(q, k, v, *, g=None, beta=None, initial_state=None, gate=None, needs_beta=False):
    """Validate the inputs of a recurrent mixing op; return (B, H, T, K, V).

    gate: None (no decay), "scalar" (g is [B, H, T]) or "channel" (g is [B, H, T, K]).
    beta [B, H, T] is checked when given, and required (None refused) for delta-rule ops: needs_beta=True
    or any gate.
    Raises ValueError naming the argument and the shape it expected.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor [B, H, T, D], got {type(x).__name__}")
        if x.dim() != 4:
            raise ValueError(f"{name} must have 4 dimensions [B, H, T, D], got {_shape(x)}")
        if not x.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {x.dtype}")
    B, H, T, K = q.shape
    V = v.shape[-1]
    if k.shape != q.shape:
        raise ValueError(f"k must have the shape of q [B, H, T, K] = {_shape(q)}, got {_shape(k)}")
    if v.shape[:3] != q.shape[:3]:
        raise ValueError(f"v must be [B, H, T, V] = [{B}, {H}, {T}, V] like q, got {_shape(v)}")
    if len({q.device, k.device, v.device}) != 1:
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    if gate is not None:
        expected = (B, H, T) if gate == "scalar" else (B, H, T, K)
        if not isinstance(g, torch.Tensor) or tuple(g.shape) != expected:
            got = _shape(g) if isinstance(g, torch.Tensor) else type(g).__name__
            raise ValueError(f"g (log decay, {gate}) must be [{', '.join(map(str, expected))}], got {got}")
        if (g > 0).any():
            raise ValueError(f"g is a log decay and must be <= 0, got a maximum of {g.max().item():.3g}")
    if beta is not None or needs_beta or gate is not None:
        if not isinstance(beta, torch.Tensor) or tuple(beta.shape) != (B, H, T):
            got = _shape(beta) if isinstance(beta, torch.Tensor) else type(beta).__name__
            raise ValueError(f"beta must be [B, H, T] = [{B}, {H}, {T}], got {got}")
    if initial_state is not None and tuple(initial_state.shape) != (B, H, K, V):
        raise ValueError(f"initial_state must be [B, H, K, V] = [{B}, {H}, {K}, {V}], "
                         f"got {_shape(initial_state)}")
    return B, H, T, K, V


def check_chunk_size(chunk_size, power_of_two=False):
    """A chunk size is a positive integer (a power of two where a Triton kernel tiles by it)."""
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    if power_of_two and chunk_size & (chunk_size - 1):
        raise ValueError(f"chunk_size must be a power of two for the Triton kernel, got {chunk_size}")


def check_triton_options(chunk_size, input_precision="ieee"):
    """The kernels tile by the chunk: a power of two >= 16 (the smallest `tl.dot` tile); products in
    full float32 ("ieee") or in a GPU's TF32 tensor cores ("tf32", relative errors near 1e-3)."""
    check_chunk_size(chunk_size, power_of_two=True)
    if chunk_size < 16:
        raise ValueError(f"chunk_size must be >= 16 for the Triton kernel (tl.dot tiles), got {chunk_size}")
    if input_precision not in ("ieee", "tf32"):
        raise ValueError(f"input_precision must be 'ieee' or 'tf32', got {input_precision!r}")


def compute_dtype(x):
    """Accumulate in float64 for float64 inputs (exact checks), float32 for everything else."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


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


def check_triton_inputs(**tensors):
    """The Triton path computes where Triton runs: CUDA tensors when compiled, CPU tensors in the
    interpreter. Anything else is a ValueError naming the argument, never a silent copy."""
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    for name, x in tensors.items():
        if x is None:
            continue
        if interpret and x.is_cuda:
            raise ValueError(f"{name} is a CUDA tensor, but Triton runs in interpreter mode here "
                             f"(TRITON_INTERPRET=1): pass CPU tensors")
        if not interpret and not x.is_cuda:
            raise ValueError(f"{name} is on {x.device}, but the compiled Triton kernel needs CUDA tensors")
