"""kimik3-lessons: from GPT-2 to KimiK3, every idea built three ways and proven equal.

Importing the package decides how Triton runs. Without a CUDA GPU the kernels run in Triton's
interpreter (numpy on the CPU, one program after another): Triton reads `TRITON_INTERPRET=1` when
`@triton.jit` wraps a function, so it is set here, before any lesson module defines a kernel. With a GPU
the same kernel source is compiled. An explicit `TRITON_INTERPRET` in the environment is respected
(`TRITON_INTERPRET=0` compiles for a GPU target without a GPU, as `benchmarks/compile_kernels.py` does).

Import order does not matter: if `triton` (or a library that imports it, such as flash-linear-attention)
was imported first, its own library functions (`tl.sum`, `tl.zeros`, `tl.cumsum`, ...) were built for
the compiler, and an interpreted kernel cannot call them. They are rebuilt here for the interpreter.
"""

import os
import sys

import torch

_FIX = ("import kimik3_lessons before triton or flash-linear-attention (restart the kernel first), or start "
        "Python with TRITON_INTERPRET=1 set (in a notebook: `%env TRITON_INTERPRET=1` in the first cell)")


def _interpret_triton_language():
    """Rebuild the @triton.jit functions of an already imported `triton.language` for the interpreter.

    With TRITON_INTERPRET=1 set before the import, Triton itself makes each of them an
    `InterpretedFunction`; imported earlier, they are `JITFunction`s, which only a compiled kernel may
    call. Same function, other wrapper: swap it in every `triton.language` module and on `tl.tensor`.
    """
    try:
        import triton.language as tl
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
    except ImportError as err:  # a Triton too different to repair: say what to do instead
        raise RuntimeError(f"triton was imported before kimik3_lessons and cannot be switched to its "
                           f"interpreter ({err}). Fix: {_FIX}.") from err
    rebuilt = {}

    def interpreted(jit_fn):
        if id(jit_fn) not in rebuilt:  # keyed by id: hashing a JITFunction compiles its cache key
            rebuilt[id(jit_fn)] = InterpretedFunction(jit_fn.fn)
        return rebuilt[id(jit_fn)]

    modules = [m for name, m in list(sys.modules.items()) if name.startswith("triton.language") and m]
    for owner in [*modules, tl.tensor]:
        for name, value in list(vars(owner).items()):
            if isinstance(value, JITFunction):
                setattr(owner, name, interpreted(value))
    if isinstance(tl.sum, JITFunction):
        raise RuntimeError(f"triton was imported before kimik3_lessons and its functions could not be "
                           f"switched to the interpreter. Fix: {_FIX}.")


if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
    if os.environ["TRITON_INTERPRET"] == "1" and "triton.language" in sys.modules:
        _interpret_triton_language()
