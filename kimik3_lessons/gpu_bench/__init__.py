"""What the `%%needs gpu` cells of lessons 03, 05b, 06, 07a and 09b compute, in one place: the same
functions run on a GPU and in the rehearsal on a CPU (`lab.rehearsing()`, small sizes, our kernels
interpreted, FLA's kernels replaced by `fla_stand_in`), so that CI runs every line a GPU cell runs.

The package, by job:
  - `gpu_bench.workload`: what a GPU cell runs at: its sizes (`batch_sizes`, `head_size`), FLA's dtype and
    our precisions (`fla_dtype`, `precisions`), its random inputs (`inputs`);
  - `gpu_bench.forward`: `compare`, every form's forward against float64, and float16's range (`check_range`);
  - `gpu_bench.training`: `compare_training`, forward and backward, the gradients against float64;
  - `gpu_bench.table`: the rows printed, recorded to $KIMIK3_GPU_RESULTS and collected (`write_table`);
  - `gpu_bench.machine`: the GPU itself: whether torch sees it (`check_cuda`), its memory bandwidth;
  - `gpu_bench.warm`: FLA's kernels compiled ahead of the lessons (`warm_fla`).
Every name is read from the package (`gpu_bench.compare`). `batch_sizes`, `inputs` and `check_range`, which
tests replace there, are called through it by the package's own modules too.
"""

from kimik3_lessons.gpu_bench.forward import FLOAT16_MAX, TOLERANCE, check, check_range, compare, forms
from kimik3_lessons.gpu_bench.machine import check_cuda, cuda_problem, memory_bandwidth
from kimik3_lessons.gpu_bench.table import RESULTS, print_rows, print_training_rows, record, write_table
from kimik3_lessons.gpu_bench.training import (
    GRADIENT_TOLERANCE,
    compare_training,
    float64_gradients,
    training_forms,
)
from kimik3_lessons.gpu_bench.warm import GPU_CELLS, warm_fla
from kimik3_lessons.gpu_bench.workload import (
    batch_sizes,
    fla_dtype,
    fla_dtypes,
    gpu_head_size,
    head_size,
    inputs,
    precisions,
    to_fla,
)

__all__ = ["FLOAT16_MAX", "GPU_CELLS", "GRADIENT_TOLERANCE", "RESULTS", "TOLERANCE", "batch_sizes", "check",
           "check_cuda", "check_range", "compare", "compare_training", "cuda_problem", "fla_dtype",
           "fla_dtypes", "float64_gradients", "forms", "gpu_head_size", "head_size", "inputs",
           "memory_bandwidth", "precisions", "print_rows", "print_training_rows", "record", "to_fla",
           "training_forms", "warm_fla", "write_table"]
