"""Compile every Triton kernel of the course for real GPU targets, without a GPU, and report its cost.

    python -m kimik3_lessons compile-kernels            # the table: every kernel x target x head size
    python -m kimik3_lessons compile-kernels --check    # exit 1 on an error, a spill, too much shared
                                                        # memory or a compile slower than --max-seconds
(`benchmarks/compile_kernels.py` is the same command.) From a notebook, whose Triton runs in the
interpreter, `compile_in_subprocess(...)` runs it in a fresh Python and returns the rows.

Triton compiles for a target it is given (`triton.compile(ASTSource(...), target=GPUTarget("cuda", cap,
32))`) on any machine; `ptxas`, shipped in the triton wheel, assembles the result and reports registers
and spills (`-v`, printed with TRITON_DUMP_PTXAS_LOG=1). Each kernel is compiled as a new user's first
call on that GPU compiles it: an empty cache, the launcher's own tile sizes and launch options
(`contract.block_sizes`, `contract.LAUNCH`), float32 tensors.

Targets: sm_75 (T4, Colab's free GPU: 64 KiB of shared memory per block, no TF32 or bf16 tensor cores),
sm_80 (A100: 163 KiB), sm_90 (H100 and H200: 227 KiB).
"""

import argparse
import contextlib
import io
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

TARGETS = {75: ("T4", 64 * 1024), 80: ("A100", 163 * 1024), 90: ("H100", 227 * 1024)}
FAMILIES = ("linear_attention", "deltanet", "gated_deltanet", "kda", "moe")
# The slowest acceptable compile of one kernel, in CPU seconds (wall time grows with the machine's load,
# CPU time does not). Every kernel here compiles in under 2 CPU seconds; 10 s leaves room for a slower
# CPU while a first call on Colab, which compiles three kernels, still starts within half a minute.
# (Before the kernels were split into thin tiles, one of them compiled for over 300 s.)
MAX_SECONDS = 10.0


def compile_mode():
    """Make the lesson modules define compilable kernels (call it before anything imports triton) and let
    ptxas report its registers and spills. `python -m kimik3_lessons compile-kernels` does this."""
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") == "1":
        raise RuntimeError("Triton already runs in the interpreter in this Python: "
                           "use compile_in_subprocess()")
    os.environ["TRITON_INTERPRET"] = "0"
    os.environ["TRITON_DUMP_PTXAS_LOG"] = "1"
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


def course_kernels(head_dim, chunk_size, families=FAMILIES):
    """Every kernel of the course as a launch compiles it at head size K = V = head_dim, each once:
    [(families that launch it, label, kernel, constexprs, options, argument types)]. Argument types:
    runtime scalars by name, "*" for the tensors' element type."""
    from kimik3_lessons import contract, deltanet, gated_deltanet, kda, linear_attention, moe
    C, sizes, launch = chunk_size, contract.block_sizes(head_dim, head_dim), contract.LAUNCH
    mixer = {"T": "i32", "K": "i32", "V": "i32", "*": "*fp32"}
    intra = dict(C=C, LOG_C=C.bit_length() - 1, BK=contract.SLICE, BV=contract.SLICE)
    scan = dict(C=C, **sizes, HAS_S0=True)
    kernels = [
        (("linear_attention",), "linear attention: intra-chunk",
         linear_attention.linear_attention_intra_chunk_kernel, intra, launch["intra"], mixer),
        (("deltanet",), "DeltaNet: intra-chunk", deltanet.deltanet_intra_chunk_kernel, intra, launch["intra"],
         mixer),
        (("gated_deltanet",), "gated DeltaNet: intra-chunk", gated_deltanet.gated_deltanet_intra_chunk_kernel,
         intra, launch["intra"], mixer),
        (("kda",), "KDA: intra-chunk", kda.kda_intra_chunk_kernel, intra, launch["intra"], mixer),
        (("linear_attention",), "scan, linear attention", contract.chunk_scan_kernel,
         dict(scan, DELTA=False, DECAY=False), launch["scan"], mixer),
        (("deltanet",), "scan, DeltaNet (DELTA)", contract.chunk_scan_kernel,
         dict(scan, DELTA=True, DECAY=False), launch["scan"], mixer),
        (("gated_deltanet", "kda"), "scan, gated DeltaNet and KDA (DELTA, DECAY)", contract.chunk_scan_kernel,
         dict(scan, DELTA=True, DECAY=True), launch["scan"], mixer),
        (FAMILIES[:4], "output, all four mixers", contract.chunk_output_kernel, dict(C=C, **sizes),
         launch["output"], mixer),
        (("moe",), "SiTU, fused (bf16)", moe.situ_kernel, dict(LINEAR=True, BLOCK=1024), dict(num_warps=4),
         {"n": "i32", "beta": "fp32", "linear_beta": "fp32", "*": "*bf16"}),
    ]
    return [(users, label, kernel, {n: v for n, v in cx.items() if n in kernel.arg_names}, options, types)
            for users, label, kernel, cx, options, types in kernels if set(users) & set(families)]


def signature(kernel, constexprs, types):
    """Triton's signature for `kernel`: constexprs by value, scalars by their type, tensors as pointers."""
    return {name: "constexpr" if name in constexprs else types.get(name, types["*"])
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


def compile_kernel(kernel, constexprs, options, types, cap, precision="ieee"):
    """Compile `kernel` for sm_{cap} as a first call would (empty cache); measure CPU seconds, registers,
    spill bytes (ptxas -v) and shared memory. A compile error is reported in the row, not raised."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    constexprs = dict(constexprs)
    if "PRECISION" in kernel.arg_names:
        constexprs["PRECISION"] = precision
    row = dict(target=f"sm_{cap}", gpu=TARGETS[cap][0],
               precision=precision if "PRECISION" in kernel.arg_names else "-")
    log = io.StringIO()
    start, cpu = time.perf_counter(), cpu_seconds()
    with empty_triton_cache():
        try:
            with contextlib.redirect_stdout(log):
                compiled = triton.compile(ASTSource(kernel, signature(kernel, constexprs, types), constexprs),
                                          target=GPUTarget("cuda", cap, 32), options=options)
        except Exception as err:  # a compile error is a result to report, not a crash of the table
            return dict(row, seconds=cpu_seconds() - cpu, wall=time.perf_counter() - start,
                        error=f"{type(err).__name__}: {str(err)[:300]}")
        shared = compiled.metadata.shared
    text = log.getvalue()
    registers = re.search(r"Used (\d+) registers", text)
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", text)]
    return dict(row, seconds=cpu_seconds() - cpu, wall=time.perf_counter() - start,
                registers=int(registers.group(1)) if registers else None, spill_bytes=sum(spills),
                shared_bytes=shared, shared_limit=TARGETS[cap][1])


def _compile_job(job):
    families, index, cap, precision, head_dim, chunk_size = job
    users, label, kernel, constexprs, options, types = course_kernels(head_dim, chunk_size, families)[index]
    row = compile_kernel(kernel, constexprs, options, types, cap, precision)
    mixer = users != ("moe",)
    return dict(row, kernel=label, families=list(users), head_dim=head_dim if mixer else None,
                chunk=chunk_size if mixer else None)


def jobs(families, head_dims, chunk_sizes, targets):
    """Every (kernel, target, precision): "ieee" everywhere, "tf32" where the GPU has TF32 (sm_80+). The SiTU
    kernel has no head size: once per target."""
    out = []
    for head_dim in head_dims:
        for chunk_size in chunk_sizes:
            for index, (users, _, kernel, *_) in enumerate(course_kernels(head_dim, chunk_size, families)):
                if users == ("moe",) and (head_dim, chunk_size) != (head_dims[0], chunk_sizes[0]):
                    continue
                for cap in targets:
                    for precision in ("ieee", "tf32") if cap >= 80 and "PRECISION" in kernel.arg_names \
                            else ("ieee",):
                        out.append((families, index, cap, precision, head_dim, chunk_size))
    return out


def problems(row, max_seconds=MAX_SECONDS):
    """What is wrong with one compiled kernel: an error, no report, a spill, too much shared memory, a
    compile slower than max_seconds (CPU)."""
    if "error" in row:
        return [f"compile error: {row['error']}"]
    found = []
    if row["registers"] is None:
        found.append("ptxas reported nothing (was the kernel taken from a cache?)")
    if row["spill_bytes"]:
        found.append(f"spills {row['spill_bytes']} bytes to local memory")
    if row["shared_bytes"] > row["shared_limit"]:
        found.append(f"needs {row['shared_bytes']} bytes of shared memory, "
                     f"the target has {row['shared_limit']}")
    if row["seconds"] > max_seconds:
        found.append(f"compiled in {row['seconds']:.1f} CPU s > {max_seconds:.0f} s")
    return found


def table(rows):
    """The rows as a markdown table."""
    lines = ["| kernel | head dim | C | target | precision | compile (CPU s) | registers | spill (bytes) | "
             "shared memory (KiB) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        head = (f"| {r['kernel']} | {r['head_dim'] or '-'} | {r['chunk'] or '-'} | {r['target']} "
                f"({r['gpu']}) | {r['precision']} | {r['seconds']:.1f} |")
        if "error" in r:
            lines.append(f"{head} error: {r['error'][:60]} | | |")
        else:
            lines.append(f"{head} {r['registers']} | {r['spill_bytes']} | "
                         f"{r['shared_bytes'] / 1024:.0f} of {r['shared_limit'] // 1024} |")
    return "\n".join(lines)


def compile_in_subprocess(families=FAMILIES, head_dims=(128,), chunk_sizes=(64,), targets=tuple(TARGETS)):
    """Run `python -m kimik3_lessons compile-kernels` in a fresh Python (Triton compiles there, not
    interprets) and return its rows: usable from a notebook. Raises RuntimeError if the command fails."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        cmd = [sys.executable, "-m", "kimik3_lessons", "compile-kernels", "--json", out,
               "--family", *families, "--head-dim", *map(str, head_dims),
               "--chunk-size", *map(str, chunk_sizes), "--target", *map(str, targets)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, TRITON_INTERPRET="0"))
        if done.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        with open(out) as f:
            return json.load(f)


def main(argv=None):
    """The command line: compile, print the table and what is wrong; --check exits 1 on any problem."""
    parser = argparse.ArgumentParser(prog="python -m kimik3_lessons compile-kernels",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--head-dim", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--chunk-size", type=int, nargs="+", default=[64])
    parser.add_argument("--target", type=int, nargs="+", default=sorted(TARGETS), choices=sorted(TARGETS))
    parser.add_argument("--check", action="store_true", help="exit 1 if any kernel has a problem")
    parser.add_argument("--max-seconds", type=float, default=MAX_SECONDS,
                        help="slowest acceptable compile of one kernel, in CPU seconds")
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    compile_mode()

    todo = jobs(tuple(args.family), args.head_dim, args.chunk_size, args.target)
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
