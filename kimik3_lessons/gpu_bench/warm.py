"""FLA's kernels compiled ahead of the lessons (`warm_fla`, `make test-gpu`): one first call for each GPU
cell's mixer and head size, in parallel, so that its autotuner's minutes are spent before the lessons run."""

import torch

from kimik3_lessons import fla_stand_in, gpu_bench, lab, mixers
from kimik3_lessons.gpu_bench.workload import fla_dtype, to_fla

# `batch_sizes` and `inputs` are called through the package (`gpu_bench.inputs`): a test that replaces one
# there replaces it for every caller.


def _warm(job):
    mixer, D = job
    import time
    start = time.perf_counter()
    B, H, T = gpu_bench.batch_sizes()
    x = gpu_bench.inputs(mixer, B, H, T, D, fla_dtype())
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

