"""The rehearsal's two devices: a CPU that behaves like a GPU machine where a student's Run All breaks.

On a GPU machine a lesson's tensors live on two devices: the GPU's (made with `device=lab.device()`, or
moved there with `.to(dev)`) and the host's (made without `device=`, or brought back with `.cpu()`). CUDA
refuses three things a CPU-only run never sees:

- an operation on tensors of both devices: "Expected all tensors to be on the same device, but found at
  least two devices, cuda:0 and cpu!" (a host scalar, a 0-dimensional tensor, may join; a host tensor may
  index a device tensor, as PyTorch moves the index);
- a device tensor given to numpy, and so to matplotlib: "can't convert cuda:0 device type tensor to
  numpy. Use Tensor.cpu() to copy the tensor to host memory first.";
- a host tensor given to a compiled Triton kernel (`contract.check_triton_inputs` names it).

And a GPU computes some things differently: a compiled `tl.exp(x)` is ex2.approx.ftz.f32 of x * log2(e)
rounded to float32 (PTX of triton 3.4-3.9, sm_75 to sm_90), whose rounding alone costs a relative error
near |x| * 6e-8 (4.5e-6 at x = -75) where numpy's exp, the interpreter's, is exact to float32; and a
"tf32" product reads its inputs with 10 mantissa bits. `gpu_arithmetic()` makes the interpreter compute
`tl.exp` and `tl.exp2` that way (`exp_compiled`, with ex2.approx's own error, 2 ulp, added in full) and
cut a "tf32" product's inputs to TF32 (`tf32`), so that a tolerance a GPU must meet is checked against
the GPU's arithmetic (`start()` turns it on with the two devices).

In the rehearsal (`lab.rehearsing()`, KIMIK3_REHEARSE=1: `make test`), `lab.setup()` calls `start()`:
`lab.device()` becomes `DEVICE` (a CPU tensor's device with index 0, "cpu:0": the arithmetic stays the
CPU's) and a `TwoDevices` mode (a `torch.overrides.TorchFunctionMode`) sees every torch call. It marks
each tensor made on `DEVICE` (a factory's `device=`, `.to(DEVICE)`, `.cuda()`), every result of an
operation on a marked tensor, a Parameter made of one, and a tensor whose `.data` or `.grad` is set to one
(an attribute of the tensor, `MARK`); `.cpu()` and `.to("cpu")` return an unmarked copy (a
real copy, as on a GPU); a marked tensor reports `.device == DEVICE`; and the three refusals above are
raised with CUDA's words (cuda:0 read as cpu:0). `paused()` lets a kernel launch hand its tensors to
Triton's interpreter. Every lesson runs under it in `make test`, so a line that only works because the
device is the host fails there.
"""

import contextlib
import functools
import math

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

DEVICE = torch.device("cpu", 0)      # the course's device in the rehearsal
HOST = torch.device("cpu")
MIXED = "Expected all tensors to be on the same device, but found at least two devices, {} and cpu!"
TO_NUMPY = "can't convert {} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host " \
           "memory first."

MARK = "_kimik3_on_device"   # the attribute that marks a tensor (a Python object) as on the device
_state = dict(mode=None, paused=0, parameter_new=None, backward_apply=None, undefined_grad=None)


def on_device(t):
    """True when tensor `t` lives on the rehearsal's device."""
    return t.__dict__.get(MARK, False)


def _mark(t):
    if isinstance(t, torch.Tensor):
        setattr(t, MARK, True)


def _tensors(args, kwargs):
    """The tensors among a call's arguments, and in the lists and tuples among them (torch.cat's)."""
    found = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(x for x in a if isinstance(x, torch.Tensor))
    return found


def _outputs(out):
    if isinstance(out, torch.Tensor):
        return (out,)
    if isinstance(out, (list, tuple)):
        return [x for x in out if isinstance(x, torch.Tensor)]
    return ()


def _where(device):
    """DEVICE, HOST or None (not a device) for a `device=` value."""
    if isinstance(device, (str, torch.device)):
        d = torch.device(device)
        if d == DEVICE or d.type == "cuda":
            return DEVICE
        if d == HOST:
            return HOST
    return None


def _target(func, args, kwargs):
    """Where a call puts its result: DEVICE, HOST, or None (where its inputs are)."""
    if func is torch.Tensor.cpu:
        return HOST
    if func is torch.Tensor.cuda:
        return DEVICE
    if "device" in kwargs:
        return _where(kwargs["device"])
    if func is torch.Tensor.to:
        for a in args[1:]:
            if isinstance(a, torch.Tensor):
                return DEVICE if on_device(a) else HOST
            where = _where(a)
            if where is not None:
                return where
    return None


_MOVES = {torch.Tensor.cpu, torch.Tensor.cuda, torch.Tensor.to}
_INDEXING = {torch.Tensor.__getitem__}
_ACROSS = {torch.Tensor.copy_, torch.Tensor.__setitem__,   # copy across devices, as CUDA allows
           torch._has_compatible_shallow_copy_type}


class TwoDevices(TorchFunctionMode):
    """See the module docstring."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _state["paused"]:
            return func(*args, **kwargs)
        special = _SPECIAL.get(func)
        if special == "device":
            return DEVICE if on_device(args[0]) else func(*args, **kwargs)
        if special == "numpy" and on_device(args[0]):
            raise TypeError(TO_NUMPY.format(DEVICE))
        if special == "set":                    # t.data = x (Module.to) or t.grad = x: t is where x is
            if on_device(args[1]) if isinstance(args[1], torch.Tensor) else False:
                _mark(args[0])
            return func(*args, **kwargs)
        target = _target(func, args, kwargs) if (func in _MOVES or "device" in kwargs) else None
        if target is None:
            inputs = _tensors(args[:1] + args[2:] if func in _INDEXING else args, kwargs)
            device = False
            for t in inputs:
                if on_device(t):
                    device = True
                    break
            if device and func not in _ACROSS:
                for t in inputs:
                    if not on_device(t) and t.dim() > 0:
                        raise RuntimeError(MIXED.format(DEVICE) + f" (in {getattr(func, '__name__', func)}: "
                                           f"a tensor of shape {list(t.shape)} is on the host)")
            out = func(*args, **kwargs)
            if device:
                for t in _outputs(out):
                    _mark(t)
            return out
        out = func(*args, **kwargs)
        inputs = [t for t in _tensors(args, kwargs)]
        if target is DEVICE:
            if isinstance(out, torch.Tensor) and any(out is t for t in inputs) and not on_device(out):
                out = out.clone()                     # a move to the device copies, as on a GPU
            for t in _outputs(out):
                _mark(t)
        elif isinstance(out, torch.Tensor) and on_device(out):
            out = out.clone()                         # .cpu() of a device tensor: a host copy
        return out


_SPECIAL = {torch.Tensor.device.__get__: "device", torch.Tensor.numpy: "numpy",
            torch.Tensor.__array__: "numpy", torch.Tensor.data.__set__: "set",
            torch.Tensor.grad.__set__: "set"}


LOG2E = np.float32(math.log2(math.e))        # the constant a compiled tl.exp multiplies by, in float32
EX2_ERROR = 2.0 ** -22                       # ex2.approx: 2 ulp of relative error, the bound assumed here


def ex2_approx(x):
    """2^x as ex2.approx.ftz.f32 (what triton emits) computes it: its error bound (2 ulp, the bound this
    emulation assumes) added in full, and a result below float32's smallest normal flushed to zero
    (float32 in, float32 out)."""
    y = np.exp2(x.astype(np.float64)) * (1.0 + EX2_ERROR)
    return np.where(y < np.finfo(np.float32).tiny, 0.0, y).astype(np.float32)


def exp_compiled(x):
    """e^x as a compiled `tl.exp` computes it on an NVIDIA GPU: x * log2(e) rounded to float32, then
    `ex2_approx`. float64 (libdevice's exp, exact to float64) is left to numpy."""
    if x.dtype != np.float32:
        return np.exp(x)
    return ex2_approx((x * LOG2E).astype(np.float32))


def tf32(x):
    """float32 values as a tensor core reads them for a "tf32" product: 10 of the 23 mantissa bits kept (cut,
    not rounded: the larger of the two errors a GPU may make, 2^-10 relative)."""
    if x.dtype != np.float32:
        return x
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


@contextlib.contextmanager
def gpu_arithmetic():
    """Inside: Triton's interpreter computes as a compiled kernel does on an NVIDIA GPU where it differs
    from numpy's float32: `tl.exp` and `tl.exp2` (`exp_compiled`, `ex2_approx`) and `tl.dot` with
    input_precision "tf32", whose inputs are cut to TF32 (`tf32`)."""
    from triton.runtime import interpreter
    builder = interpreter.InterpreterBuilder
    before = builder.create_exp, builder.create_exp2, builder.create_dot
    dot = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if str(input_precision).endswith(".TF32"):
            a = interpreter.TensorHandle(tf32(a.data), a.dtype)
            b = interpreter.TensorHandle(tf32(b.data), b.dtype)
        return dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.create_exp = lambda self, arg: self.unary_op(arg, exp_compiled)
    builder.create_exp2 = lambda self, arg: self.unary_op(
        arg, lambda x: ex2_approx(x) if x.dtype == np.float32 else np.exp2(x))
    builder.create_dot = create_dot
    try:
        yield
    finally:
        builder.create_exp, builder.create_exp2, builder.create_dot = before


def active():
    """True once `start()` has run in this process (the rehearsal of a lesson)."""
    return _state["mode"] is not None


def start():
    """Make this process play a GPU machine: the course's device becomes `DEVICE` (see the module
    docstring). Idempotent."""
    if _state["mode"] is None:
        _state["mode"] = TwoDevices()
        _state["mode"].__enter__()
        _state["exp"] = gpu_arithmetic()
        _state["exp"].__enter__()
        original = _state["parameter_new"] = torch.nn.Parameter.__new__

        def parameter_new(cls, data=None, requires_grad=True):   # a Parameter is where its data is
            param = original(cls, data, requires_grad)
            if data is not None and on_device(data):
                _mark(param)
            return param
        torch.nn.Parameter.__new__ = parameter_new
        _state["backward_apply"] = torch.autograd.function.BackwardCFunction.apply
        torch.autograd.function.BackwardCFunction.apply = backward_on_the_device
        _state["undefined_grad"] = torch._C._functions.UndefinedGrad
        torch._C._functions.UndefinedGrad = UndefinedGradOnTheDevice
    return DEVICE


class UndefinedGradOnTheDevice:
    """`torch.autograd.gradcheck` wraps a Function's outputs in autograd's C++ UndefinedGrad node, which the
    mode does not see; on a GPU its output is where its input is, and so here."""

    def __call__(self, *tensors):
        out = _state["undefined_grad"]()(*tensors)
        if any(on_device(t) for t in tensors):
            for t in _outputs(out):
                _mark(t)
        return out


def backward_on_the_device(ctx, *grads):
    """A custom `torch.autograd.Function`'s backward (lesson 13's), as autograd's engine calls it. The
    engine runs it without Python's torch-function modes, so the two devices would not be watched there,
    and the gradients it hands over, made by the engine, would count as host tensors. On a GPU they are
    where the Function's tensors are: here they are marked so when a tensor the forward saved is on the
    device, and the backward runs inside the mode."""
    if any(on_device(t) for t in getattr(ctx, "saved_tensors", ())):
        for g in grads:
            _mark(g)
    with _state["mode"]:
        return _state["backward_apply"](ctx, *grads)


def stop():
    """Undo `start()` (the tests' fixture)."""
    if _state["mode"] is not None:
        _state["mode"].__exit__(None, None, None)
        _state["exp"].__exit__(None, None, None)
        torch.nn.Parameter.__new__ = _state["parameter_new"]
        torch.autograd.function.BackwardCFunction.apply = _state["backward_apply"]
        torch._C._functions.UndefinedGrad = _state["undefined_grad"]
        _state["mode"] = None


@contextlib.contextmanager
def paused():
    """Inside: torch calls are not tracked (a kernel launch hands its tensors to Triton's interpreter,
    which copies them to numpy and back)."""
    _state["paused"] += 1
    try:
        yield
    finally:
        _state["paused"] -= 1


def launching(fn):
    """Decorate a kernel launcher so that the interpreter's own torch calls are not tracked."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with paused():
            return fn(*args, **kwargs)
    return wrapper
