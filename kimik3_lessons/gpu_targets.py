"""Compile every Triton kernel of the course for real GPU targets, without a GPU, and report its cost.

    python -m kimik3_lessons compile-kernels            # the table: every kernel x target x head size
    python -m kimik3_lessons compile-kernels --check    # exit 1 on an error, a spill, more than
                                                        # MAX_REGISTERS registers, too much shared memory
                                                        # or a compile slower than --max-seconds
(`benchmarks/compile_kernels.py` is the same command.) From a notebook, whose Triton runs in the
interpreter, `compile_in_subprocess(...)` runs it in a fresh Python and returns the rows.

Triton compiles for a target it is given (`triton.compile(ASTSource(...), target=GPUTarget("cuda", cap,
32))`) on any machine; `ptxas`, shipped in the triton wheel, assembles the PTX it produced, and run again
with `-v` on that PTX (`ptxas_report`) reports registers and spills, the same way on every triton from
3.2 on. Each kernel is compiled as a new user's first call on that GPU compiles it: an empty cache, the
launcher's own constexprs and launch options (`chunk_kernels.launches`), float32 tensors.

Targets: sm_75 (T4, Colab's free GPU: 64 KiB of shared memory per block, no TF32 or bf16 tensor cores),
sm_80 (A100: 163 KiB), sm_90 (H100 and H200: 227 KiB).
"""

import argparse
import contextlib
import inspect
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

from kimik3_lessons import contract

TARGETS = {75: ("T4", 64 * 1024), 80: ("A100", 163 * 1024), 90: ("H100", 227 * 1024)}
# The slowest acceptable compile of one kernel, in CPU seconds (wall time grows with the machine's load,
# CPU time does not). Every kernel here compiles in under 2 CPU seconds; 10 s leaves room for a slower
# CPU while a first call on Colab, which compiles three kernels, still starts within half a minute.
# (Before the kernels were split into thin tiles, one of them compiled for over 300 s.)
MAX_SECONDS = 10.0
# The most registers a thread of any kernel here may use, with the launcher's 8 warps and maxnreg=255: a
# thread can have 255 (and 8 warps of 255 fill an SM's 65,536), and a kernel near that fails the no-spill
# checks as soon as another triton or ptxas release needs a few more (the intra-chunk kernels once used
# 241-255). Measured over every row of the table (both head sizes, every precision, forward and backward),
# the most any kernel uses is KDA's intra-chunk kernel: 242 with triton 3.4 (sm_90, bf16), 242 with 3.5.1
# (Colab's; sm_75, ieee), 225 with 3.9; the bound, 248, holds on every release CI compiles with (3.4, 3.5.1,
# 3.9: `make test-colab`, tests/test_gpu_targets.py) and leaves 6 above the largest. (fp16 products on a
# T4 held up to 255 when they were a float16 `tl.dot`; as TF32 products, `chunk_kernels.mma`, at most 240.)
# A lesson reports a row over it and goes on (`report`). (Fewer registers would not buy a second block per
# SM: that takes <= 128 at 8 warps, far below what a [64, 64] float32 tile product on the CUDA cores needs.)
MAX_REGISTERS = 248


def compile_mode():
    """Make the lesson modules define compilable kernels (call it before anything imports triton).
    `python -m kimik3_lessons compile-kernels` does this."""
    if "triton" in sys.modules and contract.interpreted():
        raise RuntimeError("Triton already runs in the interpreter in this Python: "
                           "use compile_in_subprocess()")
    os.environ["TRITON_INTERPRET"] = "0"
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


def families():
    """What --family takes: every mixer of the family (`mixers.MIXERS`: its forward kernels), "moe" (the SiTU
    kernel) and "backward" (lesson 13's kernels: of the mixers named with it, or of every mixer)."""
    from kimik3_lessons import mixers
    return (*mixers.MIXERS, "moe", "backward")


def precisions(cap):
    """How a kernel's products may run on sm_{cap}: "ieee" everywhere; "tf32" and "bf16" on tensor cores
    from sm_80 (Ampere) on; "fp16" on a T4 (sm_75), a training run's half precision there."""
    return ("ieee", "tf32", "bf16") if cap >= 80 else ("ieee", "fp16")


def tensor_cores(ptx):
    """The tensor-core instruction a kernel's PTX uses: "wgmma" (Hopper's warpgroup MMA), "mma" (mma.sync,
    sm_80's and sm_75's), or "-" (none: the products run on the CUDA cores)."""
    return "wgmma" if "wgmma.mma_async" in ptx else "mma" if "mma.sync" in ptx else "-"


def course_kernels(head_dim, chunk_size, families=None):
    """Every kernel of the course as a launch compiles it at head size K = V = head_dim, each once:
    [(families that launch it, label, kernel, constexprs, options, argument types)]. Argument types:
    runtime scalars by name, "*" for the tensors' element type.

    The mixers' kernels are read from the family (`mixers.MIXERS`) and the launcher's own plan
    (`chunk_kernels.launches`: the constexprs and launch options a call uses, with an initial state), so
    that a kernel the launcher would compile differently cannot be missed here. A kernel two mixers launch
    with the same constexprs (the output kernel of all four) is compiled once."""
    from kimik3_lessons import chunk_kernels, mixers, moe
    from kimik3_lessons.backward import kernels as backward
    found = {}                         # (kernel name, constexprs, half inputs) -> [mixers, step, kernel, ...]
    for mixer in mixers.MIXERS.values():
        plan = chunk_kernels.launches(mixer.intra_chunk_kernel, chunk_size, head_dim, head_dim, chunk_size, 1,
                                      delta=mixer.delta, decay=mixer.decay, has_s0=True)
        plan += [(f"backward: {step}", *rest) for step, *rest in backward.backward_launches(
            mixer, chunk_size, head_dim, head_dim, chunk_size, 1, has_ds_t=True)]
        for step, kernel, _, constexprs, options in plan:
            half = tuple(sorted((chunk_kernels.half_inputs(mixer) | {"do"}) & set(kernel.arg_names)))
            key = (kernel.__name__, half,
                   tuple(sorted((n, str(v)) for n, v in constexprs.items() if n != "PRECISION")))
            found.setdefault(key, [[], step, kernel, constexprs, options, half])[0].append(mixer)
    kernels = [(tuple(m.name for m in users) + (("backward",) if step.startswith("backward") else ()),
                label(step, users, constexprs), kernel, constexprs, options,
                {"T": "i32", "K": "i32", "V": "i32", "*": "*fp32", "half": half})
               for users, step, kernel, constexprs, options, half in found.values()]
    situ = dict(LINEAR=True, BLOCK=1024, BF16_BITS=True)           # bfloat16, as `situ_triton` passes it
    kernels.append((("moe",), "SiTU, fused (bf16)", moe.situ_kernel, situ, dict(num_warps=4),
                    {"n": "i32", "beta": "fp32", "linear_beta": "fp32", "*": "*i16"}))
    if families is None:
        return kernels
    named = set(families) - {"backward", "moe"}          # mixers named: their forward (and backward) kernels

    def chosen(users):
        if "backward" in users:
            return "backward" in families and bool(set(users) & named or not named)
        return bool(set(users) & set(families))
    return [kernel for kernel in kernels if chosen(kernel[0])]


def label(step, users, constexprs):
    """'KDA: intra-chunk', 'scan, DeltaNet (DELTA)', 'output, linear attention, DeltaNet, ... and KDA'."""
    if step in ("intra", "backward: intra"):
        return f"{users[0].title}: intra-chunk" + (" backward" if step.startswith("backward") else "")
    titles = [m.title for m in users]
    names = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " and " + titles[-1]
    on = [name for name in ("DELTA", "DECAY") if constexprs.get(name)]
    return f"{step}, {names}" + (f" ({', '.join(on)})" if on else "")


def signature(kernel, constexprs, types, precision="ieee"):
    """Triton's signature for `kernel`: constexprs by value, scalars by their type, tensors as pointers;
    for "bf16" or "fp16" products the pointers to the inputs (types["half"]) in that dtype, as a training
    run passes them."""
    half = {"bf16": "*bf16", "fp16": "*fp16"}.get(precision)
    return {name: "constexpr" if name in constexprs else
            half if half and name in types.get("half", ()) else types.get(name, types["*"])
            for name in kernel.arg_names}


def cpu_seconds():
    """CPU time of this process and its finished children (ptxas): a compile's cost, which, unlike its
    wall time, does not grow when other jobs share the machine."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@contextlib.contextmanager
def empty_triton_cache():
    """A fresh, empty Triton cache (so a kernel compiles, as on a first call), removed afterwards."""
    before = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="kimik3-triton-cache-") as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        try:
            yield cache
        finally:
            if before is None:
                del os.environ["TRITON_CACHE_DIR"]
            else:
                os.environ["TRITON_CACHE_DIR"] = before


def wheel_ptxas(cap):
    """The path of the ptxas the triton wheel ships (and compiles sm_{cap} with): `get_ptxas()` from
    triton 3.3 on (3.9: `get_ptxas(cap)`, a newer ptxas for sm_90 and up), `_path_to_binary` in 3.2."""
    from triton.backends.nvidia import compiler
    if not hasattr(compiler, "get_ptxas"):
        return compiler._path_to_binary("ptxas")[0]
    takes_arch = bool(inspect.signature(compiler.get_ptxas).parameters)
    return (compiler.get_ptxas(cap) if takes_arch else compiler.get_ptxas()).path


def ptxas_report(ptx, cap):
    """Registers and spill bytes of one kernel's PTX: `ptxas -v` (the wheel's) on sm_{cap}, as Triton runs it
    (`-lineinfo`, for sm_90 the arch-specific sm_90a, and from ptxas 13 on `--regAllocOptLevel=2`, which
    triton 3.9 passes). Returns (registers or None, spill bytes, the report)."""
    ptxas = wheel_ptxas(cap)
    version = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
    release = re.search(r"release (\d+)", version)
    flags = ["--regAllocOptLevel=2"] if release and int(release.group(1)) >= 13 else []
    with tempfile.TemporaryDirectory(prefix="kimik3-ptxas-") as tmp:
        source = os.path.join(tmp, "kernel.ptx")
        with open(source, "w") as f:
            f.write(ptx)
        arch = f"sm_{cap}a" if cap >= 90 else f"sm_{cap}"
        done = subprocess.run([ptxas, "-lineinfo", "-v", *flags, f"--gpu-name={arch}", source,
                               "-o", os.path.join(tmp, "kernel.cubin")], capture_output=True, text=True)
    text = done.stdout + done.stderr
    registers = re.search(r"Used (\d+) registers", text)
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", text)]
    return (int(registers.group(1)) if registers else None), sum(spills), text


def compile_kernel(kernel, constexprs, options, types, cap, precision="ieee"):
    """Compile `kernel` for sm_{cap} as a first call would (empty cache); measure CPU seconds, registers,
    spill bytes (ptxas -v) and shared memory. A compile error is reported in the row, not raised."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    constexprs = dict(constexprs)
    if "PRECISION" in kernel.arg_names:
        constexprs["PRECISION"] = precision
    row = dict(target=f"sm_{cap}", gpu=TARGETS[cap][0], triton=triton.__version__,
               precision=precision if "PRECISION" in kernel.arg_names else "-")
    start, cpu = time.perf_counter(), cpu_seconds()
    with empty_triton_cache():
        try:
            compiled = triton.compile(ASTSource(kernel, signature(kernel, constexprs, types, precision),
                                                constexprs),
                                      target=GPUTarget("cuda", cap, 32), options=options)
        except Exception as err:  # a compile error is a result to report, not a crash of the table
            return dict(row, seconds=cpu_seconds() - cpu, wall=time.perf_counter() - start,
                        error=f"{type(err).__name__}: {str(err)[:300]}")
    seconds, wall = cpu_seconds() - cpu, time.perf_counter() - start
    registers, spill_bytes, _ = ptxas_report(compiled.asm["ptx"], cap)
    return dict(row, seconds=seconds, wall=wall, registers=registers, spill_bytes=spill_bytes,
                shared_bytes=compiled.metadata.shared, shared_limit=TARGETS[cap][1],
                tensor_cores=tensor_cores(compiled.asm["ptx"]))


def _compile_job(job):
    families, index, cap, precision, head_dim, chunk_size = job
    users, label, kernel, constexprs, options, types = course_kernels(head_dim, chunk_size, families)[index]
    row = compile_kernel(kernel, constexprs, options, types, cap, precision)
    mixer = users != ("moe",)
    return dict(row, kernel=label, families=list(users), head_dim=head_dim if mixer else None,
                chunk=chunk_size if mixer else None)


def jobs(families, head_dims, chunk_sizes, targets, precisions_=None):
    """Every (kernel, target, precision): each of `precisions(cap)` (those among `precisions_`, when given)
    for a kernel that takes a PRECISION, else "ieee". The SiTU kernel has no head size: once per target."""
    out = []
    for head_dim in head_dims:
        for chunk_size in chunk_sizes:
            for index, (users, _, kernel, *_) in enumerate(course_kernels(head_dim, chunk_size, families)):
                if users == ("moe",) and (head_dim, chunk_size) != (head_dims[0], chunk_sizes[0]):
                    continue
                for cap in targets:
                    kinds = precisions(cap) if "PRECISION" in kernel.arg_names else ("ieee",)
                    if "backward" in users:          # a training run's products: float32 or half, never tf32
                        kinds = tuple(k for k in kinds if k != "tf32")
                    for precision in (p for p in kinds if precisions_ is None or p in precisions_):
                        out.append((families, index, cap, precision, head_dim, chunk_size))
    return out


def problems(row, max_seconds=MAX_SECONDS, max_registers=MAX_REGISTERS):
    """What is wrong with one compiled kernel: an error, no report, a spill, more than max_registers per
    thread (no headroom under the 255 it can have), too much shared memory, a compile slower than
    max_seconds (CPU)."""
    if "error" in row:
        return [f"compile error: {row['error']}"]
    found = []
    if row["registers"] is None:
        found.append("ptxas -v reported no register count")
    elif row["registers"] > max_registers:
        found.append(f"uses {row['registers']} registers per thread, more than {max_registers}")
    if row["spill_bytes"]:
        found.append(f"spills {row['spill_bytes']} bytes to local memory")
    if row["shared_bytes"] > row["shared_limit"]:
        found.append(f"needs {row['shared_bytes']} bytes of shared memory, "
                     f"the target has {row['shared_limit']}")
    if row["seconds"] > max_seconds:
        found.append(f"compiled in {row['seconds']:.1f} CPU s > {max_seconds:.0f} s")
    return found


def report(rows):
    """Say what the compile table shows against the course's bounds (`problems`), without raising: one ✓
    line when every row is within them, else one ⚠ line per row over a bound, saying plainly which and by
    how much. A lesson's cell calls this: a compiler release or another GPU may move a register count, and
    a student's Run All must not stop on that; CI asserts the bounds on the triton releases it tests
    (`compile-kernels --check`: tests/test_gpu_targets.py, `make test-colab`). Returns the rows over."""
    version = rows[0].get("triton", "?") if rows else "?"
    over = [(r, p) for r in rows for p in problems(r)]
    if not over:
        print(f"✓ {len(rows)} compiles with triton {version}: no spill, at most "
              f"{max(r['registers'] for r in rows)} registers per thread (bound {MAX_REGISTERS}), "
              f"shared memory within each GPU's limit, slowest compile {max(r['seconds'] for r in rows):.1f} "
              f"CPU s")
    for r, p in over:
        print(f"⚠ over the course's bound with triton {version}: {r['kernel']} on {r['target']} "
              f"({r['precision']}): {p}")
    return over


def table(rows):
    """The rows as a markdown table."""
    lines = ["| kernel | head dim | C | target | precision | compile (CPU s) | registers | spill (bytes) | "
             "shared memory (KiB) | tensor cores |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        head = (f"| {r['kernel']} | {r['head_dim'] or '-'} | {r['chunk'] or '-'} | {r['target']} "
                f"({r['gpu']}) | {r['precision']} | {r['seconds']:.1f} |")
        if "error" in r:
            lines.append(f"{head} error: {r['error'][:60]} | | | |")
        else:
            lines.append(f"{head} {r['registers']} | {r['spill_bytes']} | "
                         f"{r['shared_bytes'] / 1024:.0f} of {r['shared_limit'] // 1024} | "
                         f"{r.get('tensor_cores', '-')} |")
    return "\n".join(lines)


def compile_in_subprocess(families=None, head_dims=(128,), chunk_sizes=(64,), targets=tuple(TARGETS),
                          precisions=None):
    """Run `python -m kimik3_lessons compile-kernels` in a fresh Python (Triton compiles there, not
    interprets) and return its rows: usable from a notebook. families None: all of them; precisions None:
    each its target has. Raises RuntimeError if the command fails."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        cmd = [sys.executable, "-m", "kimik3_lessons", "compile-kernels", "--json", out,
               *(["--family", *families] if families else []), "--head-dim", *map(str, head_dims),
               "--chunk-size", *map(str, chunk_sizes), "--target", *map(str, targets),
               *(["--precision", *precisions] if precisions else [])]
        done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, TRITON_INTERPRET="0"))
        if done.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        with open(out) as f:
            return json.load(f)


def main(argv=None):
    """The command line: compile, print the table and what is wrong; --check exits 1 on any problem."""
    compile_mode()
    parser = argparse.ArgumentParser(prog="python -m kimik3_lessons compile-kernels",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", nargs="+", default=list(families()), choices=families())
    parser.add_argument("--head-dim", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--chunk-size", type=int, nargs="+", default=[64])
    parser.add_argument("--target", type=int, nargs="+", default=sorted(TARGETS), choices=sorted(TARGETS))
    parser.add_argument("--precision", nargs="+", default=None, choices=("ieee", "tf32", "bf16", "fp16"),
                        help="the products' precisions to compile (default: each its target has)")
    parser.add_argument("--check", action="store_true", help="exit 1 if any kernel has a problem")
    parser.add_argument("--max-seconds", type=float, default=MAX_SECONDS,
                        help="slowest acceptable compile of one kernel, in CPU seconds")
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)

    todo = jobs(tuple(args.family), args.head_dim, args.chunk_size, args.target, args.precision)
    print(f"compiling {len(todo)} kernels for {', '.join(f'sm_{c}' for c in args.target)} "
          f"with {args.workers} workers ...", flush=True)
    start, rows = time.perf_counter(), []
    with ProcessPoolExecutor(args.workers) as pool:
        for i, row in enumerate(pool.map(_compile_job, todo), 1):
            rows.append(row)
            print(f"\r{i}/{len(todo)} compiled", end="", flush=True)
    print(f"\n{table(rows)}\n\nwall time {time.perf_counter() - start:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    failures = [(r, p) for r in rows for p in problems(r, args.max_seconds)]
    for r, p in failures:
        print(f"FAIL: {r['kernel']} (head {r['head_dim']}, {r['target']}, {r['precision']}): {p}")
    return 1 if args.check and failures else 0
