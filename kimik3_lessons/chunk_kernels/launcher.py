"""The launcher: a mixer's chunked form run as its three kernels (`launch_chunked`), the plan of those
launches (`launches`, which `gpu_targets` compiles too), the tensors the kernels are given
(`chunk_tensors`) and the one call that launches a kernel (`launch`)."""

import torch
import triton
import triton.language as tl

from kimik3_lessons import chunk_kernels, contract, rehearsal
from kimik3_lessons.chunk_kernels.shared import chunk_output_kernel, chunk_scan_kernel
from kimik3_lessons.chunk_kernels.tiles import LAUNCH, SLICE, block_sizes

# A tensor a kernel may be given in place of one the mixer does not have, and the switch that, off, keeps
# the kernel from reading it (see `launch`).
READ_ONLY_UNDER = {"w": "DELTA", "decay": "DECAY", "s0": "HAS_S0"}


def acc_dtype(tensors):
    """ACC, the dtype of every tile, sum and state of the kernels on `tensors` (`chunk_tensors`): the state's,
    float32, or float64 for float64 inputs (exact checks in the interpreter)."""
    return tl.float64 if tensors["s_out"].dtype == torch.float64 else tl.float32


def launches(intra_chunk_kernel, T, K, V, chunk_size, heads, *, delta, decay, has_s0, precision="ieee",
             acc=tl.float32):
    """The three launches of a mixer's chunked form: [(step, kernel, grid, constexprs, options)], the
    constexprs those the kernel takes. The launcher runs them; `gpu_targets` compiles the same ones.

    heads = B * H. The switches say which tensors there are: delta (W, U'), decay (the mixer's `decay`,
    None, "head" or "channel": G, Qd, Kd, d_n), has_s0 (an initial state); precision:
    how the products multiply (`contract.PRECISIONS`); acc: the dtype they sum into (`acc_dtype`)."""
    C = chunk_size
    N = triton.cdiv(T, C)
    sizes = block_sizes(K, V)
    intra = dict(C=C, LOG_C=C.bit_length() - 1, SLICE=SLICE, PRECISION=precision, ACC=acc)   # K, V: runtime
    shared = dict(K=K, V=V, C=C, **sizes, DELTA=delta, DECAY=decay, HAS_S0=has_s0, PRECISION=precision,
                  ACC=acc)
    value_blocks = triton.cdiv(V, sizes["BV"])
    steps = [("intra", intra_chunk_kernel, (N, heads), intra),
             ("scan", chunk_scan_kernel, (value_blocks, heads), shared),
             ("output", chunk_output_kernel, (N * C // sizes["BR"], value_blocks, heads), shared)]
    return [(step, kernel, grid, {n: value for n, value in constexprs.items() if n in kernel.arg_names},
             LAUNCH[step]) for step, kernel, grid, constexprs in steps]


def chunk_tensors(mixer, q, k, v, g=None, beta=None, *, chunk_size=64, initial_state=None,
                  input_precision="ieee"):
    """The tensors of `mixer`'s chunked form as its kernels name them (the table where `chunk_kernels`
    begins): q, k, v contiguous, in their dtype when it is half (bfloat16, float16: read as such, computed
    in float32), else in the compute dtype; g's cumulative sum, beta and the initial state in the compute
    dtype (float32, float64 for float64 inputs: `contract.compute_dtype`); the intermediates and outputs
    allocated in it. None for a tensor the mixer does not have. Checks the inputs (`check_inputs`), the
    options (`check_triton_options`) and where the tensors are (`check_triton_inputs`) first."""
    B, H, T, K, V = contract.check_inputs(q, k, v, g, beta, initial_state, **mixer.switches)
    contract.check_triton_options(chunk_size, input_precision)
    contract.check_triton_inputs(q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state)
    C, N, dtype = chunk_size, triton.cdiv(T, chunk_size), contract.compute_dtype(q)
    q, k, v = (x.contiguous() if x.dtype in (torch.bfloat16, torch.float16) else x.to(dtype).contiguous()
               for x in (q, k, v))
    g, beta, s0 = (None if x is None else x.to(dtype).contiguous() for x in (g, beta, initial_state))
    delta, decay = beta is not None, mixer.decay
    # G = cumsum(g) inside each chunk, padded with g = 0 to whole chunks: [B, H, N*C] or [B, H, N*C, K]
    g_cum = contract.split_chunks(g, C).cumsum(3).flatten(2, 3).contiguous() if decay else None

    def new(*shape):
        return torch.empty(shape, dtype=dtype, device=q.device)

    u = new(B, H, T, V) if delta else v                  # without the delta rule U = V, and U' = U
    return dict(q=q, k=k, v=v, g_cum=g_cum, beta=beta, a_qk=new(B, H, T, C),
                l_inv=new(B, H, T, C) if delta else None,
                w=new(B, H, T, K) if delta else None, u=u,
                qd=new(B, H, T, K) if decay else q, kd=new(B, H, T, K) if decay else k,
                decay=new(B, H, N, K) if decay else None, s0=s0, h=new(B, H, N, K, V),
                u_new=new(B, H, T, V) if delta else u, s_out=new(B, H, K, V), o=new(B, H, T, V))


def half_inputs(mixer):
    """The tensors of `mixer`'s kernels that hold its inputs in their own dtype, half precision included
    (`chunk_tensors`): q, k, v; U and U' are V without the delta rule, Qd and Kd are Q and K without decay.
    A compile for bfloat16 or float16 inputs (`gpu_targets`) types these pointers so."""
    return {"q", "k", "v"} | ({"u", "u_new"} if not mixer.delta else set()) | \
        ({"qd", "kd"} if mixer.decay is None else set())


def run(mixer, tensors, chunk_size, input_precision="ieee", steps=("intra", "scan", "output")):
    """Launch `steps` of `mixer`'s chunked form (`launches`) on `tensors` (`chunk_tensors`), the products
    multiplied as `input_precision` says."""
    (B, H, T, K), V = tensors["q"].shape, tensors["v"].shape[-1]
    plan = launches(mixer.intra_chunk_kernel, T, K, V, chunk_size, B * H, delta=mixer.delta,
                    decay=mixer.decay, has_s0=tensors["s0"] is not None, precision=input_precision,
                    acc=acc_dtype(tensors))
    for step, kernel, grid, constexprs, options in plan:
        if step in steps:           # `launch` read from the package: a patched `chunk_kernels.launch` sees it
            chunk_kernels.launch(kernel, grid, tensors, options, **{"T": T, "K": K, "V": V, **constexprs})


def launch_chunked(mixer, q, k, v, g=None, beta=None, *, chunk_size=64, initial_state=None,
                   input_precision="ieee"):
    """Run `mixer`'s chunked form as Triton kernels: its intra-chunk kernel over all (chunk, head) pairs,
    the shared `chunk_scan_kernel` over (value block, head), then `chunk_output_kernel` over (block of
    rows, value block, head). The one launcher of the four mixers.

    The tensors must be those the mixer's declaration (`contract.Mixer`) names (`check_inputs`); the
    kernels' switches come from the declaration and the initial state (HAS_S0). Products multiply as
    input_precision says (`contract.check_triton_options`), whatever the inputs' dtype; everything sums in
    float32 (float64 for float64 inputs); returns (o [B, H, T, V] in v's dtype, S_T [B, H, K, V] in
    float32, or float64).
    """
    tensors = chunk_tensors(mixer, q, k, v, g, beta, chunk_size=chunk_size, initial_state=initial_state,
                            input_precision=input_precision)
    run(mixer, tensors, chunk_size, input_precision)
    return tensors["o"].to(v.dtype), tensors["s_out"]


def launch(kernel, grid, tensors, options, read_only_under=READ_ONLY_UNDER, **scalars):
    """kernel[grid](...) with each argument taken by name: from `scalars` (sizes and switches) or `tensors`.

    A tensor the kernel names but the mixer does not have (None) is allowed only where a switch that is
    off keeps the kernel from reading it (`read_only_under`, {tensor: switch}); the kernel then gets q in
    its place (a pointer it never follows). Anything else is a ValueError. `options`: num_warps,
    num_stages, maxnreg."""
    args = {}
    for name in kernel.arg_names:
        value = scalars[name] if name in scalars else tensors[name]
        if value is None and name not in scalars:          # a switch may be None (DECAY), a tensor not
            switch = read_only_under.get(name)
            if switch is None or scalars.get(switch, True):
                raise ValueError(f"{kernel.fn.__name__} reads {name}, which was not given "
                                 f"(a kernel may skip a missing tensor only under a switch that is off)")
            value = tensors["q"]
        args[name] = value
    with rehearsal.paused():            # the interpreter's own copies are not the lesson's
        kernel[grid](**args, **options)
