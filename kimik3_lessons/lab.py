"""The notebook bench every lesson stands on (the mixing ops' own contract is `contract.py`).

- machine:     `setup`, `device`, `on_gpu`, `online`, `triton_mode`, `sizes`, and the `%%needs` cell magic
               that lets a GPU-only or online cell guard itself; `rehearsing` (KIMIK3_REHEARSE=1: the
               GPU cells run on the CPU at small sizes, and the device is kept apart from the host:
               `rehearsal`), `gpu_name`
- checking:    `check_close` (one line per claim, an AssertionError with the numbers when it fails)
- measuring:   `timeit` (warm-up, repeats, median, CUDA-synchronized), `time_in_turn` (several
               forms, round after round), `check_timing` (asserted on a CPU, reported on a GPU),
               `progress` (the scripts in benchmarks/ add `harness`)
- drawing:     `save_figure` (into figures/ only when asked: `make notebooks` asks, a student's Run All
               does not)
- exercises:   `exercise(id, fn)` checks a student's function and prints one verdict line
"""

import ast
import functools
import os
import platform
import random
import re
import socket
import statistics
import time
from pathlib import Path

import matplotlib
import numpy as np
import torch

from kimik3_lessons import contract, rehearsal

# ---------------------------------------------------------------------------------------------------
# The machine


@functools.cache
def on_gpu():
    """True when a CUDA GPU is present: Triton kernels compile, sizes grow, `gpu` cells run. Asked once
    (the timers call it around every timed call)."""
    return torch.cuda.is_available()


def device():
    """The device the lessons compute on: the GPU when there is one, else the CPU; in the rehearsal, once
    `setup` has started it, the rehearsal's device (`rehearsal.DEVICE`: a CPU that refuses what CUDA
    refuses when a device tensor meets a host tensor)."""
    if rehearsal.active():
        return rehearsal.DEVICE
    return torch.device("cuda" if on_gpu() else "cpu")


def triton_mode():
    """How Triton kernels run here: compiled for the GPU, or in the interpreter on the CPU."""
    if contract.interpreted():
        return "interpreter (CPU, numpy; same kernel source as on a GPU)"
    return f"compiled for {torch.cuda.get_device_name()}" if on_gpu() else "not available"


def sizes(cpu, gpu):
    """Pick the problem size for this machine: small on a CPU (and in the rehearsal), larger on a GPU."""
    return gpu if on_gpu() else cpu


REHEARSE = "KIMIK3_REHEARSE"


def rehearsing():
    """True on a machine without a GPU where KIMIK3_REHEARSE=1 (`make test` sets it): a `%%needs gpu` cell
    then runs its own code on the CPU, with `sizes` small, our kernels in Triton's interpreter and
    flash-linear-attention's kernels replaced by stand-ins that keep their contract (`fla_stand_in`)."""
    return os.environ.get(REHEARSE) == "1" and not on_gpu()


def gpu_name():
    """The GPU's name ("NVIDIA H100 80GB HBM3"), or "CPU (rehearsal)" when the GPU cells are rehearsed."""
    return torch.cuda.get_device_name() if on_gpu() else "CPU (rehearsal)"


def online(host="huggingface.co", port=443, timeout=3.0):
    """True when this machine can reach `host` (the Hugging Face Hub by default) and no offline switch
    (HF_HUB_OFFLINE=1, set by `make test`) says otherwise."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False


# What a guarded cell needs, how to tell whether this machine has it, and where to run it otherwise.
NEEDS = {
    "gpu": (on_gpu, "a CUDA GPU",
            "run it on a machine with an NVIDIA GPU, or on Colab with Runtime > Change runtime type > GPU"),
    "internet": (online, "the internet (this machine is offline)",
                 "run it on Colab or on any machine online (`make notebooks ONLINE=1` refreshes the output)"),
}


def needs(line, cell):
    """The `%%needs` cell magic: run the cell only where it can run, else say in one line what it would do.

        %%needs gpu: times the compiled kernel against flash-linear-attention's at T = 8192
        ...the cell's code, unchanged...

    `gpu` needs CUDA, `internet` needs the Hugging Face Hub. Where the need is met the cell runs as
    written (its last expression is displayed, an error stops Run All as usual); where it is not, it
    prints one line and the notebook goes on. Nothing after such a cell may depend on it. In the
    rehearsal (`rehearsing()`) a `gpu` cell runs on the CPU, after a line that says so.
    """
    need, _, what = line.partition(":")
    need, what = need.strip(), what.strip()
    if need not in NEEDS or not what:
        raise ValueError(f"usage: %%needs gpu: <what the cell shows>  (or `internet`), got %%needs {line}")
    available, missing, where = NEEDS[need]
    if need == "gpu" and rehearsing():
        print(f"🎭 rehearsal ({REHEARSE}=1, no GPU): this cell's own code at small sizes, our kernels in "
              f"Triton's interpreter, flash-linear-attention's kernels replaced by its PyTorch reference; "
              f"its times are not a GPU's.")
    elif not available():
        print(f"⏭ skipped, this cell needs {missing}: it {what}. To see it, {where}.")
        return
    from IPython import get_ipython
    from IPython.display import display
    shell = get_ipython()
    tree = ast.parse(shell.transform_cell(cell))
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<%%needs cell>", "exec"), shell.user_ns)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), "<%%needs cell>", "eval"), shell.user_ns)
        if value is not None:
            display(value)


def _register_magics():
    """Make `%%needs` available in any IPython kernel that imports the bench (no-op elsewhere)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.register_magic_function(needs, magic_kind="cell")


def seed_everything(seed=0):
    """Seed Python, numpy and torch (every device) so a notebook prints the same numbers each run."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def setup(seed=0):
    """Seed everything, set the figure style, print the machine and versions; return the device. In the
    rehearsal (`rehearsing()`) the process then plays a GPU machine: the device is the rehearsal's
    (`rehearsal.start`), distinct from the host."""
    seed_everything(seed)
    if rehearsing():
        rehearsal.start()
    matplotlib.rcParams.update({
        "figure.facecolor": "white", "axes.facecolor": "white", "savefig.facecolor": "white",
        "figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
        "axes.spines.right": False,
    })
    dev = device()
    cpu = f"CPU ({platform.machine()}, {os.cpu_count()} cores)"
    where = torch.cuda.get_device_name() if on_gpu() else cpu
    if rehearsal.active():
        where += ", playing a GPU machine (rehearsal): device and host tensors kept apart"
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
    Returns nothing (a cell ending with it shows only the ✓ line); `relative_error` gives the number.
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


def check_timing(holds, claim):
    """A claim about measured times (`claim`: what the lesson teaches, "the cached step is > 2x faster").
    On a CPU, where CI measures the course, it is asserted. On a GPU the margin depends on the model of GPU
    and its launch overheads, which no measurement here covers: the result is printed, ✓ or ⚠ with the
    claim, and Run All goes on."""
    if not on_gpu():
        assert holds, claim
    print(f"{'✓' if holds else '⚠ not on this GPU:'} {claim}")


def progress(items, label):
    """Iterate over `items`, printing `label: i/n` on one line as it goes (for sweeps that take a while).
    Progress goes to stdout: it is news, not a warning (a notebook shows stderr as a pink strip)."""
    items = list(items)
    for i, item in enumerate(items, 1):
        print(f"\r{label}: {i}/{len(items)}", end="", flush=True)
        yield item
    print(flush=True)


# ---------------------------------------------------------------------------------------------------
# Drawing


def figure_dir():
    """Where `save_figure` writes: $KIMIK3_FIGURES when set (`make notebooks` sets it to the checkout's
    figures/, `make test` to a scratch folder), else nowhere (None): a student's Run All shows every
    figure in the notebook and leaves the committed figures/ untouched."""
    folder = os.environ.get("KIMIK3_FIGURES")
    return Path(folder) if folder else None


def save_figure(fig, name):
    """Save `fig` as `<figure_dir>/<name>.png` (white background); `name` is `NN_what` (NN = lesson).

    Prints nothing and returns nothing: the figure itself is what the reader sees. Without
    $KIMIK3_FIGURES it only checks the name (so a wrong name fails in every run, not only in
    `make notebooks`).
    """
    if not re.fullmatch(r"\d\d_[a-z0-9_]+", name):
        raise ValueError(f"figure name must look like '01_cache_bytes' (lesson number, underscore, "
                         f"lower-case words), got {name!r}")
    folder = figure_dir()
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / f"{name}.png", dpi=110, facecolor="white", bbox_inches="tight")


# ---------------------------------------------------------------------------------------------------
# Exercises


def exercise(exercise_id, fn=None, solution=False):
    """Check the student's `fn` for exercise `exercise_id` ("05.2") on random inputs seeded from the id;
    print one line: ✅ with the measured error, ❌ with what differs and a hint (none when the environment
    says KIMIK3_HINTS=0, for graded work), or ⬜ "not attempted yet" while `fn` still raises
    NotImplementedError. `solution=True` checks the solution from solutions/ instead (a teacher's demo).
    Never raises, whatever `fn` returns or raises, so Run All reaches the end of the notebook. (The kit,
    `kimik3_lessons.exercises`, does not import this module: no import cycle.)"""
    from kimik3_lessons import exercises
    print(exercises.run(exercise_id, fn, solution=solution).line)


_register_magics()
