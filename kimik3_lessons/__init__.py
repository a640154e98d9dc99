"""kimik3-lessons: from GPT-2 to KimiK3, every idea built three ways and proven equal.

Importing the package decides how Triton runs. Without a CUDA GPU the kernels run in Triton's
interpreter (numpy on the CPU, one program after another): Triton reads `TRITON_INTERPRET=1` when
`@triton.jit` wraps a kernel, so it is set here, before any lesson module defines one. With a GPU the
same kernel source is compiled.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
