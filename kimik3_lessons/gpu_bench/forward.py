"""`compare`: every form of one mixer against the float64 recurrence, then timed: what the `%%needs gpu`
cells of lessons 03, 05b, 06 and 07a print.

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

import torch

from kimik3_lessons import fla_stand_in, gpu_bench, lab, mixers
from kimik3_lessons.gpu_bench.table import print_rows, record
from kimik3_lessons.gpu_bench.workload import fla_dtype, fla_dtypes, gpu_head_size, precisions, to_fla

# `batch_sizes`, `inputs` and `check_range` are called through the package (`gpu_bench.inputs`): a test that
# replaces one there replaces it for every caller.

# Largest relative error accepted against float64, by how a form multiplies. "ieee" and the PyTorch forms:
# float32 throughout (unit roundoff 6e-8; the sums over 8192 tokens stay far below 1e-4). "tf32": products
# of inputs rounded to 10 mantissa bits (unit roundoff 5e-4). FLA in bfloat16 (8 bits, 4e-3) or float16:
# its outputs, and the intermediate tiles it stores between kernels (the state h_n, the corrected values),
# are rounded to that dtype; a wrong layout, scale or dtype gives errors near 1, far above any of these.
TOLERANCE = {"float32": 1e-4, "ieee": 1e-4, "tf32": 1e-2, "bfloat16": 5e-2, "float16": 5e-2}

FLOAT16_MAX = torch.finfo(torch.float16).max


def check_range(mixer, D):
    """What a T4 stores in float16 must fit float16: FLA stores its outputs o and its per-chunk states h_n
    in the inputs' dtype, and above 65,504 a float16 is inf. The magnitudes grow with the length and the
    head size, so they are measured at the GPU cell's own length and head size (T = 8192, `gpu_head_size`),
    on one head of the float32 chunked form; the cell has 32 heads, whose largest value is larger (about
    1.3 times one head's for linear attention's old inputs), so one head must stay below a quarter of the
    range. Prints the magnitude; AssertionError past that bound."""
    T, D_gpu = 8192, gpu_head_size(D)
    x = gpu_bench.inputs(mixer, 1, 1, T, D_gpu, torch.float16)
    o, S = mixers.get(mixer).chunked(*x.values())
    top, bound = max(o.abs().max().item(), S.abs().max().item()), FLOAT16_MAX / 4
    print(f"float16's range (a T4's FLA stores o and its states in it): max |o|, |S| of one head {top:,.0f} "
          f"at T = {T}, head size {D_gpu}: under {bound:,.0f}, a quarter of float16's {FLOAT16_MAX:,.0f}")
    assert top < bound, (f"{mixer}: outputs or states reach {top:,.0f} in one head at T = {T}, head size "
                         f"{D_gpu}, above a quarter of float16's {FLOAT16_MAX:,.0f}: on a T4 FLA's float16 "
                         f"outputs would reach inf")


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
    B, H, T = gpu_bench.batch_sizes()
    dtype = fla_dtype()
    family = mixers.get(mixer)
    module = importlib.import_module(f"kimik3_lessons.{family.name}")
    x = gpu_bench.inputs(mixer, B, H, T, D, dtype)
    o64, S64 = family.recurrent(*(t.double() for t in x.values()))
    calls = forms(mixer, x, dtype, recurrent)
    op = mixers.FLA.get(mixer)
    if op is not None and torch.float16 in (fla_dtype(),) + (fla_dtypes() if lab.rehearsing() else ()):
        gpu_bench.check_range(mixer, D)
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


def check(rows):
    """AssertionError naming each row whose output or state error is above its tolerance (or NaN)."""
    bad = [f"{r['mixer']} D={r['D']} {r['form']}: {what} error {r[what + '_error']:.2e} "
           f"> {r['tolerance']:.0e}"
           for r in rows for what in ("output", "state") if not r[what + "_error"] <= r["tolerance"]]
    assert not bad, "errors against float64 above tolerance:\n" + "\n".join(bad)
    print(f"✓ {len(rows)} forms: outputs and final states within tolerance of the float64 recurrence")

