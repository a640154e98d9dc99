"""Two repairs of Triton's interpreter, made when `chunk_kernels` is imported and the kernels run in it
(`contract.interpreted`: on a CPU): bfloat16 products multiplied as numbers, not as their bits
(`multiply_bf16_in_the_interpreter`), and the language patched once per launch, not once per call of a
device function (`patch_language_once_per_launch`)."""

import triton.language as tl

from kimik3_lessons import contract


def multiply_bf16_in_the_interpreter():
    """Make Triton's interpreter multiply bfloat16 tiles as a tensor core does. numpy has no bfloat16, so
    the interpreter keeps a bfloat16 tile as its bits (uint16); its casts read them right, but its
    `tl.dot` (triton 3.4 to 3.9) multiplies the bits as integers. Here it turns bfloat16 operands into
    float32 first: exact, since a product of two bfloat16 numbers fits in float32, and summed in the
    accumulator's float32 as on the GPU (up to the order of the sum). No-op when compiling for a GPU."""
    from triton.runtime import interpreter
    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_dot, "multiplies_bf16", False):
        return
    create_dot = builder.create_dot

    def create_dot_bf16(self, a, b, *args, **kwargs):
        a, b = (self.cast_impl(x, tl.float32) if x.dtype.scalar == tl.bfloat16 else x for x in (a, b))
        return create_dot(self, a, b, *args, **kwargs)

    create_dot_bf16.multiplies_bf16 = True
    builder.create_dot = create_dot_bf16


def patch_language_once_per_launch():
    """Make Triton's interpreter patch `triton.language` once per kernel launch, not once per call of a
    device function. Each launch patches the language (its builtins made to compute in numpy) and undoes
    it at the end; triton 3.4 to 3.9 patch it again on every call of a @triton.jit helper inside the
    launch, which finds nothing left to patch but walks every member of the language first: a third of the
    interpreter's time in these kernels, which call small helpers (`load_rows`, `mma`) thousands of times.
    A call that finds the language modules it would patch already patched (their `load` no longer a
    builtin) now skips the walk."""
    from triton.runtime import interpreter
    patch = getattr(interpreter, "_patch_lang", None)
    if patch is None or not hasattr(interpreter, "_LangPatchScope") or hasattr(patch, "once_per_launch"):
        return

    def patch_lang(fn):
        langs = [m for m in fn.__globals__.values() if m is tl or m is tl.core]     # what it would patch
        if langs and not any(tl.core.is_builtin(lang.load) for lang in langs):
            return interpreter._LangPatchScope()      # patched by the launch: nothing to do, nothing to undo
        return patch(fn)

    patch_lang.once_per_launch = True
    interpreter._patch_lang = patch_lang


if contract.interpreted():
    multiply_bf16_in_the_interpreter()
    patch_language_once_per_launch()
