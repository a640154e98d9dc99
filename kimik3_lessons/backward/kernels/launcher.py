"""The launcher: the backward of a mixer's chunked form run as kernels (`triton_chunked_backward`), the plan
of its four launches (`backward_launches`, which `gpu_targets` compiles too), each mixer's intra-chunk
backward kernel (`BACKWARD_KERNELS`) and the tensors a kernel may be given unread (`READ_ONLY_UNDER`)."""

import torch
import triton
import triton.language as tl

from kimik3_lessons import chunk_kernels, contract
from kimik3_lessons.backward.kernels.intra import (
    deltanet_intra_backward_kernel,
    linear_attention_intra_backward_kernel,
)
from kimik3_lessons.backward.kernels.intra_decay import (
    gated_deltanet_intra_backward_kernel,
    kda_intra_backward_kernel,
)
from kimik3_lessons.backward.kernels.shared import (
    chunk_output_backward_kernel,
    chunk_state_grad_kernel,
    chunk_walk_backward_kernel,
)

SLICE = chunk_kernels.SLICE
LAUNCH = dict(num_warps=8, num_stages=1, maxnreg=255)

BACKWARD_KERNELS = {    # mixer name: its intra-chunk backward kernel (step 1')
    "linear_attention": linear_attention_intra_backward_kernel,
    "deltanet": deltanet_intra_backward_kernel,
    "gated_deltanet": gated_deltanet_intra_backward_kernel,
    "kda": kda_intra_backward_kernel,
}
# A tensor a kernel may be given in place of one the mixer does not have, and the switch that keeps the
# kernel from reading it (as `chunk_kernels.READ_ONLY_UNDER`).
READ_ONLY_UNDER = {**chunk_kernels.READ_ONLY_UNDER, "ds_t": "HAS_DS_T", "dw": "DELTA", "ddecay": "DECAY"}


def backward_launches(mixer, T, K, V, chunk_size, heads, *, has_ds_t, precision="ieee", acc=tl.float32):
    """The four launches of `mixer`'s backward after the forward's recompute: [(step, kernel, grid,
    constexprs, options)], the constexprs those each kernel takes (as `chunk_kernels.launches`). The
    launcher runs them; `gpu_targets` compiles the same ones."""
    C = chunk_size
    N = triton.cdiv(T, C)
    sizes = chunk_kernels.block_sizes(K, V)
    switches = dict(DELTA=mixer.delta, DECAY=mixer.decay, HAS_DS_T=has_ds_t, PRECISION=precision, ACC=acc)
    constexprs = dict(K=K, V=V, C=C, SLICE=SLICE, **sizes, **switches)
    rows = (N * C // sizes["BR"], heads)                        # one program per block of BR rows
    steps = [("outputs", chunk_output_backward_kernel, rows),
             ("walk", chunk_walk_backward_kernel, (triton.cdiv(V, sizes["BV"]), heads)),
             ("states", chunk_state_grad_kernel, rows),
             ("intra", BACKWARD_KERNELS[mixer.name], (N, heads))]
    runtime = {"outputs": ("K", "V"), "walk": (), "states": ("K", "V"), "intra": ("K", "V")}   # runtime sizes
    return [(step, kernel, grid, {n: value for n, value in constexprs.items()
                                  if n in kernel.arg_names and n not in runtime[step]}, LAUNCH)
            for step, kernel, grid in steps]


def triton_chunked_backward(mixer, do, dS_T, q, k, v, g=None, beta=None, chunk_size=64, initial_state=None,
                            input_precision="ieee"):
    """The gradients of `mixer`'s chunked form (a name or a `contract.Mixer`) as Triton kernels, given do
    [B, H, T, V] and dS_T [B, H, K, V] (None: the loss does not use the final state): the same numbers as
    `chunked.chunked_backward`, up to the precision of the products (input_precision, as the forward's).

    Recomputes the forward's factors and states with the forward's own kernels (`chunk_kernels.run`, its
    intra-chunk and scan steps), then runs `backward_launches`, then dg = the reverse cumulative sum of dG
    inside each chunk. Returns {"q", "k", "v", ["g",] ["beta",] "initial_state": gradient}: dq, dk, dv in
    their inputs' dtypes, the others in float32 (float64 for float64 inputs; None for an initial state
    that was not given)."""
    from kimik3_lessons import mixers
    mixer = mixers.get(mixer) if isinstance(mixer, str) else mixer
    tensors = chunk_kernels.chunk_tensors(mixer, q, k, v, g, beta, chunk_size=chunk_size,
                                          initial_state=initial_state, input_precision=input_precision)
    B, H, T, K, V = contract.check_inputs(q, k, v, g, beta, initial_state, **mixer.switches)
    if not isinstance(do, torch.Tensor) or do.shape != (B, H, T, V):
        raise ValueError(f"do must be [B, H, T, V] = [{B}, {H}, {T}, {V}] like o, "
                         f"got {contract.shape_str(do)}")
    if dS_T is not None and (not isinstance(dS_T, torch.Tensor) or dS_T.shape != (B, H, K, V)):
        raise ValueError(f"dS_T must be [B, H, K, V] = [{B}, {H}, {K}, {V}] like the final state, "
                         f"got {contract.shape_str(dS_T)}")
    contract.check_triton_inputs(do=do, dS_T=dS_T)
    chunk_kernels.run(mixer, tensors, chunk_size, input_precision, steps=("intra", "scan"))
    C, N, dtype = chunk_size, triton.cdiv(T, chunk_size), tensors["s_out"].dtype

    def new(*shape):
        return torch.empty(shape, dtype=dtype, device=tensors["s_out"].device)

    g_shape = (B, H, N * C, K) if mixer.decay == "channel" else (B, H, N * C)
    tensors.update(do=(do if do.dtype in (torch.bfloat16, torch.float16) else do.to(dtype)).contiguous(),
                   ds_t=None if dS_T is None else dS_T.to(dtype).contiguous(),
                   dh=new(B, H, N, K, V), du_new=new(B, H, T, V), ds0=new(B, H, K, V), dqd=new(B, H, T, K),
                   dw=new(B, H, T, K) if mixer.delta else None, dkd=new(B, H, T, K), da_qk=new(B, H, T, C),
                   ddecay=new(B, H, N, K) if mixer.decay else None, da=new(B, H, T, C), dq=new(B, H, T, K),
                   dk=new(B, H, T, K), dv=new(B, H, T, V) if mixer.delta else None,
                   dbeta=new(B, H, T) if mixer.delta else None,
                   dg_cum=new(*g_shape) if mixer.decay else None)
    for _, kernel, grid, constexprs, options in backward_launches(mixer, T, K, V, C, B * H,
                                                                  has_ds_t=dS_T is not None,
                                                                  precision=input_precision,
                                                                  acc=chunk_kernels.acc_dtype(tensors)):
        chunk_kernels.launch(kernel, grid, tensors, options, read_only_under=READ_ONLY_UNDER,
                             **{"T": T, "K": K, "V": V, **constexprs})
    grads = dict(q=tensors["dq"].to(q.dtype), k=tensors["dk"].to(k.dtype),
                 v=(tensors["dv"] if mixer.delta else tensors["du_new"]).to(v.dtype))
    if mixer.decay:     # dg_t = dG_t + ... + dG_C: the backward of G = cumsum(g) inside each chunk
        dG = tensors["dg_cum"].unflatten(2, (N, C))                 # [B, H, N, C] or [B, H, N, C, K]
        grads["g"] = contract.merge_chunks(dG.flip(3).cumsum(3).flip(3), T)
    if mixer.delta:
        grads["beta"] = tensors["dbeta"]
    grads["initial_state"] = tensors["ds0"] if initial_state is not None else None
    return grads
