"""What the `%%needs gpu` cells of lessons 03, 05b, 06, 07a and 09b compute, in one place: the same
functions run on a GPU and in the rehearsal on a CPU (`lab.rehearsing()`, small sizes, our kernels
interpreted, FLA's kernels replaced by `fla_stand_in`), so that CI runs every line a GPU cell runs.

The comparison `compare` makes, for one mixer at one head size:

- inputs: random q, k, v, beta (and g), rounded once to FLA's production dtype (`fla_dtype`: bfloat16 on
  sm_80 and newer, float16 on a T4, sm_75), then given to every form: FLA gets them in that dtype, with the
  log decay g in float32 as FLA's layers compute it; our forms get the same values in float32 (what they
  accumulate in); the reference gets them in float64;
- the reference: the float64 recurrence (the mixer's definition) on those values, outputs and final state;
- the forms: the PyTorch `chunked` form (and the token-by-token `recurrent` where the lesson times it) in
  float32, our Triton kernels in each precision this GPU has (`precisions`: "ieee" everywhere, "tf32" on
  sm_80+), FLA's chunked kernel (its entry point from the family's table, `mixers.FLA`);
- per form: the relative error of its outputs and of its final state against float64 (`lab.relative_error`:
  max |error| / max |reference|), at the timed size; the median time of `lab.time_in_turn` (all forms
  timed in turn), and that time as a multiple of FLA's.

Each row is printed, checked against the tolerance of its precision (`TOLERANCE`), and, when
$KIMIK3_GPU_RESULTS names a file, appended to it as one JSON line: `make test-gpu` collects them into
benchmarks/results/gpu-<gpu name>.json (`write_table`).
"""

import functools
import importlib
import json
import os
import re
from pathlib import Path

import torch
import torch.nn.functional as F

from kimik3_lessons import contract, fla_stand_in, lab, linear_attention, mixers

# Largest relative error accepted against float64, by how a form multiplies. "ieee" and the PyTorch forms:
# float32 throughout (unit roundoff 6e-8; the sums over 8192 tokens stay far below 1e-4). "tf32": products
# of inputs rounded to 10 mantissa bits (unit roundoff 5e-4). FLA in bfloat16 (8 bits, 4e-3) or float16:
# its outputs, and the intermediate tiles it stores between kernels (the state h_n, the corrected values),
# are rounded to that dtype; a wrong layout, scale or dtype gives errors near 1, far above any of these.
TOLERANCE = {"float32": 1e-4, "ieee": 1e-4, "tf32": 1e-2, "bfloat16": 5e-2, "float16": 5e-2}
RESULTS = "KIMIK3_GPU_RESULTS"


def fla_dtype():
    """FLA's production dtype here: bfloat16 on sm_80 and newer (and in the rehearsal, which plays an
    sm_80+ GPU), float16 on older GPUs (a T4, sm_75, has no bfloat16 tensor cores)."""
    if lab.on_gpu() and torch.cuda.get_device_capability()[0] < 8:
        return torch.float16
    return torch.bfloat16


def fla_dtypes():
    """The dtypes FLA runs in, one row each: this GPU's (`fla_dtype`); in the rehearsal both GPU classes',
    bfloat16 (sm_80+) and float16 (a T4), each with its own range (float16 holds at most 65,504)."""
    return (torch.bfloat16, torch.float16) if lab.rehearsing() else (fla_dtype(),)


FLOAT16_MAX = torch.finfo(torch.float16).max


def gpu_head_size(D):
    """The head size a GPU cell uses on a GPU, given the one it runs at here (`head_size`'s inverse)."""
    return lab.sizes(cpu=4 * D, gpu=D)


def check_range(mixer, D):
    """What a T4 stores in float16 must fit float16: FLA stores its outputs o and its per-chunk states h_n
    in the inputs' dtype, and above 65,504 a float16 is inf. The magnitudes grow with the length and the
    head size, so they are measured at the GPU cell's own length and head size (T = 8192, `gpu_head_size`),
    on one head of the float32 chunked form; the cell has 32 heads, whose largest value is larger (about
    1.3 times one head's for linear attention's old inputs), so one head must stay below a quarter of the
    range. Prints the magnitude; AssertionError past that bound."""
    T, D_gpu = 8192, gpu_head_size(D)
    x = inputs(mixer, 1, 1, T, D_gpu, torch.float16)
    o, S = mixers.get(mixer).chunked(*x.values())
    top, bound = max(o.abs().max().item(), S.abs().max().item()), FLOAT16_MAX / 4
    print(f"float16's range (a T4's FLA stores o and its states in it): max |o|, |S| of one head {top:,.0f} "
          f"at T = {T}, head size {D_gpu}: under {bound:,.0f}, a quarter of float16's {FLOAT16_MAX:,.0f}")
    assert top < bound, (f"{mixer}: outputs or states reach {top:,.0f} in one head at T = {T}, head size "
                         f"{D_gpu}, above a quarter of float16's {FLOAT16_MAX:,.0f}: on a T4 FLA's float16 "
                         f"outputs would reach inf")


def precisions():
    """The `input_precision`s our kernels run in: ("ieee", "tf32") where TF32 exists (sm_80+, and in the
    rehearsal, which plays such a GPU), ("ieee",) on a T4: one row each, never two rows of one name."""
    tf32 = lab.rehearsing() or contract.fast_input_precision() == "tf32"
    return ("ieee", "tf32") if tf32 else ("ieee",)


def head_size(d):
    """The head size a GPU cell uses: `d` on a GPU, d / 4 in the rehearsal (the interpreter is slow)."""
    return lab.sizes(cpu=d // 4, gpu=d)


def batch_sizes():
    """(B, H, T) of the GPU cells: (2, 16, 8192) on a GPU; (1, 2, 100) in the rehearsal (100 tokens: not a
    multiple of the chunk, so the padding of the last chunk is exercised)."""
    return lab.sizes(cpu=(1, 2, 100), gpu=(2, 16, 8192))


def inputs(mixer, B, H, T, D, dtype):
    """Random inputs of `mixer` in the lessons' [B, H, T, D] layout, rounded to `dtype` (FLA's) and
    returned in float32: q, k (the feature map of lesson 02 for linear attention, q scaled by D^-1/2; unit
    rows for the delta rule), v, then beta in (0, 1) and g = log decay in (-0.1, 0], one per head (gated
    DeltaNet) or per key channel (KDA). g is not rounded: FLA's layers compute it in float32."""
    dev = lab.device()
    if mixer == "linear_attention":      # q scaled by D^-1/2 as a layer scales it: o fits float16
        q, k = (linear_attention.elu_feature_map(torch.randn(B, H, T, D, device=dev)) for _ in range(2))
        q = q * D ** -0.5
    else:
        q, k = (F.normalize(torch.randn(B, H, T, D, device=dev), dim=-1) for _ in range(2))
    x = dict(q=q, k=k, v=torch.randn(B, H, T, D, device=dev))
    family = mixers.get(mixer)
    if "g" in family.args:
        per_channel = (D,) if family.decay == "channel" else ()
        x["g"] = -0.1 * torch.rand(B, H, T, *per_channel, device=dev)
    if "beta" in family.args:
        x["beta"] = torch.rand(B, H, T, device=dev)
    return {name: t if name == "g" else t.to(dtype).float() for name, t in x.items()}


def to_fla(x, dtype):
    """The lessons' [B, H, T, ...] -> FLA's [B, T, H, ...], in `dtype` (g stays float32)."""
    return [t.transpose(1, 2).contiguous().to(torch.float32 if name == "g" else dtype)
            for name, t in x.items()]


def forms(mixer, x, dtype, recurrent=False):
    """{name: (fn, args, precision)}: each form of `mixer` on the inputs x, all returning (o, S) in the
    lessons' layout. FLA's form runs on x in `dtype` and is transposed back."""
    family, op = mixers.get(mixer), mixers.FLA.get(mixer)
    args = tuple(x.values())
    calls = {}
    if recurrent:
        calls["recurrent (PyTorch, T steps)"] = (family.recurrent, args, "float32")
    calls["chunked (PyTorch, C = 64)"] = (family.chunked, args, "float32")
    for precision in precisions():
        kernel = functools.partial(family.triton_chunked, input_precision=precision)
        calls[f"triton_chunked ({precision})"] = (kernel, args, precision)
    if op is None:                     # flash-linear-attention has no such op: our forms alone
        return calls
    fla = fla_stand_in.entry_point(mixer)

    def fla_form(*fla_args):
        o, S = fla(*fla_args, scale=1.0, output_final_state=True, **dict(op.kwargs))
        return o.transpose(1, 2), S

    for fla_in in (dtype,) if not lab.rehearsing() else fla_dtypes():
        name = str(fla_in).removeprefix("torch.")
        label = f"FLA {op.name}" + (f" ({name})" if lab.rehearsing() else "")
        calls[label] = (fla_form, to_fla(x, fla_in), name)
    return calls


def compare(mixer, D, recurrent=False, repeat=None):
    """Check every form of `mixer` at head size D against the float64 recurrence (outputs and final
    states) and time them in turn; print the table, record and return its rows. Raises AssertionError,
    after the table, listing every error above its tolerance."""
    B, H, T = batch_sizes()
    dtype = fla_dtype()
    family = mixers.get(mixer)
    module = importlib.import_module(f"kimik3_lessons.{family.name}")
    x = inputs(mixer, B, H, T, D, dtype)
    o64, S64 = family.recurrent(*(t.double() for t in x.values()))
    calls = forms(mixer, x, dtype, recurrent)
    op = mixers.FLA.get(mixer)
    if op is not None and torch.float16 in (fla_dtype(),) + (fla_dtypes() if lab.rehearsing() else ()):
        check_range(mixer, D)
    if op is not None:
        print(f"compiling flash-linear-attention's kernels for {lab.gpu_name()}: about "
              f"{op.first_call_minutes} min the first time (its autotuner compiles every configuration; "
              f"later runs read Triton's cache)", flush=True)
    rows = []
    for name, (fn, args, precision) in calls.items():
        o, S = fn(*args)
        rows.append(dict(mixer=mixer, B=B, H=H, T=T, D=D, form=name, precision=precision,
                         output_error=lab.relative_error(o64, o), state_error=lab.relative_error(S64, S),
                         tolerance=TOLERANCE[precision]))
    seconds = lab.time_in_turn({name: (fn, args) for name, (fn, args, _) in calls.items()},
                               repeat=repeat or lab.sizes(cpu=1, gpu=10), warmup=lab.on_gpu(),
                               once=("recurrent (PyTorch, T steps)",))
    fla_seconds = next((seconds[name] for name in calls if name.startswith("FLA")), None)
    flops = getattr(module, "chunked_flops", None)
    for row in rows:
        row.update(ms=1e3 * seconds[row["form"]],
                   vs_fla=seconds[row["form"]] / fla_seconds if fla_seconds else None,
                   tflops=B * H * flops(T, D, 64)["total"] / seconds[row["form"]] / 1e12 if flops else None)
    print_rows(rows, f"{family.name}, B={B}, H={H}, T={T}, head size {D}, forward, "
                     f"{lab.gpu_name()}; FLA in {str(dtype).removeprefix('torch.')}, the others on the same "
                     f"values in float32:")
    record(rows)
    check(rows)
    return rows


# The tolerances of the gradients of `compare_training`, against float64 on the same rounded inputs: a
# float32 backward ("ieee", the PyTorch forms) sums a few thousand rounded terms (measured 3e-7 to 2e-5);
# "bf16" and "fp16" products round every tile a product reads to 8 and 11 mantissa bits, and the rounding
# compounds through the chunk's products (measured up to 2e-2 and 6e-4, lesson 13); FLA in bfloat16 or
# float16 rounds its stored intermediates too.
GRADIENT_TOLERANCE = {"float32": 1e-4, "ieee": 1e-4, "tf32": 2e-2, "bf16": 6e-2, "fp16": 1e-2,
                      "bfloat16": 6e-2, "float16": 2e-2}


def training_forms(mixer, x, dtype):
    """{name: (fn, args, precision)}: forward and backward of `mixer`'s chunked form, each fn(*args) ->
    (o, {input: gradient}) in the lessons' layout, for the loss sum(o * dO) with a fixed random dO: autograd
    through the PyTorch chunked form, lesson 13's kernels (`backward.trainable`) in float32 ("ieee") and in
    FLA's half precision (`dtype`'s products, "bf16" or "fp16"), FLA's chunk_* (its own backward)."""
    from kimik3_lessons.backward import trainable
    family, op = mixers.get(mixer), mixers.FLA.get(mixer)
    dO = torch.randn_like(x["v"])
    half = {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]

    def run(form, inputs, layout=lambda t: t):
        leaves = {name: t.detach().clone().requires_grad_() for name, t in inputs.items()}
        o, _ = form(*leaves.values())
        o = layout(o)
        (o.float() * dO).sum().backward()
        return o, {name: layout(t.grad) for name, t in leaves.items()}

    half_x = {name: t if name == "g" else t.to(dtype) for name, t in x.items()}
    calls = {"autograd through chunked (PyTorch)": (run, (family.chunked, x), "float32"),
             "kernels, lesson 13 (ieee)": (run, (trainable(family, input_precision="ieee"), x), "ieee"),
             f"kernels, lesson 13 ({half})": (run, (trainable(family, input_precision=half), half_x), half)}
    if op is not None:
        fla = fla_stand_in.entry_point(mixer)
        fla_x = dict(zip(x, to_fla(x, dtype), strict=True))

        def fla_form(*fla_args):
            return fla(*fla_args, scale=1.0, output_final_state=True, **dict(op.kwargs))

        calls[f"FLA {op.name}"] = (run, (fla_form, fla_x, lambda t: t.transpose(1, 2)),
                                   str(dtype).removeprefix("torch."))
    return calls, dO


def compare_training(mixer, D, repeat=None):
    """Forward plus backward of `mixer` at head size D, every form of `training_forms`: the gradients of
    sum(o * dO) with respect to q, k, v, [g,] [beta] against autograd through the float64 recurrence on the
    same rounded inputs (the largest relative error over the inputs), then all timed in turn; print, record
    (kind "train") and return the rows. AssertionError past `GRADIENT_TOLERANCE`."""
    B, H, T = lab.sizes(cpu=(1, 2, 40), gpu=batch_sizes())      # the rehearsal: three chunks, the last padded
    dtype = fla_dtype()
    family = mixers.get(mixer)
    x = inputs(mixer, B, H, T, D, dtype)
    calls, dO = training_forms(mixer, x, dtype)
    leaves = {name: t.double().requires_grad_() for name, t in x.items()}
    o64, _ = family.recurrent(*leaves.values())
    (o64 * dO.double()).sum().backward()
    rows = []
    for name, (fn, args, precision) in calls.items():
        _, grads = fn(*args)
        errors = {n: lab.relative_error(leaves[n].grad, grads[n]) for n in x}
        rows.append(dict(kind="train", mixer=mixer, B=B, H=H, T=T, D=D, form=name, precision=precision,
                         gradient_error=max(errors.values()), worst=max(errors, key=errors.get),
                         tolerance=GRADIENT_TOLERANCE[precision]))
    seconds = lab.time_in_turn({name: (fn, args) for name, (fn, args, _) in calls.items()},
                               repeat=repeat or lab.sizes(cpu=1, gpu=10), warmup=lab.on_gpu())
    fla_seconds = next((seconds[name] for name in calls if name.startswith("FLA")), None)
    for row in rows:
        row.update(ms=1e3 * seconds[row["form"]],
                   vs_fla=seconds[row["form"]] / fla_seconds if fla_seconds else None)
    print_training_rows(rows, f"{family.name}, B={B}, H={H}, T={T}, head size {D}, forward + backward, "
                              f"{lab.gpu_name()}; gradients against float64 of the same rounded inputs:")
    record(rows)
    bad = [f"{r['mixer']} D={r['D']} {r['form']}: gradient error {r['gradient_error']:.2e} (d{r['worst']}) "
           f"> {r['tolerance']:.0e}" for r in rows if not r["gradient_error"] <= r["tolerance"]]
    assert not bad, "gradients against float64 above tolerance:\n" + "\n".join(bad)
    print(f"✓ {len(rows)} forms: gradients within tolerance of autograd through the float64 recurrence")
    return rows


def print_training_rows(rows, title):
    """The table of `compare_training`: per form, its worst gradient error, time, multiple of FLA's."""
    print(title)
    print(f"  {'form':<40}{'precision':>10}{'grad err':>10}{'(of)':>6}{'(tol)':>8}{'ms':>10}{'× FLA':>8}")
    for r in rows:
        vs_fla = f"{r['vs_fla']:8.2f}" if r.get("vs_fla") is not None else f"{'-':>8}"
        print(f"  {r['form']:<40}{r['precision']:>10}{r['gradient_error']:>10.1e}{'d' + r['worst']:>6}"
              f"{r['tolerance']:>8.0e}{r['ms']:>10.3f}{vs_fla}")


def print_rows(rows, title):
    """The table of `compare`: a row per form, errors against float64, time, multiple of FLA's time."""
    print(title)
    print(f"  {'form':<32}{'precision':>10}{'output err':>12}{'state err':>11}{'(tol)':>8}{'ms':>10}"
          f"{'× FLA':>8}{'TFLOP/s':>9}")
    for r in rows:
        tflops = f"{r['tflops']:9.2f}" if r.get("tflops") is not None else f"{'-':>9}"
        vs_fla = f"{r['vs_fla']:8.2f}" if r.get("vs_fla") is not None else f"{'-':>8}"
        print(f"  {r['form']:<32}{r['precision']:>10}{r['output_error']:>12.1e}{r['state_error']:>11.1e}"
              f"{r['tolerance']:>8.0e}{r['ms']:>10.3f}{vs_fla}{tflops}")


def check(rows):
    """AssertionError naming each row whose output or state error is above its tolerance (or NaN)."""
    bad = [f"{r['mixer']} D={r['D']} {r['form']}: {what} error {r[what + '_error']:.2e} "
           f"> {r['tolerance']:.0e}"
           for r in rows for what in ("output", "state") if not r[what + "_error"] <= r["tolerance"]]
    assert not bad, "errors against float64 above tolerance:\n" + "\n".join(bad)
    print(f"✓ {len(rows)} forms: outputs and final states within tolerance of the float64 recurrence")


def record(rows):
    """Append the rows, one JSON line each, to the file $KIMIK3_GPU_RESULTS names (if set)."""
    path = os.environ.get(RESULTS)
    if path:
        with open(path, "a") as f:
            for row in rows:
                f.write(json.dumps(dict(row, gpu=lab.gpu_name())) + "\n")


def memory_bandwidth():
    """(bytes per second, name) of this GPU's memory: from its bus width and memory clock (two transfers a
    clock) where torch reports them, else measured, a 256 MiB device-to-device copy (read and written: 2 x
    256 MiB moved) timed by `lab.timeit`, below the rated figure as any copy is. Without a GPU: an H200's
    4.8e12, the model's GPU, said so in the name."""
    if lab.on_gpu():
        p = torch.cuda.get_device_properties(0)
        width, clock = getattr(p, "memory_bus_width", 0), getattr(p, "memory_clock_rate", 0)   # bits, kHz
        if width and clock:
            return 2 * width / 8 * clock * 1e3, torch.cuda.get_device_name()
        x = torch.empty(2**26, device="cuda")                # 256 MiB of float32
        y = torch.empty_like(x)
        seconds = lab.timeit(y.copy_, x, warmup=2, repeat=10)
        return 2 * x.nbytes / seconds, f"{torch.cuda.get_device_name()} (measured: a device copy)"
    return 4.8e12, "an H200, the model's GPU; none here"


def cuda_problem(driver_cuda, torch_cuda, available):
    """Why torch sees no GPU on a machine whose driver `nvidia-smi` lists (driver_cuda: the newest CUDA the
    driver runs, "12.4"; torch_cuda: the CUDA torch was built for, `torch.version.cuda`, None for a CPU
    build), and what to pass instead; None when torch sees the GPU."""
    if available:
        return None
    if torch_cuda is None:
        return (f"this torch ({torch.__version__}) is a CPU build. Rebuild .venv with a CUDA build: "
                f'rm -rf .venv && make test-gpu TORCH_SPEC="torch"')
    tag = "cu" + "".join(driver_cuda.split(".")[:2]) if driver_cuda else "cu118"
    version = lambda v: tuple(map(int, v.split(".")[:2]))
    if driver_cuda and version(torch_cuda) > version(driver_cuda):
        return (f"this torch ({torch.__version__}) is built for CUDA {torch_cuda}, newer than the driver's "
                f"CUDA {driver_cuda}: update the driver, or rebuild .venv with a torch built for CUDA "
                f'{driver_cuda} or older: rm -rf .venv && make test-gpu TORCH_SPEC="torch '
                f'--index-url https://download.pytorch.org/whl/{tag}"')
    return (f"torch {torch.__version__} (CUDA {torch_cuda}) sees no GPU although nvidia-smi lists one "
            f"(driver CUDA {driver_cuda or 'unknown'}): check CUDA_VISIBLE_DEVICES and the driver's install")


def check_cuda():
    """`make test-gpu`'s first check: exit 1, naming the cause and the fix (`cuda_problem`), when torch does
    not see the GPU that nvidia-smi lists; else print the GPU and the versions."""
    import subprocess
    import sys
    smi = subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout
    found = re.search(r"CUDA Version:\s*([\d.]+)", smi)
    problem = cuda_problem(found and found.group(1), torch.version.cuda, torch.cuda.is_available())
    if problem:
        print(f"make test-gpu: torch does not see the GPU: {problem}")
        sys.exit(1)
    print(f"make test-gpu: {torch.cuda.get_device_name()}, torch {torch.__version__} "
          f"(CUDA {torch.version.cuda})")


def _warm(job):
    mixer, D = job
    import time
    start = time.perf_counter()
    B, H, T = batch_sizes()
    x = inputs(mixer, B, H, T, D, fla_dtype())
    op = mixers.FLA[mixer]
    fla_stand_in.entry_point(mixer)(*to_fla(x, fla_dtype()), scale=1.0, output_final_state=True,
                                    **dict(op.kwargs))
    torch.cuda.synchronize()
    return mixer, D, time.perf_counter() - start


# What the GPU cells call FLA with: (mixer, head size), as lessons 03, 05b, 06 and 07a do.
GPU_CELLS = (("linear_attention", 64), ("linear_attention", 128), ("deltanet", 64), ("deltanet", 128),
             ("gated_deltanet", 128), ("kda", 128))


def warm_fla(jobs=GPU_CELLS, workers=None):
    """Call FLA's entry point once for each GPU cell's (mixer, head size), in parallel processes, printing
    a line as each finishes: its autotuner compiles every config on a first call (minutes per call on one
    CPU), and FLA and Triton keep what it found in their disk caches, so that the lessons then run warm.
    The autotuner's timings are taken while the others compile; to tune alone, empty ~/.triton/cache."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor, as_completed
    workers = workers or max(1, min(len(jobs), (os.cpu_count() or 2) - 1))
    total = sum(mixers.FLA[m].first_call_minutes for m, _ in jobs)
    print(f"warming flash-linear-attention's kernels for {lab.gpu_name()}: {len(jobs)} first calls, about "
          f"{total} CPU-minutes of compiling, {workers} at a time", flush=True)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for done, future in enumerate(as_completed([pool.submit(_warm, job) for job in jobs]), 1):
            mixer, D, seconds = future.result()
            print(f"  {done}/{len(jobs)} {mixers.FLA[mixer].name}, head size {D}: {seconds:.0f} s",
                  flush=True)


def write_table(results, folder="benchmarks/results"):
    """Collect the JSON lines of `results` (one file of $KIMIK3_GPU_RESULTS) into one table: print it and
    write `<folder>/gpu-<gpu name>.json`. Returns the path written."""
    rows = [json.loads(line) for line in Path(results).read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"{results} holds no rows: did the GPU cells run?")
    gpu = rows[0]["gpu"]
    print(f"One table, {gpu}: every GPU cell's forms, errors against float64 of the same rounded inputs")
    for key in dict.fromkeys((r.get("kind", "forward"), r["mixer"], r["D"]) for r in rows):
        group = [r for r in rows if (r.get("kind", "forward"), r["mixer"], r["D"]) == key]
        first = group[0]
        title = f"{key[1]}, B={first['B']}, H={first['H']}, T={first['T']}, head size {key[2]}"
        if key[0] == "train":
            print_training_rows(group, title + ", forward + backward")
        else:
            print_rows(group, title)
    path = Path(folder) / f"gpu-{re.sub(r'[^a-z0-9]+', '-', gpu.lower()).strip('-')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(gpu=gpu, torch=torch.__version__, rows=rows), indent=1) + "\n")
    print(f"written: {path}")
    return path
