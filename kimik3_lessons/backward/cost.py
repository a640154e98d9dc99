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


# Reported peaks (vendor data sheets): dense tensor-core FLOP/s in the kernels' half precision (fp16 on a
# T4, which has no bf16; bf16 on the others), and memory bandwidth in bytes/s.
GPUS = {"T4": (65e12, 320e9), "A100": (312e12, 2.039e12), "H100": (989e12, 3.35e12)}


def gpu_time_model(flops, bytes_moved, gpu):
    """A roofline model, not a measurement: a kernel takes at least FLOPs / peak and bytes / bandwidth,
    and at best the larger of the two (perfect overlap, peak rates). Returns (seconds, "compute" or
    "memory": which bound sets it)."""
    peak, bandwidth = GPUS[gpu]
    compute, memory = flops / peak, bytes_moved / bandwidth
    return max(compute, memory), "compute" if compute >= memory else "memory"
