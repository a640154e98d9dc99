"""Compile every Triton kernel of the course for sm_75 (T4), sm_80 (A100) and sm_90 (H100), without a GPU:
compile time, registers, spills, shared memory. The same as `python -m kimik3_lessons compile-kernels`.

    python benchmarks/compile_kernels.py [--check] [--head-dim 64 128] [--target 75 80 90] [--json rows.json]

Exit status 1 (with `--check`) and a `FAIL:` line for each kernel that spills, needs more shared memory
than its target has, does not compile, or compiles slower than --max-seconds.
"""

import os
import sys

os.environ["TRITON_INTERPRET"] = "0"   # before kimik3_lessons imports triton: compile, don't interpret

from kimik3_lessons import gpu_targets  # noqa: E402

if __name__ == "__main__":
    gpu_targets.compile_mode()
    sys.exit(gpu_targets.main())
