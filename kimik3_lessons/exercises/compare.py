"""Comparing the student's result with the reference, with messages that say what differs: a shape, the
first wrong row, the error, a known mistake by name."""

import torch

from kimik3_lessons.contract import shape_str
from kimik3_lessons.exercises.verdict import Wrong
from kimik3_lessons.lab import relative_error


def expect_tensor(what, out, shape, dtype=None):
    """`out` must be a tensor of `shape` (and `dtype`, when given), else Wrong naming both."""
    if not isinstance(out, torch.Tensor):
        got = "None (did the function end without `return`?)" if out is None else type(out).__name__
        raise Wrong(f"{what} should be a tensor of shape {list(shape)}, got {got}")
    if tuple(out.shape) != tuple(shape):
        raise Wrong(f"{what} has shape {shape_str(out)}, expected {list(shape)}")
    if dtype is not None and out.dtype != dtype:
        raise Wrong(f"{what} is {out.dtype}, expected {dtype} (the inputs' dtype): compute in the dtype "
                    f"you are given, without .float() or a new tensor of the default dtype")


def expect_pair(what, out, n=2):
    """`out` must be a tuple of n things, else Wrong."""
    if not isinstance(out, tuple) or len(out) != n:
        got = f"a tuple of {len(out)}" if isinstance(out, tuple) else type(out).__name__
        raise Wrong(f"return {what}, got {got}")
    return out


def expect_close(what, ref, out, rtol=1e-9, hint=None, row_dim=-2, dtype=None):
    """`out` must equal `ref` to `rtol` relative error (max |Δ| / max |ref|); returns the error.

    On a mismatch the message names the first wrong row along `row_dim` (a token, a chunk row, ...),
    how many rows before it are right, the largest difference, and the hint.
    """
    expect_tensor(what, out, ref.shape, dtype)
    ref64, out64 = ref.detach().double().cpu(), out.detach().double().cpu()
    if not torch.isfinite(out64).all():
        raise Wrong(f"{what} holds NaN or inf", hint=hint)
    err = relative_error(ref64, out64)
    if err <= rtol:
        return err
    scale = ref64.abs().max().item() or 1.0
    diff = (out64 - ref64).abs()
    bad = diff.movedim(row_dim, 0).reshape(diff.shape[row_dim], -1).amax(-1) > rtol * scale
    first = int(bad.nonzero()[0])
    where = f"from row {first} on (rows 0..{first - 1} match)" if first else "from the first row on"
    rounded = (f" (yours is {out.dtype}, the reference {ref.dtype}: compute in the dtype you are given)"
               if out.is_floating_point() and torch.finfo(out.dtype).eps > torch.finfo(ref.dtype).eps else "")
    raise Wrong(f"{what} differs from the reference {where}: relative error {err:.2e} > {rtol:.0e}{rounded}",
                hint=hint)


def matches(ref, out, rtol=1e-9):
    """True when `out` is a finite tensor of ref's shape that equals it to `rtol` (no message)."""
    if not isinstance(out, torch.Tensor) or out.shape != ref.shape:
        return False
    return bool(torch.isfinite(out).all()) and relative_error(ref, out) <= rtol


def known_mistake(what, ref, out, known, rtol=1e-9):
    """If `out` is wrong and equals one of the `known` mistakes [(explanation, its result), ...], raise
    Wrong whose hint is that explanation: a message that names the mistake rather than only the first wrong
    row (in a graded run, without hints, the line says only how far off it is)."""
    if not matches(ref, out, rtol):
        for explanation, wrong in known:
            if matches(wrong, out, rtol):
                raise Wrong(f"{what} differs from the reference (relative error "
                            f"{relative_error(ref, out):.2e})",
                            hint=explanation and explanation[0].upper() + explanation[1:] + ".")
