"""Compile every Triton kernel of the course for real GPU targets, without a GPU, and report its cost.

    python benchmarks/compile_kernels.py                  # the table: every kernel x target x head size
    python benchmarks/compile_kernels.py --check          # exit 1 on an error, a spill, too much shared
                                                          # memory or a compile slower than --max-seconds

Triton compiles for a target it is given (`triton.compile(ASTSource(...), target=GPUTarget("cuda", cap,
32))`) on any machine; `ptxas`, shipped in the triton wheel, assembles the result and reports registers
and spills (`-v`, printed with TRITON_DUMP_PTXAS_LOG=1). Each kernel is compiled as a new user's first
call on that GPU would compile it: a fresh cache, the launcher's own block sizes, float32 tensors.

Targets: sm_75 (T4, Colab's free GPU: 64 KiB of shared memory per block, no TF32/bf16 tensor cores),
sm_80 (A100: 163 KiB), sm_90 (H100/H200: 227 KiB).
"""

import argparse
import contextlib
import io
import json
import os
import re
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

# Compile, don't interpret, and start from an empty cache: before anything imports triton.
os.environ["TRITON_INTERPRET"] = "0"
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="kimik3-triton-cache-")
os.environ["TRITON_DUMP_PTXAS_LOG"] = "1"
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

TARGETS = {75: ("T4", 64 * 1024), 80: ("A100", 163 * 1024), 90: ("H100", 227 * 1024)}
MAX_SECONDS = 30.0   # see --max-seconds


def mixer_kernels(head_dim, chunk_size):
    """(name, kernel, constexprs, launch options) for the three steps of each mixer at K = V = head_dim,
    with the launcher's own tile sizes (`contract.block_sizes`, `contract.SLICE`) and options."""
    from kimik3_lessons import contract, deltanet, gated_deltanet, kda, linear_attention
    C, sizes = chunk_size, contract.block_sizes(head_dim, head_dim)
    intra = (dict(C=C, LOG_C=C.bit_length() - 1, BK=contract.SLICE, BV=contract.SLICE), contract.LAUNCH["intra"])
    scan = dict(C=C, **sizes, HAS_S0=True)
    output = (dict(C=C, **sizes), contract.LAUNCH["output"])
    steps = [
        ("linear attention", linear_attention.linear_attention_intra_chunk_kernel, dict(DELTA=False, DECAY=False)),
        ("DeltaNet", deltanet.deltanet_intra_chunk_kernel, dict(DELTA=True, DECAY=False)),
        ("gated DeltaNet", gated_deltanet.gated_deltanet_intra_chunk_kernel, dict(DELTA=True, DECAY=True)),
        ("KDA", kda.kda_intra_chunk_kernel, dict(DELTA=True, DECAY=True)),
    ]
    kernels = []
    for name, intra_kernel, switches in steps:
        kernels.append((f"{name}: intra-chunk", intra_kernel, *intra))
        if name != "KDA":   # gated DeltaNet and KDA share the scan (both DELTA and DECAY)
            kernels.append((f"scan ({'+'.join(k for k, on in switches.items() if on) or 'linear'})",
                            contract.chunk_scan_kernel, dict(scan, **switches), contract.LAUNCH["scan"]))
    kernels.append(("output (all four)", contract.chunk_output_kernel, *output))
    return [(label, kernel, {n: v for n, v in cx.items() if n in kernel.arg_names}, options)
            for label, kernel, cx, options in kernels]


def situ_kernels():
    from kimik3_lessons import moe
    return [("SiTU (fused, bf16)", moe.situ_kernel, dict(LINEAR=True, BLOCK=1024), dict(num_warps=4))]


SCALARS = {"T", "K", "V", "n"}


def signature(kernel, constexprs, pointer="*fp32"):
    """Triton's signature for `kernel`: constexprs by value, sizes as i32, floats as fp32, tensors as pointers."""
    sig = {}
    for name in kernel.arg_names:
        if name in constexprs:
            sig[name] = "constexpr"
        elif name in SCALARS:
            sig[name] = "i32"
        elif name in ("beta", "linear_beta") and pointer == "*bf16":   # SiTU's float arguments
            sig[name] = "fp32"
        else:
            sig[name] = pointer
    return sig


def cpu_seconds():
    """CPU time of this process and its finished children (ptxas): a compile's cost that does not grow
    when other jobs share the machine, as its wall time does."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def compile_one(job):
    """Compile one (kernel, target, precision); return a row of measurements (or the error)."""
    name, module_kernels, index, cap, precision, head_dim, chunk_size = job
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    kernels = situ_kernels() if module_kernels == "situ" else mixer_kernels(head_dim, chunk_size)
    label, kernel, constexprs, options = kernels[index]
    constexprs = dict(constexprs)
    if "PRECISION" in kernel.arg_names:
        constexprs["PRECISION"] = precision
    pointer = "*bf16" if module_kernels == "situ" else "*fp32"
    row = dict(kernel=label, target=f"sm_{cap}", gpu=TARGETS[cap][0], head_dim=head_dim, chunk=chunk_size,
               precision=precision if "PRECISION" in kernel.arg_names else "-")
    log = io.StringIO()
    start, cpu = time.perf_counter(), cpu_seconds()
    try:
        with contextlib.redirect_stdout(log):
            compiled = triton.compile(ASTSource(kernel, signature(kernel, constexprs, pointer), constexprs),
                                      target=GPUTarget("cuda", cap, 32), options=options)
    except Exception as err:  # a compile error is a result to report, not a crash of the table
        row.update(seconds=cpu_seconds() - cpu, wall=time.perf_counter() - start,
                   error=f"{type(err).__name__}: {str(err)[:300]}")
        return row
    row.update(seconds=cpu_seconds() - cpu, wall=time.perf_counter() - start)
    text = log.getvalue()
    regs = re.search(r"Used (\d+) registers", text)
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", text)]
    row.update(registers=int(regs.group(1)) if regs else None, spill_bytes=sum(spills),
               shared_bytes=compiled.metadata.shared, shared_limit=TARGETS[cap][1])
    return row


def jobs(head_dims, chunk_sizes, targets):
    """Every (kernel, target, precision): "ieee" everywhere, "tf32" where the GPU has TF32 (sm_80+)."""
    out = []
    for head_dim in head_dims:
        for chunk_size in chunk_sizes:
            for index, (label, *_) in enumerate(mixer_kernels(head_dim, chunk_size)):
                for cap in targets:
                    for precision in ("ieee", "tf32") if cap >= 80 else ("ieee",):
                        out.append((label, "mixers", index, cap, precision, head_dim, chunk_size))
    for cap in targets:
        out.append(("SiTU", "situ", 0, cap, "ieee", 0, 0))
    return out


def problems(row, max_seconds):
    """What is wrong with one compiled kernel: an error, a spill, too much shared memory, a slow compile."""
    if "error" in row:
        return [f"compile error: {row['error']}"]
    found = []
    if row["spill_bytes"]:
        found.append(f"spills {row['spill_bytes']} bytes to local memory")
    if row["shared_bytes"] > row["shared_limit"]:
        found.append(f"needs {row['shared_bytes']} bytes of shared memory, the target has {row['shared_limit']}")
    if row["seconds"] > max_seconds:
        found.append(f"compiled in {row['seconds']:.1f} CPU s > {max_seconds:.0f} s")
    return found


def table(rows):
    lines = ["| kernel | head dim | C | target | precision | compile (CPU s) | registers | spill (bytes) | "
             "shared memory (KiB) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['kernel']} | {r['head_dim'] or '-'} | {r['chunk'] or '-'} | {r['target']} "
                         f"({r['gpu']}) | {r['precision']} | {r['seconds']:.1f} | error | | |")
            continue
        lines.append(f"| {r['kernel']} | {r['head_dim'] or '-'} | {r['chunk'] or '-'} | {r['target']} ({r['gpu']}) "
                     f"| {r['precision']} | {r['seconds']:.1f} | {r['registers']} | {r['spill_bytes']} | "
                     f"{r['shared_bytes'] / 1024:.0f} of {r['shared_limit'] // 1024} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--head-dim", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--chunk-size", type=int, nargs="+", default=[64])
    parser.add_argument("--target", type=int, nargs="+", default=sorted(TARGETS), choices=sorted(TARGETS))
    parser.add_argument("--check", action="store_true", help="exit 1 if any kernel has a problem")
    parser.add_argument("--max-seconds", type=float, default=MAX_SECONDS,
                        help="slowest acceptable compile of one kernel, in CPU seconds")
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)

    todo = jobs(args.head_dim, args.chunk_size, args.target)
    print(f"compiling {len(todo)} kernels for {', '.join(f'sm_{c}' for c in args.target)} "
          f"with {args.workers} workers ...", flush=True)
    start = time.perf_counter()
    rows = []
    with ProcessPoolExecutor(args.workers) as pool:
        for i, row in enumerate(pool.map(compile_one, todo), 1):
            rows.append(row)
            print(f"\r{i}/{len(todo)} compiled", end="", flush=True)
    print(f"\n{table(rows)}\n\nwall time {time.perf_counter() - start:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    failures = [(r, p) for r in rows for p in problems(r, args.max_seconds)]
    for r, p in failures:
        print(f"FAIL {r['kernel']} (head {r['head_dim']}, {r['target']}, {r['precision']}): {p}")
    if args.check and failures:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
