"""What a backward pass costs: the memory the forward keeps for it, and the work it does.

- `saved_bytes`: bytes of the tensors autograd keeps between the forward and the backward (each storage
  once), measured with `torch.autograd.graph.saved_tensors_hooks`: what autograd through `mixer.chunked`
  keeps, against what `train.trainable` keeps (the inputs, or the inputs and the states S_n)
- `kept_bytes`: the same two hand-written strategies, counted from the shapes (no run)
- `matmul_flops`: FLOPs of the matrix products a call runs (`torch.utils.flop_counter`: a multiply-add is
  2 FLOPs, the course's convention), for the forward against the backward
- `gpu_time_model`: a roofline model of a kernel's time on a GPU, max(FLOPs / peak, bytes / bandwidth)
"""

import torch
from torch.utils.flop_counter import FlopCounterMode


def saved_bytes(fn, *args, **kwargs):
    """Run fn(*args, **kwargs) and return (its result, the bytes autograd kept for the backward). A tensor
    kept twice (or a view of one already kept) counts once: the bytes are those of distinct storages."""
    storages = {}

    def pack(t):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args, **kwargs)
    return out, sum(storages.values())


def kept_bytes(mixer, B, H, T, K, V, chunk_size, keep, initial_state=True, bytes_per_number=4):
    """The bytes `train.trainable` keeps, from the shapes: the inputs of `mixer` (a `contract.Mixer`),
    q, k [B, H, T, K], v [B, H, T, V], g ([B, H, T], or [B, H, T, K] per channel), beta [B, H, T], the
    initial state [B, H, K, V] when there is one; and with keep="states" the N = ceil(T / C) states S_n."""
    sizes = {"g": T * K if mixer.decay == "channel" else T, "beta": T}
    numbers = B * H * (2 * T * K + T * V + sum(sizes[a] for a in mixer.args) + K * V * initial_state)
    if keep == "states":
        numbers += B * H * -(-T // chunk_size) * K * V
    return numbers * bytes_per_number


def matmul_flops(fn, *args, **kwargs):
    """FLOPs of the matrix products (mm, bmm, matmul, einsum that lowers to them) fn(*args, **kwargs) runs,
    counted by `torch.utils.flop_counter.FlopCounterMode` (2 per multiply-add; elementwise work not
    counted)."""
    with FlopCounterMode(display=False) as counter:
        fn(*args, **kwargs)
    return counter.get_total_flops()


def tensor_numbers(mixer, B, H, T, K, V, C):
    """{tensor name: numbers it holds} for the tensors of `mixer`'s kernels, forward and backward (the
    names of `chunk_kernels` and `backward.kernels`); a tensor the mixer does not have is left out."""
    N = -(-T // C)
    g = N * C * (K if mixer.decay == "channel" else 1)
    sizes = dict(q=T * K, k=T * K, v=T * V, a_qk=T * C, qd=T * K, kd=T * K, u=T * V, u_new=T * V, o=T * V,
                 h=N * K * V, s0=K * V, s_out=K * V, do=T * V, ds_t=K * V, ds0=K * V, dh=N * K * V,
                 du_new=T * V, dqd=T * K, dkd=T * K, da_qk=T * C, dq=T * K, dk=T * K)
    if mixer.delta:
        sizes.update(beta=T, l_inv=T * C, w=T * K, dw=T * K, da=T * C, dv=T * V, dbeta=T)
    if mixer.decay:
        sizes.update(g_cum=g, decay=N * K, ddecay=N * K, dg_cum=g)
    return {name: B * H * n for name, n in sizes.items()}


def kernel_traffic(mixer, B, H, T, K, V, C, half=False):
    """[(step, kernel name, bytes)] for the launches of `mixer`'s forward (its three) and backward (the
    forward's intra-chunk and scan steps again, then the backward's four): a model of each kernel's memory
    traffic, every tensor it names read or written once (nothing kept in a cache between kernels, nothing
    read twice). q, k, v, dO and what aliases them (`chunk_kernels.half_inputs`) take 2 bytes a number with
    half=True, everything else 4."""
    from kimik3_lessons import chunk_kernels
    from kimik3_lessons.backward import kernels
    numbers = tensor_numbers(mixer, B, H, T, K, V, C)
    two_bytes = (chunk_kernels.half_inputs(mixer) | {"do"}) if half else set()
    forward = chunk_kernels.launches(mixer.intra_chunk_kernel, T, K, V, C, B * H, delta=mixer.delta,
                                     decay=mixer.decay, has_s0=False)
    backward = kernels.backward_launches(mixer, T, K, V, C, B * H, has_ds_t=False)
    plan = [("forward", *launch) for launch in forward] + \
        [("backward", *launch) for launch in forward if launch[0] in ("intra", "scan")] + \
        [("backward", *launch) for launch in backward]
    return [(direction, step, kernel.fn.__name__,
             sum(numbers[a] * (2 if a in two_bytes else 4) for a in kernel.arg_names if a in numbers))
            for direction, step, kernel, *_ in plan]


# Reported peaks (vendor data sheets), FLOP/s and bytes/s: a T4's float32 on its CUDA cores (Triton gives
# our kernels' products no tensor cores on sm_75: the compile table's fp16 rows), an A100's and an H100's
# dense bf16 tensor cores; and each one's memory bandwidth.
GPUS = {"T4": (8.1e12, 320e9), "A100": (312e12, 2.039e12), "H100": (989e12, 3.35e12)}


def gpu_time_model(flops, bytes_moved, gpu):
    """A roofline model, not a measurement: a kernel takes at least FLOPs / peak and bytes / bandwidth,
    and at best the larger of the two (perfect overlap, peak rates). Returns (seconds, "compute" or
    "memory": which bound sets it)."""
    peak, bandwidth = GPUS[gpu]
    compute, memory = flops / peak, bytes_moved / bandwidth
    return max(compute, memory), "compute" if compute >= memory else "memory"
